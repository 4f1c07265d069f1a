"""Imports write in short transactions and publish at the end: unseen until then, all or nothing, never in the way.

The in-process tests shrink the chunks so that a small document takes several
transactions, and look at the store from outside the import (a fresh context, where
the import's own rows do not count) between them. The slow ones run the import as a
process, as an operator would: a remember while it writes, and a kill -9 half-way.
"""

import contextvars
import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing, contextmanager

import pytest
from django.db import connection
from django.utils import timezone

from memories import health, selectors, services, staging, validation
from memories.models import Attributes, AuditEvent, ImportBatch, Memory, Revision, Tag
from memories.selectors import unfinished_imports
from memories.services import batches
from memories.services.export import EXPORT_FORMAT, EXPORT_VERSION
from memoryproject import dialect
from memoryproject.exceptions import Conflict, NotFound
from memoryproject.timeparse import format_instant
from search.indexing import index_drift
from tests.subprocesses import BASE_DIR, serve

ACTOR = {"actor": "importer", "interface": "cli"}


def revision(content, known_at, **fields) -> dict:
    return {"content": content, "known_at": known_at, **fields}


def item(key, *revisions, namespace="acme", **fields) -> dict:
    return {"namespace": namespace, "key": key, "revisions": list(revisions), **fields}


def document(*items) -> dict:
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "memories": list(items)}


def import_(document, *, trusted, **options):
    return services.memories_import(document=document, trusted=trusted, **ACTOR, **options)


def rows() -> dict:
    return {
        model.__name__: model.all_objects.count() if hasattr(model, "all_objects") else model.objects.count()
        for model in (Memory, Revision, Attributes, Tag, AuditEvent, ImportBatch)
    }


def outside(check):
    """Run ``check()`` as any other reader or writer would: without the import's view of its own rows."""
    return contextvars.Context().run(check)


@pytest.fixture
def small_chunks(monkeypatch):
    """Two memories per transaction, and no pause between them (nothing else writes here)."""
    monkeypatch.setattr(batches, "STAGED_CHUNK", 2)
    monkeypatch.setattr(batches, "STAGED_CHUNK_RANGE", (2, 2))


@pytest.mark.parametrize("trusted", [True, False])
def test_an_import_is_seen_by_no_one_until_its_last_step_publishes_it(db, small_chunks, trusted):
    import_(
        document(
            item("kept", revision("Otters hold hands while they sleep.", "2024-01-01T00:00:00Z"), tags=["animals"])
        ),
        trusted=True,
    )
    kept = Memory.objects.get(key="kept").pk

    def view():
        return {
            "list": sorted(record.key for record in selectors.memory_list(namespace="acme", state="all").items),
            "get": [selectors.memory_get(namespace="acme", key="kept").content],
            "history": [record.content for record in selectors.memory_history(memory_id=kept)],
            "recall": sorted(
                hit.memory.key
                for hit in selectors.memory_recall(query="zebras otters", match="any", mode="keyword").hits
            ),
            "export": [entry["key"] for entry in json.loads("".join(services.memories_export()))["memories"]],
            "stats": selectors.memory_stats()["memories"],
            "counts": (Memory.objects.count(), Revision.objects.count()),
            "tags": sorted(selectors.memory_get(namespace="acme", key="kept").tags),
            "duplicate": selectors.visible_duplicate(
                namespace="acme", content_hash=validation.content_hash("Zebra fact 3.")
            ),
        }

    before = view()
    seen = []
    batch = document(
        *(item(f"zebra{n}", revision(f"Zebra fact {n}.", "2024-02-01T00:00:00Z"), tags=["new-tag"]) for n in range(5)),
        item(
            "kept",
            revision("Otters hold hands while they sleep.", "2024-01-01T00:00:00Z"),
            revision("Otters and zebras hold hands.", "2024-03-01T00:00:00Z"),
            tags=["animals", "more"],
        ),
    )

    report = import_(batch, trusted=trusted, progress=lambda done, total: seen.append(outside(view)))

    assert (report.created, report.revised) == (5, 1)
    assert len(seen) == 6
    # Untrusted, "kept" (a stored memory) is remembered in the transaction that publishes: no one sees it before.
    for state in seen if trusted else seen[:5]:
        assert state == before
    after = view()
    assert after["list"] == ["kept"] + [f"zebra{n}" for n in range(5)]
    assert after["recall"] == after["list"]
    assert after["get"] == ["Otters and zebras hold hands."] and after["tags"] == ["animals", "more"]
    assert ImportBatch.objects.get(pk=ImportBatch.objects.latest("pk").pk).state == "published"


