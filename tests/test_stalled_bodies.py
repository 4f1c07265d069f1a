"""Stalled request bodies against a real server: the key before the body, a time for it, one budget for all.

Raw sockets, as a hostile client sends them: headers that promise a body, part of it, then
nothing. The server's resident memory is read from /proc.
"""

import json
import re
import socket
import time
import urllib.parse
from pathlib import Path

import pytest

from api.views import ApiView
from tests.subprocesses import serve_process

pytestmark = pytest.mark.slow

DECLARED = 1_048_000
BODY_TIMEOUT = 3
# Four bodies of DECLARED bytes fit; the per-door limits are lowered so that this budget is allowed.
BUDGET = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def server(module_instance):
    keys = module_instance.create_api_keys(writer={}, revoked={"revoked": True})
    env = {
        **module_instance.env,
        "MEMORY_BODY_TIMEOUT": str(BODY_TIMEOUT),
        "MEMORY_BODY_BUFFER_BYTES": str(BUDGET),
        "MEMORY_API_MAX_IMPORT_BYTES": str(1024 * 1024),
    }
    with serve_process(env) as (base, process):
        url = urllib.parse.urlsplit(base)
        yield (url.hostname, url.port), process.pid, keys


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024


def stall(
    address, path: str, *, key: str | None = None, declared: int = DECLARED, sent: int = 0, extra: str = ""
) -> socket.socket:
    """Send the headers of a POST that promises ``declared`` bytes (``extra``: more header lines), then ``sent``
    of them, and stop."""
    connection = socket.create_connection(address, timeout=10)
    authorization = f"Authorization: Bearer {key}\r\n" if key else ""
    connection.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{authorization}{extra}"
        f"Content-Length: {declared}\r\n\r\n".encode()
    )
    try:
        connection.sendall(b" " * sent)
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered and closed before the whole part was sent: what a refusal does
    return connection


def answer(connection: socket.socket, *, within: float) -> tuple[int, dict, dict, float]:
    """Read the answer to the end (the server closes the connection); (status, headers, JSON body, seconds)."""
    start = time.monotonic()
    connection.settimeout(within)
    data = b""
    try:
        while chunk := connection.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass  # the rest of the body was never read, so the close may come as a reset after the answer
    except TimeoutError:
        pytest.fail(f"no answer within {within} s; got {data[:200]!r}")
    finally:
        connection.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body), time.monotonic() - start


def test_bodies_without_a_key_are_refused_at_once_unread_and_the_server_holds_nothing_for_them(server):
    address, pid, keys = server
    before = rss_mb(pid)
    connections = [
        stall(address, "/mcp" if number % 2 else "/api/v1/memories/", sent=512 * 1024) for number in range(100)
    ]
    grown = rss_mb(pid) - before
    for number, connection in enumerate(connections):
        status, headers, body, seconds = answer(connection, within=5)
        assert status == 401 and headers["connection"] == "close" and seconds < 2
        metadata = "http://127.0.0.1/.well-known/oauth-protected-resource"  # the Host stall() sends
        assert (
            headers["www-authenticate"]
            == f'Bearer realm="memory", resource_metadata="{metadata}{"/mcp" if number % 2 else ""}"'
        )
        if number % 2:
            assert body == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32001, "message": "Missing API key: send 'Authorization: Bearer <key>'."},
            }
        else:
            assert body["error"]["code"] == "unauthenticated" and "Missing API key" in body["error"]["message"]
    # 50 MB was sent; the server read none of it.
    assert grown < 25, f"the server grew by {grown:.0f} MB"

    status, headers, body, _ = answer(stall(address, "/api/v1/memories/", key=keys["revoked"]), within=5)
    assert status == 401 and body["error"]["message"] == "This API key was revoked. Ask the operator for a new one."
    metadata = "http://127.0.0.1/.well-known/oauth-protected-resource"  # the Host stall() sends
    assert (
        headers["www-authenticate"] == f'Bearer realm="memory", resource_metadata="{metadata}", error="invalid_token"'
    )
    status, _, body, _ = answer(stall(address, "/mcp", key="mem_00000000_unknown"), within=5)
    assert status == 401 and body["error"]["code"] == -32001 and "not valid" in body["error"]["message"]


