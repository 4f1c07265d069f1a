"""What the HTTP endpoint checks before the MCP SDK sees a request: body size and strict JSON.

Refusals are JSON-RPC error objects with ``id: null``, the form MCP clients read.
"""

import json
from typing import get_args

from mcp import types

# JSON-RPC 2.0 error codes; -32001 is in the range the spec leaves to servers.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
UNAUTHORIZED = -32001


# The request methods the SDK's session accepts; it answers others with a vague "Invalid request parameters".
CLIENT_METHODS = frozenset(
    method
    for model in get_args(types.ClientRequest.model_fields["root"].annotation)
    for method in get_args(model.model_fields["method"].annotation)
)


def jsonrpc_error(code: int, message: str, request_id=None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()


def too_large_message(limit: int) -> str:
    return (f"Request body over the limit of {limit} bytes (MEMORY_MCP_MAX_BODY_BYTES). "
            "Send less per call, e.g. split the content into several memories.")


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


def message_problem(message) -> tuple[int, str] | None:
    """Return (JSON-RPC code, reason) when a parsed body is not one message the server can take, else None."""
    if not isinstance(message, dict):
        return INVALID_REQUEST, "send one JSON-RPC message, a JSON object (batches are not supported)"
    method, request_id = message.get("method"), message.get("id")
    valid_id = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    if valid_id and isinstance(method, str) and method not in CLIENT_METHODS:
        return METHOD_NOT_FOUND, f"Method not found: {method[:60]!r}"
    return None


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``limit`` bytes under ``path`` before Django reads them.

    Django's ASGI handler spools the whole body before any view runs, so the limit has to
    sit in front of it: a declared Content-Length over the limit is answered 413 at once,
    and a chunked body is cut off as soon as it passes the limit.
    """

    def __init__(self, app, *, path: str, limit: int):
        self.app = app
        self.path = path.rstrip("/")
        self.limit = limit

    def _applies(self, scope) -> bool:
        path = scope.get("path", "")
        return scope["type"] == "http" and (path == self.path or path.startswith(self.path + "/"))

    async def _refuse(self, send) -> None:
        body = jsonrpc_error(INVALID_REQUEST, too_large_message(self.limit))
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if not self._applies(scope):
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                return await self._refuse(send)
        received = 0
        refused = False

        async def limited_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    refused = True
                    await self._refuse(send)
                    # Django stops reading at a disconnect and sends nothing more.
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, limited_receive, send)
