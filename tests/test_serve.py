"""The server as `make run` starts it: uvicorn on loopback, admin pages and their static files."""

import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.subprocesses import BASE_DIR, free_port, instance, migrated_db, serve  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


@pytest.fixture
def server(instance):
    with serve(instance.env) as base:
        yield base


def test_the_server_answers_the_admin_login_and_serves_its_static_files(server):
    status, content_type, body = get(f"{server}/admin/login/")
    assert status == 200
    assert content_type.startswith("text/html")
    assert b'name="username"' in body and b'name="password"' in body

    status, content_type, body = get(f"{server}/static/admin/css/base.css")
    assert status == 200
    assert content_type.startswith("text/css")
    assert b"--body-bg" in body

    assert get(f"{server}/static/admin/css/no-such-file.css")[0] == 404


@pytest.mark.django_db
def test_static_files_are_served_by_the_middleware_in_process(client):
    response = client.get("/static/dashboard/dashboard.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert b"".join(response.streaming_content)
    assert client.get("/static/dashboard/no-such-file.css").status_code == 404
    assert client.get("/api/v1/health/").status_code == 200  # other requests pass through


def test_serve_prints_the_first_credentials_then_the_urls_once_the_port_accepts_connections(instance):
    port = free_port()
    process = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)], cwd=BASE_DIR,
                               env=instance.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        before = []
        for line in process.stdout:
            if line.startswith("Dashboard:"):
                # At once, with no retry: the port must accept by the time the URLs are out.
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    pass
                break
            before.append(line.rstrip("\n"))
        else:
            pytest.fail(f"the server stopped without printing its URLs: {before}")
        urls = [line, *(process.stdout.readline() for _ in range(3))]
        status, _, _ = get(f"http://127.0.0.1:{port}/admin/login/")
    finally:
        process.terminate()
        process.wait(timeout=30)

    assert any(line.startswith("  password: ") for line in before)  # first_run's credentials come first
    assert any(line.startswith("  key: mem_") for line in before)
    assert [line.rstrip("\n") for line in urls] == [
        f"Dashboard: http://127.0.0.1:{port}/",
        f"Admin:     http://127.0.0.1:{port}/admin/",
        f"REST docs: http://127.0.0.1:{port}/api/docs/",
        f"MCP:       http://127.0.0.1:{port}/mcp",
    ]
    assert status == 200