def test_an_untrusted_import_counts_from_its_publication_and_a_trusted_one_from_its_recorded_times(db):
    during = []
    import_(
        document(item("zebra", revision("Zebras graze at dawn.", None))),
        trusted=False,
        progress=lambda done, total: during.append(timezone.now()),
    )
    memory = Memory.objects.get(key="zebra")
    written = memory.revisions.get()
    batch = ImportBatch.objects.get(pk=written.batch_id)
    # Written (known) before that moment, published after it.
    assert written.known_at <= during[0] < batch.counts_from == batch.published_at
    before_publish = format_instant(during[0])

    with pytest.raises(NotFound):
        selectors.memory_get(namespace="acme", key="zebra", as_of=before_publish)
    assert selectors.memory_history(memory_id=memory.pk, as_of=before_publish) == []
    assert selectors.memory_recall(query="zebras", mode="keyword", as_of=before_publish).hits == []
    assert selectors.memory_list(namespace="acme").items[0].key == "zebra"
    assert [hit.memory.key for hit in selectors.memory_recall(query="zebras", mode="keyword").hits] == ["zebra"]

    import_(
        document(
            item("otter", revision("Otters restored from a backup.", "2024-01-01T00:00:00Z"), kind="fact", tags=["Zoo"])
        ),
        trusted=True,
    )
    restored = selectors.memory_get(namespace="acme", key="otter", as_of="2024-06-01")
    assert restored.content == "Otters restored from a backup."
    # Its namespace, kind and tags hold from its first revision on, like its text.
    assert (restored.namespace, restored.kind, restored.tags) == ("acme", "fact", ["Zoo"])
    assert [row.known_at for row in selectors.attribute_history(memory_id=restored.id)] == [restored.known_at]
    hits = selectors.memory_recall(query="otters", mode="keyword", as_of="2024-06-01").hits
    assert [hit.memory.key for hit in hits] == ["otter"]


def test_a_conflict_in_a_later_chunk_takes_out_the_chunks_already_written(db, small_chunks):
    import_(document(item("taken", revision("Our own history.", "2024-01-01T00:00:00Z"))), trusted=True)
    before = rows()
    batch = document(
        *(item(f"new{n}", revision(f"New fact {n}.", "2024-01-01T00:00:00Z"), tags=[f"tag{n}"]) for n in range(5)),
        item("taken", revision("Someone else's history.", "2024-01-02T00:00:00Z")),
    )

    with pytest.raises(Conflict) as raised:
        import_(batch, trusted=True)

    assert raised.value.field == "memories[5].key"
    assert rows() == before
    assert index_drift() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_document")
        assert cursor.fetchone()[0] == 1


def test_a_key_being_imported_is_refused_to_other_writers_and_one_written_meanwhile_is_revised(db, small_chunks):
    refused = []

    def meanwhile(done, total):
        if done != 1:
            return
        try:  # the import has written "first": its key is not free
            outside(lambda: services.memory_remember(namespace="acme", key="first", content="Mine.", **ACTOR))
        except Conflict as error:
            refused.append(error.message)
        # "third" comes in a later chunk: a writer may still take the key, and the import then revises it.
        outside(lambda: services.memory_remember(namespace="acme", key="third", content="Written meanwhile.", **ACTOR))

    batch = document(*(item(key, revision(f"Imported {key}.", None)) for key in ("first", "second", "third")))
    report = import_(batch, trusted=False, progress=meanwhile)

    assert (report.created, report.revised) == (2, 1)
    assert refused and "belongs to an import that has not finished" in refused[0]
    assert selectors.memory_get(namespace="acme", key="first").content == "Imported first."
    assert selectors.memory_get(namespace="acme", key="third").content == "Imported third."


