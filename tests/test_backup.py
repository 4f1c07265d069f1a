"""manage.py backup and restore: a consistent copy of a live database, and a restore refused while a server runs."""

import contextlib
import json
import sqlite3
import threading
import urllib.parse
import urllib.request
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.subprocesses import clean_env, manage, serve


@pytest.mark.sqlite_only(
    "backup and restore copy a SQLite file; on PostgreSQL they refuse with the pg_dump hint (tests/test_postgres.py)"
)
def test_restore_refuses_a_file_that_is_not_a_database_and_backup_an_in_memory_one(tmp_path, db):
    garbage = tmp_path / "backup.db"
    garbage.write_bytes(b"not a database" * 100)

    with pytest.raises(CommandError, match="cannot be read as a database"):
        call_command("restore", str(garbage), "--yes", stdout=StringIO())
    with pytest.raises(CommandError, match="in memory"):
        call_command("backup", str(tmp_path / "copy.db"), stdout=StringIO())


def _database(path, memories: int):
    """A database file with the counted tables and ``memories`` rows (what backup checks, without the schema)."""
    with sqlite3.connect(path) as database:
        database.execute("CREATE TABLE memories_memory (id INTEGER PRIMARY KEY)")
        database.execute("CREATE TABLE memories_revision (id INTEGER PRIMARY KEY)")
        database.executemany("INSERT INTO memories_memory (id) VALUES (?)", [(n,) for n in range(1, memories + 1)])
    database.close()


def test_backup_never_overwrites_a_file_unless_forced_and_leaves_no_partial_file(tmp_path):
    from memoryproject.sqlite_backend.backup import CopyFailed, backup
    from memoryproject.sqlite_backend.base import Database

    _database(tmp_path / "live.db", memories=2)
    target = tmp_path / "copy.db"
    live = Database.connect(tmp_path / "live.db", isolation_level=None)
    backup(live, target, overwrite=False)  # an earlier backup
    earlier = target.read_bytes()
    live.execute("INSERT INTO memories_memory (id) VALUES (3)")

    with pytest.raises(CopyFailed, match="already exists.*--force"):
        backup(live, target, overwrite=False)
    assert target.read_bytes() == earlier
    copy = backup(live, target, overwrite=True)
    live.close()

    assert copy.rows == {"memories_memory": 3, "memories_revision": 0}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["copy.db", "live.db"]


