"""The engine seam (memoryproject.dialect) and the run-time SQL that goes through it, on both engines.

On SQLite the fragments are the SQL the code wrote before PostgreSQL was supported. On
PostgreSQL the real statements of search, vectors and erasure run against a throwaway
cluster whose tables mirror the schema (written by hand here: the migrations are not
PostgreSQL-ready yet), through Django's own PostgreSQL backend set as the default
connection. Skipped, with the reason, where PostgreSQL 15 or psycopg is missing.
"""

import ast
import datetime as dt
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from django.db import DatabaseError, connection, connections, transaction

from memoryproject import dialect
from search import indexing, postings, snapshot, vectors
from search.embeddings import HashEmbedder
from tests.test_layers import APPS, ROOT

# Debian keeps the server's programs off PATH.
PG_BIN = Path(shutil.which("initdb") or "/usr/lib/postgresql/15/bin/initdb").parent


# SQLite: the fragments are byte for byte what the call sites held before the seam.


@pytest.mark.sqlite_only("the SQLite forms of the seam, on the suite's own SQLite connection")
def test_sqlite_fragments_are_the_sql_written_before_the_seam():
    before = (
        "(unixepoch({col}) * 1000000 + CAST(substr({col}, 21, 6) || substr('000000', 1, "
        "6 - length(substr({col}, 21, 6))) AS INTEGER))"
    )
    assert dialect.micros("r.known_at") == before.format(col="r.known_at")
    assert dialect.new_version() == "random()"
    assert dialect.contains("substr(term, %s)", "%s") == "instr(substr(term, %s), %s) > 0"
    assert dialect.ordered_join() == "CROSS JOIN"


@pytest.mark.sqlite_only("the SQLite forms of the seam, on the suite's own SQLite connection")
@pytest.mark.django_db
def test_sqlite_key_and_clock_are_the_ones_used_before_the_seam():
    assert dialect.database_key() == str(connection.settings_dict["NAME"])
    with transaction.atomic():
        now = dialect.locked_now()
    assert now.tzinfo is dt.timezone.utc


def _clock_calls(tree) -> list[int]:
    """Lines that read the app server's clock by Django's ``timezone.now()``."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "now"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "timezone"
    ]


def test_the_clock_reader_finds_timezone_now():
    assert _clock_calls(ast.parse("x = timezone.now()\ny = dialect.now()\n")) == [1]


def test_every_now_comes_from_the_one_clock():
    """On PostgreSQL the database's clock stamps writes; a time read from an app server's could sort before them."""
    found = []
    for path in sorted(path for app in APPS for path in (ROOT / app).rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "migrations" in relative.parts or relative == Path("memoryproject/dialect.py"):  # dialect: the clock
            continue
        found += [f"{relative}:{line}" for line in _clock_calls(ast.parse(path.read_text()))]
    assert found == [], f"read the time from memoryproject.dialect.now(), not timezone.now(): {found}"


@pytest.mark.sqlite_only("the SQLite forms of the seam, on the suite's own SQLite connection")
@pytest.mark.django_db
def test_sqlite_finds_tables_and_triggers_by_name():
    with connection.cursor() as cursor:
        assert dialect.existing(cursor, ["memories_revision", "search_fts_words_after_insert", "nothing"]) == {
            "memories_revision",
            "search_fts_words_after_insert",
        }
        assert {"search_fts_words_after_insert", "search_fts_words_after_delete"} <= dialect.triggers_on(
            cursor, "memories_revision"
        )


def _five_rows_come_in_chunks_of_two():
    blobs = [bytes([n]) * 3 for n in range(5)]
    sql = " UNION ALL ".join("SELECT %s, %s" for _ in blobs) + " ORDER BY 1"
    with connection.cursor() as cursor:
        chunks = list(
            dialect.chunks(cursor, sql, [value for n, blob in enumerate(blobs) for value in (n, blob)], size=2)
        )
    assert [[tuple(row) for row in rows] for rows in chunks] == [
        [(0, blobs[0]), (1, blobs[1])],
        [(2, blobs[2]), (3, blobs[3])],
        [(4, blobs[4])],
    ]
    with pytest.raises(DatabaseError), connection.cursor() as cursor:  # Django's error, as from its own cursor
        list(dialect.chunks(cursor, "SELECT id FROM no_such_table", [], size=2))


@pytest.mark.django_db
def test_chunks_hold_every_row_once_in_order_with_bytes_as_bytes():
    # The suite's engine: on PostgreSQL with the server's settings (parameters bound by the server, rows in binary).
    _five_rows_come_in_chunks_of_two()


# PostgreSQL: a throwaway cluster, the schema's tables by hand.


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_postgres(command: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root.
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@pytest.fixture(scope="module")
def cluster():
    """(port, folder) of a PostgreSQL cluster started for this module, stopped after it."""
    pytest.importorskip("psycopg", reason="psycopg (3) is not installed")
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 is not installed ({PG_BIN}/initdb missing)")
    folder = Path(tempfile.mkdtemp(prefix="memory-dialect-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", _free_port()
    subprocess.run(
        _as_postgres(
            [str(PG_BIN / "initdb"), "-D", str(data), "--locale=C", "-E", "UTF8", "-A", "trust", "-U", "postgres"]
        ),
        check=True,
        capture_output=True,
    )
    subprocess.run(
        _as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(folder / "log"),
                "-w",
                "-o",
                f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
    )
    try:
        yield port
    finally:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]), capture_output=True
        )
        shutil.rmtree(folder, ignore_errors=True)


# The columns the run-time SQL reads, with the types the models give them on PostgreSQL.
SCHEMA = """
CREATE TABLE memories_memory (id bigserial PRIMARY KEY, namespace text NOT NULL, kind text NOT NULL);
CREATE TABLE memories_tag (id bigserial PRIMARY KEY, name text NOT NULL);
CREATE TABLE memories_importbatch (id bigserial PRIMARY KEY, counts_from timestamptz);
CREATE TABLE memories_revision (
    id bigserial PRIMARY KEY, memory_id bigint NOT NULL REFERENCES memories_memory, title text NOT NULL DEFAULT '',
    content text NOT NULL DEFAULT '', known_at timestamptz NOT NULL, valid_from timestamptz NOT NULL,
    valid_to timestamptz, expires_at timestamptz, tombstone boolean NOT NULL DEFAULT false,
    batch_id bigint REFERENCES memories_importbatch);
