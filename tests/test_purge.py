import datetime as dt
import os
from contextlib import closing

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memories import selectors, services
from memories.models import AuditEvent, ErasureGate, Memory, Revision
from memoryproject.exceptions import NotFound
from memoryproject.sqlite_backend.base import Database

LONG_AGO = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


@pytest.fixture
def expired(remember):
    """A memory imported with a one-day TTL that ran out long ago."""
    return remember(
        "The staging password rotates weekly.", key="staging", tags=["ops"], ttl_days=1, known_at=LONG_AGO
    ).memory.id


def _contents(memory_id):
    return list(Revision.objects.filter(memory_id=memory_id).order_by("id").values_list("content", flat=True))


def test_purge_removes_expired_revisions_and_keeps_unexpired_ones(expired, remember, actor):
    lasting = remember("The office opens at nine.").memory.id
    later = remember("The release is on Friday.", ttl_days=30).memory.id

    counts = services.purge_expired(**actor)

    assert counts == {
        "revisions": 1,
        "tombstones": 0,
        "tombstones_repointed": 0,
        "memories": 1,
        "telemetry": 0,
        "dry_run": False,
    }
    assert not Memory.objects.filter(pk=expired).exists()
    assert not Memory.tags.through.objects.filter(memory_id=expired).exists()
    assert _contents(lasting) == ["The office opens at nine."]
    assert _contents(later) == ["The release is on Friday."]


def test_history_before_expiry_is_answerable_until_the_purge(expired, actor):
    during = LONG_AGO + dt.timedelta(hours=12)
    assert selectors.memory_get(memory_id=expired, as_of=during).content == "The staging password rotates weekly."
    with pytest.raises(NotFound):
        selectors.memory_get(memory_id=expired)

    services.purge_expired(**actor)

    with pytest.raises(NotFound):
        selectors.memory_get(memory_id=expired, as_of=during)


def test_purge_keeps_a_memory_whose_older_revision_has_not_expired(remember, actor):
    memory_id = remember("Deploys go through the blue pipeline.", key="deploys", known_at=LONG_AGO).memory.id
    remember(
        "Deploys go through the green pipeline.", key="deploys", ttl_days=1, known_at=LONG_AGO + dt.timedelta(days=1)
    )

    counts = services.purge_expired(**actor)

    assert counts["revisions"] == 1 and counts["memories"] == 0
    assert _contents(memory_id) == ["Deploys go through the blue pipeline."]
    assert selectors.memory_get(memory_id=memory_id).content == "Deploys go through the blue pipeline."


def test_dry_run_removes_nothing_and_counts_what_a_purge_would(expired, remember, actor):
    remember("The office opens at nine.")
    revisions, events = Revision.objects.count(), AuditEvent.objects.count()

    counts = services.purge_expired(dry_run=True, **actor)

    assert counts == {
        "revisions": 1,
        "tombstones": 0,
        "tombstones_repointed": 0,
        "memories": 1,
        "telemetry": 0,
        "dry_run": True,
    }
    assert Revision.objects.count() == revisions
    assert AuditEvent.objects.count() == events
    assert Memory.objects.filter(pk=expired).exists()
    assert services.purge_expired(**actor) == {**counts, "dry_run": False}


def test_a_tombstone_goes_with_the_revision_it_hides(remember, actor):
    memory_id = remember("The cache key prefix is v2.", ttl_days=1).memory.id
    services.memory_forget(memory_id=memory_id, **actor)

    counts = services.purge_expired(now=timezone.now() + dt.timedelta(days=2), **actor)

    assert counts["revisions"] == 1 and counts["tombstones"] == 1 and counts["memories"] == 1
    assert not Memory.objects.filter(pk=memory_id).exists()


def test_purge_never_brings_forgotten_older_text_back(remember, actor):
    memory_id = remember("The VPN uses port 1194.", key="vpn", known_at=LONG_AGO).memory.id
    services.memory_revise(memory_id=memory_id, content="The VPN uses port 443.", ttl_days=1, **actor)
    services.memory_forget(memory_id=memory_id, **actor)
    later = timezone.now() + dt.timedelta(days=2)
    with pytest.raises(NotFound):
        selectors.memory_get(memory_id=memory_id, as_of=later)

    counts = services.purge_expired(now=later, **actor)

    assert counts["revisions"] == 1 and counts["tombstones"] == 0 and counts["tombstones_repointed"] == 1
    with pytest.raises(NotFound):
        selectors.memory_get(memory_id=memory_id, as_of=later)
    tombstone = Revision.objects.get(memory_id=memory_id, tombstone=True)
    assert tombstone.hides.content == "The VPN uses port 1194."
    restored = services.memory_restore(memory_id=memory_id, **actor)
    assert restored.memory.content == "The VPN uses port 1194."


