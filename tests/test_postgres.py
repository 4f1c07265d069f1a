"""PostgreSQL: MEMORY_DATABASE_URL selects it, migrations build the schema there, the write lock serializes writers.

The suite itself runs on SQLite; these tests start a throwaway cluster (tests/postgres.py)
and reach it through subprocesses and a second connection alias.
"""

import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
from django.db import IntegrityError, connections, transaction
from prometheus_client.parser import text_string_to_metric_families

from memoryproject.env import SettingError, env_database_url
from memoryproject.exceptions import Busy, ReadOnlyStorage, Unavailable
from memoryproject.storage import MIGRATION_LOCKED_MESSAGE
from tests import postgres
from tests.subprocesses import BASE_DIR, clean_env, manage, manage_at_once, python, serve
from tests.test_migrate import (
    ALL_APPLIED,
    MIGRATE_WAITING_ONE_SECOND,
    WAITING,
    assert_one_applied_and_the_other_found_nothing_to_apply,
)

URL = "MEMORY_DATABASE_URL"


# --- The URL ---------------------------------------------------------------------------------


def fields_of(url: str) -> dict:
    """The database fields settings.py makes of ``url``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL, url)
        return env_database_url(URL)


def test_an_unset_url_keeps_the_sqlite_file(monkeypatch):
    monkeypatch.delenv(URL, raising=False)

    assert env_database_url(URL) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "postgresql://memory:secret@db.example:6543/memories",
            {
                "NAME": "memories",
                "USER": "memory",
                "PASSWORD": "secret",
                "HOST": "db.example",
                "PORT": "6543",
                "OPTIONS": {},
            },
        ),
        (
            "postgres://memory@127.0.0.1/memories",
            {"NAME": "memories", "USER": "memory", "PASSWORD": "", "HOST": "127.0.0.1", "PORT": "5432", "OPTIONS": {}},
        ),
        # Special characters percent-encoded; an "@" and ":" in the password even as they are.
        (
            "postgresql://me%40corp:p%40ss%3Aw%2Fo%25rd%20x@[::1]:5433/my%20db",
            {
                "NAME": "my db",
                "USER": "me@corp",
                "PASSWORD": "p@ss:w/o%rd x",
                "HOST": "::1",
                "PORT": "5433",
                "OPTIONS": {},
            },
        ),
        (
            "postgresql://memory:p@ss:word@host/memories",
            {
                "NAME": "memories",
                "USER": "memory",
                "PASSWORD": "p@ss:word",
                "HOST": "host",
                "PORT": "5432",
                "OPTIONS": {},
            },
        ),
        (
            "postgresql://memory:secret@host/memories?sslmode=verify-full&sslrootcert=/etc/ca.pem&connect_timeout=5",
            {
                "NAME": "memories",
                "USER": "memory",
                "PASSWORD": "secret",
                "HOST": "host",
                "PORT": "5432",
                "OPTIONS": {"sslmode": "verify-full", "sslrootcert": "/etc/ca.pem", "connect_timeout": "5"},
            },
        ),
        # A schema is a field of its own, not a libpq parameter.
        (
            "postgresql://memory:secret@host/memories?schema=team_7&sslmode=require",
            {
                "NAME": "memories",
                "USER": "memory",
                "PASSWORD": "secret",
                "HOST": "host",
                "PORT": "5432",
                "OPTIONS": {"sslmode": "require"},
                "SCHEMA": "team_7",
            },
        ),
    ],
)
def test_a_url_gives_the_database_fields(monkeypatch, url, expected):
    monkeypatch.setenv(URL, url)

    assert env_database_url(URL) == expected


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://memory:secret@host/memories", "the scheme must be postgresql:// or postgres://"),
        ("/var/lib/memory.db", "the scheme must be postgresql:// or postgres://"),
        ("postgresql://memory:secret@/memories", "the host is missing"),
        ("postgresql://host/memories", "the user is missing"),
        ("postgresql://memory:secret@host", "the path must be one database name"),
        ("postgresql://memory:secret@host/memories/extra", "the path must be one database name"),
        ("postgresql://memory:secret@host:99999/memories", "it does not parse (Port out of range 0-65535)"),
        (
            "postgresql://memory:secret@host:port/memories",
            "it does not parse (Port could not be cast to integer value as 'port')",
        ),
        (
            "postgresql://memory:secret@host/memories?sslmode=sometimes",
            "sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full",
        ),
        (
            "postgresql://memory:secret@host/memories?options=-c%20fsync%3Doff",
            "after '?' only sslmode, sslrootcert, sslcert, sslkey, connect_timeout, application_name, schema, "
            "each once",
        ),
        (
            "postgresql://memory:secret@host/memories?sslmode=require&sslmode=disable",
            "after '?' only sslmode, sslrootcert, sslcert, sslkey, connect_timeout, application_name, schema, "
            "each once",
        ),
        ("postgresql://memory:secret@host/memories#main", "a '#' part is not accepted"),
        *[
            (
                f"postgresql://memory:secret@host/memories?schema={name}",
                "schema must be 1 to 63 lower-case letters, digits and _, not starting with a digit or pg_",
            )
            for name in ("Team", "team-7", "7team", "pg_team", "", "a" * 64, "team%3Bdrop")
        ],
    ],
)
def test_a_bad_url_is_refused_with_what_is_expected_and_without_the_password(monkeypatch, url, why):
    monkeypatch.setenv(URL, url)

    with pytest.raises(SettingError) as refused:
        env_database_url(URL)

    message = str(refused.value)
    assert message.startswith(f"Bad setting {URL}=")
    assert message.endswith(
        f": expected postgresql://user:password@host[:port]/dbname (percent-encode special characters); {why}."
    )
    assert "secret" not in message


@pytest.mark.slow
def test_a_bad_url_stops_start_up_with_one_line(tmp_path):
    done = manage("check", env=clean_env(tmp_path, MEMORY_DATABASE_URL="postgresql://memory:secret@host"))

    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        f"Bad setting {URL}='postgresql://memory:***@host': expected postgresql://user:password@host[:port]/dbname "
        "(percent-encode special characters); the path must be one database name."
    ]


# --- A real cluster --------------------------------------------------------------------------


def on_a_cluster(test):
    """Mark a test that needs a throwaway cluster: slow, and skipped where none can be started."""
    return pytest.mark.slow(
        pytest.mark.skipif(postgres.missing() is not None, reason=f"no PostgreSQL cluster: {postgres.missing()}")(test)
    )


@pytest.fixture(scope="module")
def cluster():
    started = postgres.Cluster()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def migrated(cluster, tmp_path_factory):
    """The URL of a database on the cluster that ``manage.py migrate`` built."""
    url = cluster.create("migrated")
    done = manage("migrate", env=clean_env(tmp_path_factory.mktemp("pg"), MEMORY_DATABASE_URL=url), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return url


@pytest.fixture
def pg(migrated, django_db_blocker):
    """A connection alias "pg" to the migrated database, for this test's threads (busy timeout: 1 s)."""
    fields = fields_of(migrated)
    settings = connections.configure_settings(
        {
            "default": dict(connections.settings["default"]),
            "pg": {"ENGINE": "memoryproject.pg_backend", **fields, "OPTIONS": {"options": "-c lock_timeout=1000"}},
        }
    )["pg"]
    connections.settings["pg"] = settings
    with django_db_blocker.unblock():
        yield connections["pg"]
        connections["pg"].close()
    del connections.settings["pg"]