CREATE TABLE memories_attributes (
    id bigserial PRIMARY KEY, memory_id bigint NOT NULL, namespace text NOT NULL, kind text NOT NULL,
    state text NOT NULL, known_at timestamptz NOT NULL, batch_id bigint);
CREATE TABLE search_state (id integer PRIMARY KEY, generation bigint NOT NULL DEFAULT 0,
    published bigint NOT NULL DEFAULT 0, packed_version bigint NOT NULL DEFAULT 0, tail_rows bigint NOT NULL DEFAULT 0);
INSERT INTO search_state (id) VALUES (1);
CREATE TABLE search_document (revision_id bigint PRIMARY KEY, ntok integer NOT NULL, nbigram integer NOT NULL);
CREATE TABLE search_posting (term text COLLATE "C" NOT NULL, segment integer NOT NULL, revision_ids bytea NOT NULL,
    tfs bytea NOT NULL, PRIMARY KEY (term, segment));
CREATE TABLE search_posting_tail (term text COLLATE "C" NOT NULL, revision_id bigint NOT NULL, tf integer NOT NULL,
    PRIMARY KEY (term, revision_id));
CREATE TABLE search_embedding_space (id integer PRIMARY KEY CHECK (id = 1), embedder text NOT NULL,
    dim integer NOT NULL, created_at text NOT NULL, generation bigint NOT NULL);
"""


@pytest.fixture
def postgresql(cluster, django_db_blocker):
    """Django's PostgreSQL backend as the default connection, on a fresh database holding SCHEMA."""
    import psycopg

    name = f"dialect_{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(host="127.0.0.1", port=cluster, user="postgres", dbname="postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    settings = connections.configure_settings(
        {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": name,
                "USER": "postgres",
                "HOST": "127.0.0.1",
                "PORT": str(cluster),
            }
        }
    )["default"]
    from django.db.backends.postgresql.base import DatabaseWrapper

    pg = DatabaseWrapper(settings, alias="default")
    sqlite = connections["default"]
    with django_db_blocker.unblock():
        connections["default"] = pg
        try:
            with connection.cursor() as cursor:
                cursor.execute(SCHEMA)
            yield pg
        finally:
            pg.close()
            connections["default"] = sqlite


