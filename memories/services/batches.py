"""Import batches: an import's rows are written in short transactions and published in one.

Holding the write lock for a whole import would stall every other writer for its
length, so an import writes a chunk per transaction. Its memories and revisions carry
its ``ImportBatch`` and count nowhere until ``batch_publish`` flips the batch in one
short transaction (``memories.models.counted_rows``). An import that fails is taken
out again by ``batch_abandon``; one whose process died stays ``writing``, and
``purge_dead_imports`` (``manage.py purge``) removes it. ``doctor`` reports it.

Both imports (JSON documents and Markdown folders) write through ``import_batch``,
``write_chunks`` and ``publishing``, in that order.
"""

import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from memories import staging
from memories.models import Attributes, AuditEvent, ImportBatch, Memory, Revision, Tag
from memories.selectors.unfinished_imports import batch_rows, is_dead, this_host, unpublished_batches
from memories.services.erasure import delete_attribute_rows, delete_revisions
from memories.services.revisions import audit
from memoryproject import dialect
from search import indexing

logger = logging.getLogger(__name__)

# Rows removed per transaction when a batch is taken out, so other writers get the lock between.
REMOVE_CHUNK = 500


def batch_begin(*, actor: str, interface: str, trusted: bool) -> ImportBatch:
    """Open a batch for an import this process is about to write."""
    now = dialect.now()
    with transaction.atomic():
        return ImportBatch.objects.create(
            trusted=trusted,
            actor=actor,
            interface=interface,
            started_at=now,
            progress_at=now,
            host=this_host(),
            pid=os.getpid(),
        )


def batch_progress(batch: ImportBatch) -> None:
    """Record that a chunk of ``batch`` was written (inside that chunk's transaction): it is alive."""
    ImportBatch.objects.filter(pk=batch.pk).update(progress_at=dialect.now())


def batch_publish(batch: ImportBatch) -> dt.datetime:
    """Make every row of ``batch`` count, in the caller's (final, short) transaction; return the publish time.

    The clock is read under the write lock, after every row of the batch was written,
    so rows on the server clock all count from a time after their own known_at.
    """
    now = dialect.locked_now()
    counts_from = ImportBatch.EARLIEST if batch.trusted else now
    ImportBatch.objects.filter(pk=batch.pk).update(
        state=ImportBatch.Status.PUBLISHED, published_at=now, progress_at=now, counts_from=counts_from
    )
    # The search snapshots hold which rows count: visibility changed without new rows.
    indexing.import_published()
    return now


# Items in the first chunk; each next chunk is sized from the last one's time so that a
# transaction takes about CHUNK_SECONDS, and a writer waiting for the lock gets it soon.
# Small: an item remembered one by one (Markdown, an untrusted import) costs far more than
# one written in bulk (a trusted import), and the first chunk has no timing to go by.
STAGED_CHUNK = 10
STAGED_CHUNK_RANGE = (10, 5000)
CHUNK_SECONDS = 0.2
# Seconds at least between two chunks' transactions: a writer waiting in line for the write lock
# (another process retries every millisecond, memoryproject.sqlite_backend.writelock) gets it first.
LOCK_GAP = 0.01


@contextmanager
def import_batch(*, actor: str, interface: str, trusted: bool, dry_run: bool) -> Iterator[ImportBatch]:
    """Open a batch and run the block as its writer; its rows are taken out on any failure, and after a dry run."""
    batch = batch_begin(actor=actor, interface=interface, trusted=trusted)
    try:
        with staging.writing(batch.pk):
            yield batch
    except BaseException:
        _take_out(batch)
        raise
    if dry_run:
        _take_out(batch)


def _take_out(batch: ImportBatch) -> None:
    try:
        # A failure after the publishing transaction committed (an interrupt) leaves the import whole.
        if ImportBatch.objects.filter(pk=batch.pk, state=ImportBatch.Status.WRITING).exists():
            batch_abandon(batch)
    except Exception:  # noqa: BLE001 - the rows stay unpublished: purge removes them
        logger.exception("Could not remove the rows of unpublished import batch %s; 'manage.py purge' will.", batch.pk)


def write_chunks(
    batch: ImportBatch, items: list, *, texts: Callable[[list], list[tuple[str, str]]], write: Callable[[list], None]
) -> None:
    """Call ``write(chunk)`` on ``items`` a chunk per short transaction, unseen in ``batch``.

    ``texts(chunk)``: the (title, content) of the revisions the chunk may add, embedded
    before its transaction takes the write lock. Between two transactions, and before
    the one that publishes, a writer waiting for the lock gets it.
    """
    released, start, size = None, 0, STAGED_CHUNK
    while start < len(items):
        chunk = items[start : start + size]
        start += len(chunk)
        indexing.prepare_many(texts(chunk))
        _leave_a_gap(released)
        # Indexed in one batch at the end of each transaction: far cheaper than per revision.
        with transaction.atomic(), indexing.batched():
            began = time.monotonic()  # once the lock is held
            write(chunk)
            batch_progress(batch)
        released = time.monotonic()
        low, high = STAGED_CHUNK_RANGE
        # At most doubled: a small chunk's time is mostly fixed costs.
        size = max(low, min(high, 2 * len(chunk), int(len(chunk) * CHUNK_SECONDS / max(released - began, 0.001))))
    _leave_a_gap(released)