def test_stalled_bodies_with_a_key_are_cut_off_at_the_timeout_and_those_beyond_the_budget_refused_unread(server):
    address, pid, keys = server
    before = rss_mb(pid)
    admitted = [stall(address, "/api/v1/memories/", key=keys["writer"], sent=DECLARED - 48_000) for _ in range(4)]
    time.sleep(0.5)  # for the server to take their headers (the client's sends return once the kernel has the bytes)
    # While those four hold the budget (for BODY_TIMEOUT seconds), every other body is refused.
    for number in range(20):
        connection = stall(
            address, "/mcp" if number % 2 else "/api/v1/memories/", key=keys["writer"], sent=DECLARED // 2
        )
        status, headers, body, seconds = answer(connection, within=5)
        assert status == 503 and headers["retry-after"] == "2" and seconds < 0.5
        assert "MEMORY_BODY_BUFFER_BYTES" in body["error"]["message"]
        assert body["error"]["code"] == (-32000 if number % 2 else "busy")
    peak = rss_mb(pid) - before
    for connection in admitted:
        status, headers, body, _ = answer(connection, within=BODY_TIMEOUT + 4)
        assert status == 408 and body["error"]["code"] == "timeout" and headers["connection"] == "close"
    # The budget is free again: a whole body is read and answered.
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    connection = stall(address, "/mcp", key=keys["writer"], declared=len(ping), extra="Connection: close\r\n")
    connection.sendall(ping)
    status, _, body, _ = answer(connection, within=10)
    assert (status, body) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    # 14 MB was sent; at most the budget's 4 MiB was read.
    assert peak < 25, f"the server grew by {peak:.0f} MB"


def _keyed_paths() -> list[tuple[str, bool]]:
    """Every REST endpoint's path (ids filled in), and whether its view needs a key."""
    from api import urls

    paths = []
    for pattern in urls.urlpatterns:
        route = str(pattern.pattern)
        if route.startswith("v1/"):
            path = "/api/" + re.sub(r"<int:\w+>", "1", re.sub(r"<str:\w+>", "x", route))
            paths.append((path, issubclass(pattern.callback.view_class, ApiView)))
    return paths


def test_every_rest_endpoint_with_a_key_checks_it_before_the_body_and_health_reads_its_body(server):
    address, _, _ = server
    paths = _keyed_paths()
    assert ("/api/v1/health/", False) in paths and ("/api/v1/memories/", True) in paths
    for path, needs_key in [*paths, ("/mcp", True), ("/api/v1/nowhere/", True)]:
        status, _, _, seconds = answer(stall(address, path, declared=10), within=BODY_TIMEOUT + 4)
        # A door that needs no key waits for the body, which never comes.
        assert (status, seconds < BODY_TIMEOUT / 2) == ((401, True) if needs_key else (408, False)), path


def closed_at(connection: socket.socket, deadline: float) -> float:
    """Wait until ``deadline`` (monotonic) for the server to close ``connection`` without answering; return when."""
    connection.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        assert connection.recv(65536) == b""
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail("the connection was still open at the deadline")
    finally:
        connection.close()
    return time.monotonic()


def test_connections_that_send_no_head_or_stop_half_way_through_it_are_closed_at_the_timeout(server):
    address, _, keys = server
    start = time.monotonic()
    silent = socket.create_connection(address, timeout=10)
    halfway = socket.create_connection(address, timeout=10)
    halfway.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bear")
    # A kept-alive connection: its second request stops in its headers.
    kept = socket.create_connection(address, timeout=10)
    kept.sendall(b"GET /api/v1/health/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while not re.search(rb"\r\n\r\n\{.*\}$", first, re.DOTALL):  # the whole answer: headers and its JSON
        first += kept.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    kept.sendall(b"GET /api/v1/health/ HTTP/1.1\r\nHost: 12")

    for connection in (silent, halfway, kept):
        closed = closed_at(connection, start + BODY_TIMEOUT + 4) - start
        assert BODY_TIMEOUT - 0.5 < closed, closed