def _revision(cursor, memory_id, known_at, *, content="", tombstone=False, valid_to=None, expires_at=None):
    cursor.execute(
        "INSERT INTO memories_revision (memory_id, content, known_at, valid_from, valid_to, expires_at, "
        "tombstone) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        [memory_id, content, known_at, known_at, valid_to, expires_at, tombstone],
    )
    return cursor.fetchone()[0]


def _memory(cursor, namespace="acme"):
    cursor.execute("INSERT INTO memories_memory (namespace, kind) VALUES (%s, 'fact') RETURNING id", [namespace])
    return cursor.fetchone()[0]


UTC = dt.timezone.utc
TIMES = [
    dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    dt.datetime(2024, 1, 2, 3, 4, 5, 1, tzinfo=UTC),
]


def test_postgresql_micros_are_exact(postgresql):
    with connection.cursor() as cursor:
        memory = _memory(cursor)
        for moment in TIMES:
            _revision(cursor, memory, moment)
        cursor.execute(
            f"SELECT {dialect.micros('known_at')}, {dialect.micros('valid_to')} FROM memories_revision ORDER BY id"
        )
        assert cursor.fetchall() == [(snapshot.to_micros(moment), None) for moment in TIMES]


def test_postgresql_snapshot_loads_what_sqlite_loads(postgresql):
    with connection.cursor() as cursor:
        memory = _memory(cursor)
        cursor.execute("INSERT INTO memories_importbatch (counts_from) VALUES (%s) RETURNING id", [TIMES[0]])
        batch = cursor.fetchone()[0]
        first = _revision(cursor, memory, TIMES[0], content="one", expires_at=TIMES[3])
        second = _revision(cursor, memory, TIMES[1], tombstone=True, valid_to=TIMES[2])
        cursor.execute("UPDATE memories_revision SET batch_id = %s WHERE id = %s", [batch, second])
        cursor.execute("INSERT INTO search_document VALUES (%s, 3, 1)", [first])
        cursor.execute(
            "INSERT INTO memories_attributes (memory_id, namespace, kind, state, known_at) "
            "VALUES (%s, 'acme', 'fact', 'active', %s)",
            [memory, TIMES[0]],
        )
    view = snapshot.Snapshot().refresh()
    columns = {name: getattr(view.columns, name).tolist() for name in snapshot._COLUMNS}
    assert columns["revision"] == [second, first]  # sorted by (memory, known, id): TIMES[1] is the earlier
    assert columns["known"] == [snapshot.to_micros(TIMES[1]), snapshot.to_micros(TIMES[0])]
    assert columns["valid_to"] == [snapshot.to_micros(TIMES[2]), snapshot.OPEN]
    assert columns["expires"] == [snapshot.OPEN, snapshot.to_micros(TIMES[3])]
    assert columns["tombstone"] == [True, False]
    assert columns["ntok"] == [0, 3]
    assert columns["counts_from"] == [snapshot.to_micros(TIMES[0]), snapshot.ALWAYS]
    assert view.attributes.known.tolist() == [snapshot.to_micros(TIMES[0])]
    # The anchor text is stable, so a second refresh extends nothing and reloads nothing.
    again = snapshot.Snapshot()
    again.view = view
    again.generation, again.published = 0, 0
    assert again.refresh() is view


def test_postgresql_reads_versions_and_blobs_in_one_union(postgresql):
    ids, tfs = np.array([3, 9], dtype="<u4").tobytes(), np.array([1, 2], dtype="<u2").tobytes()
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO search_posting VALUES (%s, 0, %s, %s)", [postings.key("acme", "deploy"), ids, tfs])
        cursor.executemany(
            "INSERT INTO search_posting_tail VALUES (%s, %s, %s)",
            [(postings.key("acme", "deploy"), 12, 4), (postings.key("acme", "deployment"), 14, 1)],
        )
        postings._new_packed_version(cursor)
        cursor.execute("SELECT packed_version FROM search_state")
        version = cursor.fetchone()[0]
    assert abs(version) > 2**32  # a 64-bit draw, not random()'s [0, 1) cast to 0 or 1
    low, high = postings.key("acme", "deploy"), postings.key("acme", "deploz")
    assert postings._select([(low, high)], "search_posting_tail") == (version, [[(12, 4), (14, 1)]])
    got_version, [[row]] = postings._select([(low, None)], "search_posting")
    assert (got_version, bytes(row[0]), bytes(row[1]), row[2:]) == (version, ids, tfs, (low, 0))
    [(found_ids, found_tfs)] = postings.read_terms([[(low, high)]], max_id=100)
    assert sorted(zip(found_ids.tolist(), found_tfs.tolist())) == [(3, 1), (9, 2), (12, 4), (14, 1)]
    # The substring channel: strpos over the namespace's tail terms, str.find over its packed ones.
    assert postings.containing("acme", ["ploym"], max_id=100).tolist() == [14]
    assert postings.containing("acme", ["epl"], max_id=100).tolist() == [3, 9, 12, 14]
    assert postings.containing("other", ["epl"], max_id=100).tolist() == []


