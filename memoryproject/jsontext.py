"""Strict JSON for request bodies: what Python's json accepts but JSON does not mean one way is refused.

The MCP endpoint and the REST API both parse bodies with ``parse_strict_json``.
"""

import json


def _object_without_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:60]!r} in one JSON object")
        result[key] = value
    return result


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def parse_strict_json(body: bytes):
    """Parse a request body, refusing what Python's json accepts but JSON does not mean one way.

    A duplicate key would otherwise silently keep the last value (a client and the server
    could read different requests from one body), and NaN/Infinity are not JSON.
    Raises ValueError with a short reason.
    """
    try:
        return json.loads(body, object_pairs_hook=_object_without_duplicates, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{error.msg} at line {error.lineno} column {error.colno}") from None
