"""Strict JSON for documents from outside: what Python's json accepts but JSON does not mean one way is refused.

Every door parses with ``parse_strict_json``: REST bodies, the MCP endpoint, and the
import of an export document (REST's and the CLI's, in ``memories.services.imports``).
"""

import json
import re
from itertools import accumulate

# Deeper than any document the server reads (an export item is four levels down); far from
# the depth at which parsing, or anything that walks the parsed value, runs out of stack.
MAX_DEPTH = 64

# A JSON string (its brackets are text, not structure), and a bracket.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _object_without_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:60]!r} in one JSON object")
        result[key] = value
    return result


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _depth(text: str) -> int:
    """Return how deeply the brackets of ``text`` nest, strings left out; read without recursion."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(1 if bracket in "[{" else -1 for bracket in brackets), default=0)


def parse_strict_json(body: bytes | str):
    """Parse a JSON document, refusing what Python's json accepts but JSON does not mean one way.

    A duplicate key would otherwise silently keep the last value (a client and the server
    could read different requests from one body), NaN/Infinity are not JSON, and nesting
    deeper than ``MAX_DEPTH`` is refused before parsing, so no reader recurses that deep.
    Raises ValueError with a short reason.
    """
    try:
        # As json.loads reads bytes: UTF-8 (UTF-16 and -32 by their first bytes).
        text = body.decode(json.detect_encoding(body), "surrogatepass") if isinstance(body, (bytes, bytearray)) \
            else body
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    if _depth(text) > MAX_DEPTH:
        raise ValueError(f"nested too deeply (more than {MAX_DEPTH} levels)")
    try:
        return json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} at line {error.lineno} column {error.colno}") from None
