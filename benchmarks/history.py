"""Seeded memory histories over two years, and two ways to load them.

``make_history`` gives, per memory, its revisions oldest first: later revisions, bounded
corrections of past periods, tombstones and TTLs, at the rates in ``RATES``.

- ``import_document`` turns memories into the export format, for ``memories_import``
  (the service path whose throughput the latency benchmark measures).
- ``bulk_load`` writes the same rows with plain INSERTs in large transactions and makes
  them searchable through ``search.indexing.index_revisions``, one call per batch: the
  FTS5 tables follow by trigger as on any write, the postings and vectors are written by
  the engine's own indexing code. It skips what recall does not read (tags, audit
  events) and per-item checks an import makes (duplicates, key conflicts: a generated
  history has none). It exists so that 100k and 1M memories load in minutes.
"""

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

RATES = {
    "later_revision": 0.22,  # memories that get one later revision (a few of those get two)
    "second_revision": 0.04,
    "bounded_correction": 0.03,  # a later revision valid only for a past period
    "tombstone": 0.03,  # forgotten at some point after the last text
    "ttl": 0.08,  # the first revision expires 30-400 days after it was learned
}
KINDS = ["fact", "preference", "decision", "skill", "note", "artifact", "event"]
DAY = dt.timedelta(days=1)


@dataclass
class RevisionSpec:
    known_at: dt.datetime
    content: str = ""
    valid_from: dt.datetime | None = None  # None: from known_at
    valid_to: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    tombstone: bool = False
    hides: int | None = None  # position of the hidden revision in the memory's list


@dataclass
class MemorySpec:
    namespace: str
    key: str
    kind: str
    revisions: list[RevisionSpec] = field(default_factory=list)


def make_history(
    corpus,
    count: int,
    *,
    now: dt.datetime,
    namespace: str,
    key_prefix: str = "m",
    span_days: int = 730,
    rng: np.random.Generator | None = None,
) -> list[MemorySpec]:
    """``count`` memories first learned uniformly over the ``span_days`` before ``now``."""
    rng = rng or corpus.rng
    span = span_days * 86400
    memories = []
    for number in range(count):
        first = now - dt.timedelta(seconds=float(rng.uniform(86400, span)))
        # Whole microseconds, as the database stores them.
        first = first.replace(microsecond=int(rng.integers(0, 1_000_000)))
        text = corpus.text()
        revisions = [RevisionSpec(known_at=first, content=text)]
        if rng.random() < RATES["ttl"]:
            revisions[0].expires_at = first + dt.timedelta(days=float(rng.uniform(30, 400)))
        later = 0
        if rng.random() < RATES["later_revision"]:
            later = 2 if rng.random() < RATES["second_revision"] / RATES["later_revision"] else 1
        known = first
        for _ in range(later):
            known = known + dt.timedelta(seconds=float(rng.uniform(3600, max(7200.0, (now - known).total_seconds()))))
            if known >= now:
                break
            text = corpus.revise(text)
            revisions.append(RevisionSpec(known_at=known, content=text))
        if rng.random() < RATES["bounded_correction"]:
            known = known + dt.timedelta(seconds=float(rng.uniform(3600, max(7200.0, (now - known).total_seconds()))))
            if known < now:
                start = first + dt.timedelta(seconds=float(rng.uniform(0, max(1.0, (known - first).total_seconds()))))
                end = start + dt.timedelta(days=float(rng.uniform(1, 60)))
                revisions.append(
                    RevisionSpec(known_at=known, content=corpus.revise(text), valid_from=start, valid_to=end)
                )
        if rng.random() < RATES["tombstone"]:
            known = known + dt.timedelta(seconds=float(rng.uniform(3600, max(7200.0, (now - known).total_seconds()))))
            if known < now:
                last_text = max(index for index, revision in enumerate(revisions) if not revision.tombstone)
                revisions.append(RevisionSpec(known_at=known, tombstone=True, hides=last_text))
        memories.append(
            MemorySpec(
                namespace=namespace,
                key=f"{key_prefix}{number}",
                kind=KINDS[int(rng.integers(len(KINDS)))],
                revisions=revisions,
            )
        )
    return memories