@on_a_cluster
def test_migrate_builds_the_schema_with_its_triggers(cluster, migrated):
    database = migrated.rsplit("/", 1)[1]
    triggers = {
        row[0] for row in cluster.sql("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal", database=database)
    }
    collations = cluster.sql(
        "SELECT DISTINCT collation_name FROM information_schema.columns "
        "WHERE table_name IN ('search_posting', 'search_posting_tail') AND column_name = 'term'",
        database=database,
    )
    ((version,),) = cluster.sql("SELECT packed_version FROM search_state", database=database)

    assert triggers == {
        "memories_revision_no_update",
        "memories_revision_no_delete",
        "memories_attributes_no_update",
        "memories_attributes_no_delete",
        "memories_attributes_tags_no_update",
        "memories_attributes_tags_no_delete",
        "search_revision_deleted",
        "search_revision_updated",
        "search_memory_deleted",
        "search_attributes_deleted",
    }
    assert collations == [("C",)]  # terms compare byte by byte, as on SQLite
    assert abs(version) > 2**32  # a 64-bit random value, as SQLite's random() gives


@on_a_cluster
def test_the_url_selects_postgresql_with_the_busy_timeout_as_lock_timeout(migrated, tmp_path):
    show = (
        "from django.db import connection\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('SHOW lock_timeout')\n"
        "    print(connection.vendor, connection.settings_dict['NAME'], cursor.fetchone()[0])"
    )

    on_postgresql = python(show, env=clean_env(tmp_path, MEMORY_DATABASE_URL=migrated, MEMORY_DB_BUSY_TIMEOUT="7"))
    sqlite_env = {name: value for name, value in clean_env(tmp_path).items() if name != URL}  # also under test-postgres
    unset = python(
        "from django.db import connection; print(connection.vendor, connection.settings_dict['NAME'])", env=sqlite_env
    )

    assert on_postgresql.stdout.split() == ["postgresql", "migrated", "7s"], on_postgresql.stderr
    assert unset.stdout.split() == ["sqlite", str(tmp_path / "memory.db")], unset.stderr


