"""uvicorn's HTTP protocol, answering a request it cannot parse in the door's JSON error shape.

httptools refuses a request line or header it cannot read (a NUL in ``Authorization``, a
space in a header name) before the application sees it, and uvicorn answers with a
plain-text 400. A client of ``/api`` reads ``{"error": ...}`` and a client of ``/mcp`` a
JSON-RPC error everywhere else, so this sends those instead. ``manage.py serve`` (what
``make run`` runs) uses it; ``uvicorn --http memoryproject.httpprotocol:HttpProtocol`` too.
"""

import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MESSAGE = ("The request could not be read as HTTP: its request line or a header is malformed (for one, a "
           "control character such as NUL in a header value). Fix the request and send it again.")

# -32600 Invalid Request: the message cannot be read at all, so there is no id to answer to.
_MCP_ANSWER = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": MESSAGE}}).encode()
_REST_ANSWER = json.dumps({"error": {"code": "bad_request", "message": MESSAGE}}).encode()


class HttpProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        # The path, when the parser read it before the fault (a header fault comes after the request line).
        body = _MCP_ANSWER if getattr(self, "url", b"").startswith(b"/mcp") else _REST_ANSWER
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [b"content-type: application/json\r\n",
                 b"content-length: " + str(len(body)).encode() + b"\r\n",
                 b"connection: close\r\n\r\n"]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
