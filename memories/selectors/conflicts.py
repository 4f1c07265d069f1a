"""Reads of conflicts (``knowledge.contradictions`` finds them): the review list, and the conflicts recall hits and get
carry.

Each side of a conflict comes with its provenance (author, interface, source, known_at),
read from the revision that states it. Resolving is ``memories.services.resolution``.
"""

import datetime as dt

from knowledge import contradictions
from memories import validation
from memories.models import AuditEvent, Revision
from memories.records.conflict_records import ConflictList, ConflictRecord, ConflictSide
from memories.records.memory_record import ConflictWith, MemoryRecord, Provenance

CONFLICTS_LIMIT_DEFAULT = 50
CONFLICTS_LIMIT_MAX = 200


def _revisions(revision_ids) -> dict[int, Revision]:
    """The revisions with these ids, their memories joined (primary-key lookups)."""
    return Revision.objects.select_related("memory").in_bulk(sorted(set(revision_ids)))


def _provenance(revision: Revision) -> Provenance:
    return Provenance(
        author=revision.author, interface=revision.interface, source=revision.source, known_at=revision.known_at
    )


def _side(revision: Revision) -> ConflictSide:
    return ConflictSide(
        memory_id=revision.memory_id,
        revision_id=revision.pk,
        key=revision.memory.key,
        title=revision.title,
        content=revision.content,
        subject=revision.subject,
        predicate=revision.predicate,
        object=revision.object,
        valid_from=revision.valid_from,
        valid_to=revision.valid_to,
        provenance=_provenance(revision),
    )


def memory_conflicts(
    *, namespace=None, as_of=None, valid_at=None, limit: int = CONFLICTS_LIMIT_DEFAULT
) -> ConflictList:
    """Return the conflicts among the facts visible at (as_of, valid_at) in ``namespace`` (a name, a list, or None
    for all), both sides with their provenance."""
    namespaces = validation.namespace_names(namespace)
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    pairs = contradictions.find_conflicts(namespaces=namespaces, as_of=as_of_time, valid_at=valid_time)
    shown = pairs[:limit]
    revisions = _revisions([side.revision_id for pair in shown for side in (pair.left, pair.right)])
    return ConflictList(
        as_of=as_of_time,
        valid_at=valid_time,
        total=len(pairs),
        conflicts=[
            ConflictRecord(
                id=pair.id,
                namespace=pair.namespace,
                subject=pair.subject,
                predicate=pair.predicate,
                left=_side(revisions[pair.left.revision_id]),
                right=_side(revisions[pair.right.revision_id]),
            )
            for pair in shown
        ],
    )


def with_conflicts(records: list[MemoryRecord], *, as_of: dt.datetime, valid_at: dt.datetime) -> list[MemoryRecord]:
    """``records`` (visible at (as_of, valid_at)), each with the conflicts its fact is in at that point.

    Records without a triple, or whose predicate is not single-valued, cost no lookup.
    """
    probes = [
        contradictions.Probe(
            memory_id=record.id,
            revision_id=record.revision_id,
            namespace=record.namespace,
            subject=record.subject or "",
            predicate=record.predicate or "",
            object=record.object or "",
        )
        for record in records
        if record.subject
    ]
    found = contradictions.conflicts_of(probes, as_of=as_of, valid_at=valid_at) if probes else {}
    if not found:
        return records
    revisions = _revisions([*found, *(side.revision_id for sides in found.values() for side in sides)])
    shown = []
    for record in records:
        sides = found.get(record.revision_id)
        if sides:
            own = _provenance(revisions[record.revision_id])
            record = record.model_copy(
                update={
                    "conflicts": [
                        ConflictWith(
                            conflict_id=contradictions.conflict_id(record.id, side.memory_id),
                            memory_id=side.memory_id,
                            revision_id=side.revision_id,
                            object=revisions[side.revision_id].object,
                            provenance=_provenance(revisions[side.revision_id]),
                            own_provenance=own,
                        )
                        for side in sides
                    ]
                }
            )
        shown.append(record)
    return shown


def splits_of(*, memory_id: int) -> dict[int, tuple[str, str]]:
    """Return {revision id: (conflict id, boundary)} for each revision of ``memory_id`` that a split appended.

    A split writes a tombstone and a re-assertion, as any narrowing of validity does; only the
    resolution's audit event (``memories.services.resolution``) says that a split wrote them.
    """
    events = AuditEvent.objects.filter(memory_id=memory_id, action="resolve_conflict", detail__resolution="split")
    return {
        revision_id: (event.detail["conflict_id"], event.detail["boundary"])
        for event in events
        for revision_id in event.detail.get("revision_ids", [])
    }
