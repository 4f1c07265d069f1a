"""The server as `make run` starts it: uvicorn on loopback, admin pages and their static files."""

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from memoryproject.storage import READ_ONLY_MESSAGE
from tests.subprocesses import BASE_DIR, clean_env, free_port, read_only_mount, serve

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


def test_serve_says_where_the_first_credentials_are_then_prints_the_urls_once_the_port_accepts_connections(instance):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=BASE_DIR,
        env=instance.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
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

    # first_run's lines come first; its drawn password and key are in a file, not on a pipe that logs keep.
    assert before[0] == "Created the first admin login 'admin' and the first API key."
    assert not any("password: " in line or "key: mem_" in line for line in before)
    assert "  key: mem_" in (instance.data_dir / "memory.db.first-run").read_text()
    assert [line.rstrip("\n") for line in urls] == [
        f"Dashboard: http://127.0.0.1:{port}/",
        f"Admin:     http://127.0.0.1:{port}/admin/",
        f"REST docs: http://127.0.0.1:{port}/api/docs/",
        f"MCP:       http://127.0.0.1:{port}/mcp",
    ]
    assert status == 200


def test_with_json_logs_the_urls_are_one_json_log_line_and_the_listening_line_stays(instance, tmp_path):
    errors = (tmp_path / "stderr").open("w+")
    process, found = _start({**instance.env, "MEMORY_LOG_FORMAT": "json"}, stderr=errors)
    try:
        base = found["url"]
        assert get(f"{base}/admin/login/")[0] == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
    errors.seek(0)
    entries = [json.loads(line) for line in errors.read().splitlines()]  # every line JSON

    [listening] = [entry for entry in entries if entry["logger"] == "memory.serve"]
    assert listening["message"] == f"Listening on {base}"
    assert (listening["dashboard_url"], listening["admin_url"], listening["rest_docs_url"], listening["mcp_url"]) == (
        f"{base}/",
        f"{base}/admin/",
        f"{base}/api/docs/",
        f"{base}/mcp",
    )
    assert (listening["port"], listening["pid"]) == (found["port"], process.pid)


