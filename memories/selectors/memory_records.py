"""Memory records built from revision rows: a revision's memory, tags and attributes as of a time, with confidence."""

import datetime as dt
from typing import NamedTuple

from django.db import connection
from django.db.models import Prefetch

from memories import confidence as confidence_rules
from memories import staging
from memories import states as state_rules
from memories.models import Lifecycle, Memory, Revision, Tag
from memories.records.memory_record import MemoryRecord
from memoryproject.timeparse import stored_instant


def tag_prefetch():
    return Prefetch("tags", queryset=Tag.objects.order_by("slug"))


# The columns records_for_revisions reads, in MemoryRecord's order after the ids, then the rest of the revision's
# provenance (memories.confidence.Provenance).
_RECORD_SQL = """
    SELECT r.id, m.id, m.key, m.namespace, m.kind, m.state, r.title, r.content, r.known_at, r.valid_from,
           r.valid_to, r.expires_at, r.source, r.content_hash, r.subject, r.predicate, r.object, r.confidence,
           r.author, m.created_at, r.interface, b.trusted
    FROM memories_revision r JOIN memories_memory m ON m.id = r.memory_id
    LEFT JOIN memories_importbatch b ON b.id = r.batch_id
    WHERE r.id IN ({marks})"""
# Tag names per memory in slug order, as the ORM's records list them.
_TAGS_SQL = """
    SELECT mt.memory_id, t.name FROM memories_memory_tags mt JOIN memories_tag t ON t.id = mt.tag_id
    WHERE mt.memory_id IN ({marks}) ORDER BY mt.memory_id, t.slug"""
# The attribute rows of some memories known by a time, oldest first, each with its tag names in slug order (a row
# without tags once, with a null name); each memory's last counted row is its row then.
_ATTRIBUTES_SQL = """
    SELECT a.memory_id, a.id, a.namespace, a.kind, a.state, a.batch_id, t.name FROM memories_attributes a
    LEFT JOIN memories_attributes_tags at ON at.attributes_id = a.id LEFT JOIN memories_tag t ON t.id = at.tag_id
    WHERE a.memory_id IN ({marks}) AND a.known_at <= %s ORDER BY a.memory_id, a.known_at, a.id, t.slug"""
_IDS_PER_QUERY = 500


def _counting_batches(cursor, as_of: dt.datetime) -> set[int]:
    """Ids of the import batches whose rows count at ``as_of`` (memories.models.counted_rows)."""
    # The batches are few: one scan of their small table.
    cursor.execute(
        "SELECT id FROM memories_importbatch WHERE counts_from <= %s", [connection.ops.adapt_datetimefield_value(as_of)]
    )
    counted = {row[0] for row in cursor.fetchall()}
    own = staging.own_batch_id()
    return counted | {own} if own is not None else counted


def _attributes_as_of(cursor, memory_ids: list[int], as_of: dt.datetime) -> dict[int, tuple[str, str, list[str], str]]:
    """{memory id: (namespace, kind, tag names by slug, recorded state)} as of ``as_of`` (Attributes); memories without
    a row then are left out."""
    chosen: dict[int, tuple[int, str, str, list[str], str]] = {}
    batches = None
    for start in range(0, len(memory_ids), _IDS_PER_QUERY):
        chunk = memory_ids[start : start + _IDS_PER_QUERY]
        # The (memory, known_at, id) index: a few rows per memory, joined to their few tags by the m2m's unique index.
        cursor.execute(
            _ATTRIBUTES_SQL.format(marks=",".join(["%s"] * len(chunk))),
            [*chunk, connection.ops.adapt_datetimefield_value(as_of)],
        )
        for memory_id, row_id, namespace, kind, state, batch_id, tag in cursor.fetchall():
            if batch_id is not None:
                batches = _counting_batches(cursor, as_of) if batches is None else batches
                if batch_id not in batches:
                    continue
            if chosen.get(memory_id, (None,))[0] != row_id:
                chosen[memory_id] = (row_id, namespace, kind, [], state)  # the newest wins
            if tag is not None:
                chosen[memory_id][3].append(tag)
    return {
        memory_id: (namespace, kind, tags, state) for memory_id, (_, namespace, kind, tags, state) in chosen.items()
    }


def records_for_revisions(revision_ids: list[int], *, as_of: dt.datetime | None = None) -> dict[int, MemoryRecord]:
    """The records of these revisions (with their memories' tags), by revision id; missing ids are left out.

    With ``as_of`` (revisions visible then: a recall's hits, a get) the memory's namespace,
    kind and tags are those it carried then, and its state is what a read then says
    (``memories.states``: never forgotten, since the revision is visible). Plain queries:
    search answers build ten or a hundred records per request, and querysets would cost
    more than the rest of a keyword recall.
    """
    return _records(revision_ids, as_of=as_of)[0]


class _RevisionRow(NamedTuple):
    """One row of _RECORD_SQL."""

    revision_id: int
    memory_id: int
    key: str
    namespace: str
    kind: str
    state: str
    title: str
    content: str
    # Times as the raw cursor returns them (naive UTC, or its text): stored_instant reads them.
    known_at: dt.datetime | str
    valid_from: dt.datetime | str
    valid_to: dt.datetime | str | None
    expires_at: dt.datetime | str | None
    source: str
    content_hash: str
    subject: str
    predicate: str
    object: str
    confidence: float | None
    author: str
    created_at: dt.datetime | str
    interface: str
    trusted: bool | None


