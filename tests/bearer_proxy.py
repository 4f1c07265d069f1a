"""A loopback HTTP proxy that adds ``Authorization: Bearer <token>`` to every request it forwards.

For clients that send no credentials of their own (the MCP conformance suite): they talk
to the proxy, the proxy to the real server. A ``Host`` naming the proxy is sent as the
server's own, so the server sees the URL a token was issued for; any other ``Host`` (a
DNS-rebinding probe's), ``Origin`` and the rest pass as they came, for the server to judge.
"""

import contextlib
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Headers that belong to one connection (RFC 9110, 7.6.1): each side of the proxy has its own.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


def _handler(upstream: str, token: str) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                # skip_host: Host is sent from the client's, below, for the server to check.
                connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                own = f"127.0.0.1:{self.server.server_address[1]}"
                for name, value in self.headers.items():
                    if name.lower() == "host" and value == own:
                        value = target.netloc
                    if name.lower() not in HOP_BY_HOP and name.lower() != "authorization":
                        connection.putheader(name, value)
                connection.putheader("Authorization", f"Bearer {token}")
                connection.endheaders(body)
                answer = connection.getresponse()
                content = answer.read()
            finally:
                connection.close()
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            try:
                self.end_headers()
                self.wfile.write(content)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client hung up first (the SDK's client does, on close)

        do_GET = do_POST = do_DELETE = do_OPTIONS = forward

        def log_message(self, format, *args):
            pass  # the server logs its side

    return Forward


@contextlib.contextmanager
def bearer_proxy(upstream: str, token: str):
    """Serve a proxy to ``upstream`` (e.g. ``http://127.0.0.1:8000``) on a free loopback port; yield its base URL."""
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, token))
    proxy.daemon_threads = True
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()
