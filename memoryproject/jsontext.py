"""Strict JSON for documents from outside: what Python's json accepts but JSON does not mean one way is refused.

Every door parses with ``parse_strict_json``: REST bodies, the MCP endpoint, and the
import of an export document (REST's and the CLI's, in ``memories.services.imports``).
"""

import codecs
import json

# Deeper than any document the server reads (an export item is six levels down); far from
# the depth at which anything that walks the parsed value runs out of stack.
MAX_DEPTH = 64


def _object_without_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:60]!r} in one JSON object")
        result[key] = value
    return result


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _nested_deeper_than(value, limit: int) -> bool:
    """Whether lists and objects in ``value`` nest more than ``limit`` levels; read without recursion."""
    stack = [(value, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _utf8_text(body: bytes) -> str:
    """``body`` as text: UTF-8 without a byte order mark, the one form JSON between systems takes."""
    # json.loads would take a BOM or UTF-16 from bytes, which other readers (the MCP SDK) then fail to read.
    if body.startswith(codecs.BOM_UTF8):
        raise ValueError("it starts with a byte order mark; send UTF-8 without one")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None


def parse_strict_json(body: bytes | str):
    """Parse a JSON document, refusing what Python's json accepts but JSON does not mean one way.

    Bytes must be UTF-8 without a byte order mark (not UTF-16 or 32). A duplicate key would
    otherwise silently keep the last value (a client and the server could read different
    requests from one body), NaN/Infinity are not JSON, and nesting deeper than
    ``MAX_DEPTH`` is refused, so nothing that reads the value recurses that deep.
    Raises ValueError with a short reason.
    """
    if isinstance(body, (bytes, bytearray)):
        body = _utf8_text(bytes(body))
    try:
        parsed = json.loads(body, object_pairs_hook=_object_without_duplicates, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    if isinstance(parsed, (dict, list)) and _nested_deeper_than(parsed, MAX_DEPTH):
        raise ValueError(f"nested too deeply (more than {MAX_DEPTH} levels)")
    return parsed
