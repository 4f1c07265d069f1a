"""uvicorn's HTTP protocol, with a time limit on a request's head and JSON answers when it cannot parse one.

uvicorn waits for ever on a connection that sends nothing, or stops half way through its
headers: each holds a socket and its buffers, and enough of them use up the process's
file descriptors. Here a request's head (request line and headers) must arrive whole
within ``MEMORY_BODY_TIMEOUT`` of the connection opening or the message starting, or
the connection is closed; the body then has the same time (``memoryproject.bodygate``).

httptools refuses a request line or header it cannot read (a NUL in ``Authorization``, a
space in a header name) before the application sees it, and uvicorn answers with a
plain-text 400. A client of ``/api`` reads ``{"error": ...}`` and a client of ``/mcp`` a
JSON-RPC error everywhere else, so this sends those instead. ``manage.py serve`` (what
``make run`` runs) uses it; ``uvicorn --http memoryproject.httpprotocol:HttpProtocol`` too.
"""

import asyncio
import json

from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MESSAGE = (
    "The request could not be read as HTTP: its request line or a header is malformed (for one, a "
    "control character such as NUL in a header value). Fix the request and send it again."
)

# -32600 Invalid Request: the message cannot be read at all, so there is no id to answer to.
_MCP_ANSWER = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": MESSAGE}}).encode()
_REST_ANSWER = json.dumps({"error": {"code": "bad_request", "message": MESSAGE}}).encode()


class HttpProtocol(HttpToolsProtocol):
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._await_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._await_head()  # the next request on a kept-alive connection

    def on_headers_complete(self) -> None:
        self._head_arrived()
        super().on_headers_complete()

    def connection_lost(self, exc) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(settings.MEMORY_BODY_TIMEOUT, self.transport.close)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def send_400_response(self, msg: str) -> None:
        # The path, when the parser read it before the fault (a header fault comes after the request line).
        body = _MCP_ANSWER if getattr(self, "url", b"").startswith(b"/mcp") else _REST_ANSWER
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
