"""Removing text for good: erasing one memory, and purging revisions whose TTL has run out.

These are the only writes that delete revisions. The append-only triggers (memories
migration 0002) let a DELETE or UPDATE on memories_revision through only while a row
exists in memories_erasuregate; ``_gate_open`` inserts that row and removes it again
inside one transaction, so no other connection ever sees the gate open.

Deleting a revision row also removes its terms from both FTS5 indexes (their
AFTER DELETE triggers, with FTS5 secure-delete on), and the connection's
``secure_delete`` pragma zeroes the freed pages. PostgreSQL zeroes nothing: erased
text is unreachable once committed, and leaves the files only as far as VACUUM takes
it (``_vacuum_text_tables`` says how far).
"""

import contextlib
import datetime as dt
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q

from knowledge import facts
from knowledge.models import Fact
from memories import validation
from memories.models import Attributes, AuditEvent, ErasureGate, ErasureReceipt, Memory, Revision, Tag
from memories.services.revisions import audit, check_interface, get_memory
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput
from memoryproject.timeparse import parse_optional_instant
from search import indexing
from telemetry import selectors as telemetry_selectors
from telemetry import services as telemetry

logger = logging.getLogger(__name__)

PURGE_BATCH_SIZE = 500


@contextlib.contextmanager
def _gate_open():
    """Let UPDATE and DELETE on revisions through, only inside this (nested) transaction."""
    with transaction.atomic():
        gate = ErasureGate.objects.create(opened_at=dialect.now())
        yield
        # On an exception the savepoint rolls back, and the gate row with it.
        gate.delete()


def delete_revisions(revision_ids) -> int:
    """Delete these revisions under the gate; tombstones go first, since ``hides`` protects what they hide.

    The FTS triggers follow each row. Anything else keyed by revision id and holding
    text or vectors (postings, fact rows) must be deleted here too, so erase, purge and
    a dead import's removal all reach it.
    """
    revision_ids = list(revision_ids)
    indexing.unindex_revisions(revision_ids)
    facts.delete_facts(revision_ids)
    with _gate_open():
        # all_objects: an import's unpublished rows are deleted by id too (purge of a dead import).
        tombstones, _ = Revision.all_objects.filter(pk__in=revision_ids, tombstone=True).delete()
        others, _ = Revision.all_objects.filter(pk__in=revision_ids, tombstone=False).delete()
    return tombstones + others


def delete_attribute_rows(rows) -> None:
    """Delete these attribute rows (a queryset of ``Attributes.all_objects``) and their tag links, under the gate.

    Only for memories that go entirely (erase, purge, a dead import's removal): the rows hold tag names.
    """
    with _gate_open():
        rows.delete()


def _truncate_wal() -> None:
    """Copy the WAL into the database file and empty it, so the old pages holding erased text are gone.

    Until a checkpoint, the pre-erasure pages still sit in the -wal file (and the
    database file itself still holds them). TRUNCATE waits up to the busy timeout
    for readers on older snapshots; if they outlast it the text stays until the next
    checkpoint, so that is logged.
    """
    if connection.is_in_memory_db():
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _, _ = cursor.fetchone()
    if busy:
        logger.warning(
            "After an erasure the WAL could not be emptied (a reader was busy); the erased text "
            "stays in the -wal file until the next checkpoint."
        )


def _text_tables(cursor) -> list[str]:
    """The tables erasure and purge delete or blank text in (the search tables that exist so far)."""
    models = (Revision, Memory, Memory.tags.through, Attributes, Attributes.tags.through, Tag, AuditEvent, Fact)
    names = [model._meta.db_table for model in models] + telemetry_selectors.tables_with_queries()
    names += ["search_document", "search_posting", "search_posting_tail", "search_vectors"]
    present = dialect.existing(cursor, names)
    return [name for name in names if name in present]


def _vacuum_text_tables(*, full: bool) -> None:
    """PostgreSQL: VACUUM (FULL with ``full``) the tables that held erased or purged text; in autocommit.

    PostgreSQL has no secure_delete: a deleted or updated row stays in its page until
    VACUUM frees it, and even then the page keeps the bytes until a new row overwrites
    them. Plain VACUUM (after every erasure) frees the rows without blocking anyone, so the
    text is unreachable and its room reused, but it may still be read from the files.
    VACUUM FULL writes each table anew and drops the old files, but takes an ACCESS
    EXCLUSIVE lock on each table while it does, which stops every recall: only
    ``purge --vacuum``, chosen by an operator, runs it. Neither reaches WAL segments not
    yet recycled, nor archives and replicas.
    """
    with connection.cursor() as cursor:
        tables = _text_tables(cursor)
        # Names from the models and the search module, quoted; VACUUM takes no parameters.
        cursor.execute(
            ("VACUUM (FULL) " if full else "VACUUM ") + ", ".join(connection.ops.quote_name(table) for table in tables)
        )