@pytest.mark.parametrize("trusted", [True, False])
def test_a_key_another_unfinished_import_holds_is_refused_and_nothing_is_imported(db, trusted):
    other = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(other.pk):
        services.memory_remember(namespace="acme", key="shared", content="Theirs.", **ACTOR)
    before = rows()

    with pytest.raises(Conflict) as raised:
        import_(
            document(
                item("mine", revision("Mine.", "2024-01-01T00:00:00Z")),
                item("shared", revision("Ours.", "2024-01-01T00:00:00Z")),
            ),
            trusted=trusted,
        )

    assert raised.value.field == "memories[1].key"
    assert "another import that has not finished" in raised.value.message
    assert rows() == before


def test_a_dry_run_leaves_no_batch_and_no_row(db, small_chunks):
    before = rows()

    report = import_(
        document(*(item(f"k{n}", revision(f"Fact {n}.", None)) for n in range(5))), trusted=False, dry_run=True
    )

    assert report.created == 5
    assert rows() == before


def test_an_interrupt_just_after_the_publishing_step_committed_leaves_the_import_whole(db, monkeypatch):
    publishing = batches.publishing

    @contextmanager
    def interrupted(batch, *, dry_run):
        with publishing(batch, dry_run=dry_run):
            yield
        raise KeyboardInterrupt  # Ctrl-C, after the commit and before the import returns

    monkeypatch.setattr(batches, "publishing", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_(document(item("kept", revision("Otters hold hands.", "2024-01-01T00:00:00Z"))), trusted=True)

    assert selectors.memory_get(namespace="acme", key="kept").content == "Otters hold hands."
    assert ImportBatch.objects.get().state == "published"


def test_a_snapshot_takes_in_a_publication_without_a_reload_and_matches_a_fresh_load(db):
    from search import snapshot

    def columns(view):
        return {name: getattr(view.columns, name).tolist() for name in snapshot._COLUMNS}

    def attribute_columns(view):
        return {name: getattr(view.attributes, name).tolist() for name in snapshot._ATTRIBUTE_COLUMNS}

    def fresh():
        return snapshot._extend_attributes(snapshot._extend(snapshot._EMPTY, after=0), after=0)

    def visible(view, moment):
        at = snapshot.to_micros(moment) if isinstance(moment, dt.datetime) else moment
        return len(view.visible_rows(as_of=at, valid_at=at))

    services.memory_remember(namespace="acme", content="Written before the import.", **ACTOR)
    batch = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(batch.pk):
        services.memory_remember(namespace="acme", content="Written by the import.", **ACTOR)
    loaded = snapshot._extend_attributes(snapshot._extend(snapshot._EMPTY, after=0, shared=True), after=0)
    assert visible(loaded, timezone.now()) == 1
    published = batches.batch_publish(batch)

    republished = snapshot._republished(loaded)

    assert columns(republished) == columns(snapshot._extend(snapshot._EMPTY, after=0))
    # The import's attribute rows count from the publication too.
    assert attribute_columns(republished) == attribute_columns(fresh())
    assert republished.import_times.tolist() == fresh().import_times.tolist()
    assert visible(republished, timezone.now()) == 2
    assert visible(republished, snapshot.to_micros(published) - 1) == 1  # before the publication
    assert visible(loaded, timezone.now()) == 1  # an earlier view never changes
    services.memory_remember(namespace="acme", content="Written after the publication.", **ACTOR)
    extended = snapshot._extend(republished, after=republished.max_id, shared=True)
    assert columns(extended) == columns(snapshot._extend(snapshot._EMPTY, after=0))
    assert visible(extended, timezone.now()) == 3


def _notes(root, texts: dict[str, str]):
    root.mkdir(exist_ok=True)
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def import_markdown(root, **options):
    return services.markdown_import(root=root, namespace="acme", collection="docs", **ACTOR, **options)


def test_a_markdown_import_is_seen_by_no_one_until_its_last_step_publishes_it(db, small_chunks, tmp_path):
    services.memory_remember(namespace="acme", key="kept", content="Otters hold hands while they sleep.", **ACTOR)

    def view():
        return {
            "list": sorted(record.key for record in selectors.memory_list(namespace="acme", state="all").items),
            "recall": sorted(
                hit.memory.key
                for hit in selectors.memory_recall(query="zebra otters", match="any", mode="keyword").hits
            ),
            "counts": (Memory.objects.count(), Revision.objects.count()),
            "duplicate": selectors.visible_duplicate(
                namespace="acme", content_hash=validation.content_hash("Zebra note 3.")
            ),
        }

    before = view()
    seen = []
    root = _notes(tmp_path / "notes", {f"z{n}.md": f"Zebra note {n}." for n in range(5)})

    report = import_markdown(root, progress=lambda done, total: seen.append(outside(view)))

    assert report.created == 5
    assert seen == [before] * 5
    after = view()
    assert after["list"] == ["kept"] + [f"md:docs:z{n}.md#1" for n in range(5)]
    assert after["recall"] == after["list"]
    assert ImportBatch.objects.get().state == "published"


def test_a_markdown_import_refuses_its_keys_to_other_writers_and_revises_one_taken_meanwhile(
    db, small_chunks, tmp_path
):
    refused = []

    def meanwhile(done, total):
        if done != 1:
            return
        try:  # the import has written the first file's chunk: its key is not free
            outside(lambda: services.memory_remember(namespace="acme", key="md:docs:a.md#1", content="Mine.", **ACTOR))
        except Conflict as error:
            refused.append(error.message)
        # c.md comes in a later transaction: a writer may still take its key, and the import then revises it.
        outside(
            lambda: services.memory_remember(
                namespace="acme", key="md:docs:c.md#1", content="Written meanwhile.", **ACTOR
            )
        )

    root = _notes(tmp_path / "notes", {name: f"Imported {name}." for name in ("a.md", "b.md", "c.md")})
    report = import_markdown(root, progress=meanwhile)

    assert (report.created, report.revised) == (2, 1)
    assert refused and "belongs to an import that has not finished" in refused[0]
    assert selectors.memory_get(namespace="acme", key="md:docs:a.md#1").content == "Imported a.md."
    assert selectors.memory_get(namespace="acme", key="md:docs:c.md#1").content == "Imported c.md."


def test_a_markdown_import_that_fails_in_a_later_transaction_leaves_nothing(db, small_chunks, tmp_path):
    other = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(other.pk):
        services.memory_remember(namespace="acme", key="md:docs:e.md#1", content="Theirs.", **ACTOR)
    before = rows()
    root = _notes(tmp_path / "notes", {f"{name}.md": f"Note {name}." for name in "abcde"})

    with pytest.raises(Conflict, match="belongs to an import that has not finished"):
        import_markdown(root)

    assert rows() == before
    assert index_drift() == []


# Writes that meet a key an unfinished import holds -----------------------------------------------------------------


@pytest.fixture
def held(db):
    """An unfinished import (another process's, alive) holding the key "fridge" in namespace "home"."""
    batch = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(batch.pk):
        memory = services.memory_remember(namespace="home", key="fridge", content="Theirs.", **ACTOR).memory
    return batch, memory.id


def test_a_move_into_a_key_an_unfinished_import_holds_is_a_conflict_and_moves_nothing(held):
    batch, _ = held
    mover = services.memory_remember(
        namespace="acme", key="fridge", content="The fridge is empty.", tags=["food"], **ACTOR
    ).memory.id
    before = rows()

    with pytest.raises(Conflict) as raised:
        services.memory_move(memory_id=mover, namespace="home", **ACTOR)

    assert raised.value.field == "namespace"
    assert raised.value.message == (
        f"Memory {mover} cannot move to 'home': its key 'fridge' there belongs to an import that has not finished "
        f"(batch {batch.pk}). Try again once it is done (or, if it died, after 'manage.py purge')."
    )
    assert rows() == before
    assert Memory.objects.get(pk=mover).namespace == "acme"
    batches.batch_abandon(batch)  # the import gone, the key is free
    assert services.memory_move(memory_id=mover, namespace="home", **ACTOR).changed


def test_a_memory_moved_while_an_import_extends_it_is_found_by_its_new_text_in_its_new_namespace(db, small_chunks):
    import_(document(item("kept", revision("Otters hold hands.", "2024-01-01T00:00:00Z"))), trusted=True)
    kept = Memory.objects.get(key="kept").pk

    def meanwhile(done, total):
        if done == 3:  # the first transaction, which extended "kept", has committed
            outside(lambda: services.memory_move(memory_id=kept, namespace="attic", **ACTOR))

    batch = document(
        item(
            "kept",
            revision("Otters hold hands.", "2024-01-01T00:00:00Z"),
            revision("Otters hold hands with zebras.", "2024-02-01T00:00:00Z"),
        ),
        *(item(f"new{n}", revision(f"New fact {n}.", "2024-01-01T00:00:00Z")) for n in range(3)),
    )
    assert import_(batch, trusted=True, progress=meanwhile).revised == 1

    hits = selectors.memory_recall(query="zebras", namespace="attic", mode="keyword").hits
    assert [hit.memory.id for hit in hits] == [kept]
    assert selectors.memory_recall(query="zebras", namespace="acme", mode="keyword").hits == []


def test_a_memory_erased_while_an_import_extends_it_stops_the_import_with_a_conflict(db, small_chunks):
    import_(document(item("kept", revision("Otters hold hands.", "2024-01-01T00:00:00Z"))), trusted=True)
    kept = Memory.objects.get(key="kept").pk

    def meanwhile(done, total):
        if done == 3:  # the first transaction, which extended "kept", has committed
            outside(lambda: services.memory_erase(memory_id=kept, **ACTOR))

    batch = document(
        item(
            "kept",
            revision("Otters hold hands.", "2024-01-01T00:00:00Z"),
            revision("Otters hold hands with zebras.", "2024-02-01T00:00:00Z"),
        ),
        *(item(f"new{n}", revision(f"New fact {n}.", "2024-01-01T00:00:00Z")) for n in range(3)),
    )
    before = rows()
    with pytest.raises(Conflict) as raised:
        import_(batch, trusted=True, progress=meanwhile)

    assert raised.value.field == "memories[0]"
    assert raised.value.message.startswith(f"Nothing was imported: memories[0]: memory {kept} was erased while")
    after = rows()
    assert after.pop("Memory") == before.pop("Memory") - 1 and after.pop("Revision") == before.pop("Revision") - 1
    assert after.pop("Attributes") == before.pop("Attributes") - 1  # the erased memory's one row
    assert after.pop("AuditEvent") >= before.pop("AuditEvent")  # the erasure's own event
    assert after == before
    assert index_drift() == []


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()  # reaped: no process has the pid now
    return process.pid


def test_purge_removes_what_a_dead_import_wrote_and_doctor_reports_it_until_then(db):
    services.memory_remember(namespace="acme", key="old", content="Already here.", tags=["ops"], **ACTOR)
    before = rows()
    batch = batches.batch_begin(trusted=False, **ACTOR)
    with staging.writing(batch.pk):
        for n in range(3):
            services.memory_remember(
                namespace="acme", key=f"k{n}", content=f"Half-imported {n}.", tags=["ops", "half"], **ACTOR
            )
    assert health.unfinished_imports().ok  # its process (this one) is alive
    ImportBatch.objects.filter(pk=batch.pk).update(pid=_dead_pid())

    assert Memory.objects.count() == 1 and Memory.all_objects.count() == 4
    check = health.unfinished_imports()
    assert not check.ok and "3 memory(ies) and 3 revision(s)" in check.detail and "manage.py purge" in check.detail

    removed = services.purge_dead_imports(**ACTOR)

    assert removed == {"imports": 1, "memories": 3, "revisions": 3}
    assert health.unfinished_imports().ok
    after = rows()
    assert after.pop("AuditEvent") == before.pop("AuditEvent") + 1  # the purge's own event
    assert after == before
    assert index_drift() == []
    assert sorted(Tag.objects.values_list("slug", flat=True)) == ["ops"]


def test_an_import_that_made_no_progress_for_long_counts_as_dead(db):
    batch = batches.batch_begin(trusted=True, **ACTOR)
    assert not unfinished_imports.is_dead(batch)
    assert unfinished_imports.is_dead(
        batch, now=batch.progress_at + unfinished_imports.STALE_AFTER + dt.timedelta(seconds=1)
    )


# Processes ----------------------------------------------------------------------------------------------------------

# Waits for the import (another process) to be writing, remembers once and times it, then looks
# at what the import has written so far, as every reader does.
WRITER = """
import json, sys, time
import django
django.setup()
from memories import selectors, services
from memories.models import ImportBatch, Memory
from django.db import connection

connection.ensure_connection()
# Loads what a process's first write loads (the embedder, the search snapshot): the timing below is the lock's.
services.memory_remember(namespace="warm", content="Warming up.", actor="writer", interface="cli")
print("ready", flush=True)
deadline = time.monotonic() + 60
while not ImportBatch.objects.filter(state="writing").exists():
    assert time.monotonic() < deadline, "the import never started writing"
    time.sleep(0.01)
time.sleep(0.3)  # well inside the import
started = time.monotonic()
services.memory_remember(namespace="acme", key="meanwhile", content="Written while the import ran.",
                         actor="writer", interface="cli")
took = time.monotonic() - started
seen = {"bulk": Memory.objects.filter(namespace="bulk").count(),
        "listed": len(selectors.memory_list(namespace="bulk").items),
        "recalled": len(selectors.memory_recall(query="bulk fact", namespace="bulk", mode="keyword").hits)}
writing = ImportBatch.objects.filter(state="writing").exists()  # read last: all of the above was mid-import
print(json.dumps({"took": took, "seen": seen, "writing": writing}), flush=True)
"""


def _bulk_document(path, count: int) -> None:
    memories = [
        item(
            f"bulk{n}",
            revision(f"Bulk fact number {n} about {n % 97} things.", "2024-01-01T00:00:00Z"),
            namespace="bulk",
        )
        for n in range(count)
    ]
    path.write_text(json.dumps(document(*memories)))


def _bulk_folder(root, count: int) -> None:
    """Markdown files of ten paragraphs, each paragraph a chunk of its own (two do not fit in one)."""
    root.mkdir()
    for first in range(0, count, 10):
        paragraphs = [(f"Bulk fact number {n} about {n % 97} things. " * 40)[:1000] for n in range(first, first + 10)]
        (root / f"part{first:06}.md").write_text("\n\n".join(paragraphs), encoding="utf-8")


def _count(instance, sql: str) -> int:
    return instance.sql(sql)[0][0]


@pytest.mark.slow
@pytest.mark.parametrize("kind, count", [("json", 10_000), ("markdown", 1_000)])
def test_a_remember_gets_in_while_a_large_import_runs_and_sees_none_of_it(instance, tmp_path, kind, count):
    if kind == "json":
        _bulk_document(tmp_path / "bulk.json", count)
        command = ["import_memories", str(tmp_path / "bulk.json"), "--trusted"]
    else:
        _bulk_folder(tmp_path / "bulk", count)
        command = ["import_markdown", str(tmp_path / "bulk"), "--namespace", "bulk", "--collection", "bulk"]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER],
        cwd=BASE_DIR,
        env=instance.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
        importer = subprocess.Popen(
            [sys.executable, "manage.py", *command],
            cwd=BASE_DIR,
            env=instance.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        imported, import_err = importer.communicate(timeout=180)
        assert importer.returncode == 0, import_err
    finally:
        for process in (writer, locals().get("importer")):
            if process is not None and process.poll() is None:
                process.kill()
    result = json.loads(out.splitlines()[-1])

    assert result["writing"], "the import ended before the writer looked: make the import larger"
    assert result["seen"] == {"bulk": 0, "listed": 0, "recalled": 0}
    assert result["took"] < 1.0
    assert f"{count} created" in imported
    assert _count(instance, "SELECT count(*) FROM memories_memory WHERE namespace = 'bulk'") == count
    assert _count(instance, "SELECT count(*) FROM memories_memory WHERE key = 'meanwhile'") == 1


STORE_ROWS = """
import json
import numpy as np
from django.db import connection
from memoryproject import dialect
counts = {}
with connection.cursor() as cursor:
    # PostgreSQL has no FTS5 tables.
    fts = [] if dialect.is_postgresql() else ["search_fts_words_docsize"]
    for table in ["memories_memory", "memories_revision", "search_document", "search_vectors", *fts,
                  "memories_importbatch"]:
        cursor.execute(f"SELECT count(*) FROM {table}")
        counts[table] = cursor.fetchone()[0]
    cursor.execute("SELECT revision_id FROM search_posting_tail")
    posted = {row[0] for row in cursor.fetchall()}
    cursor.execute("SELECT revision_ids FROM search_posting")
    for (ids,) in cursor.fetchall():
        posted.update(np.frombuffer(ids, dtype="<u4").tolist())
counts["posted revisions"] = sorted(posted)
print(json.dumps(counts))
"""


@pytest.mark.slow
def test_an_import_killed_half_way_leaves_nothing_visible_and_purge_removes_its_rows(instance, tmp_path):
    instance.run("""services.memory_remember(namespace="acme", content="Here before the import.", **ACTOR)""")
    path = tmp_path / "bulk.json"
    _bulk_document(path, 10_000)
    importer = subprocess.Popen(
        [sys.executable, "manage.py", "import_memories", str(path), "--trusted"],
        cwd=BASE_DIR,
        env=instance.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while _count(instance, "SELECT count(*) FROM memories_revision WHERE batch_id IS NOT NULL") < 500:
            assert importer.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline, "the import did not start writing"
            time.sleep(0.02)
        os.kill(importer.pid, signal.SIGKILL)
        importer.wait(timeout=10)
    finally:
        if importer.poll() is None:
            importer.kill()
    assert importer.returncode == -signal.SIGKILL
    assert _count(instance, "SELECT count(*) FROM memories_importbatch WHERE state = 'published'") == 0

    assert instance.memory("list", "--namespace", "bulk")["items"] == []
    doctor = instance.manage("doctor")
    assert doctor.returncode == 1 and "died unpublished" in doctor.stdout and "manage.py purge" in doctor.stdout

    purged = instance.manage("purge")
    assert purged.returncode == 0, purged.stderr
    assert "1 unfinished import(s) whose process died" in purged.stdout

    doctor = instance.manage("doctor")
    assert doctor.returncode == 0, doctor.stdout
    left = json.loads(instance.run(STORE_ROWS))
    fts = {} if dialect.is_postgresql() else {"search_fts_words_docsize": 1}
    assert left == {
        "memories_memory": 1,
        "memories_revision": 1,
        "search_document": 1,
        "search_vectors": 1,
        **fts,
        "memories_importbatch": 0,
        "posted revisions": [1],
    }


@contextmanager
def _holding_the_write_lock(instance):
    """Another writer holding the database's write lock: SQLite's file lock, PostgreSQL's advisory lock."""
    if dialect.is_postgresql():
        import psycopg

        from memoryproject.pg_backend.base import WRITE_LOCK_KEY

        with psycopg.connect(instance.env["MEMORY_DATABASE_URL"], autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", [WRITE_LOCK_KEY])
            yield
        return
    with closing(sqlite3.connect(instance.db_path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")


@pytest.mark.slow
def test_a_write_that_cannot_get_the_lock_answers_busy_with_retry_after_never_500(instance):
    keys = instance.create_api_keys(writer={})
    env = {**instance.env, "MEMORY_DB_BUSY_TIMEOUT": "1"}
    # Another writer holding the lock past the busy timeout.
    with serve(env) as base, _holding_the_write_lock(instance):
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            f"{base}/api/v1/memories/",
            method="POST",
            data=json.dumps({"content": "Blocked.", "namespace": "acme"}).encode(),
            headers={"Authorization": f"Bearer {keys['writer']}", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=30)
        error = raised.value
        body = json.loads(error.read())
        cli = subprocess.run(
            [sys.executable, "manage.py", "memory", "remember", "Blocked too.", "--namespace", "acme"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert error.code == 503
    assert error.headers["Retry-After"] == "2"
    assert body["error"]["code"] == "busy" and "try again" in body["error"]["message"]
    assert cli.returncode == 2 and json.loads(cli.stderr)["error"]["code"] == "busy"