def test_postgresql_postings_fold_into_packed_rows_and_leave_them(postgresql):
    documents = postings.analyse(
        [(1, "acme", "", "deploy the api"), (2, "acme", "", "deploy again"), (3, "other", "", "deploy")]
    )
    [shared] = set(documents[0].terms) & set(documents[1].terms)  # the stem of "deploy" in acme

    def held():
        [(ids, tfs)] = postings.read_terms([[(shared, None)]], max_id=100)
        return sorted(zip(ids.tolist(), np.asarray(tfs).tolist()))

    with transaction.atomic():
        postings.add(documents)
    assert held() == [(1, 1), (2, 1)]  # from the tail
    assert postings.compact() == len({term for document in documents for term in document.terms})
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), (SELECT tail_rows FROM search_state) FROM search_posting_tail")
        assert cursor.fetchone() == (0, 0)
    assert held() == [(1, 1), (2, 1)]  # from the packed rows
    with transaction.atomic():
        postings.remove_terms(documents[:1])
    assert held() == [(2, 1)]
    assert postings.containing("acme", ["api"], max_id=100).tolist() == []  # the erased revision's own term left


def test_postgresql_stamps_writes_with_the_database_clock_after_the_lock(postgresql):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        started = cursor.fetchone()[0]
        first = dialect.locked_now()
        time.sleep(0.01)
        second = dialect.locked_now()
    assert first.tzinfo is UTC and second.tzinfo is UTC
    # clock_timestamp() moves within a transaction; now() would repeat the transaction's start.
    assert started <= first < second


def test_postgresql_a_writer_that_waited_for_the_lock_stamps_after_the_one_it_waited_for(postgresql):
    import psycopg

    settings = connection.settings_dict
    holding, stamped = threading.Event(), []

    def other_server():
        with psycopg.connect(
            host=settings["HOST"], port=settings["PORT"], user="postgres", dbname=settings["NAME"]
        ) as other:  # one transaction, committed on leaving
            other.execute("SELECT pg_advisory_xact_lock(42)")  # the write lock as the PostgreSQL backend takes it
            holding.set()
            time.sleep(0.2)
            stamped.append(other.execute("SELECT clock_timestamp()").fetchone()[0])

    thread = threading.Thread(target=other_server)
    thread.start()
    holding.wait()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT now()")  # the transaction's start, before the wait
        started = cursor.fetchone()[0]
        cursor.execute("SELECT pg_advisory_xact_lock(42)")
        now = dialect.locked_now()
    thread.join()
    assert started < stamped[0] < now


def test_postgresql_key_names_the_server_and_the_database(postgresql):
    settings = connection.settings_dict
    assert dialect.database_key() == f"127.0.0.1:{settings['PORT']}/{settings['NAME']}"


def test_postgresql_finds_tables_and_triggers_by_name(postgresql):
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$")
        cursor.execute(
            "CREATE TRIGGER revision_noop AFTER DELETE ON memories_revision FOR EACH ROW EXECUTE FUNCTION noop()"
        )
        assert dialect.existing(cursor, ["memories_revision", "revision_noop", "nothing"]) == {
            "memories_revision",
            "revision_noop",
        }
        assert dialect.triggers_on(cursor, "memories_revision") == {"revision_noop"}  # not the foreign keys'
        assert dialect.triggers_on(cursor, "no_such_table") == set()