def _start(env: dict, *, stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, dict]:
    """Start `serve` with MEMORY_PORT=0 and return it with the JSON of its MEMORY_SERVER_LISTENING line."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve"],
        cwd=BASE_DIR,
        env={**env, "MEMORY_PORT": "0"},
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    for line in process.stdout:
        if line.startswith("MEMORY_SERVER_LISTENING "):
            return process, json.loads(line.split(" ", 1)[1])
    process.kill()
    pytest.fail("the server stopped without printing its MEMORY_SERVER_LISTENING line")


def test_port_zero_binds_a_free_port_announces_it_and_the_discovery_file_goes_on_a_graceful_stop(instance):
    discovery = instance.data_dir / "memory.db.server.json"
    process, found = _start(instance.env)
    try:
        port = found["port"]
        assert port > 0 and found == {
            "url": f"http://127.0.0.1:{port}",
            "mcp_url": f"http://127.0.0.1:{port}/mcp",
            "port": port,
            "pid": process.pid,
        }
        # Listening before the line is out, and the file says the same.
        assert get(f"{found['url']}/api/v1/health/")[0] == 200
        assert json.loads(discovery.read_text()) == found
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert not discovery.exists()


def test_a_killed_server_leaves_a_file_that_readers_know_is_stale(instance):
    hook = _load_hook()
    process, found = _start(instance.env)
    discovery = instance.data_dir / "memory.db.server.json"
    try:
        assert hook.discovered_url({"MEMORY_DISCOVERY_FILE": str(discovery)}) == found["url"]
        # With no MEMORY_URL the hook goes where the file points.
        assert hook.Client({"MEMORY_API_KEY": "mem_x", "MEMORY_DB_PATH": str(instance.db_path)}).url == found["url"]
    finally:
        process.kill()
        process.wait(timeout=30)
    assert json.loads(discovery.read_text())["pid"] == process.pid  # no chance to clean up
    assert hook.discovered_url({"MEMORY_DISCOVERY_FILE": str(discovery)}) is None


def _stop(process: subprocess.Popen) -> int:
    process.terminate()
    return process.wait(timeout=30)


def test_a_second_server_on_a_database_leaves_the_discovery_file_to_the_first_and_takes_it_when_that_one_stops(
    instance, tmp_path
):
    hook = _load_hook()
    discovery = instance.data_dir / "memory.db.server.json"
    first, first_found = _start(instance.env)
    second = third = None
    try:
        second_said = tmp_path / "second.err"
        second, second_found = _start(instance.env, stderr=second_said.open("w"))
        # Both serve; the file still names the first, and the second says so in one line.
        assert get(f"{first_found['url']}/api/v1/health/")[0] == 200
        assert get(f"{second_found['url']}/api/v1/health/")[0] == 200
        assert json.loads(discovery.read_text()) == first_found
        assert (
            f"The discovery file {discovery} names the server at {first_found['url']}, started first on this "
            "database; it stays that server's, and passes to this one when that one stops. Until then local "
            f"clients reach this server with MEMORY_URL={second_found['url']}."
        ) in second_said.read_text()

        # The second stops: the file is the first's still, and the hook goes there.
        assert _stop(second) == 0
        assert json.loads(discovery.read_text()) == first_found
        assert hook.discovered_url({"MEMORY_DISCOVERY_FILE": str(discovery)}) == first_found["url"]

        # The first stops while a third serves: the file passes to the third, and goes when it stops.
        third, third_found = _start(instance.env)
        assert _stop(first) == 0
        deadline = time.monotonic() + 10
        while not discovery.exists() or json.loads(discovery.read_text()) != third_found:
            assert time.monotonic() < deadline, "the discovery file did not pass to the server still running"
            time.sleep(0.05)
        assert _stop(third) == 0
        assert not discovery.exists()
    finally:
        for process in (first, second, third):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_logs_no_lifespan_line_and_a_signal_stops_it_with_status_0(instance, tmp_path, stop):
    log = tmp_path / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve"],
            cwd=BASE_DIR,
            env={**instance.env, "MEMORY_PORT": "0"},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        _wait_for_line(log, process, "MEMORY_SERVER_LISTENING ")
        process.send_signal(stop)
        status = process.wait(timeout=30)
    said = log.read_text().replace(str(instance.data_dir), "<data>")  # the first-run file's path names this test
    assert status == 0, said
    assert "lifespan" not in said and "Traceback" not in said
    assert "Finished server process" in said


def test_uvicorn_on_the_entry_point_itself_completes_the_lifespan_and_logs_no_unsupported_line(instance):
    with serve(instance.env) as base:  # `uvicorn memoryproject.asgi:application`, lifespan on (its default)
        assert get(f"{base}/api/v1/health/")[0] == 200
    said = (instance.data_dir / "server.log").read_text()
    assert "Application startup complete." in said and "Application shutdown complete." in said
    assert "unsupported" not in said


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_ctrl_c_stops_make_run_without_a_word_from_make(instance, tmp_path):
    log = tmp_path / "make.log"
    with log.open("w") as output:
        # -o install: the suite's own interpreter, no pip; the terminal's Ctrl-C goes to make and the server alike.
        process = subprocess.Popen(
            ["make", "-o", "install", "run", f"PY={sys.executable}"],
            cwd=BASE_DIR,
            env={**instance.env, "MEMORY_PORT": "0"},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait_for_line(log, process, "MEMORY_SERVER_LISTENING ")
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=30)
    said = log.read_text()
    assert "Finished server process" in said
    assert "make: ***" not in said and "Traceback" not in said and "lifespan" not in said


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_install_says_what_it_installs_before_pip_runs_and_lets_pip_show_its_progress(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # An interpreter that only says how it was called: the recipe runs, no package is fetched.
    (venv / "bin" / "python").write_text('#!/bin/sh\necho "python $*"\n')
    (venv / "bin" / "python").chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", "install", f"VENV={venv}"], cwd=BASE_DIR, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0] == (
        f"Installing requirements.txt into {venv}: about 2 GB, a few minutes the first time (README: Install)."
    )
    called = next(line for line in said if line.startswith("python -m pip install"))
    assert "-q" not in called.split() and called.endswith("-r requirements.txt")
    assert (venv / ".requirements.stamp").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_and_lint_install_the_test_tools_on_top_and_make_run_installs_only_what_running_needs(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text('#!/bin/sh\necho "python $*"\n')
    (venv / "bin" / "python").chmod(0o755)

    def installs(*targets: str) -> list[str]:
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", *targets, f"VENV={venv}"],
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return [line.split(" -r ")[1] for line in done.stdout.splitlines() if " -m pip install " in line]

    assert installs("run") == ["requirements.txt"]
    for target in ("test", "lint", "test-postgres"):
        assert installs(target) == ["requirements.txt", "requirements-test.txt"]
    testing = (BASE_DIR / "requirements-test.txt").read_text().splitlines()
    running = (BASE_DIR / "requirements.txt").read_text()
    assert "-r requirements.txt" in testing
    for tool in ("pytest", "pytest-django", "hypothesis", "schemathesis", "playwright", "ruff"):
        assert any(line.startswith(f"{tool}==") for line in testing)
        assert not re.search(rf"^{tool}==", running, re.MULTILINE)


def _wait_for_line(log, process: subprocess.Popen, start: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(line.startswith(start) for line in log.read_text().splitlines()):
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def _load_hook():
    spec = importlib.util.spec_from_file_location("memory_hook", BASE_DIR / "integrations/claude-code/memory_hook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _raw_answer(port: int, request: bytes) -> tuple[str, dict, dict]:
    """Send ``request`` as bytes on one socket; return the status line, headers and JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    return status, headers, json.loads(body)