def test_purge_records_an_audit_event_with_ids_only(expired, actor):
    revision_id = Revision.objects.get(memory_id=expired).pk

    services.purge_expired(**actor)

    event = AuditEvent.objects.get(action="purge")
    assert event.actor == "tester" and event.interface == "cli" and event.memory_id is None
    assert event.detail["revision_ids"] == [revision_id]
    assert event.detail["memory_ids"] == [expired]
    assert "staging" not in str(event.detail)
    assert not ErasureGate.objects.exists()


def test_purge_works_in_batches(remember, actor):
    ids = [remember(f"Expired note number {n}.", ttl_days=1, known_at=LONG_AGO).memory.id for n in range(5)]

    counts = services.purge_expired(batch_size=2, **actor)

    assert counts["revisions"] == 5 and counts["memories"] == 5
    assert not Memory.objects.filter(pk__in=ids).exists()
    assert AuditEvent.objects.filter(action="purge").count() == 3


def test_the_command_reports_a_dry_run_without_removing_anything(expired, capsys):
    call_command("purge", "--dry-run")

    assert capsys.readouterr().out == ("Would purge 1 expired revision(s), 0 tombstone(s) and 1 emptied memory(ies).\n")
    assert Memory.objects.filter(pk=expired).exists()


_SEED = """
import datetime as dt
import os
for n in range(40):
    # Big enough to fill pages of their own, so deleting them frees pages that VACUUM must return.
    services.memory_remember(namespace="acme", content=f"Expired long ago, number {n}. " + "filler " * 500,
                             ttl_days=1, known_at=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), **ACTOR)
services.memory_remember(namespace="acme", content="Still here.", **ACTOR)
"""


def _purge(instance, *args) -> str:
    done = instance.manage("purge", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.sqlite_only(
    "counts the SQLite file's free pages (PRAGMA freelist_count); PostgreSQL's VACUUM FULL is checked by the test below"
)
def test_the_purge_command_removes_expired_memories_and_prints_one_line(instance):
    instance.run(_SEED)

    dry = _purge(instance, "--dry-run")
    first = _purge(instance)
    with closing(Database.connect(instance.db_path)) as db:
        # No VACUUM unless asked for (it holds every writer for its length): the freed pages stay for new rows.
        freed = db.execute("PRAGMA freelist_count").fetchone()[0]
    again = _purge(instance, "--vacuum")

    assert dry == "Would purge 40 expired revision(s), 0 tombstone(s) and 40 emptied memory(ies).\n"
    assert first == "Purged 40 expired revision(s), 0 tombstone(s) and 40 emptied memory(ies).\n"
    assert freed > 0
    assert again == "Purged 0 expired revision(s), 0 tombstone(s) and 0 emptied memory(ies); file compacted.\n"
    with closing(Database.connect(instance.db_path)) as db:
        assert db.execute("SELECT count(*) FROM memories_revision").fetchone() == (1,)
        assert db.execute("PRAGMA freelist_count").fetchone() == (0,)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MEMORY_DATABASE_URL"), reason="PostgreSQL's VACUUM FULL (make test-postgres)")
def test_the_purge_command_rewrites_the_purged_tables_with_vacuum_full_on_postgresql(instance):
    instance.run(_SEED)
    files = "SELECT pg_relation_filenode('memories_revision'), pg_relation_filenode('search_vectors')"

    [before] = instance.sql(files)

    dry = _purge(instance, "--dry-run")
    first = _purge(instance)
    [after_first] = instance.sql(files)
    again = _purge(instance, "--vacuum")

    assert dry == "Would purge 40 expired revision(s), 0 tombstone(s) and 40 emptied memory(ies).\n"
    assert first == "Purged 40 expired revision(s), 0 tombstone(s) and 40 emptied memory(ies).\n"
    assert again == (
        "Purged 0 expired revision(s), 0 tombstone(s) and 0 emptied memory(ies); tables rewritten (VACUUM FULL).\n"
    )
    # Without --vacuum, a plain VACUUM frees the rows' room in place; VACUUM FULL writes each table into new files.
    assert after_first == before
    assert all(old != new for old, new in zip(before, instance.sql(files)[0]))
    assert instance.sql("SELECT count(*) FROM memories_revision") == [(1,)]


def test_the_purge_command_turns_a_bad_batch_size_into_a_command_error(db):
    with pytest.raises(CommandError, match="batch_size: 0 is not a positive integer"):
        call_command("purge", "--batch-size", "0")
