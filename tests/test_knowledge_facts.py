"""The fact rows: one per revision with a triple, written with it by every write path, gone with it, rebuildable."""

import datetime as dt

import pytest
from django.core.management import CommandError, call_command

from knowledge.facts import fact_drift, rebuild_facts
from knowledge.models import Fact
from memories import services, staging
from memories.models import ImportBatch, Revision
from memories.services import batches
from memories.services.export import EXPORT_FORMAT, EXPORT_VERSION

ACTOR = {"actor": "tester", "interface": "cli"}
LONG_AGO = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
TRIPLE = {"subject": "The Payments API", "predicate": "Runs_on", "object": "  host-7  "}


def _rows():
    return sorted(Fact.objects.values_list("revision_id", "memory_id", "subject", "predicate", "object"))


def test_a_revision_with_a_triple_gets_one_row_in_normal_form_and_one_without_gets_none(remember):
    memory = remember("Payments runs on host-7.", **TRIPLE).memory
    remember("No triple here.")

    assert _rows() == [(memory.revision_id, memory.id, "payments api", "runs on", "host-7")]


def test_revise_forget_and_restore_give_each_revision_with_text_its_own_row(remember):
    memory_id = remember("Payments runs on host-7.", **TRIPLE).memory.id
    services.memory_revise(
        memory_id=memory_id,
        content="Payments runs on host-9.",
        subject="Payments API",
        predicate="runs on",
        object="host-9",
        **ACTOR,
    )
    services.memory_forget(memory_id=memory_id, reason="moved away", **ACTOR)
    services.memory_restore(memory_id=memory_id, **ACTOR)

    revisions = list(Revision.objects.filter(memory_id=memory_id).order_by("id").values_list("id", "tombstone"))
    assert [tombstone for _, tombstone in revisions] == [False, False, True, False]
    assert [(row[0], row[4]) for row in _rows()] == [
        (revisions[0][0], "host-7"),
        (revisions[1][0], "host-9"),
        (revisions[3][0], "host-9"),
    ]


def _document(*items):
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "memories": list(items)}


@pytest.mark.parametrize("trusted", [True, False])
def test_an_import_writes_the_rows_of_what_it_imports(db, trusted):
    document = _document(
        {
            "namespace": "acme",
            "key": "pay",
            "revisions": [
                {"content": "Payments runs on host-7.", "known_at": "2024-01-01T00:00:00Z", **TRIPLE},
                {
                    "content": "Payments runs on host-9.",
                    "known_at": "2024-02-01T00:00:00Z",
                    "subject": "payments api",
                    "predicate": "runs on",
                    "object": "host-9",
                },
            ],
        }
    )

    services.memories_import(document=document, trusted=trusted, **ACTOR)

    # Trusted replays both revisions; untrusted remembers the current one only.
    assert [row[4] for row in _rows()] == (["host-7", "host-9"] if trusted else ["host-9"])
    assert fact_drift() == []


def test_a_dry_run_import_leaves_no_row(db):
    document = _document(
        {
            "namespace": "acme",
            "key": "pay",
            "revisions": [{"content": "Payments runs on host-7.", "known_at": "2024-01-01T00:00:00Z", **TRIPLE}],
        }
    )

    services.memories_import(document=document, trusted=True, dry_run=True, **ACTOR)

    assert _rows() == []


def test_erase_deletes_the_rows_of_every_revision_of_the_memory(remember):
    erased = remember("Payments runs on host-7.", **TRIPLE).memory.id
    services.memory_revise(
        memory_id=erased,
        content="Payments runs on host-9.",
        subject="Payments API",
        predicate="runs on",
        object="host-9",
        **ACTOR,
    )
    kept = remember("Billing runs on host-1.", subject="Billing", predicate="runs on", object="host-1").memory

    services.memory_erase(memory_id=erased, reason="user asked", **ACTOR)

    assert _rows() == [(kept.revision_id, kept.id, "billing", "runs on", "host-1")]
    assert fact_drift() == []