def test_a_request_http_cannot_parse_gets_the_doors_json_error_not_plain_text(instance):
    process, found = _start(instance.env)
    try:
        port = found["port"]
        nul = b"Authorization: Bearer mem_\x00abc\r\n"
        status, headers, body = _raw_answer(port, b"GET /api/v1/memories/ HTTP/1.1\r\nHost: x\r\n" + nul + b"\r\n")
        assert status == "HTTP/1.1 400 Bad Request" and headers["content-type"] == "application/json"
        assert body["error"]["code"] == "bad_request" and "NUL" in body["error"]["message"]

        request = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" + nul + b"\r\n{}"
        status, headers, body = _raw_answer(port, request)
        assert status == "HTTP/1.1 400 Bad Request" and headers["content-type"] == "application/json"
        assert body["id"] is None and body["error"]["code"] == -32600

        assert get(f"{found['url']}/api/v1/health/")[0] == 200  # and it goes on serving
    finally:
        process.terminate()
        process.wait(timeout=30)


def call(url: str, *, key: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="GET" if body is None else "POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.sqlite_only("a SQLite file on a read-only disk; tests/test_postgres.py has PostgreSQL's read-only case")
@pytest.mark.parametrize(
    ("held_elsewhere", "with_admin"),
    [(False, True), (True, False)],
    ids=["closed-with-admin", "held-open-elsewhere-keys-only"],
)
def test_serve_on_a_read_only_disk_answers_reads_refuses_writes_and_health_says_read_only(
    instance, tmp_path, held_elsewhere, with_admin
):
    if with_admin:
        assert instance.manage("first_run").returncode == 0
        key = re.search(r"key: (mem_\S+)", (instance.data_dir / "memory.db.first-run").read_text()).group(1)
    else:  # first_run, which serve runs, would make an admin login: on this disk it cannot
        key = instance.create_api_keys(reader={})["reader"]
    instance.memory("remember", "--namespace", "acme", "The VPN endpoint is vpn1.example.")
    errors = tmp_path / "stderr.txt"
    with contextlib.ExitStack() as stack:
        if held_elsewhere:
            # A process on a writable path keeps the database open, so its -wal and -shm files are there too.
            other = stack.enter_context(contextlib.closing(sqlite3.connect(instance.db_path)))
            other.execute("SELECT count(*) FROM memories_memory").fetchall()
        folder = stack.enter_context(read_only_mount(instance.data_dir, tmp_path / "read-only"))
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve"],
            cwd=BASE_DIR,
            env={**clean_env(folder), "MEMORY_PORT": "0"},
            stdout=subprocess.PIPE,
            stderr=errors.open("w"),
            text=True,
        )
        try:
            found = next(
                (
                    json.loads(line.split(" ", 1)[1])
                    for line in process.stdout
                    if line.startswith("MEMORY_SERVER_LISTENING ")
                ),
                None,
            )
            assert found is not None, errors.read_text()
            health = get(f"{found['url']}/api/v1/health/")
            listed = call(f"{found['url']}/api/v1/memories/?namespace=acme", key=key)
            written = call(
                f"{found['url']}/api/v1/memories/",
                key=key,
                body={"namespace": "acme", "content": "Written to a read-only disk."},
            )
        finally:
            process.terminate()
            process.wait(timeout=30)

    assert health[0] == 503
    assert json.loads(health[2])["database"] == "read-only"
    assert listed[0] == 200
    assert [item["content"] for item in listed[1]["items"]] == ["The VPN endpoint is vpn1.example."]
    assert written == (503, {"error": {"code": "read_only", "message": READ_ONLY_MESSAGE}})
    # A line says why no local client finds it through the discovery file, and one why no admin was made; no traceback.
    said = errors.read_text()
    assert "Traceback" not in said
    assert f"Cannot write the discovery file {folder / 'memory.db.server.json'}" in said
    assert (f"{READ_ONLY_MESSAGE} No first admin login or API key was made; serving reads only." in said) != with_admin
