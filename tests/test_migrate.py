"""migrate holds the store's migration lock for its whole run: two started at once both succeed, one after the other."""

import contextlib
import fcntl
import json
import os
import sqlite3

import pytest

from memoryproject.storage import MIGRATION_LOCKED_MESSAGE
from tests.subprocesses import clean_env, manage, manage_at_once, python, read_only_mount

WAITING = "Waiting for another migrate on this store...\n"
ALL_APPLIED = "ok   schema             all migrations applied"
# migrate as manage.py runs it, waiting one second instead of minutes for the migration lock.
MIGRATE_WAITING_ONE_SECOND = """
from django.core.management import execute_from_command_line
from memories.management.commands import migrate
migrate.WAIT_SECONDS = 1
execute_from_command_line(["manage.py", "migrate"])
"""


def assert_one_applied_and_the_other_found_nothing_to_apply(done) -> None:
    """Both ``migrate`` runs succeeded without a traceback; the second, waiting if it came while the first ran,
    found every migration applied."""
    for process in done:
        assert process.returncode == 0, process.stdout + process.stderr
        assert process.stderr in ("", WAITING), process.stderr
    assert sorted("No migrations to apply." in process.stdout for process in done) == [False, True]


@pytest.mark.slow
def test_two_migrates_started_at_once_on_a_new_store_both_succeed_and_leave_every_migration_applied(tmp_path):
    # Without the lock one of the two died in most rounds (a table "already exists"): three rounds catch it.
    for attempt in range(3):
        data_dir = tmp_path / f"store-{attempt}"
        data_dir.mkdir()
        env = clean_env(data_dir)

        done = manage_at_once("migrate", "--noinput", env=env)

        assert_one_applied_and_the_other_found_nothing_to_apply(done)
        doctor = manage("doctor", env=env, timeout=120)
        assert ALL_APPLIED in doctor.stdout.splitlines(), doctor.stdout + doctor.stderr


@pytest.mark.sqlite_only("holds SQLite's lock file; tests/test_postgres.py holds PostgreSQL's advisory lock")
@pytest.mark.slow
def test_a_migrate_kept_waiting_for_the_whole_wait_says_so_in_one_line_and_applies_nothing(tmp_path):
    env = clean_env(tmp_path)
    lock_file = os.open(tmp_path / "memory.db-migratelock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # another migrate, as far as this one can tell
        done = python(MIGRATE_WAITING_ONE_SECOND, env=env)
    finally:
        os.close(lock_file)

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"{WAITING}CommandError: {MIGRATION_LOCKED_MESSAGE}\n"
    with contextlib.closing(sqlite3.connect(tmp_path / "memory.db")) as database:
        assert database.execute("SELECT name FROM sqlite_master").fetchall() == []


@pytest.mark.sqlite_only("a SQLite file on a read-only mount")
@pytest.mark.slow
def test_migrate_on_a_read_only_disk_runs_without_the_lock_file_it_cannot_make(instance, tmp_path):
    with read_only_mount(instance.data_dir, tmp_path / "read-only") as folder:
        done = manage("migrate", env=clean_env(folder, MEMORY_SECRET_KEY="read-only-test-" + "k" * 40))

    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines()[-1] == "  No migrations to apply."
    assert not (instance.data_dir / "memory.db-migratelock").exists()


def test_with_json_logs_migrate_says_each_migration_and_its_end_as_json_lines(tmp_path):
    env = clean_env(tmp_path, MEMORY_LOG_FORMAT="json")

    first, second = (manage("migrate", env=env, timeout=180) for _ in range(2))

    for done in (first, second):
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""  # Django's text is off: every line is a JSON log line on stderr
    applied = [json.loads(line) for line in first.stderr.splitlines()]
    *steps, end = applied
    assert {entry["logger"] for entry in applied} == {"memory.migrate"}
    assert (
        steps[0]["migration"] == "contenttypes.0001_initial"
        and steps[0]["message"] == "Applied contenttypes.0001_initial"
    )
    assert all(step["action"] == "applied" and step["duration_ms"] >= 0 for step in steps)
    assert end["message"] == f"{len(steps)} migration(s) applied"
    assert end["migrations"] == [step["migration"] for step in steps]
    assert [json.loads(line)["message"] for line in second.stderr.splitlines()] == ["No migrations to apply"]