def test_purge_deletes_the_rows_of_expired_revisions(remember):
    remember(
        "Staging runs on host-3.",
        ttl_days=1,
        known_at=LONG_AGO,
        subject="staging",
        predicate="runs on",
        object="host-3",
    )
    kept = remember("Billing runs on host-1.", subject="Billing", predicate="runs on", object="host-1").memory

    services.purge_expired(**ACTOR)

    assert _rows() == [(kept.revision_id, kept.id, "billing", "runs on", "host-1")]


def test_purging_a_dead_import_deletes_the_rows_it_wrote(db):
    batch = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(batch.pk):
        services.memory_remember(namespace="acme", content="Half-imported.", **TRIPLE, **ACTOR)
    ImportBatch.objects.filter(pk=batch.pk).update(pid=2**22 + 12345)  # no such process
    assert len(_rows()) == 1

    services.purge_dead_imports(**ACTOR)

    assert _rows() == []


@pytest.fixture
def history(remember):
    """Facts revised, forgotten, moved and erased, and memories without a triple."""
    first = remember("Payments runs on host-7.", **TRIPLE).memory.id
    services.memory_revise(
        memory_id=first,
        content="Payments runs on host-9.",
        subject="payments api",
        predicate="runs on",
        object="host-9",
        **ACTOR,
    )
    second = remember(
        "Search is owned by Team Blue.", subject="Search", predicate="is owned by", object="Team Blue"
    ).memory.id
    services.memory_forget(memory_id=second, **ACTOR)
    third = remember(
        "Ledger depends on Payments API.", subject="Ledger", predicate="depends on", object="the payments API"
    ).memory.id
    services.memory_move(memory_id=third, namespace="finance", **ACTOR)
    erased = remember("Audit runs on host-2.", subject="Audit", predicate="runs on", object="host-2").memory.id
    services.memory_erase(memory_id=erased, **ACTOR)
    remember("No triple here.")


def test_a_rebuild_gives_exactly_the_rows_the_writes_gave(history):
    written = _rows()
    assert len(written) == 4

    assert rebuild_facts() == 4

    assert _rows() == written
    assert fact_drift() == []


def test_drift_names_missing_extra_and_different_rows(history):
    rows = Fact.objects.order_by("revision_id")
    missing, different = rows[0].revision_id, rows[1].revision_id
    Fact.objects.filter(revision_id=missing).delete()
    Fact.objects.filter(revision_id=different).update(object="elsewhere")
    Fact.objects.create(revision_id=10_000, memory_id=1, subject="a", predicate="b", object="c")

    problems = fact_drift()

    assert problems == [
        f"facts: 1 revisions have a triple but no fact row (revision {missing}); rebuild them with "
        "'manage.py reindex --graph'.",
        "facts: 1 revisions have a fact row but no triple (or no longer exist) (revision 10000); rebuild them "
        "with 'manage.py reindex --graph'.",
        f"facts: 1 revisions have a fact row that differs from their triple (revision {different}); rebuild "
        "them with 'manage.py reindex --graph'.",
    ]


def test_the_reindex_command_reports_drift_and_rebuilds(history, capsys):
    written = _rows()
    Fact.objects.all().delete()

    call_command("reindex", "--graph", "--dry-run")
    assert "4 revisions have a triple but no fact row" in capsys.readouterr().out
    assert _rows() == []

    call_command("reindex", "--graph")
    assert capsys.readouterr().out.startswith("Rebuilt 4 fact row(s) from the revisions in ")
    assert _rows() == written

    call_command("reindex", "--graph", "--dry-run")
    assert capsys.readouterr().out == "The fact rows are in step with the revisions.\n"


def test_the_reindex_command_asks_what_to_rebuild(db):
    with pytest.raises(CommandError, match="--graph"):
        call_command("reindex")
