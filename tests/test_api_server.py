"""The REST API end to end: a real server process, and a client that uses only the standard library."""

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.subprocesses import serve

pytestmark = pytest.mark.slow

BODY_LIMIT = 64 * 1024
IMPORT_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def server(module_instance):
    keys = module_instance.create_api_keys(writer={}, admin={"scopes": ["admin"]})
    env = {
        **module_instance.env,
        "MEMORY_API_MAX_BODY_BYTES": str(BODY_LIMIT),
        "MEMORY_API_MAX_IMPORT_BYTES": str(IMPORT_LIMIT),
    }
    with serve(env) as base:
        yield base, keys


def call(base, method, path, key=None, body=None, headers=None):
    """Return (status, headers, parsed JSON body) of one request, errors included."""
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    request = urllib.request.Request(f"{base}{path}", data=data, method=method, headers=headers or {})
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def test_a_script_stores_recalls_exports_and_imports_with_a_key(server):
    base, keys = server
    key = keys["writer"]

    status, headers, stored = call(
        base,
        "POST",
        "/api/v1/memories/",
        key,
        {"content": "The on-call rota lives in PagerDuty.", "namespace": "ops", "tags": ["oncall"]},
    )
    assert status == 201 and headers["Location"] == f"/api/v1/memories/{stored['id']}/"
    status, _, found = call(base, "GET", "/api/v1/recall/?query=on-call+rota&namespace=ops", key)
    assert status == 200 and found["hits"][0]["id"] == stored["id"]

    request = urllib.request.Request(f"{base}/api/v1/export/?namespace=ops", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        # Streamed: sent in chunks as the rows are read, with no length known up front.
        assert response.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in response.headers
        document = json.loads(response.read())
    assert [memory["key"] for memory in document["memories"]] == [stored["key"]]

    document["memories"][0]["namespace"] = "ops-copy"
    status, _, report = call(base, "POST", "/api/v1/import/", key, document)
    assert status == 200 and report["created"] == 1
    status, _, copied = call(base, "GET", "/api/v1/memories/?namespace=ops-copy", key)
    assert [item["content"] for item in copied["items"]] == [stored["content"]]
    status, _, again = call(base, "POST", "/api/v1/import/", key, document)
    assert (again["created"], again["unchanged"]) == (0, 1)


def test_point_in_time_reads_over_http(server):
    base, keys = server
    key = keys["writer"]
    _, _, first = call(base, "POST", "/api/v1/memories/", key, {"content": "Standup is at 9:30.", "namespace": "pit"})
    status, _, revised = call(base, "PATCH", f"/api/v1/memories/{first['id']}/", key, {"content": "Standup is at 10."})
    assert status == 200 and revised["changed"]

    as_of = urllib.parse.quote(first["known_at"])
    _, _, then = call(base, "GET", f"/api/v1/memories/{first['id']}/?as_of={as_of}", key)
    _, _, now = call(base, "GET", f"/api/v1/memories/{first['id']}/", key)
    assert (then["content"], now["content"]) == ("Standup is at 9:30.", "Standup is at 10.")
    _, _, recalled = call(
        base, "POST", "/api/v1/recall/", key, {"query": "standup", "namespace": "pit", "as_of": first["known_at"]}
    )
    assert [(hit["id"], hit["content"]) for hit in recalled["hits"]] == [(first["id"], "Standup is at 9:30.")]


def test_errors_limits_and_health_on_the_real_server(server):
    base, keys = server

    status, headers, error = call(base, "GET", "/api/v1/memories/")
    metadata = f"{base}/.well-known/oauth-protected-resource"
    assert status == 401 and headers["WWW-Authenticate"] == f'Bearer realm="memory", resource_metadata="{metadata}"'
    assert error["error"]["code"] == "unauthenticated"
    big = json.dumps({"content": "x", "source": "y" * (BODY_LIMIT + 10)}).encode()
    status, _, error = call(base, "POST", "/api/v1/memories/", keys["writer"], big)
    assert status == 413 and error["error"]["code"] == "too_large"
    status, _, error = call(base, "POST", "/api/v1/memories/", keys["writer"], b'{"content": "a", "content": "b"}')
    assert status == 400 and error["error"]["code"] == "parse_error"
    status, _, error = call(base, "GET", "/api/v1/nowhere/", keys["writer"])
    assert status == 404 and error["error"]["code"] == "not_found"

    status, _, health = call(base, "GET", "/api/v1/health/")
    assert status == 200 and (health["status"], health["database"]) == ("ok", "ok")
    assert health["embedder"]["name"] == "hash-v1"
    with urllib.request.urlopen(f"{base}/api/docs/", timeout=30) as response:
        assert response.status == 200 and b"/api/v1/recall/" in response.read()


def test_a_declared_oversized_body_is_refused_before_it_is_sent(server):
    base, keys = server
    url = urllib.parse.urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=5) as connection:
        # Headers only: a server that waited for the 100 MB it was promised would time out here.
        connection.sendall(
            f"POST /api/v1/memories/ HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: "
            f"application/json\r\nAuthorization: Bearer {keys['writer']}\r\n"
            f"Content-Length: 100000000\r\n\r\n{{".encode()
        )
        answer = b""
        while chunk := connection.recv(4096):  # the refusal closes the connection
            answer += chunk
    head, _, body = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 413 ")
    assert json.loads(body)["error"] == {
        "code": "too_large",
        "message": f"The request body is over the limit of {BODY_LIMIT} bytes "
        "(MEMORY_API_MAX_BODY_BYTES). Send less per request: split the content or the import into smaller parts.",
    }