@on_a_cluster
def test_a_command_on_a_database_not_migrated_says_to_migrate(cluster, tmp_path):
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=cluster.create("not_migrated"))

    done = manage("memory", "recall", "anything", env=env)

    assert done.returncode != 0
    assert '"code": "not_migrated"' in done.stdout + done.stderr


def _revision(cursor) -> int:
    """Insert a memory and its first revision; return the revision's id."""
    cursor.execute(
        "INSERT INTO memories_memory (namespace, key, kind, state, created_at) "
        "VALUES ('default', '', 'fact', 'active', now()) RETURNING id"
    )
    memory_id = cursor.fetchone()[0]
    cursor.execute(
        "INSERT INTO memories_revision (memory_id, content, title, subject, predicate, object, source, "
        "content_hash, known_at, valid_from, tombstone, reason, author, interface, embedding_model) "
        "VALUES (%s, 'text', '', '', '', '', '', 'h', now(), now(), false, '', 'test', 'cli', '') "
        "RETURNING id",
        [memory_id],
    )
    return cursor.fetchone()[0]


@on_a_cluster
def test_revisions_are_append_only_unless_the_erasure_gate_is_open(pg):
    with transaction.atomic(using="pg"), pg.cursor() as cursor:
        revision = _revision(cursor)

    with pytest.raises(IntegrityError, match="revisions are append-only: add a new revision"):
        with transaction.atomic(using="pg"), pg.cursor() as cursor:
            cursor.execute("UPDATE memories_revision SET content = 'changed' WHERE id = %s", [revision])
    with pytest.raises(IntegrityError, match="revisions are append-only: forget"):
        with transaction.atomic(using="pg"), pg.cursor() as cursor:
            cursor.execute("DELETE FROM memories_revision WHERE id = %s", [revision])

    with transaction.atomic(using="pg"), pg.cursor() as cursor:
        cursor.execute("INSERT INTO memories_erasuregate (id, opened_at) VALUES (1, now())")
        cursor.execute("SELECT generation FROM search_state")
        generation = cursor.fetchone()[0]
        cursor.execute("DELETE FROM memories_revision WHERE id = %s", [revision])
        cursor.execute("DELETE FROM memories_erasuregate")
        cursor.execute("SELECT generation FROM search_state")
        assert cursor.fetchone()[0] == generation + 1  # search's trigger saw the deletion


@on_a_cluster
def test_a_write_to_a_read_only_database_is_the_read_only_storage_error(pg):
    with pg.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")
    try:
        with pytest.raises(ReadOnlyStorage), transaction.atomic(using="pg"), pg.cursor() as cursor:
            _revision(cursor)
    finally:
        with pg.cursor() as cursor:
            cursor.execute("RESET default_transaction_read_only")


@on_a_cluster
def test_doctor_names_postgresql_and_its_version(migrated, tmp_path):
    done = manage("doctor", env=clean_env(tmp_path, MEMORY_DATABASE_URL=migrated), timeout=120)
    lines = done.stdout.splitlines()

    assert any(re.match(r"ok   postgresql         1\d\.\d+", line) for line in lines), done.stdout
    assert "ok   fts5               available" in lines
    assert any(line.startswith("ok   database writable  postgres@127.0.0.1:") for line in lines)
    assert "ok   schema             all migrations applied" in lines


@pytest.mark.slow
def test_an_unreachable_server_is_the_unavailable_error_and_doctor_says_so(tmp_path, django_db_blocker):
    url = "postgresql://memory:secret@127.0.0.1:1/memories"
    fields = fields_of(url)
    connections.settings["unreachable"] = connections.configure_settings(
        {
            "default": dict(connections.settings["default"]),
            "unreachable": {"ENGINE": "memoryproject.pg_backend", **fields},
        }
    )["unreachable"]
    try:
        with django_db_blocker.unblock(), pytest.raises(Unavailable, match="Cannot connect to the database: "):
            connections["unreachable"].ensure_connection()
    finally:
        del connections.settings["unreachable"]
    # A refused connection ends the pool's wait at once, whatever the busy timeout (30 s here).
    started = time.monotonic()
    done = manage("doctor", env=clean_env(tmp_path, MEMORY_DATABASE_URL=url))

    assert done.returncode != 0 and time.monotonic() - started < 15
    assert done.stdout.splitlines()[1].startswith("FAIL database  cannot connect to memory@127.0.0.1:1/memories: ")
    assert "secret" not in done.stdout + done.stderr


