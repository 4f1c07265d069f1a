"""What the MCP doors check before the SDK sees a message: body size (HTTP), strict JSON, the envelope, the params.

Refusals are JSON-RPC error objects, with ``id: null`` where no request could be read,
the form MCP clients read. The HTTP endpoint (``mcp_api.views``) and stdio
(``mcp_api.stdio``) both check with ``read_message``.
"""

import json
from typing import get_args

from mcp import types
from pydantic import ValidationError

from memoryproject.exceptions import encodable
from memoryproject.jsontext import parse_strict_json

# JSON-RPC 2.0 error codes; -32001 and -32000 are in the range the spec leaves to servers.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
UNAUTHORIZED = -32001
# The server cannot answer now (its database is unreachable or busy, or it holds too many bodies): HTTP 503.
UNAVAILABLE = -32000


# The requests the SDK's session accepts, by method; it answers others, and bad params, with a vague
# "Invalid request parameters".
CLIENT_REQUESTS = {
    method: model
    for model in get_args(types.ClientRequest.model_fields["root"].annotation)
    for method in get_args(model.model_fields["method"].annotation)
}


class Refused(Exception):
    """A message the server cannot take, with its answer: an HTTP status and a JSON-RPC error."""

    def __init__(self, status: int, answer: bytes):
        super().__init__(status, answer)
        self.status = status
        self.answer = answer


def jsonrpc_error(code: int, message: str, request_id=None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()


def too_large_refusal(limit: int) -> bytes:
    """The 413 body for /mcp (memoryproject.bodylimit): a JSON-RPC error."""
    return jsonrpc_error(INVALID_REQUEST, too_large_message(limit))


def too_large_message(limit: int) -> str:
    return (
        f"Request body over the limit of {limit} bytes (MEMORY_MCP_MAX_BODY_BYTES). "
        "Send less per call, e.g. split the content into several memories."
    )


def _request_id(value) -> bool:
    """MCP ids are strings or integers, never null (a float, a bool or a structure names no request)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def message_problem(message) -> tuple[int, str] | None:
    """Return (JSON-RPC code, reason) when a parsed body is not one message the server can take, else None.

    The SDK would read a request with a malformed id as a notification (and answer 202 to
    nothing), and answers other malformed envelopes with a dump of its validation errors:
    the envelope is checked here, once, and refused in a sentence.
    """
    if not isinstance(message, dict):
        return INVALID_REQUEST, "send one JSON-RPC message, a JSON object (batches are not supported)"
    if message.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'jsonrpc must be "2.0"'
    if "method" not in message:
        if "result" in message or "error" in message:
            return INVALID_REQUEST, "this server sends no requests, so it takes no responses"
        return INVALID_REQUEST, "method is missing"
    method = message["method"]
    if not isinstance(method, str):
        return INVALID_REQUEST, "method must be a string"
    if "id" in message and not _request_id(message["id"]):
        return INVALID_REQUEST, "id must be a string or an integer (a notification has no id)"
    if isinstance(message.get("id"), str) and encodable(message["id"]) != message["id"]:
        # Every answer carries the id back, and this one cannot be written as UTF-8.
        return INVALID_REQUEST, "id must be valid Unicode text, without lone surrogates"
    # Absent and null both mean "no parameters", as the SDK reads them.
    if message.get("params") is not None and not isinstance(message["params"], dict):
        return INVALID_REQUEST, "params must be a JSON object"
    if "id" not in message:
        return None
    if method not in CLIENT_REQUESTS:
        return METHOD_NOT_FOUND, f"Method not found: {method[:60]!r}"
    return params_problem(method, message)


def params_problem(method: str, message: dict) -> tuple[int, str] | None:
    """Return (INVALID_PARAMS, reason) when the SDK would refuse the request's params, each bad field named."""
    # Validated as the SDK's session validates it, which drops a null params first.
    request = {key: message[key] for key in ("method", "params") if message.get(key) is not None}
    try:
        CLIENT_REQUESTS[method].model_validate(request)
    except ValidationError as error:
        described = "; ".join(_field_problem(item) for item in error.errors())
        return INVALID_PARAMS, f"Invalid params for {method}: {described}."
    return None


def _field_problem(item) -> str:
    # Steps that are not identifiers name a form of a union (e.g. 'function-after[...]'), not a place in the value.
    where = ".".join(str(step) for step in item["loc"] if isinstance(step, int) or step.isidentifier())
    return f"{where} is required" if item["type"] == "missing" else f"{where}: {item['msg']}"


def read_message(body: bytes) -> dict:
    """Return the one JSON-RPC message in ``body``; raise Refused when the server cannot take it.

    A request for a method the server lacks, or with params that method does not take, is
    answered to its id (200); anything that cannot be read as a message gets ``id: null`` (400).
    """
    try:
        message = parse_strict_json(body)
    except ValueError as error:
        raise Refused(400, jsonrpc_error(PARSE_ERROR, f"Parse error: {error}.")) from None
    problem = message_problem(message)
    if problem is None:
        return message
    code, reason = problem
    if code in (METHOD_NOT_FOUND, INVALID_PARAMS):
        raise Refused(200, jsonrpc_error(code, reason, message["id"]))
    raise Refused(400, jsonrpc_error(code, f"Invalid request: {reason}."))