def _clean_up_after_erasure() -> None:
    """Make the erased rows' text leave the database's files, as far as the engine allows (once it committed)."""
    if dialect.is_postgresql():
        _vacuum_text_tables(full=False)
    else:
        _truncate_wal()


def database_vacuum() -> None:
    """Rebuild the database file so the space that purged rows held goes back to the filesystem.

    VACUUM rewrites the whole file and holds the write lock for as long as that takes:
    every other writer waits. Only ``purge --vacuum`` asks for it. On PostgreSQL: VACUUM
    FULL of the tables purge deletes from, each locked against reads and writes in turn.
    """
    if dialect.is_postgresql():
        _vacuum_text_tables(full=True)
        return
    with connection.cursor() as cursor:
        # VACUUM cannot run inside a transaction; callers run it in autocommit, after the purge committed.
        cursor.execute("VACUUM")
    _truncate_wal()


def database_release_free_pages() -> bool:
    """Give freed pages back to the filesystem without a full VACUUM, where the file allows it; return whether it did.

    Only a file created with ``auto_vacuum = INCREMENTAL`` can; its mode is left as it is
    (changing it needs a VACUUM). Otherwise freed pages stay in the file and new rows reuse them.
    PostgreSQL: a plain VACUUM of the purged tables, so the rows' room is reused now, not when
    autovacuum comes; it gives back only empty pages at a table's end, so it answers False.
    """
    if dialect.is_postgresql():
        _vacuum_text_tables(full=False)
        return False
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        if cursor.fetchone()[0] != 2:  # 0 none, 1 full, 2 incremental
            return False
        cursor.execute("PRAGMA incremental_vacuum")
        cursor.fetchall()
    return True


def memory_erase(*, memory_id: int, actor: str, interface: str, reason: str | None = None) -> ErasureReceipt:
    """Destroy a memory and every revision of it, tombstones included, and return the receipt.

    Unlike forget, nothing stays answerable, not even history: the rows, their FTS
    entries and the memory's tag links are deleted, and so is the query text of the hook
    recalls and injections that returned it (the receipt counts them). The receipt and
    the audit event keep ids and content hashes, never text.
    """
    check_interface(interface)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, like every lifecycle write
        memory = get_memory(memory_id)
        # all_objects: an import still writing may have added revisions; erasure takes them too.
        revisions = list(Revision.all_objects.filter(memory=memory).order_by("id").values_list("id", "content_hash"))
        revision_ids = [revision_id for revision_id, _ in revisions]
        delete_revisions(revision_ids)
        # Telemetry names the memory, and its recalls' and injections' queries can say as much as the text.
        queries_removed = telemetry.memory_traces_erase(memory_id=memory_id)
        history = Attributes.all_objects.filter(memory=memory)
        tag_ids = {
            *memory.tags.values_list("pk", flat=True),
            *Tag.objects.filter(attribute_rows__in=history).values_list("pk", flat=True),
        }
        delete_attribute_rows(history)
        memory.delete()
        # A tag can say as much as the text: drop the ones only this memory used (now or in its history),
        # and the tag names earlier audit events recorded for it.
        Tag.objects.filter(pk__in=tag_ids, memories__isnull=True, attribute_rows__isnull=True).delete()
        AuditEvent.objects.filter(memory_id=memory_id).update(detail={})
        receipt = ErasureReceipt.objects.create(
            erased_at=now,
            actor=actor,
            interface=interface,
            reason=reason,
            memory_id=memory_id,
            namespace=memory.namespace,
            revision_ids=revision_ids,
            content_hashes=[content_hash for _, content_hash in revisions],
            telemetry_queries_removed=queries_removed,
        )
        audit(
            actor=actor,
            interface=interface,
            action="erase",
            memory_id=memory_id,
            at=now,
            receipt_id=receipt.pk,
            revision_ids=revision_ids,
        )
        # robust: the erasure has committed by then; a busy checkpoint (or VACUUM) must not turn it into an error.
        transaction.on_commit(_clean_up_after_erasure, robust=True)
    return receipt