@pytest.mark.slow
@pytest.mark.sqlite_only(
    "backup copies a SQLite file; on PostgreSQL it refuses with the pg_dump hint (tests/test_postgres.py)"
)
def test_backup_force_replaces_an_earlier_backup_but_never_the_stores_files_or_a_file_that_is_no_backup(
    instance, tmp_path
):
    earlier = tmp_path / "earlier.db"
    assert instance.manage("backup", str(earlier)).returncode == 0
    instance.memory("remember", "Written after the earlier backup.")
    notes = tmp_path / "notes.txt"
    notes.write_text("Not a database.")
    wal = instance.data_dir / "memory.db-wal"
    discovery_lock = instance.data_dir / "memory.db.server.json.lock"  # what `serve` holds while it owns the file
    discovery_lock.write_text("")
    targets = [instance.data_dir / "secret_key", instance.db_path, wal, notes, discovery_lock]

    with contextlib.closing(sqlite3.connect(instance.db_path, isolation_level=None)) as elsewhere:
        elsewhere.execute("PRAGMA user_version = 7")  # another process's write, still in the -wal file
        before = {path: path.read_bytes() for path in targets}
        refused = {path: instance.manage("backup", str(path), "--force") for path in targets}
        after = {path: path.read_bytes() for path in targets}

    assert before[wal]  # the -wal holds that write
    for path, done in refused.items():
        assert (done.returncode, done.stdout) == (1, ""), (path, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and "even with --force" in done.stderr, done.stderr
    assert "is one of the store's own files" in refused[instance.db_path].stderr
    assert "is one of the store's own files" in refused[discovery_lock].stderr
    assert f"{notes} is not a backup (it is not a SQLite database)" in refused[notes].stderr
    assert after == before
    assert instance.manage("doctor").returncode == 0  # the store, its key included, is as it was
    replaced = instance.manage("backup", str(earlier), "--force")
    assert replaced.returncode == 0, replaced.stderr
    with contextlib.closing(sqlite3.connect(f"file:{earlier}?mode=ro", uri=True)) as copy:
        assert copy.execute("SELECT count(*) FROM memories_memory").fetchone() == (1,)


def test_backup_force_refuses_a_store_in_use_elsewhere_as_not_a_backup(tmp_path):
    from memoryproject.sqlite_backend.backup import CopyFailed, backup
    from memoryproject.sqlite_backend.base import Database

    _database(tmp_path / "live.db", memories=1)
    other_store = tmp_path / "other.db"
    _database(other_store, memories=2)
    with contextlib.closing(sqlite3.connect(other_store)) as database:
        database.execute("PRAGMA journal_mode = WAL")  # as a server leaves the store it runs on
    live = Database.connect(tmp_path / "live.db", isolation_level=None)
    try:
        with pytest.raises(CopyFailed, match=r"not a backup \(it is a database in WAL mode.*even with --force"):
            backup(live, other_store, overwrite=True)
    finally:
        live.close()
    with contextlib.closing(sqlite3.connect(other_store)) as database:
        assert database.execute("SELECT count(*) FROM memories_memory").fetchone() == (2,)


def _max_known_at(path) -> str:
    """The newest revision's known_at in a database file, as ISO 8601 in UTC."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as database:
        stored = database.execute("SELECT max(known_at) FROM memories_revision").fetchone()[0]
    return stored.replace(" ", "T") + "+00:00"


def _export(env, as_of: str) -> dict:
    done = manage("export_memories", "--as-of", as_of, env=env)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    del document["exported_at"]
    return document


@pytest.mark.slow
@pytest.mark.sqlite_only(
    "backup and restore copy a SQLite file with SQLite's backup API; on PostgreSQL they refuse "
    "with the pg_dump hint (tests/test_postgres.py)"
)
def test_a_backup_of_a_server_taking_writes_restores_to_the_same_export_and_restore_waits_for_the_server(
    instance, tmp_path
):
    token = instance.create_api_keys(writer={})["writer"]
    copy = tmp_path / "backup.db"
    written, stop = [], threading.Event()

    failures = []

    def write(base):
        try:
            while not stop.is_set():
                body = json.dumps({"content": f"Write number {len(written)} while backing up.", "namespace": "acme"})
                request = urllib.request.Request(
                    f"{base}/api/v1/memories/",
                    data=body.encode(),
                    method="POST",
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                )
                with urllib.request.urlopen(request, timeout=30) as response:
                    assert response.status == 201
                written.append(1)
                stop.wait(0.05)  # a steady trickle, leaving the CPU to the commands under test
        except Exception as error:  # noqa: BLE001 - reported by the test, not lost in the thread
            failures.append(error)

    def wait_for(count):
        while len(written) < count and writer.is_alive():
            stop.wait(0.01)

    # No rate limit: the writer writes as fast as the server takes it.
    with serve({**instance.env, "MEMORY_API_WRITES_PER_MINUTE": "0"}) as base:
        writer = threading.Thread(target=write, args=(base,))
        writer.start()
        try:
            wait_for(5)
            backed_up = instance.manage("backup", str(copy))
            wait_for(len(written) + 5)  # and writes go on after it
        finally:
            stop.set()
            writer.join()
        refused = instance.manage("restore", str(copy), "--yes")
        # The live store's export (the service export_memories runs), as of the newest write in the copy.
        as_of = _max_known_at(copy)
        request = urllib.request.Request(
            f"{base}/api/v1/export/?{urllib.parse.urlencode({'as_of': as_of})}",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            from_live = json.loads(response.read())
        del from_live["exported_at"]

    assert failures == []

    assert backed_up.returncode == 0, backed_up.stderr
    assert backed_up.stdout.startswith(f"Backed up {instance.db_path} to {copy}: ")
    assert "integrity check ok" in backed_up.stdout
    assert refused.returncode == 1
    assert f"A server is using {instance.db_path}" in refused.stderr and "stop it" in refused.stderr
    with sqlite3.connect(f"file:{copy}?mode=ro", uri=True) as database:
        in_copy = database.execute("SELECT count(*) FROM memories_memory").fetchone()[0]
    assert 5 <= in_copy < len(written)  # taken while the writes went on

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    restored = manage("restore", str(copy), "--yes", env=clean_env(fresh))
    assert restored.returncode == 0, restored.stderr
    assert f"{in_copy} memories" in restored.stdout

    from_backup = _export(clean_env(fresh), as_of)
    assert len(from_backup["memories"]) == in_copy
    assert from_backup == from_live

    # Over the live database, once its server has stopped: the writes after the backup are gone.
    over_live = instance.manage("restore", str(copy), "--yes")
    assert over_live.returncode == 0, over_live.stderr
    with sqlite3.connect(instance.db_path) as database:
        assert database.execute("SELECT count(*) FROM memories_memory").fetchone()[0] == in_copy
        assert database.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    database.close()