def _holds_the_lock(url: str) -> bool:
    """Whether another session holds the write lock now (tried from a connection of its own)."""
    import psycopg

    from memoryproject.pg_backend.base import WRITE_LOCK_KEY

    with psycopg.connect(url, autocommit=True) as other:
        free = other.execute("SELECT pg_try_advisory_lock(%s)", [WRITE_LOCK_KEY]).fetchone()[0]
        if free:
            other.execute("SELECT pg_advisory_unlock(%s)", [WRITE_LOCK_KEY])
        return not free


@on_a_cluster
def test_an_atomic_block_holds_the_write_lock_until_it_ends(pg, migrated):
    assert not _holds_the_lock(migrated)
    with transaction.atomic(using="pg"):
        assert _holds_the_lock(migrated)
        with transaction.atomic(using="pg"):  # a savepoint: the same lock
            assert _holds_the_lock(migrated)
    assert not _holds_the_lock(migrated)
    with pytest.raises(ZeroDivisionError), transaction.atomic(using="pg"):
        1 / 0
    assert not _holds_the_lock(migrated)


@on_a_cluster
def test_a_second_writer_waits_for_the_first_to_commit(pg):
    committed, entered = [], []

    def second_writer():
        with transaction.atomic(using="pg"):
            entered.append(time.monotonic())
        connections["pg"].close()

    with transaction.atomic(using="pg"):
        waiting = threading.Thread(target=second_writer)
        waiting.start()
        time.sleep(0.3)
        assert entered == []  # still in line
        committed.append(time.monotonic())
    waiting.join(5)

    assert entered and entered[0] >= committed[0]


@on_a_cluster
def test_a_writer_kept_waiting_past_the_busy_timeout_gets_the_busy_error(pg):
    refused = []

    def second_writer():
        try:
            with transaction.atomic(using="pg"):
                pass
        except Busy as error:
            refused.append(error)
        # The refused block left the connection usable, back in autocommit.
        with connections["pg"].cursor() as cursor:
            cursor.execute("SELECT 1")
        refused.append(connections["pg"].get_autocommit())
        connections["pg"].close()

    with transaction.atomic(using="pg"):
        waiting = threading.Thread(target=second_writer)
        waiting.start()
        waiting.join(10)  # the busy timeout is 1 s

    assert len(refused) == 2 and refused[1] is True
    assert "stayed locked for the whole busy timeout" in str(refused[0])


@on_a_cluster
def test_migrations_run_back_to_zero_and_forward_again(cluster, tmp_path):
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=cluster.create("round_trip"))
    assert manage("migrate", env=env, timeout=180).returncode == 0
    # Packed postings to split by namespace and join again (search 0005, 0006 backwards).
    cluster.sql(
        "INSERT INTO search_posting (term, segment, revision_ids, tfs) VALUES ('a' || chr(31) || 'word', 0, "
        "'\\x01000000', '\\x0100')",
        database="round_trip",
    )

    for app in ("oauth", "oauth2_provider", "telemetry", "knowledge", "search", "memories"):
        done = manage("migrate", app, "zero", env=env, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
    left = cluster.sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'auth%' "
        "AND tablename NOT LIKE 'django%'",
        database="round_trip",
    )
    done = manage("migrate", env=env, timeout=180)

    assert left == []
    assert done.returncode == 0, done.stdout + done.stderr


@on_a_cluster
@pytest.mark.parametrize("schema", [None, "team_c"])
def test_two_migrates_started_at_once_on_a_new_database_both_succeed_and_leave_every_migration_applied(
    cluster, tmp_path, schema
):
    # Without the migration lock one of the two died every time ("relation ... already exists").
    url = cluster.create(f"at_once_{schema or 'public'}") + (f"?schema={schema}" if schema else "")
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=url)

    done = manage_at_once("migrate", "--noinput", env=env)

    assert_one_applied_and_the_other_found_nothing_to_apply(done)
    doctor = manage("doctor", env=env, timeout=120)
    assert ALL_APPLIED in doctor.stdout.splitlines(), doctor.stdout + doctor.stderr


@on_a_cluster
def test_a_migrate_kept_waiting_for_the_whole_wait_says_so_in_one_line_and_applies_nothing(cluster, tmp_path):
    import psycopg

    from memoryproject.pg_backend.base import MIGRATION_LOCK_KEY

    url = cluster.create("kept_waiting")
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])  # another migrate, as far as it can tell
        done = python(MIGRATE_WAITING_ONE_SECOND, env=clean_env(tmp_path, MEMORY_DATABASE_URL=url))

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"{WAITING}CommandError: {MIGRATION_LOCKED_MESSAGE}\n"
    assert cluster.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'", database="kept_waiting") == [(0,)]


