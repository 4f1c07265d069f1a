"""Confidence per memory: how far a reader may rely on what a memory shows, worked out at each read.

Derived, never stored: the answer at (as_of, valid_at) reads only what is visible there,
like everything else. ``confidence`` is the formula over explicit inputs (docs/concepts.md,
Confidence, has the table of worked cases); ``with_confidence`` gathers the inputs of some
visible records and fills in their ``confidence``:

1. **Source reliability** (``RELIABILITY``): ``extracted`` (learn's revisions, whose source starts
   with ``learn:``), else ``import`` (written by an untrusted import: a trusted one restores the
   history, so its revisions keep their recorded interface), else ``person`` (admin, cli) or
   ``agent`` (api, mcp: API keys).
2. **The writer's stated confidence** can only lower it: base = min(reliability, stated).
3. **Age**: times 0.5 ** (age / half-life of the memory's kind), the age counted from when the
   visible revision was learned to ``as_of`` (``MEMORY_CONFIDENCE_HALF_LIFE_DAYS``; a kind not
   named does not decay).
4. **Corroboration**: each other author whose memory shows the same fact (the same triple in
   normal form) in the same namespace then closes ``CORROBORATION_GAIN`` of the gap to 1; at
   most ``CORROBORATION_MAX`` authors count. The memory's own author never corroborates itself.
5. **Conflicts**: an open conflict (``knowledge.contradictions``) multiplies it by ``CONFLICT_FACTOR``.

The result is rounded to ``DIGITS`` places, and recall's ``min_confidence`` compares that value.
"""

import datetime as dt
from dataclasses import asdict, dataclass

from django.conf import settings

from knowledge.contradictions import Probe
from knowledge.corroboration import same_facts
from memories.models import Interface, Revision
from memories.records.memory_record import MemoryRecord
from memories.selectors import conflicts

PERSON, AGENT, IMPORT, EXTRACTED = "person", "agent", "import", "extracted"
# How far a memory is relied on by where it came from, before anything else counts.
RELIABILITY = {PERSON: 0.9, AGENT: 0.7, IMPORT: 0.6, EXTRACTED: 0.5}
PEOPLE = (Interface.ADMIN.value, Interface.CLI.value)
# learn's sources read "learn: <where> chars A-B" (memories.services.learn.learned_source).
EXTRACTED_PREFIX = "learn: "
CORROBORATION_GAIN = 0.5
CORROBORATION_MAX = 3
CONFLICT_FACTOR = 0.5
DIGITS = 3


@dataclass(frozen=True)
class Inputs:
    """What a memory's confidence is worked out from, at one point in time."""

    source: str  # person, agent, import or extracted
    stated: float | None  # the writer's stated confidence; None: not stated
    age_days: float  # from when the visible revision was learned to as_of
    half_life_days: int | None  # of the memory's kind then; None: it does not decay
    corroborating_authors: int  # other authors showing the same fact in the namespace then
    conflicts: int  # open conflicts the memory's fact is in then


@dataclass(frozen=True)
class Provenance:
    """Where one revision came from: what its source reliability and its corroboration are read from."""

    interface: str
    source: str
    author: str
    untrusted_import: bool  # written by an import that did not restore a trusted history

    @classmethod
    def of(cls, interface: str, source: str, author: str, batch_trusted) -> "Provenance":
        """From a revision's columns and its import batch's ``trusted`` (null: written outside an import)."""
        return cls(interface, source, author, untrusted_import=batch_trusted is not None and not batch_trusted)


def source_of(*, interface: str, source: str, untrusted_import: bool) -> str:
    """The source class of a revision written through ``interface`` with ``source``."""
    if source.startswith(EXTRACTED_PREFIX):
        return EXTRACTED
    if untrusted_import:
        return IMPORT
    return PERSON if interface in PEOPLE else AGENT


def confidence(inputs: Inputs) -> float:
    """The confidence the inputs give, from 0 to 1 (the module's docstring says how)."""
    value = RELIABILITY[inputs.source]
    if inputs.stated is not None:
        value = min(value, inputs.stated)
    if inputs.half_life_days:
        value *= 0.5 ** (max(inputs.age_days, 0.0) / inputs.half_life_days)
    value = 1 - (1 - value) * (1 - CORROBORATION_GAIN) ** min(inputs.corroborating_authors, CORROBORATION_MAX)
    if inputs.conflicts:
        value *= CONFLICT_FACTOR
    return round(value, DIGITS)


def _probe(record: MemoryRecord) -> Probe:
    return Probe(
        memory_id=record.id,
        revision_id=record.revision_id,
        namespace=record.namespace,
        subject=record.subject or "",
        predicate=record.predicate or "",
        object=record.object or "",
    )


def with_confidence(
    records: list[MemoryRecord],
    *,
    as_of: dt.datetime,
    valid_at: dt.datetime,
    provenance: dict[int, Provenance] | None = None,
) -> list[MemoryRecord]:
    """``records`` (visible at (as_of, valid_at)), each with its conflicts, its ``confidence`` and the inputs it
    came from (``confidence_inputs``, for recall's explain).

    ``provenance``: what the caller already read, by revision id. The rest (the corroborating
    revisions', at least) is one primary-key read; only records with a triple cost a fact lookup each.
    """
    records = conflicts.with_conflicts(records, as_of=as_of, valid_at=valid_at)
    if not records:
        return records
    same = same_facts([_probe(record) for record in records if record.subject], as_of=as_of, valid_at=valid_at)
    provenance = dict(provenance or {})
    missing = (
        {record.revision_id for record in records} | {side.revision_id for sides in same.values() for side in sides}
    ) - provenance.keys()
    if missing:
        # Primary-key lookups; the batch join is null for revisions written outside an import.
        provenance.update(
            (pk, Provenance.of(*columns))
            for pk, *columns in Revision.all_objects.filter(pk__in=sorted(missing)).values_list(
                "pk", "interface", "source", "author", "batch__trusted"
            )
        )
    half_lives = settings.MEMORY_CONFIDENCE_HALF_LIFE_DAYS
    shown = []
    for record in records:
        origin = provenance[record.revision_id]
        others = {provenance[side.revision_id].author for side in same.get(record.revision_id, ())} - {origin.author}
        inputs = Inputs(
            source=source_of(
                interface=origin.interface, source=origin.source, untrusted_import=origin.untrusted_import
            ),
            stated=record.stated_confidence,
            age_days=(as_of - record.known_at).total_seconds() / 86400,
            half_life_days=half_lives.get(record.kind),
            corroborating_authors=len(others),
            conflicts=len(record.conflicts or ()),
        )
        shown.append(
            record.model_copy(
                update={
                    "confidence": confidence(inputs),
                    "confidence_inputs": {**asdict(inputs), "age_days": round(inputs.age_days, 2)},
                }
            )
        )
    return shown