def _records(
    revision_ids: list[int], *, as_of: dt.datetime | None
) -> tuple[dict[int, MemoryRecord], dict[int, confidence_rules.Provenance]]:
    """records_for_revisions, and beside them each revision's provenance (its confidence's inputs), by revision id."""
    records, provenance = {}, {}
    with connection.cursor() as cursor:
        rows = _revision_rows(cursor, revision_ids)
        memory_ids = sorted({row.memory_id for row in rows})
        then = _attributes_as_of(cursor, memory_ids, as_of) if as_of is not None else {}
        # Memories without a row then (written outside the services) show their current tags.
        tags = _current_tags(cursor, [memory_id for memory_id in memory_ids if memory_id not in then])
    for row in rows:
        records[row.revision_id] = _record(row, then=then.get(row.memory_id), tags=tags, as_of=as_of)
        provenance[row.revision_id] = confidence_rules.Provenance.of(row.interface, row.source, row.author, row.trusted)
    return records, provenance


def _revision_rows(cursor, revision_ids: list[int]) -> list[_RevisionRow]:
    """The rows of these revisions, each with its memory's columns and its import batch's trust."""
    rows = []
    for start in range(0, len(revision_ids), _IDS_PER_QUERY):
        chunk = revision_ids[start : start + _IDS_PER_QUERY]
        # Primary-key lookups, each joined to its memory by primary key.
        cursor.execute(_RECORD_SQL.format(marks=",".join(["%s"] * len(chunk))), chunk)
        rows.extend(_RevisionRow._make(row) for row in cursor.fetchall())
    return rows


def _current_tags(cursor, memory_ids: list[int]) -> dict[int, list[str]]:
    """{memory id: its tag names now, in slug order}; memories without tags are left out."""
    tags: dict[int, list[str]] = {}
    for start in range(0, len(memory_ids), _IDS_PER_QUERY):
        chunk = memory_ids[start : start + _IDS_PER_QUERY]
        # The m2m table's (memory_id, tag_id) unique index serves the IN; tags are few per memory.
        cursor.execute(_TAGS_SQL.format(marks=",".join(["%s"] * len(chunk))), chunk)
        for memory_id, name in cursor.fetchall():
            tags.setdefault(memory_id, []).append(name)
    return tags


def _record(
    row: _RevisionRow,
    *,
    then: tuple[str, str, list[str], str] | None,
    tags: dict[int, list[str]],
    as_of: dt.datetime | None,
) -> MemoryRecord:
    """The record of one revision row; ``then``: its memory's attributes as of ``as_of``, when it had a row then."""
    namespace, kind, state, recorded = row.namespace, row.kind, row.state, Lifecycle.ACTIVE.value
    memory_tags = tags.get(row.memory_id, [])
    if then is not None:
        namespace, kind, memory_tags, recorded = then
    if as_of is not None:
        state = state_rules.read_state(recorded, kind=kind, known_at=stored_instant(row.known_at), as_of=as_of)
    return MemoryRecord(
        id=row.memory_id,
        key=row.key,
        namespace=namespace,
        kind=kind,
        state=state,
        title=row.title,
        content=row.content,
        tags=memory_tags,
        revision_id=row.revision_id,
        known_at=stored_instant(row.known_at),
        valid_from=stored_instant(row.valid_from),
        valid_to=stored_instant(row.valid_to),
        expires_at=stored_instant(row.expires_at),
        source=row.source,
        content_hash=row.content_hash,
        subject=row.subject,
        predicate=row.predicate,
        object=row.object,
        stated_confidence=row.confidence,
        author=row.author,
        created_at=stored_instant(row.created_at),
    )


def records_with_confidence(
    revision_ids: list[int], *, as_of: dt.datetime, valid_at: dt.datetime | None = None
) -> dict[int, MemoryRecord]:
    """records_for_revisions of revisions visible at (as_of, valid_at), each with its conflicts and confidence
    (memories.confidence), by revision id."""
    records, provenance = _records(revision_ids, as_of=as_of)
    return {
        record.revision_id: record
        for record in confidence_rules.with_confidence(
            list(records.values()), as_of=as_of, valid_at=as_of if valid_at is None else valid_at, provenance=provenance
        )
    }


GONE = {"label": "(gone: erased or purged)", "state": "gone"}


def memory_labels(memory_ids: set[int]) -> dict[int, dict]:
    """Return {memory id: {"label", "state"}} for each id: its newest title, else namespace/key; or gone.

    Telemetry rows hold bare ids and its selectors return them so (they serve every door and
    never carry memory text); staff-only pages are where they are given names. Two queries.
    """
    memories = {memory.pk: memory for memory in Memory.objects.filter(pk__in=memory_ids)}
    titles = {}
    for revision in (
        Revision.objects.filter(memory_id__in=memories, tombstone=False)
        .order_by("memory_id", "known_at", "id")
        .values("memory_id", "title")
    ):
        titles[revision["memory_id"]] = revision["title"]  # the newest wins
    return {
        pk: {"label": titles.get(pk) or f"{memories[pk].namespace}/{memories[pk].key}", "state": memories[pk].state}
        if pk in memories
        else GONE
        for pk in memory_ids
    }