def _post_chunked(base, path, key, body: bytes, *, chunk: int = 16 * 1024, headers=None) -> tuple[int, dict]:
    """POST ``body`` with Transfer-Encoding: chunked (no Content-Length), ``chunk`` bytes a chunk."""
    url = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        chunks = (body[start : start + chunk] for start in range(0, len(body), chunk))
        connection.request(
            "POST",
            path,
            body=chunks,
            encode_chunked=True,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}", **(headers or {})},
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_chunked_body_reaches_mcp_and_rest_whole(server):
    base, keys = server
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    status, answer = _post_chunked(
        base, "/mcp", keys["writer"], ping, chunk=7, headers={"Accept": "application/json, text/event-stream"}
    )
    assert (status, answer) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})
    memory = json.dumps({"content": "This memory was sent in chunks.", "namespace": "chunked"}).encode()
    status, stored = _post_chunked(base, "/api/v1/memories/", keys["writer"], memory, chunk=10)
    assert status == 201 and (stored["content"], stored["namespace"]) == ("This memory was sent in chunks.", "chunked")


def test_a_chunked_body_is_cut_off_at_its_paths_limit_and_otherwise_read_whole(server):
    base, keys = server
    memory = json.dumps({"content": "x", "source": "y" * (BODY_LIMIT + 10)}).encode()
    status, error = _post_chunked(base, "/api/v1/memories/", keys["writer"], memory)
    assert status == 413 and "MEMORY_API_MAX_BODY_BYTES" in error["error"]["message"]
    # Imports have their own, larger limit: a document over the plain limit but under it passes the
    # cut-off and is imported whole.
    document = json.dumps(
        {
            "format": "memory-export",
            "version": 1,
            "memories": [
                {"namespace": "big", "key": f"k{index}", "revisions": [{"content": f"Item {index} " + "z" * 900}]}
                for index in range(100)
            ],
        }
    ).encode()
    assert BODY_LIMIT < len(document) < IMPORT_LIMIT
    status, report = _post_chunked(base, "/api/v1/import/", keys["writer"], document)
    assert status == 200 and report["created"] == 100
    status, error = _post_chunked(base, "/api/v1/import/", keys["writer"], document * 3)
    assert status == 413 and "MEMORY_API_MAX_IMPORT_BYTES" in error["error"]["message"]
    # The same document with its length declared changes nothing more.
    status, _, report = call(base, "POST", "/api/v1/import/", keys["writer"], document)
    assert status == 200 and (report["created"], report["unchanged"]) == (0, 100)