@on_a_cluster
def test_a_memory_is_remembered_and_recalled_and_health_names_postgresql(cluster, migrated, tmp_path):
    cluster.sql('CREATE DATABASE "end_to_end" TEMPLATE "migrated"')
    env = clean_env(tmp_path, MEMORY_DATABASE_URL=cluster.url("end_to_end"))
    remembered = manage(
        "memory", "remember", "The staging database runs on db-7.internal port 5433", "--namespace", "acme", env=env
    )
    assert remembered.returncode == 0, remembered.stderr
    recalled = manage("memory", "recall", "staging database", "--namespace", "acme", env=env)
    assert json.loads(recalled.stdout)["hits"][0]["id"] == json.loads(remembered.stdout)["id"]
    made = manage("create_api_key", "--name", "operator", "--scopes", "admin", env=env)
    assert made.returncode == 0, made.stderr
    admin = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
    with serve(env) as url:
        health, to_admin = (
            json.loads(urllib.request.urlopen(urllib.request.Request(f"{url}/api/v1/health/", headers=headers)).read())
            for headers in ({}, admin)
        )
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
            exposition = response.read().decode()
    assert (health["database"], health["database_engine"]) == ("ok", "postgresql")  # the version only to an admin
    assert re.fullmatch(r"postgresql \d+\.\d+", to_admin["database_engine"])
    # The pool of the server's connections, for Prometheus (MEMORY_DB_POOL_SIZE: 8 by default).
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }
    assert samples[("memory_db_pool_max", ())] == 8
    opened = sum(samples[("memory_db_pool_connections", (("state", state),))] for state in ("in_use", "idle"))
    assert 1 <= opened <= 8
    assert samples[("memory_db_pool_requests_total", ())] == 2  # one a request: the two health checks
    assert samples[("memory_db_pool_errors_total", (("kind", "timeout"),))] == 0

    for command in (["backup", str(tmp_path / "copy.db")], ["restore", str(tmp_path / "copy.db"), "--yes"]):
        refused = manage(*command, env=env)
        assert refused.returncode == 1 and "pg_dump" in refused.stderr, refused.stderr
    assert not (tmp_path / "copy.db").exists()


# --- Two app servers on one database ---------------------------------------------------------------