def test_postgresql_vectors_keep_the_same_bytes_and_follow_deletes(postgresql):
    embedder = HashEmbedder(dim=8)
    with connection.cursor() as cursor:
        memory = _memory(cursor)
        kept = _revision(cursor, memory, TIMES[0], content="deploy the api")
        erased = _revision(cursor, memory, TIMES[1], content="the vault code")
        tombstone = _revision(cursor, memory, TIMES[3], tombstone=True)
    assert vectors.pending_count() == 2
    matrix = embedder.embed(["deploy the api", "the vault code", "nothing"])
    assert vectors.insert_vectors([kept, erased, tombstone], matrix, embedder=embedder) == 2
    assert vectors.insert_vectors([kept], matrix[:1], embedder=embedder) == 0  # kept: revisions are immutable
    assert vectors.pending_revision_ids() == [] and vectors.pending_count() == 0
    state, ids, loaded = vectors.load_vectors()
    assert state == (2, "hash-v1") and ids.tolist() == [kept, erased]
    assert loaded.tobytes() == matrix[:2].astype("<f4").tobytes()
    assert [neighbour.revision_id for neighbour in vectors.vec0_knn(matrix[1], k=2)] == [erased, kept]
    assert vectors.vec0_knn(matrix[1], k=1)[0].cosine == pytest.approx(1.0, abs=1e-6)
    assert vectors.vector_drift() == []
    with connection.cursor() as cursor:
        # The trigger: a deleted revision with text takes its vector and bumps the generation; a tombstone neither.
        cursor.execute("DELETE FROM memories_revision WHERE id IN (%s, %s)", [erased, tombstone])
    assert vectors.load_vectors()[1].tolist() == [kept]
    assert vectors.current_space().generation == 3
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER search_vectors_after_delete ON memories_revision")
    assert [line.split(" is missing")[0] for line in vectors.vector_drift()] == [
        "The trigger search_vectors_after_delete"
    ]
    space = vectors.reset_space(embedder)
    assert space.generation == 4 and vectors.vector_count() == 0 and vectors.vector_drift() == []


def test_postgresql_chunks_with_parameters_bound_by_the_client(postgresql):
    # Django's default binding (MEMORY_DB_PREPARED_STATEMENTS=0), which reads rows as text only.
    _five_rows_come_in_chunks_of_two()


def test_postgresql_drift_and_reindex_queries_bind_booleans(postgresql):
    with connection.cursor() as cursor:
        memory = _memory(cursor)
        text = _revision(cursor, memory, TIMES[0], content="deploy")
        _revision(cursor, memory, TIMES[1], tombstone=True)
        cursor.execute("INSERT INTO search_document VALUES (%s, 1, 0), (999, 1, 0)", [text])
        cursor.execute("DELETE FROM search_document WHERE revision_id = %s", [text])
        cursor.execute(
            "INSERT INTO memories_attributes (memory_id, namespace, kind, state, known_at) "
            "VALUES (%s, 'moved', 'fact', 'active', %s)",
            [memory, TIMES[0]],
        )
    # These hand-made tables have no triggers; and PostgreSQL has no FTS tables to check.
    assert [line.split(":")[0] for line in indexing.index_drift()] == [
        "memories_revision",
        "memories_memory",
        "memories_attributes",
    ]
    assert indexing._drifted_documents() == ([text], [999])
    assert indexing._with_text([text]) == [(text, "acme", "", "deploy")]
    assert indexing._with_text([text], every_namespace=True) == [
        (text, "acme", "", "deploy"),
        (text, "moved", "", "deploy"),
    ]


def test_postgresql_erasure_vacuums_the_tables_that_held_text(postgresql):
    from memories.services import erasure

    with connection.cursor() as cursor:
        tables = erasure._text_tables(cursor)
    # Those of the hand-made schema; the others are skipped, not an error.
    assert tables == [
        "memories_revision",
        "memories_memory",
        "memories_attributes",
        "memories_tag",
        "search_document",
        "search_posting",
        "search_posting_tail",
    ]
    with transaction.atomic():
        # As memory_erase hands it over: run once the erasure committed, outside any transaction (VACUUM refuses one).
        transaction.on_commit(erasure._clean_up_after_erasure)
    assert erasure.database_release_free_pages() is False
    erasure.database_vacuum()  # VACUUM (FULL)