def _leave_a_gap(released: float | None) -> None:
    """Wait until LOCK_GAP has passed since the last chunk let the lock go, so a waiting writer takes it."""
    if released is None or connection.in_atomic_block:  # inside a caller's transaction no one else can write
        return
    time.sleep(max(0.0, LOCK_GAP - (time.monotonic() - released)))


@contextmanager
def publishing(batch: ImportBatch, *, dry_run: bool) -> Iterator[None]:
    """The import's last transaction: the block writes what cannot wait unseen, then ``batch`` is published.

    Keep the block short: every other writer waits for it. A dry run rolls it back instead.
    """
    with transaction.atomic(), indexing.batched():
        yield
        if dry_run:
            transaction.set_rollback(True)
        else:
            batch_publish(batch)


def batch_abandon(batch: ImportBatch, *, progress: Callable[[int], None] | None = None) -> int:
    """Remove every row ``batch`` wrote (revisions, their indexes, memories, tag links, audit events) and the batch.

    In short transactions: the batch stays unpublished until its row goes, last, so
    nothing of it is ever visible, and an interrupted removal is taken up again by the
    next purge. Returns the number of revisions removed.
    """
    removed = 0
    revisions = Revision.all_objects.filter(batch=batch)
    while True:
        with transaction.atomic():
            # Newest first: a tombstone goes before the revision it hides (ids grow with writes).
            ids = list(revisions.order_by("-pk").values_list("pk", flat=True)[:REMOVE_CHUNK])
            if not ids:
                break
            delete_revisions(ids)
        removed += len(ids)
        if progress:
            progress(len(ids))
    # The import's attribute rows, its memories' and any it added to memories stored before it.
    attributes = Attributes.all_objects.filter(batch=batch)
    while True:
        with transaction.atomic():
            ids = list(attributes.order_by("pk").values_list("pk", flat=True)[:REMOVE_CHUNK])
            if not ids:
                break
            links = Attributes.tags.through.objects.filter(attributes_id__in=ids)
            tag_ids = set(links.values_list("tag_id", flat=True))
            delete_attribute_rows(Attributes.all_objects.filter(pk__in=ids))
            _drop_unused_tags(tag_ids)
    memories = Memory.all_objects.filter(batch=batch)
    while True:
        with transaction.atomic():
            ids = list(memories.order_by("pk").values_list("pk", flat=True)[:REMOVE_CHUNK])
            if not ids:
                break
            # Revisions other writers added to these memories could only come through the import's own
            # view of them; none can exist, so the memories are empty now.
            tag_ids = set(Memory.tags.through.objects.filter(memory_id__in=ids).values_list("tag_id", flat=True))
            Memory.tags.through.objects.filter(memory_id__in=ids).delete()
            AuditEvent.objects.filter(memory_id__in=ids).delete()
            Memory.all_objects.filter(pk__in=ids).delete()
            _drop_unused_tags(tag_ids)
    with transaction.atomic():
        ImportBatch.objects.filter(pk=batch.pk).delete()
    return removed


def _drop_unused_tags(tag_ids) -> None:
    """Delete the tags of ``tag_ids`` that no memory and no attribute row carries: only the import's rows used them."""
    Tag.objects.filter(pk__in=tag_ids).filter(
        ~Exists(Memory.tags.through.objects.filter(tag_id=OuterRef("pk"))),
        ~Exists(Attributes.tags.through.objects.filter(tag_id=OuterRef("pk"))),
    ).delete()


def purge_dead_imports(*, actor: str, interface: str, dry_run: bool = False) -> dict:
    """Remove the rows of every import whose writer died before publishing; return what was found and removed."""
    now = dialect.now()
    dead = [batch for batch in unpublished_batches() if is_dead(batch, now=now)]
    totals = {"imports": len(dead), "memories": 0, "revisions": 0}
    for batch in dead:
        counts = batch_rows(batch)
        totals["memories"] += counts["memories"]
        totals["revisions"] += counts["revisions"]
        if dry_run:
            continue
        batch_abandon(batch)
        with transaction.atomic():
            audit(
                actor=actor,
                interface=interface,
                action="purge_import",
                memory_id=None,
                at=dialect.now(),
                batch_id=batch.pk,
                started_at=batch.started_at.isoformat(),
                import_actor=batch.actor,
                **counts,
            )
    return totals
