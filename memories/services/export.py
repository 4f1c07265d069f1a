"""The JSON export: every memory with every revision known by a cutoff, one document.

The document (format ``memory-export``, version 1) is a header and a ``memories`` list,
each memory with every revision known by the cutoff, oldest first. A tombstone names
the revision it hides by its position in that list, so the document does not depend on
the row ids of the database it came from. ``memories.services.imports`` reads it back.
"""

import json
from collections.abc import Callable, Iterator

from django.db.models import Exists, OuterRef, Prefetch, Q

from memories import selectors, validation
from memories.models import Attributes, Lifecycle, Memory, Revision, State, Tag
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput
from memoryproject.timeparse import format_instant, parse_optional_instant

EXPORT_FORMAT = "memory-export"
EXPORT_VERSION = 1
EXPORT_BATCH_SIZE = 500
# Ids in one hand-picked export: a page or a few of the admin's list, never the whole store.
EXPORT_SELECTED_MAX = 10_000

# The document's fields, which an import accepts and no others.
DOCUMENT_FIELDS = {"format", "version", "exported_at", "as_of", "namespace", "memories"}
# A memory's confidence (memories.confidence) at the cutoff is information for the reader: import ignores it.
MEMORY_FIELDS = {"namespace", "key", "kind", "tags", "state", "created_at", "confidence", "revisions"}
TIME_FIELDS = ("known_at", "valid_from", "valid_to", "expires_at")
TEXT_FIELDS = (
    "title",
    "content",
    "subject",
    "predicate",
    "object",
    "source",
    "content_hash",
    "reason",
    "author",
    "interface",
)
# The writer's stated confidence, 0..1, or null when not stated.
NUMBER_FIELDS = ("confidence",)
REVISION_FIELDS = {*TIME_FIELDS, "tombstone", "hides", *TEXT_FIELDS, *NUMBER_FIELDS}


def _memory_ids(values) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, set, frozenset)):
        raise InvalidInput("memory_ids: expected a list of memory ids.", field="memory_ids")
    if any(isinstance(value, bool) or not isinstance(value, int) or value < 1 for value in values):
        raise InvalidInput("memory_ids: every id must be a positive integer.", field="memory_ids")
    if len(values) > EXPORT_SELECTED_MAX:
        raise InvalidInput(
            f"memory_ids: {len(values)} ids is over the limit of {EXPORT_SELECTED_MAX}; export a namespace instead.",
            field="memory_ids",
        )
    return sorted(set(values))


def memories_export(
    *,
    namespace: str | None = None,
    memory_ids=None,
    as_of=None,
    batch_size: int = EXPORT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[str]:
    """Return the export document as an iterator of text chunks, reading ``batch_size`` memories at a time.

    ``namespace`` and ``memory_ids`` (a hand-picked set, as the admin exports) narrow it.
    The arguments are checked at once, so a bad one raises before the caller opens
    its output; rows are read only as the chunks are consumed, in primary-key order.
    Revisions and attribute rows never change, so a cutoff in the past gives the same
    memories on every run: each with the namespace, kind and tags it had at the cutoff.
    """
    if namespace is not None:
        namespace = validation.namespace(namespace)
    ids = _memory_ids(memory_ids) if memory_ids is not None else None
    asked = parse_optional_instant(as_of, field="as_of")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size: {batch_size!r} is not a positive integer.", field="batch_size")
    return _export(namespace, ids, asked, batch_size=batch_size, progress=progress)


def _export(namespace, ids, asked, *, batch_size, progress) -> Iterator[str]:
    """The document, from its first chunk's reading of the clock (nothing runs until that chunk is asked for)."""
    now = dialect.now()
    cutoff = asked or now
    memories = Memory.objects.filter(Exists(Revision.objects.filter(memory=OuterRef("pk")).known_by(cutoff)))
    if namespace is not None:
        # In the namespace at the cutoff; a memory without attribute rows (written outside the services) by its own.
        there = Exists(Attributes.objects.as_of(cutoff).filter(memory=OuterRef("pk"), namespace=namespace))
        rowless = ~Exists(Attributes.all_objects.filter(memory=OuterRef("pk")))
        memories = memories.filter(Q(there) | (Q(namespace=namespace) & Q(rowless)))
    if ids is not None:
        memories = memories.filter(pk__in=ids)
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": format_instant(now),
        "as_of": format_instant(cutoff),
        "namespace": namespace,
    }
    yield from _export_chunks(memories, header=header, cutoff=cutoff, batch_size=batch_size, progress=progress)


def _export_chunks(memories, *, header, cutoff, batch_size, progress) -> Iterator[str]:
    total = memories.count() if progress else 0
    revisions = Prefetch(
        "revisions", queryset=Revision.objects.known_by(cutoff).order_by("known_at", "id"), to_attr="exported_revisions"
    )
    # A memory's tags as of the cutoff are its attribute row's (Memory.tags are today's).
    attributes = Prefetch(
        "attribute_rows",
        to_attr="exported_attributes",
        queryset=Attributes.objects.as_of(cutoff).prefetch_related(
            Prefetch("tags", queryset=Tag.objects.order_by("slug"))
        ),
    )
    yield json.dumps(header, ensure_ascii=False)[:-1] + ', "memories": ['
    done, after = 0, 0
    while True:
        # Keyset pagination: each batch is one indexed range scan, however deep into the table.
        batch = list(memories.filter(pk__gt=after).order_by("pk").prefetch_related(revisions, attributes)[:batch_size])
        if not batch:
            break
        scores = _confidence_at(batch, cutoff)
        for memory in batch:
            entry = _memory_entry(memory, confidence=scores.get(memory.pk))
            yield ("\n" if done == 0 else ",\n") + json.dumps(entry, ensure_ascii=False)
            done += 1
        after = batch[-1].pk
        if progress:
            progress(done, total)
    yield "\n]}\n"


def _confidence_at(batch: list[Memory], cutoff) -> dict[int, float]:
    """{memory id: its confidence at the cutoff (about then)} for the memories of ``batch`` visible then."""
    shown = list(Revision.objects.filter(memory__in=batch).visible(as_of=cutoff).values_list("pk", flat=True))
    return {record.id: record.confidence for record in selectors.records_with_confidence(shown, as_of=cutoff).values()}


def _memory_entry(memory: Memory, *, confidence: float | None) -> dict:
    revisions = memory.exported_revisions
    position = {revision.pk: index for index, revision in enumerate(revisions)}
    # Namespace, kind, tags and lifecycle state at the cutoff; today's for a memory without attribute rows then.
    then = memory.exported_attributes[0] if memory.exported_attributes else memory
    # Forgotten at the cutoff when a tombstone came last; else the recorded state (stale is read, never stored).
    state = (
        State.FORGOTTEN.value if revisions[-1].tombstone else (Lifecycle.ACTIVE.value if then is memory else then.state)
    )
    return {
        "namespace": then.namespace,
        "key": memory.key,
        "kind": then.kind,
        "tags": [tag.name for tag in then.tags.order_by("slug")]
        if then is memory
        else [tag.name for tag in then.tags.all()],
        "state": state,
        "created_at": format_instant(memory.created_at),
        "confidence": confidence,
        "revisions": [
            {
                **{name: format_instant(getattr(revision, name)) for name in TIME_FIELDS},
                "tombstone": revision.tombstone,
                "hides": position.get(revision.hides_id),
                **{name: getattr(revision, name) for name in TEXT_FIELDS},
                **{name: getattr(revision, name) for name in NUMBER_FIELDS},
            }
            for revision in revisions
        ],
    }