def _call(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{base}/api/v1/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _listed(base: str, token: str, **query) -> list[tuple]:
    """Every memory of the namespace as ``base`` lists it (all pages): (id, key, revision_id, known_at)."""
    found, cursor = [], None
    while True:
        parameters = {"namespace": "shared", "limit": 200, **query, **({"cursor": cursor} if cursor else {})}
        page = _call(base, token, "GET", "memories/?" + urllib.parse.urlencode(parameters))
        found += [(item["id"], item["key"], item["revision_id"], item["known_at"]) for item in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            return sorted(found)


@on_a_cluster
def test_two_servers_on_one_database_share_every_write_and_answer_alike_as_of_any_time(cluster, migrated, tmp_path):
    cluster.sql('CREATE DATABASE "two_servers" TEMPLATE "migrated"')
    url = cluster.url("two_servers")
    envs = [
        clean_env(
            tmp_path / name, MEMORY_DATABASE_URL=url, MEMORY_API_WRITES_PER_MINUTE="0", MEMORY_API_READS_PER_MINUTE="0"
        )
        for name in ("a", "b")
    ]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    made = manage("create_api_key", "--name", "two servers", env=envs[0])
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    acknowledged, problems = {}, []

    def write(number: int, bases: list[str]):
        for step in range(12):
            key = f"w{number}-{step}"
            writer, reader = bases[step % 2], bases[(step + 1) % 2]
            try:
                stored = _call(
                    writer,
                    token,
                    "POST",
                    "memories/",
                    {"namespace": "shared", "key": key, "content": f"Note {key} carries the word zq{number}x{step}."},
                )
                acknowledged[key] = stored["id"]
                # Read your writes on the other server: its caches noticed this server's commit.
                found = _call(
                    reader,
                    token,
                    "GET",
                    "recall/?"
                    + urllib.parse.urlencode({"query": f"zq{number}x{step}", "namespace": "shared", "mode": "keyword"}),
                )
                if [hit["id"] for hit in found["hits"]] != [stored["id"]]:
                    problems.append(f"{key}: the other server recalled {found['hits']}")
            except Exception as error:  # noqa: BLE001  (collected and reported below)
                problems.append(f"{key}: {error!r}")

    with serve(envs[0]) as first, serve(envs[1]) as second:
        threads = [threading.Thread(target=write, args=(number, [first, second])) for number in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert problems == []
        on_first, on_second = _listed(first, token), _listed(second, token)
        assert on_first == on_second
        assert sorted(key for _, key, _, _ in on_first) == sorted(acknowledged)  # each acknowledged write once
        assert {key: memory_id for memory_id, key, _, _ in on_first} == acknowledged

        # known_at follows commit order across both servers: by time and by id, the writes come in one order.
        assert [row[0] for row in sorted(on_first, key=lambda row: row[3])] == [row[0] for row in on_first]
        middle = on_first[len(on_first) // 2][3]
        then = [_listed(base, token, as_of=middle) for base in (first, second)]
        assert then[0] == then[1] == [row for row in on_first if row[3] <= middle]
        _call(second, token, "POST", "memories/", {"namespace": "shared", "key": "later", "content": "Written later."})
        assert _listed(first, token, as_of=middle) == then[0]


@on_a_cluster
def test_stores_in_two_schemas_of_one_database_keep_apart_each_with_its_own_write_lock(cluster, tmp_path):
    url = cluster.create("schemas")
    envs = {}
    for schema in ("team_a", "team_b"):
        (tmp_path / schema).mkdir()
        envs[schema] = clean_env(
            tmp_path / schema, MEMORY_DATABASE_URL=f"{url}?schema={schema}", MEMORY_DB_BUSY_TIMEOUT="1"
        )
        done = manage("migrate", env=envs[schema], timeout=180)  # creates the schema, then the tables in it
        assert done.returncode == 0, done.stdout + done.stderr
    remember = (
        "import json, sys\n"
        "from memories.selectors import memory_recall, memory_stats\n"
        "from memories.services import memory_remember\n"
        "memory_remember(namespace='acme', content=sys.argv[1], actor='test', interface='cli')\n"
        "print(json.dumps({'recalled': [hit.memory.content for hit in memory_recall(\n"
        "    query='staging database', namespace='acme', mode='keyword').hits],\n"
        "    'where': memory_stats()['database_path']}))\n"
    )
    # team_a's writer holds its write lock the whole time team_b writes, with a busy timeout of 1 s.
    hold = (
        "import django, time\n"
        "django.setup()\n"
        "from django.db import transaction\n"
        "from memories.services import memory_remember\n"
        "with transaction.atomic():\n"
        "    memory_remember(namespace='acme', content='The staging database runs on db-7.', actor='test',\n"
        "                    interface='cli')\n"
        "    print('holding', flush=True)\n"
        "    time.sleep(4)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold], cwd=BASE_DIR, env=envs["team_a"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        on_b = python(remember, "The staging database of team b runs on db-9.", env=envs["team_b"])
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    on_a = python(remember, "The staging database also keeps backups.", env=envs["team_a"])
    drift = python(
        "from django.db import connection\n"
        "from search.vectors import vector_drift\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('DROP TRIGGER search_vectors_after_delete ON memories_revision')\n"
        "print(vector_drift())\n",
        env=envs["team_b"],
    )

    assert on_b.returncode == 0 and waited < 4, on_b.stderr  # not queued behind team_a's lock
    assert on_a.returncode == 0, on_a.stderr
    seen_b, seen_a = json.loads(on_b.stdout.splitlines()[-1]), json.loads(on_a.stdout.splitlines()[-1])
    assert seen_b == {
        "recalled": ["The staging database of team b runs on db-9."],
        "where": "postgres@127.0.0.1:%d/schemas?schema=team_b" % cluster.port,
    }
    assert sorted(seen_a["recalled"]) == [
        "The staging database also keeps backups.",
        "The staging database runs on db-7.",
    ]
    assert cluster.sql(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'memories_revision' ORDER BY 1",
        database="schemas",
    ) == [("team_a",), ("team_b",)]
    # The catalogue is the database's: team_a's trigger of the same name does not hide that team_b's is gone.
    assert "search_vectors_after_delete" in drift.stdout, drift.stderr


@on_a_cluster
def test_a_server_whose_clock_is_behind_the_database_still_reads_what_was_just_written(cluster, migrated, tmp_path):
    cluster.sql('CREATE DATABASE "skewed" TEMPLATE "migrated"')
    # This process's clock runs an hour behind the database's (an app server out of sync): writes are stamped by
    # the database's clock, and a read that names no time must take its "now" from there too, or miss them.
    skewed = (
        "import datetime as dt, json\n"
        "from django.utils import timezone\n"
        "real_now = timezone.now\n"
        "timezone.now = lambda: real_now() - dt.timedelta(hours=1)\n"
        "from memories.selectors import memory_get, memory_list, memory_recall, memory_stats\n"
        "from memories.services import memory_remember\n"
        "stored = memory_remember(namespace='acme', key='db', content='The staging database runs on db-7.',\n"
        "                         actor='test', interface='cli')\n"
        "print(json.dumps({'stored': stored.memory.id,\n"
        "    'recalled': [hit.memory.id for hit in memory_recall(query='staging database', namespace='acme',\n"
        "                                                        mode='keyword').hits],\n"
        "    'listed': [record.id for record in memory_list(namespace='acme').items],\n"
        "    'got': memory_get(namespace='acme', key='db').id,\n"
        "    'visible': memory_stats(namespace='acme')['visible']}))\n"
        "from django.contrib.auth.models import User\n"
        "from django.test import Client\n"
        "client = Client(HTTP_HOST='localhost')\n"
        "client.force_login(User.objects.create_superuser('root', 'root@example.com', 'pw'))\n"
        "print(client.get('/').content.decode())\n"
        "print(client.get(f'/memories/{stored.memory.id}/timeline/').content.decode())\n"
    )

    done = python(skewed, env=clean_env(tmp_path, MEMORY_DATABASE_URL=cluster.url("skewed")))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    seen = json.loads(next(line for line in lines if line.startswith('{"stored"')))
    assert seen["recalled"] == seen["listed"] == [seen["stored"]] and seen["got"] == seen["stored"]
    assert seen["visible"] == 1  # the statistics count it too, and the dashboard's pages:
    pages = "\n".join(lines)
    assert '<span class="value" id="total-visible">1</span>' in pages
    assert '<span class="badge current">shown now</span>' in pages


# --- The pool of connections ----------------------------------------------------------------------


@on_a_cluster
def test_a_server_shares_a_pool_of_connections_among_its_request_threads(cluster, migrated, tmp_path):
    cluster.sql('CREATE DATABASE "pooled" TEMPLATE "migrated"')
    env = clean_env(
        tmp_path,
        MEMORY_DATABASE_URL=cluster.url("pooled") + "?application_name=pooled",
        MEMORY_DB_POOL_SIZE="2",
        MEMORY_SERVER_THREADS="8",
        MEMORY_API_WRITES_PER_MINUTE="0",
        MEMORY_API_READS_PER_MINUTE="0",
    )
    made = manage("create_api_key", "--name", "pool", env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    held, answered, problems, done = [], [], [], threading.Event()

    def count_connections():
        while not done.is_set():
            ((count,),) = cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pooled'")
            held.append(count)
            time.sleep(0.02)

    def client(number: int):
        try:
            for step in range(5):
                stored = _call(
                    base,
                    token,
                    "POST",
                    "memories/",
                    {"namespace": "shared", "key": f"c{number}-{step}", "content": f"Pooled note zp{number}x{step}."},
                )
                found = _call(
                    base,
                    token,
                    "GET",
                    "recall/?"
                    + urllib.parse.urlencode({"query": f"zp{number}x{step}", "namespace": "shared", "mode": "keyword"}),
                )
                answered.append([hit["id"] for hit in found["hits"]] == [stored["id"]])
        except Exception as error:  # noqa: BLE001  (collected and reported below)
            problems.append(repr(error))

    with serve(env) as base:
        watcher = threading.Thread(target=count_connections)
        watcher.start()
        clients = [threading.Thread(target=client, args=(number,)) for number in range(12)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(timeout=120)
        done.set()
        watcher.join()

    assert problems == []
    assert len(answered) == 60 and all(answered)
    assert 1 <= max(held) <= 2  # 12 clients at once, 8 request threads, never more than the pool's 2 connections


@on_a_cluster
def test_a_request_that_finds_no_free_connection_in_the_busy_timeout_gets_the_busy_error(migrated, tmp_path):
    # One connection in the pool; one thread keeps it in a transaction while another needs one.
    code = (
        "import threading, time\n"
        "from django.db import connection, transaction\n"
        "from memoryproject.exceptions import Busy\n"
        "taken = threading.Event()\n"
        "def holder():\n"
        "    with transaction.atomic():\n"
        "        taken.set()\n"
        "        time.sleep(3)\n"
        "    connection.close()\n"
        "thread = threading.Thread(target=holder)\n"
        "thread.start()\n"
        "taken.wait()\n"
        "started = time.monotonic()\n"
        "try:\n"
        "    with connection.cursor() as cursor:\n"
        "        cursor.execute('SELECT 1')\n"
        "    print('answered')\n"
        "except Busy as error:\n"
        "    print('busy', round(time.monotonic() - started), error)\n"
        "thread.join()\n"
        "with connection.cursor() as cursor:\n"
        "    cursor.execute('SHOW lock_timeout')\n"
        "    print('then', cursor.fetchone()[0])\n"
    )

    done = python(
        code, env=clean_env(tmp_path, MEMORY_DATABASE_URL=migrated, MEMORY_DB_POOL_SIZE="1", MEMORY_DB_BUSY_TIMEOUT="1")
    )

    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0].startswith("busy 1 Every database connection of this server process stayed in use"), lines
    assert "MEMORY_DB_POOL_SIZE" in lines[0]
    assert lines[1] == "then 1s"  # the pooled connection, once free, carries the busy timeout as lock_timeout


@on_a_cluster
def test_the_pool_s_connections_waiters_and_timeouts_are_counted_for_prometheus(migrated, tmp_path):
    # One connection in the pool, held in a transaction; a second thread waits for it past the busy timeout.
    code = (
        "import json, threading, time\n"
        "from django.db import connection, transaction\n"
        "from prometheus_client import REGISTRY, CollectorRegistry\n"
        "from memoryproject.exceptions import Busy\n"
        "from memoryproject.metrics import PoolCollector\n"
        "pool = CollectorRegistry()\n"
        "pool.register(PoolCollector(connection.pool))\n"
        "def seen():\n"
        "    found = {f'{s.name}{sorted(s.labels.values())}': s.value for r in (pool, REGISTRY) for f in r.collect()\n"
        "             for s in f.samples if s.name.startswith(('memory_db_pool', 'memory_database_errors_total'))}\n"
        "    return {name: value for name, value in found.items() if value}\n"
        "taken, release = threading.Event(), threading.Event()\n"
        "def holder():\n"
        "    with transaction.atomic():\n"
        "        taken.set()\n"
        "        release.wait()\n"
        "    connection.close()\n"
        "def needs_one():\n"
        "    try:\n"
        "        with connection.cursor() as cursor:\n"
        "            cursor.execute('SELECT 1')\n"
        "    except Busy:\n"
        "        pass\n"
        "holding = threading.Thread(target=holder)\n"
        "holding.start()\n"
        "taken.wait()\n"
        "waiter = threading.Thread(target=needs_one)\n"
        "waiter.start()\n"
        "time.sleep(0.5)\n"
        "waiting = seen()\n"
        "waiter.join()\n"
        "release.set()\n"
        "holding.join()\n"
        "print(json.dumps([waiting, seen()]))\n"
    )

    done = python(
        code, env=clean_env(tmp_path, MEMORY_DATABASE_URL=migrated, MEMORY_DB_POOL_SIZE="1", MEMORY_DB_BUSY_TIMEOUT="1")
    )

    assert done.returncode == 0, done.stderr
    waiting, after = json.loads(done.stdout)
    assert waiting["memory_db_pool_connections['in_use']"] == 1 and waiting["memory_db_pool_max[]"] == 1
    assert waiting["memory_db_pool_waiting[]"] == 1
    assert "memory_db_pool_errors_total['timeout']" not in waiting
    assert after["memory_db_pool_errors_total['timeout']"] == 1
    assert after.get("memory_db_pool_waiting[]", 0) == 0  # the waiter that gave up leaves when a connection returns
    # The request that found no connection is a database error too, of the kind its message names.
    assert sum(value for name, value in after.items() if name.startswith("memory_database_errors_total")) == 1


@on_a_cluster
@pytest.mark.parametrize("prepared", ["1", "0"])
def test_a_statement_run_five_times_is_prepared_unless_prepared_statements_are_off(migrated, tmp_path, prepared):
    code = (
        "import django\n"
        "django.setup()\n"
        "from django.db import connection\n"
        "with connection.cursor() as cursor:\n"
        "    for _ in range(6):\n"
        "        cursor.execute('SELECT count(*) FROM memories_memory WHERE id > %s', [0])\n"
        '    cursor.execute("SELECT count(*) FROM pg_prepared_statements "\n'
        "                   \"WHERE statement LIKE '%%memories_memory WHERE id >%%'\")\n"
        "    print(cursor.fetchone()[0])\n"
    )

    done = python(code, env=clean_env(tmp_path, MEMORY_DATABASE_URL=migrated, MEMORY_DB_PREPARED_STATEMENTS=prepared))

    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) == (1 if prepared == "1" else 0)