def import_document(memories: list[MemorySpec]) -> dict:
    """The export format (``memories.services.export``) for a trusted import of ``memories``."""
    items = []
    for memory in memories:
        revisions = []
        for revision in memory.revisions:
            entry = {"known_at": revision.known_at.isoformat(), "tombstone": revision.tombstone}
            if revision.tombstone:
                entry["hides"] = revision.hides
            else:
                entry["content"] = revision.content
            for name in ("valid_from", "valid_to", "expires_at"):
                value = getattr(revision, name)
                if value is not None:
                    entry[name] = value.isoformat()
            revisions.append(entry)
        items.append({"namespace": memory.namespace, "key": memory.key, "kind": memory.kind, "revisions": revisions})
    return {"memories": items}


def bulk_load(memories: list[MemorySpec], *, batch: int = 5000, progress=None) -> int:
    """Write ``memories`` with plain INSERTs, indexing each batch in one call; return the revision count."""
    from django.db import connection, transaction

    from memories import validation
    from search import indexing

    adapt = connection.ops.adapt_datetimefield_value
    written = 0
    for start in range(0, len(memories), batch):
        chunk = memories[start : start + batch]
        with transaction.atomic(), connection.cursor() as cursor:
            # Memory ids come back from RETURNING in insert order (one statement per row keeps that certain).
            memory_ids = []
            for memory in chunk:
                cursor.execute(
                    "INSERT INTO memories_memory (namespace, key, kind, state, created_at) "
                    "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    [
                        memory.namespace,
                        memory.key,
                        memory.kind,
                        "forgotten" if memory.revisions[-1].tombstone else "active",
                        adapt(memory.revisions[0].known_at),
                    ],
                )
                memory_ids.append(cursor.fetchone()[0])
                # Its attribute row, as every service write leaves one (recall reads a hit's namespace, kind and tags
                # then from it).
                cursor.execute(
                    "INSERT INTO memories_attributes (memory_id, known_at, namespace, kind, state, reason, author, "
                    "interface) VALUES (%s, %s, %s, %s, 'active', '', 'bench', 'cli')",
                    [memory_ids[-1], adapt(memory.revisions[0].known_at), memory.namespace, memory.kind],
                )
            # Revisions in rounds by position, so a tombstone's hidden revision already has its id.
            ids: list[list[int]] = [[] for _ in chunk]
            indexed = []
            depth = max(len(memory.revisions) for memory in chunk)
            for position in range(depth):
                for number, memory in enumerate(chunk):
                    if position >= len(memory.revisions):
                        continue
                    revision = memory.revisions[position]
                    hides = ids[number][revision.hides] if revision.tombstone else None
                    cursor.execute(
                        "INSERT INTO memories_revision (memory_id, content, title, subject, predicate, object, "
                        "source, content_hash, known_at, valid_from, valid_to, expires_at, tombstone, hides_id, "
                        "reason, author, interface, embedding_model) "
                        "VALUES (%s, %s, '', '', '', '', '', %s, %s, %s, %s, %s, %s, %s, '', 'bench', 'cli', '') "
                        "RETURNING id",
                        [
                            memory_ids[number],
                            revision.content,
                            validation.content_hash(revision.content),
                            adapt(revision.known_at),
                            adapt(revision.valid_from or revision.known_at),
                            adapt(revision.valid_to),
                            adapt(revision.expires_at),
                            revision.tombstone,
                            hides,
                        ],
                    )
                    revision_id = cursor.fetchone()[0]
                    ids[number].append(revision_id)
                    if not revision.tombstone:
                        indexed.append((revision_id, memory.namespace, "", revision.content))
            indexed.sort()
            indexing.index_revisions(indexed)
            written += len(indexed)
        if progress:
            progress(min(start + batch, len(memories)), len(memories))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # The planner's statistics, as autovacuum gathers them within a minute of a load this size: without
            # them it joins a new revision to its memory by scanning every memory (10 ms at 20k, not 0.1).
            cursor.execute("ANALYZE")
    return written