def _purge_batch(expired_ids: list[int], *, now: dt.datetime) -> dict:
    """Purge one batch of expired revisions, and the tombstones and memories they leave behind.

    A tombstone cannot outlive the revision it hides (``hides`` is PROTECT). If the
    memory still has older, unexpired text, dropping the tombstone would bring that
    text back into view, so the tombstone is pointed at the newest such revision
    instead: the memory stays forgotten, and restore brings back text that exists.
    """
    gone = set(expired_ids)
    tombstones = list(
        Revision.objects.filter(tombstone=True, hides_id__in=gone)
        .exclude(pk__in=gone)
        .only("id", "memory_id", "known_at")
    )
    repoint = {}
    for tombstone in tombstones:
        older_text = (
            Revision.objects.filter(memory_id=tombstone.memory_id, tombstone=False, known_at__lte=tombstone.known_at)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            .exclude(pk__in=gone)
            .latest_known()
            .values_list("id", flat=True)
            .first()
        )
        if older_text is None:
            gone.add(tombstone.pk)
        else:
            repoint[tombstone.pk] = older_text
    memory_ids = set(Revision.objects.filter(pk__in=gone).values_list("memory_id", flat=True))
    if repoint:
        with _gate_open():
            for tombstone_id, revision_id in repoint.items():
                Revision.objects.filter(pk=tombstone_id).update(hides_id=revision_id)
    removed = delete_revisions(gone)
    emptied = list(
        Memory.objects.filter(pk__in=memory_ids)
        .filter(~Exists(Revision.objects.filter(memory=OuterRef("pk"))))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    delete_attribute_rows(Attributes.all_objects.filter(memory_id__in=emptied))
    Memory.objects.filter(pk__in=emptied).delete()
    return {
        "revisions": len(expired_ids),
        "tombstones": removed - len(expired_ids),
        "tombstones_repointed": len(repoint),
        "memories": len(emptied),
        "revision_ids": sorted(gone),
        "memory_ids": emptied,
    }


def _purge_telemetry(cutoff: dt.datetime, *, actor: str, interface: str) -> int:
    """Delete the telemetry rows (hook recalls, injections, refused ingests) older than ``cutoff``; count them."""
    with transaction.atomic():
        counts = telemetry.telemetry_purge(before=cutoff)
        removed = sum(counts.values())
        if removed:
            audit(
                actor=actor,
                interface=interface,
                action="purge_telemetry",
                memory_id=None,
                at=dialect.now(),
                older_than=cutoff.isoformat(),
                **counts,
            )
    return removed


def purge_expired(
    *,
    actor: str,
    interface: str,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    batch_size: int = PURGE_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Delete revisions whose TTL ran out by ``now`` (default: the clock), and return the counts.

    Also removed: tombstones of purged revisions, memories left without revisions, and
    telemetry rows more than MEMORY_TELEMETRY_DAYS older than ``now`` (``telemetry``).
    What is visible at ``now`` or later does not change; answers for earlier ``as_of``
    times lose the purged revisions. Batches go oldest expiry
    first, each in its own transaction, so an interrupted purge is safe to re-run.
    ``dry_run`` does the same work and rolls it back, so its counts are exact.
    ``progress(done, total)`` is called after each batch, counting expired revisions.
    """
    check_interface(interface)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size: {batch_size!r} is not a positive integer.", field="batch_size")
    now = parse_optional_instant(now, field="now") or dialect.now()
    totals = {"revisions": 0, "tombstones": 0, "tombstones_repointed": 0, "memories": 0, "telemetry": 0}
    # The partial index revision_expires (expires_at, then rowid) serves both the range and
    # the order; ordering by pk alone makes SQLite walk the whole table instead.
    expired = Revision.objects.filter(expires_at__lte=now).order_by("expires_at", "pk")
    total = expired.count() if progress else 0
    with transaction.atomic() if dry_run else contextlib.nullcontext():
        while True:
            with transaction.atomic():
                batch = list(expired.values_list("pk", flat=True)[:batch_size])
                if not batch:
                    break
                counts = _purge_batch(batch, now=now)
                audit(
                    actor=actor,
                    interface=interface,
                    action="purge",
                    memory_id=None,
                    at=dialect.now(),
                    expired_before=now.isoformat(),
                    revision_ids=counts.pop("revision_ids"),
                    memory_ids=counts.pop("memory_ids"),
                    **counts,
                )
            for name, value in counts.items():
                totals[name] += value
            if progress:
                progress(totals["revisions"], max(total, totals["revisions"]))
        totals["telemetry"] = _purge_telemetry(
            now - dt.timedelta(days=settings.MEMORY_TELEMETRY_DAYS), actor=actor, interface=interface
        )
        if dry_run:
            transaction.set_rollback(True)
    return {**totals, "dry_run": dry_run}
