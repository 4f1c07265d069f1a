"""What an operator deploys, run for real: the systemd unit and the nginx site of docs/examples/, a server started
with the unit's own commands and environment behind Debian's nginx, the Host check, and the checks `serve` makes
as it starts."""

import contextlib
import http.client
import json
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from tests import postgres
from tests.subprocesses import BASE_DIR, clean_env, free_port

pytestmark = pytest.mark.slow

EXAMPLES = BASE_DIR / "docs" / "examples"
UNIT = EXAMPLES / "memory-server.service"
SITE = EXAMPLES / "nginx.conf"
HOST = "memory.example.com"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
LISTENING = "MEMORY_SERVER_LISTENING "


def replaced(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each key replaced, each found exactly once: an example that changed shape fails here."""
    for old, new in replacements.items():
        assert text.count(old) == 1, f"expected {old!r} once in the example"
        text = text.replace(old, new)
    return text


def unit_here(data_dir: Path, credentials: Path, port: int) -> str:
    """The unit with this checkout, this Python, and the test's folders and port for the example's paths."""
    text = replaced(UNIT.read_text(), {"Environment=MEMORY_PORT=8000": f"Environment=MEMORY_PORT={port}"})
    text = text.replace("/opt/memory-server/.venv/bin/python", sys.executable)
    text = text.replace("/opt/memory-server", str(BASE_DIR))
    text = text.replace("/var/lib/memory-server", str(data_dir))
    return text.replace("%d", str(credentials))


def unit_lines(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


@pytest.mark.parametrize(("example", "fence"), [(UNIT, "ini"), (SITE, "nginx")], ids=["unit", "nginx"])
def test_docs_operations_shows_each_example_file_exactly_as_it_is(example, fence):
    operations = (BASE_DIR / "docs" / "operations.md").read_text()

    assert f"```{fence}\n{example.read_text()}```\n" in operations


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_systemd_unit_passes_systemd_analyze_verify_without_a_warning(tmp_path):
    unit = tmp_path / "memory-server.service"
    unit.write_text(unit_here(tmp_path / "data", tmp_path / "credentials", 8000))

    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.fixture(scope="module")
def unit_server(tmp_path_factory):
    """A server started as the unit starts one: its ExecStartPre, then its ExecStart, with its Environment= lines
    (a secret key in the credentials folder, as LoadCredential= leaves it). Yields (base URL, data dir, stderr)."""
    folder = tmp_path_factory.mktemp("unit")
    data_dir, credentials = folder / "data", folder / "credentials"
    data_dir.mkdir(mode=0o700)
    credentials.mkdir()
    (credentials / "secret_key").write_text("unit-test-secret-" + "k" * 40 + "\n")
    port = free_port()
    text = unit_here(data_dir, credentials, port)
    env = clean_env(data_dir)
    for name in ("MEMORY_DATA_DIR", "MEMORY_DB_PATH"):
        env.pop(name)  # the unit's own, below
    env.update(dict(line.split("=", 1) for line in unit_lines(text, "Environment")))
    (before,) = unit_lines(text, "ExecStartPre")
    (start,) = unit_lines(text, "ExecStart")
    migrated = subprocess.run(before.split(), cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=180)
    assert migrated.returncode == 0, migrated.stderr
    errors = folder / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(start.split(), cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=stderr)
    try:
        for line in process.stdout:
            if line.startswith(LISTENING.encode()):
                break
        else:
            pytest.fail(f"the unit's server stopped: {errors.read_text()}")
        yield f"http://127.0.0.1:{port}", port, data_dir, errors
    finally:
        process.send_signal(signal.SIGTERM)  # what systemd sends to stop it
        assert process.wait(timeout=30) == 0


def request(port: int, method: str, path: str, *, tls: bool = False, host: str = HOST, body=None, headers=None):
    """One request to 127.0.0.1:``port`` with this Host; returns (status, headers, body)."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the test's own certificate
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    with contextlib.closing(connection):
        connection.request(method, path, body=body, headers={"Host": host, **(headers or {})})
        response = connection.getresponse()
        return response.status, response.headers, response.read()


def test_the_units_environment_is_all_known_settings_and_its_server_drew_the_first_login_into_a_private_file(
    unit_server,
):
    _, _, data_dir, errors = unit_server

    assert "is not a setting of this server" not in errors.read_text()
    written = (data_dir / "memory.db.first-run").read_text()
    assert re.search(r"^\s+password: \S+$", written, re.MULTILINE)
    assert oct((data_dir / "memory.db.first-run").stat().st_mode & 0o777) == "0o600"


def test_a_request_for_a_host_not_allowed_gets_a_json_error_on_every_door(unit_server):
    _, port, _, _ = unit_server

    rest = request(port, "GET", "/api/v1/health/", host="evil.example")
    mcp = request(port, "GET", "/mcp", host="evil.example")  # a body would be refused for its missing key first
    page = request(port, "GET", "/admin/login/", host="evil.example")

    for status, headers, _ in (rest, mcp, page):
        assert status == 400 and headers["Content-Type"] == "application/json"
    assert json.loads(rest[2])["error"]["code"] == "disallowed_host"
    assert "MEMORY_ALLOWED_HOSTS" in json.loads(page[2])["error"]["message"]
    assert json.loads(mcp[2])["error"]["code"] == -32600
    assert request(port, "GET", "/api/v1/health/")[0] == 200  # the unit's own host name passes


@contextlib.contextmanager
def nginx_in_front_of(app_port: int, folder: Path):
    """Debian's nginx running docs/examples/nginx.conf on free ports, with a certificate made for the test."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={HOST}"]
        + ["-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
        check=True,
        capture_output=True,
    )
    http_port, https_port = free_port(), free_port()
    site = replaced(
        SITE.read_text(),
        {
            "server 127.0.0.1:8000;": f"server 127.0.0.1:{app_port};",
            "listen 80;": f"listen 127.0.0.1:{http_port};",
            "listen [::]:80;": "",
            "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
            "listen [::]:443 ssl;": "",
            f"/etc/letsencrypt/live/{HOST}/fullchain.pem": str(folder / "cert.pem"),
            f"/etc/letsencrypt/live/{HOST}/privkey.pem": str(folder / "key.pem"),
        },
    )
    (folder / "site.conf").write_text(site)
    temp = "".join(
        f"{kind}_temp_path {folder}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (folder / "nginx.conf").write_text(
        f"pid {folder}/nginx.pid;\nerror_log {folder}/error.log;\nevents {{}}\n"
        f"http {{\naccess_log {folder}/access.log;\n{temp}include {folder}/site.conf;\n}}\n"
    )
    command = [NGINX, "-e", str(folder / "error.log"), "-p", str(folder), "-c", str(folder / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen([*command, "-g", "daemon off;"])
    try:
        deadline = time.monotonic() + 20
        while not all(_accepts(port) for port in (http_port, https_port)):
            assert process.poll() is None, (folder / "error.log").read_text()
            assert time.monotonic() < deadline, "nginx did not start listening"
            time.sleep(0.05)
        yield http_port, https_port
    finally:
        process.terminate()
        process.wait(timeout=20)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (Debian's nginx package)")
@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_through_the_nginx_example_the_api_answers_and_an_admin_signs_in_with_secure_cookies(unit_server, tmp_path):
    _, app_port, data_dir, _ = unit_server
    written = (data_dir / "memory.db.first-run").read_text()
    password = re.search(r"^\s+password: (\S+)$", written, re.MULTILINE).group(1)
    key = re.search(r"^\s+key: (\S+)$", written, re.MULTILINE).group(1)

    with nginx_in_front_of(app_port, tmp_path) as (http_port, https_port):
        redirect = request(http_port, "GET", "/admin/")
        stored = request(
            https_port,
            "POST",
            "/api/v1/memories/",
            tls=True,
            body=json.dumps({"namespace": "ops", "content": "The proxy passes keys on."}),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        recalled = request(
            https_port,
            "GET",
            "/api/v1/recall/?query=proxy&namespace=ops",
            tls=True,
            headers={"Authorization": f"Bearer {key}"},
        )
        login_page = request(https_port, "GET", "/admin/login/", tls=True)
        csrf_cookie = login_page[1]["Set-Cookie"]
        token = re.search(r"csrftoken=([^;]+)", csrf_cookie).group(1)
        form = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', login_page[2]).group(1).decode()
        signed_in = request(
            https_port,
            "POST",
            "/admin/login/?next=/admin/",
            tls=True,
            body=urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": form}),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"csrftoken={token}",
                "Origin": f"https://{HOST}",
                "Referer": f"https://{HOST}/admin/login/",
            },
        )
        metrics = request(https_port, "GET", "/metrics", tls=True)

    assert redirect[0] == 301 and redirect[1]["Location"] == f"https://{HOST}/admin/"
    assert stored[0] == 201, stored[2]
    assert [hit["content"] for hit in json.loads(recalled[2])["hits"]] == ["The proxy passes keys on."]
    assert "; Secure" in csrf_cookie
    assert signed_in[0] == 302 and signed_in[1]["Location"] == "/admin/", signed_in[2][:500]
    (session_cookie,) = [value for value in signed_in[1].get_all("Set-Cookie") if value.startswith("sessionid=")]
    assert "; Secure" in session_cookie and "HttpOnly" in session_cookie
    assert metrics[0] == 404  # scraped on each app server, not through the proxy


def start_serving(env: dict, errors: Path) -> tuple[int, str]:
    """Run `manage.py serve` until it listens or exits; return its exit status (None while it serves) and stderr."""
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", "0"],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        for line in process.stdout:
            if line.startswith(LISTENING):
                return None, errors.read_text()
        return process.wait(timeout=30), errors.read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_names_a_misspelt_setting_with_the_closest_one_and_not_the_hooks_variables(instance, tmp_path):
    env = {
        **instance.env,
        "MEMORY_SERVER_THREDS": "4",
        "MEMORY_URL": "http://127.0.0.1:8000",  # read by the hooks in the same shell
        "MEMORY_API_KEY": "mem_00000000_x",
        "MEMORY_NAMESPACE": "ops",
    }

    status, stderr = start_serving(env, tmp_path / "stderr.txt")

    assert status is None, stderr  # a warning, not a refusal: it served
    warnings = [line for line in stderr.splitlines() if "is not a setting of this server" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith(
        "WARNING memory.serve: MEMORY_SERVER_THREDS is set but is not a setting of this "
        "server: did you mean MEMORY_SERVER_THREADS? It is ignored."
    )


@pytest.mark.skipif(postgres.missing() is not None, reason=f"no PostgreSQL cluster: {postgres.missing()}")
def test_serve_refuses_a_pool_larger_than_postgresql_accepts_with_the_numbers_and_serves_one_that_fits(tmp_path):
    cluster = postgres.Cluster()  # max_connections=200, 3 of them reserved for superusers: PostgreSQL's default
    try:
        env = clean_env(tmp_path, MEMORY_DATABASE_URL=cluster.create("pooled"))
        migrated = subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=BASE_DIR, env=env, capture_output=True, timeout=180
        )
        assert migrated.returncode == 0, migrated.stderr

        refused = start_serving({**env, "MEMORY_DB_POOL_SIZE": "198"}, tmp_path / "refused.txt")
        fits = start_serving({**env, "MEMORY_DB_POOL_SIZE": "197"}, tmp_path / "fits.txt")
    finally:
        cluster.stop()

    assert refused[0] == 1
    assert refused[1].splitlines()[-1] == (
        f"CommandError: MEMORY_DB_POOL_SIZE=198 asks for more connections than the PostgreSQL server at "
        f"postgres@127.0.0.1:{cluster.port}/pooled accepts: its max_connections is 200, 3 of them reserved, so 197 "
        "at most for all clients together. Lower the setting, or raise max_connections on the server."
    )
    assert fits[0] is None, fits[1]
