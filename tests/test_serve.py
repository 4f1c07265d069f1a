"""The server as `make run` starts it: uvicorn on loopback, admin pages and their static files."""

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.subprocesses import BASE_DIR, instance, migrated_db  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


@pytest.fixture
def server(instance):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "memoryproject.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--no-access-log"],
        cwd=BASE_DIR, env=instance.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            if get(f"{base}/admin/login/")[0] == 200:
                break
        except (urllib.error.URLError, ConnectionError):
            pass
        assert time.monotonic() < deadline, "the server did not answer within 30 seconds"
        time.sleep(0.1)
    yield base
    process.terminate()
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


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
