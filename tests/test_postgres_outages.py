"""PostgreSQL stopped under a live server, refusing its password, or behind its code: every door says so at once.

A throwaway cluster (tests/postgres.py) of this module's own, since one test stops and starts it.
"""

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import httpx
import pytest

from memoryproject.env import SettingError, env_database_url
from tests import postgres
from tests.subprocesses import BASE_DIR, clean_env, manage, python, serve
from tests.test_postgres import on_a_cluster

# Each wait measured here: the target for an outage seen and for a recovery (docs/postgresql.md).
SECONDS = 3.0
# How long the database stays down while requests keep coming.
OUTAGE_SECONDS = 3
RECALL = "/api/v1/recall/?" + urllib.parse.urlencode({"query": "kettle", "mode": "keyword"})


def call(base: str, path: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, dict, dict, float]:
    """One request: (status, headers by lower-case name, parsed JSON body, seconds it took); errors included."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers=headers, method="POST" if data else "GET")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, answered, content = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, answered, content = error.code, dict(error.headers), error.read()
    return (
        status,
        {name.lower(): value for name, value in answered.items()},
        json.loads(content),
        time.monotonic() - started,
    )


def signed_in(base: str, env: dict) -> httpx.Client:
    """A browser's session with the admin, as a person who curates memories has one."""
    made = manage(
        "createsuperuser",
        "--noinput",
        "--username",
        "curator",
        "--email",
        "c@example.com",
        env={**env, "DJANGO_SUPERUSER_PASSWORD": "a-long-curator-password"},
    )
    assert made.returncode == 0, made.stderr
    browser = httpx.Client(base_url=base, timeout=60)
    form = browser.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)[1]
    answer = browser.post(
        "/admin/login/?next=/admin/",
        data={
            "csrfmiddlewaretoken": token,
            "username": "curator",
            "password": "a-long-curator-password",
            "next": "/admin/",
        },
        headers={"Referer": f"{base}/admin/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return browser


def mcp_recall(base: str, token: str) -> tuple[int, dict, dict, float]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_recall"}}
    message["params"]["arguments"] = {"query": "kettle", "mode": "keyword"}
    return call(base, "/mcp", token=token, body=message)


def until_answered(request, *, within: float) -> float:
    """Repeat ``request`` until it answers 200; return the seconds that took."""
    started = time.monotonic()
    while True:
        status, _, body, _ = request()
        if status == 200:
            return time.monotonic() - started
        assert time.monotonic() - started < within, (status, body)
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster():
    started = postgres.Cluster()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def migrated(cluster, tmp_path_factory) -> str:
    """A migrated database's name, to copy (CREATE DATABASE ... TEMPLATE) for each test."""
    url = cluster.create("outage_template")
    done = manage("migrate", env=clean_env(tmp_path_factory.mktemp("pg"), MEMORY_DATABASE_URL=url), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return "outage_template"


def copy(cluster, migrated: str, name: str) -> str:
    cluster.sql(f'CREATE DATABASE "{name}" TEMPLATE "{migrated}"')
    return cluster.url(name)


def api_key(env: dict) -> str:
    made = manage("create_api_key", "--name", "probe", env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


@on_a_cluster
@pytest.mark.parametrize("pool_size", ["8", "0"])
def test_a_stopped_database_is_unavailable_at_every_door_within_seconds_and_served_as_soon_as_it_is_back(
    cluster, migrated, tmp_path, pool_size
):
    url = copy(cluster, migrated, f"stopped_{pool_size}")
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=url, MEMORY_DB_POOL_SIZE=pool_size)
    token = api_key(env)
    figures = {}
    with serve(env) as base:
        stored = call(base, "/api/v1/memories/", token=token, body={"content": "The kettle is descaled monthly."})
        assert stored[0] == 201, stored
        assert call(base, RECALL, token=token)[0] == mcp_recall(base, token)[0] == 200
        assert call(base, "/api/v1/health/ready/")[0] == 200
        browser = signed_in(base, env)

        cluster.halt()
        try:
            admin = browser.get("/admin/")  # the session is read from the database first
            rest = call(base, RECALL, token=token)
            write = call(base, "/api/v1/memories/", token=token, body={"content": "The kettle leaks."})
            mcp = mcp_recall(base, token)
            health = call(base, "/api/v1/health/")
            live = call(base, "/api/v1/health/live/")
            ready = call(base, "/api/v1/health/ready/")
            # Requests keep coming while it stays down: none waits for a retry backing off.
            later = []
            for _ in range(OUTAGE_SECONDS * 4):
                time.sleep(0.25)
                later.append(call(base, RECALL, token=token))
        finally:
            cluster.start()
        figures["recovery, REST"] = until_answered(lambda: call(base, RECALL, token=token), within=SECONDS)
        figures["recovery, MCP"] = until_answered(lambda: mcp_recall(base, token), within=SECONDS)
        assert call(base, "/api/v1/health/ready/")[0] == 200
        # A restart that no request saw: the first one after it is served, on a new connection.
        cluster.halt()
        time.sleep(1)
        cluster.start()
        unseen = call(base, RECALL, token=token)
    figures["slowest of the later REST reads"] = max(answer[3] for answer in later)
    figures["first read after an unseen restart"] = unseen[3]
    assert {answer[0] for answer in later} == {503} and unseen[0] == 200
    figures.update({"REST read": rest[3], "REST write": write[3], "MCP": mcp[3], "health": health[3]})
    figures.update({"readiness": ready[3], "liveness": live[3]})

    for status, headers, body, _ in (rest, write):
        assert status == 503 and body["error"]["code"] == "unavailable", body
        assert body["error"]["message"].startswith("Cannot connect to the database: Connection refused. "), body
        assert "127.0.0.1" not in body["error"]["message"]  # where the database is, a client need not learn
        assert headers["retry-after"] == "5"
    status, headers, body, _ = mcp
    assert status == 503 and headers["content-type"] == "application/json" and headers["retry-after"] == "5"
    assert body["error"]["code"] == -32000 and body["error"]["message"].startswith("Cannot connect to the database")
    assert health[0] == 503 and health[2]["database"] == "error"
    assert live[0] == 200 and live[2]["status"] == "ok"
    assert ready[0] == 503 and ready[2]["status"] == "not_ready" and ready[2]["database"] == "error"
    assert ready[1]["retry-after"] == "5"
    assert admin.status_code == 503 and admin.headers["retry-after"] == "5"
    assert "Cannot connect to the database" in admin.text and "Server Error" not in admin.text
    print(
        f"\nMEMORY_DB_POOL_SIZE={pool_size}: "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in figures.items())
    )
    assert max(figures.values()) <= SECONDS, figures
    assert live[3] < 0.5  # the database is never asked


@on_a_cluster
def test_a_wrong_password_fails_fast_with_its_reason_in_serve_doctor_and_requests(cluster, migrated, tmp_path):
    url = copy(cluster, migrated, "guarded")
    cluster.sql("CREATE ROLE guarded LOGIN SUPERUSER PASSWORD 'the-right-one'")
    cluster.require_passwords("guarded")
    wrong = url.replace("postgres@", "guarded:Wr0ngPassw0rd@")
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=wrong)
    reason = 'password authentication failed for user "guarded"'

    started = time.monotonic()
    doctor = manage("doctor", env=env)
    doctor_seconds = time.monotonic() - started
    started = time.monotonic()
    served = subprocess.run(
        [sys.executable, "manage.py", "serve", "--port", "0"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    serve_seconds = time.monotonic() - started
    with serve(env) as base:  # uvicorn itself: the server starts, and each request says why it cannot answer
        rest = call(base, RECALL, token="mem_deadbeef_not-a-real-secret")
        mcp = mcp_recall(base, "mem_deadbeef_not-a-real-secret")

    assert doctor.returncode != 0 and doctor_seconds < 15
    assert doctor.stdout.splitlines()[1].startswith("FAIL database  cannot connect to guarded@127.0.0.1:")
    assert reason in doctor.stdout
    assert served.returncode != 0 and serve_seconds < 15
    assert served.stderr.strip().splitlines() == [served.stderr.strip()], served.stderr  # one line
    assert reason in served.stderr
    assert rest[0] == 503 and reason in rest[2]["error"]["message"] and rest[3] < SECONDS
    assert mcp[0] == 503 and reason in mcp[2]["error"]["message"] and mcp[3] < SECONDS
    for output in (doctor.stdout + doctor.stderr, served.stdout + served.stderr, json.dumps([rest[2], mcp[2]])):
        assert "Wr0ngPassw0rd" not in output and "MEMORY_DB_POOL_SIZE" not in output and "Traceback" not in output


PASSWORD = "Zq7@Xk:Vb/Wm9"


@pytest.mark.parametrize("password", [PASSWORD, "Zq7?Xk", "Zq7#Xk", "Zq7/Xk:Vb"])
def test_a_password_with_a_slash_question_mark_or_hash_as_it_is_is_refused_without_a_piece_of_it(monkeypatch, password):
    monkeypatch.setenv("MEMORY_DATABASE_URL", f"postgresql://memory:{password}@127.0.0.1:5432/memories")

    with pytest.raises(SettingError) as refused:
        env_database_url("MEMORY_DATABASE_URL")

    message = str(refused.value)
    assert "percent-encode them (/ as %2F, ? as %3F, # as %23, and @ as %40, : as %3A)" in message
    assert "postgresql://memory:***@127.0.0.1:5432/memories" in message
    for piece in re.split(r"[@:/?#]", password):
        assert piece not in message, piece


@on_a_cluster
def test_a_password_with_reserved_characters_connects_percent_encoded_and_stops_start_up_in_one_line_unencoded(
    cluster, migrated, tmp_path
):
    cluster.sql("CREATE ROLE reserved LOGIN PASSWORD 'Zq7@Xk:Vb/Wm9'")
    cluster.require_passwords("reserved")
    encoded = cluster.url(migrated).replace("postgres@", f"reserved:{urllib.parse.quote(PASSWORD, safe='')}@")
    who = "from django.db import connection\nwith connection.cursor() as c:\n    c.execute('SELECT current_user')\n"
    who += "    print(c.fetchone()[0])\n"

    connected = python(who, env=clean_env(tmp_path, MEMORY_DATABASE_URL=encoded))
    unencoded = manage("check", env=clean_env(tmp_path, MEMORY_DATABASE_URL=encoded.replace("%2F", "/")))

    assert connected.stdout.strip() == "reserved", connected.stderr
    assert unencoded.returncode != 0 and len(unencoded.stderr.strip().splitlines()) == 1, unencoded.stderr
    assert "percent-encode them" in unencoded.stderr
    for piece in ("Zq7", "Xk", "Vb", "Wm9"):
        assert piece not in unencoded.stdout + unencoded.stderr


@on_a_cluster
def test_readiness_names_the_migration_the_database_lacks_until_migrate_applies_it(cluster, migrated, tmp_path):
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=copy(cluster, migrated, "behind"))
    ((last,),) = cluster.sql(
        "SELECT name FROM django_migrations WHERE app = 'memories' ORDER BY name DESC LIMIT 1", database="behind"
    )
    ((previous,),) = cluster.sql(
        "SELECT name FROM django_migrations WHERE app = 'memories' ORDER BY name DESC OFFSET 1 LIMIT 1",
        database="behind",
    )
    rolled_back = manage("migrate", "memories", previous, env=env)
    assert rolled_back.returncode == 0, rolled_back.stderr

    with serve(env) as base:
        behind = call(base, "/api/v1/health/ready/")
        assert manage("migrate", env=env).returncode == 0
        current = call(base, "/api/v1/health/ready/")

    assert behind[0] == 503 and behind[2]["status"] == "not_ready" and behind[2]["database"] == "ok"
    assert behind[2]["unapplied_migrations"] == [f"memories.{last}"]
    assert "Run 'manage.py migrate'" in behind[2]["message"]
    assert current[0] == 200 and current[2] == {"status": "ready", "database": "ok", "unapplied_migrations": []}
