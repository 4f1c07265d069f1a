import json
import os
from contextlib import closing
from io import StringIO

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from memories import health
from memoryproject.sqlite_backend.base import Database
from search.indexing import index_drift

# The checks per engine: make test-postgres runs the suite, and its child processes, on PostgreSQL.
CHECKS = (
    ["python", "postgresql", "fts5", "database writable", "schema", "index drift", "embedder", "imports"]
    if os.environ.get("MEMORY_DATABASE_URL")
    else [
        "python",
        "sqlite",
        "fts5",
        "sqlite-vec",
        "database writable",
        "integrity",
        "schema",
        "index drift",
        "embedder",
        "imports",
    ]
)


def test_every_check_passes_on_a_healthy_store(remember):
    remember("The build cache lives on the NAS.")

    checks = health.run_checks()

    assert [check.name for check in checks] == CHECKS
    assert [check.name for check in checks if not check.ok] == []


@pytest.mark.sqlite_only("FTS5's index and its triggers exist on SQLite only")
def test_index_drift_names_the_table_whose_trigger_was_dropped(remember):
    remember("Indexed before the trigger went away.")
    assert index_drift() == []
    with connection.cursor() as cursor:
        # DDL is transactional in SQLite: the test's own rollback restores the trigger.
        cursor.execute("DROP TRIGGER search_fts_words_after_insert")

    remember("Written while the words index was not listening.")

    problems = index_drift()
    assert problems and all(line.startswith("search_fts_words:") for line in problems)
    assert any("trigger search_fts_words_after_insert is missing" in line for line in problems)
    assert any("1 rows indexed but 2 revisions carry text" in line for line in problems)
    assert any("does not match the revisions" in line for line in problems)
    assert not health.index_in_step().ok
    # Without FTS5's full check (the dashboard's), the trigger and the counts still show it.
    quick = index_drift(full=False)
    assert [line for line in problems if "does not match the revisions" not in line] == quick


@pytest.mark.sqlite_only("FTS5's index and its triggers exist on SQLite only")
def test_the_full_check_finds_an_index_whose_rows_add_up_but_whose_text_differs(remember):
    remember("The original text the index was built from.")
    with connection.cursor() as cursor:
        # Swap the indexed text behind FTS5's back: same row count, triggers intact.
        cursor.execute("DROP TRIGGER memories_revision_no_update")
        cursor.execute("DROP TRIGGER search_revision_updated")
        cursor.execute("UPDATE memories_revision SET content = 'Something else entirely now.'")

    quick = index_drift(full=False)
    assert quick == [
        "memories_revision: trigger search_revision_updated, memories_revision_no_update is missing, "
        "so the store and search's tables can drift apart; manage.py audit --fix makes it again, then rebuilds the "
        "index."
    ]
    problems = index_drift()
    assert any(line.startswith("search_fts_words: the index does not match") for line in problems)


def test_a_dropped_trigger_of_search_s_own_tables_is_index_drift_on_every_engine(remember):
    remember("Indexed while every trigger was there.")
    assert index_drift(full=False) == []
    with connection.cursor() as cursor:
        # DDL is transactional on both engines: the test's own rollback restores the trigger.
        cursor.execute(
            "DROP TRIGGER search_memory_deleted" + (" ON memories_memory" if connection.vendor == "postgresql" else "")
        )

    assert index_drift(full=False) == [
        "memories_memory: trigger search_memory_deleted is missing, so the store and search's tables can drift "
        "apart; manage.py audit --fix makes it again, then rebuilds the index."
    ]
    assert not health.index_in_step().ok


def test_the_schema_check_fails_while_a_migration_is_unapplied(db):
    MigrationRecorder.Migration.objects.filter(app="search", name="0001_fts_indexes").delete()

    check = health.schema_current()

    assert not check.ok
    assert "search.0001_fts_indexes" in check.detail


