"""The server as `make run` starts it: uvicorn on loopback, admin pages and their static files."""

import urllib.error
import urllib.request

import pytest

from tests.subprocesses import instance, migrated_db, serve  # noqa: F401  (fixtures)

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
