"""Import batches: an import's rows are written in short transactions and published in one.

Holding the write lock for a whole import would stall every other writer for its
length, so an import writes a chunk per transaction. Its memories and revisions carry
its ``ImportBatch`` and count nowhere until ``batch_publish`` flips the batch in one
short transaction (``memories.models.counted_rows``). An import that fails is taken
out again by ``batch_abandon``; one whose process died stays ``writing``, and
``purge_dead_imports`` (``manage.py purge``) removes it. ``doctor`` reports it.
"""

import datetime as dt
import logging
import os
import socket
from collections.abc import Callable

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from memories.models import Attributes, AuditEvent, ImportBatch, Memory, Revision, Tag
from memories.services.erasure import delete_attribute_rows, delete_revisions
from memories.services.lifecycle import audit
from search import indexing

logger = logging.getLogger(__name__)

# A batch still writing counts as dead when its process is gone (same host), or when it
# has committed nothing for this long (another host, or a pid reused since).
STALE_AFTER = dt.timedelta(hours=1)
# Rows removed per transaction when a batch is taken out, so other writers get the lock between.
REMOVE_CHUNK = 500


def _host() -> str:
    return socket.gethostname()[:255]


def batch_begin(*, actor: str, interface: str, trusted: bool) -> ImportBatch:
    """Open a batch for an import this process is about to write."""
    now = timezone.now()
    with transaction.atomic():
        return ImportBatch.objects.create(trusted=trusted, actor=actor, interface=interface, started_at=now,
                                          progress_at=now, host=_host(), pid=os.getpid())


def batch_progress(batch: ImportBatch) -> None:
    """Record that a chunk of ``batch`` was written (inside that chunk's transaction): it is alive."""
    ImportBatch.objects.filter(pk=batch.pk).update(progress_at=timezone.now())


def batch_publish(batch: ImportBatch) -> dt.datetime:
    """Make every row of ``batch`` count, in the caller's (final, short) transaction; return the publish time.

    The clock is read under the write lock, after every row of the batch was written,
    so rows on the server clock all count from a time after their own known_at.
    """
    now = timezone.now()
    counts_from = ImportBatch.EARLIEST if batch.trusted else now
    ImportBatch.objects.filter(pk=batch.pk).update(state=ImportBatch.Status.PUBLISHED, published_at=now,
                                                  progress_at=now, counts_from=counts_from)
    # The search snapshots hold which rows count: visibility changed without new rows.
    indexing.import_published()
    return now


def is_dead(batch: ImportBatch, *, now: dt.datetime | None = None) -> bool:
    """Whether ``batch``, still writing, has no live writer: its process is gone, or it went quiet too long."""
    if batch.state != ImportBatch.Status.WRITING:
        return False
    now = now or timezone.now()
    if now - batch.progress_at > STALE_AFTER:
        return True
    if batch.host != _host():
        return False
    try:
        os.kill(batch.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a process of another user holds the pid: alive
        return False
    return False


def unpublished_batches() -> list[ImportBatch]:
    """Batches still writing, oldest first."""
    return list(ImportBatch.objects.filter(state=ImportBatch.Status.WRITING).order_by("pk"))


def batch_rows(batch: ImportBatch) -> dict:
    """How many memories and revisions ``batch`` has written."""
    return {"memories": Memory.all_objects.filter(batch=batch).count(),
            "revisions": Revision.all_objects.filter(batch=batch).count()}


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
        ~Exists(Attributes.tags.through.objects.filter(tag_id=OuterRef("pk")))).delete()


def purge_dead_imports(*, actor: str, interface: str, dry_run: bool = False) -> dict:
    """Remove the rows of every import whose writer died before publishing; return what was found and removed."""
    now = timezone.now()
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
            audit(actor=actor, interface=interface, action="purge_import", memory_id=None, at=timezone.now(),
                  batch_id=batch.pk, started_at=batch.started_at.isoformat(), import_actor=batch.actor, **counts)
    return totals