_SEED = """
for content in ("Backups run nightly at two.", "The wiki moved to the new host."):
    services.memory_remember(namespace="acme", content=content, **ACTOR)
"""


def _doctor(instance, *args, expect):
    done = instance.manage("doctor", *args)
    assert done.returncode == expect, done.stdout + done.stderr
    return done


@pytest.mark.slow
def test_doctor_passes_on_a_healthy_migrated_database_file(instance):
    instance.run(_SEED)

    done = _doctor(instance, expect=0)
    as_json = json.loads(_doctor(instance, "--json", expect=0).stdout)

    lines = done.stdout.splitlines()
    assert len(lines) == len(CHECKS) + 1
    assert all(line.startswith("ok ") for line in lines[:-1])
    assert lines[-1] == f"All {len(CHECKS)} checks passed."
    assert as_json["ok"] is True
    assert [check["name"] for check in as_json["checks"]] == CHECKS


@pytest.mark.sqlite_only("FTS5's index and its triggers exist on SQLite only")
@pytest.mark.slow
def test_doctor_exits_1_and_names_the_index_that_drifted(instance):
    instance.run(_SEED)
    with closing(Database.connect(instance.db_path, isolation_level=None)) as db:
        # Take one revision out of one index behind the triggers' back.
        db.execute(
            "INSERT INTO search_fts_words(search_fts_words, rowid, title, content) "
            "SELECT 'delete', id, title, content FROM memories_revision ORDER BY id LIMIT 1"
        )

    done = _doctor(instance, expect=1)
    as_json = json.loads(_doctor(instance, "--json", expect=1).stdout)

    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and "index drift" in failed[0] and "search_fts_words" in failed[0]
    assert f"1 of {len(CHECKS)} checks failed: index drift." in done.stderr
    assert as_json["ok"] is False
    assert [check["name"] for check in as_json["checks"] if not check["ok"]] == ["index drift"]


@pytest.mark.sqlite_only("a missing database file; PostgreSQL's unreachable server is in tests/test_postgres.py")
def test_doctor_reports_a_missing_database_without_creating_it(tmp_path):
    from tests.subprocesses import clean_env, manage

    done = manage("doctor", env=clean_env(tmp_path))

    assert done.returncode == 1
    assert "database file" in done.stdout and "does not exist" in done.stdout
    assert not (tmp_path / "memory.db").exists()


def _vectors_from_minilm(revision_ids):
    """Store vectors recorded as all-MiniLM-L6-v2's, as a store that ran with the default model holds."""
    import numpy as np

    from search import vectors
    from search.embeddings import MiniLMEmbedder

    minilm = MiniLMEmbedder()  # its name and dimension, without loading the model
    vectors.reset_space(minilm)
    rows = np.random.default_rng(0).normal(size=(len(revision_ids), 384)).astype(np.float32)
    vectors.insert_vectors(revision_ids, rows / np.linalg.norm(rows, axis=1, keepdims=True), embedder=minilm)


def test_doctor_fails_when_the_stored_vectors_come_from_another_embedder_and_names_the_fix(remember):
    from django.core.management import CommandError, call_command

    first = remember("The build cache lives on the NAS.")
    second = remember("Releases are tagged on Fridays.")
    _vectors_from_minilm([first.memory.revision_id, second.memory.revision_id])

    with pytest.raises(CommandError, match="checks failed: embedder"):
        call_command("doctor", stdout=StringIO())
    check = next(check for check in health.run_checks() if check.name == "embedder")

    assert not check.ok
    assert (
        "2 vector(s) from all-MiniLM-L6-v2" in check.detail and "MEMORY_EMBEDDER=hash selects hash-v1" in check.detail
    )
    assert "manage.py backfill --reembed" in check.detail

    # The command it names is the fix.
    call_command("backfill", "--reembed", stdout=StringIO())
    check = health.embedder_matches()
    assert check.ok and check.detail == "2 vector(s) from hash-v1"
