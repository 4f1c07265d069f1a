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


def too_large_refusal(limit: int) -> bytes:
    """The 413 body for /mcp (memoryproject.bodylimit): a JSON-RPC error."""
    return jsonrpc_error(INVALID_REQUEST, too_large_message(limit))


def too_large_message(limit: int) -> str:
    return (f"Request body over the limit of {limit} bytes (MEMORY_MCP_MAX_BODY_BYTES). "
            "Send less per call, e.g. split the content into several memories.")


def message_problem(message) -> tuple[int, str] | None:
    """Return (JSON-RPC code, reason) when a parsed body is not one message the server can take, else None."""
    if not isinstance(message, dict):
        return INVALID_REQUEST, "send one JSON-RPC message, a JSON object (batches are not supported)"
    method, request_id = message.get("method"), message.get("id")
    valid_id = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    if valid_id and isinstance(method, str) and method not in CLIENT_METHODS:
        return METHOD_NOT_FOUND, f"Method not found: {method[:60]!r}"
    return None
