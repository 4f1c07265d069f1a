"""Recall: the engine's hits for a query as memory records, within the caller's namespaces, states and confidence."""

import datetime as dt

from django.conf import settings
from django.db.models import Exists, OuterRef

from memories import states as state_rules
from memories import validation
from memories.models import Attributes, Lifecycle, Memory
from memories.records.memory_record import MemoryRecord
from memories.records.recall_results import Hit, RecallResult
from memories.selectors.memory_records import records_with_confidence
from memoryproject.exceptions import InvalidInput, Unavailable
from memoryproject.metrics import RECALL_SECONDS, observed
from memoryproject.timeparse import format_instant
from search import engine, errors, hits
from telemetry import selectors as telemetry

RECALL_LIMIT_DEFAULT = 8
RECALL_MATCH_DEFAULT = "auto"
RECALL_MODE_DEFAULT = "hybrid"
# With min_confidence, recall ranks this many candidates first for every hit it may return, then twice as many
# while too few pass, up to CONFIDENCE_CANDIDATES_MAX.
CONFIDENCE_CANDIDATES_PER_HIT = 4
CONFIDENCE_CANDIDATES_MAX = 400


def _tagged_memories(tags: list[str], namespaces: list[str] | None, *, as_of: dt.datetime | None) -> list[int]:
    """Ids of the memories of ``namespaces`` (None: all) that carry every one of ``tags``, both as of ``as_of``.

    ``as_of`` None is now: a memory's current values are its newest attribute row's, one join cheaper.
    """
    if as_of is None:
        memories = Memory.objects.all() if namespaces is None else Memory.objects.filter(namespace__in=namespaces)
        for slug in sorted({tag.casefold() for tag in tags}):
            memories = memories.filter(tags__slug=slug)
        return list(memories.values_list("pk", flat=True))
    rows = Attributes.objects.as_of(as_of)
    # Memories without attribute rows (written outside the services) by their current values.
    rowless = Memory.objects.filter(~Exists(Attributes.all_objects.filter(memory=OuterRef("pk"))))
    if namespaces is not None:
        rows, rowless = rows.filter(namespace__in=namespaces), rowless.filter(namespace__in=namespaces)
    for slug in sorted({tag.casefold() for tag in tags}):
        rows, rowless = rows.filter(tags__slug=slug), rowless.filter(tags__slug=slug)
    return sorted({*rows.values_list("memory_id", flat=True), *rowless.values_list("pk", flat=True)})


def _recall_state(name: str) -> str:
    if name not in state_rules.RECALL_STATES:
        raise InvalidInput(
            f"states: {name!r} is not one of {', '.join(state_rules.RECALL_STATES)} (recall finds "
            "no forgotten memory).",
            field="states",
        )
    return name


def _age(known_at: dt.datetime, now: dt.datetime) -> str:
    seconds = (now - known_at).total_seconds()
    for unit, size in (
        ("year", 365 * 86400),
        ("month", 30 * 86400),
        ("week", 7 * 86400),
        ("day", 86400),
        ("hour", 3600),
        ("minute", 60),
    ):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


@observed(RECALL_SECONDS, lambda result, arguments: {"mode": result.mode})
def memory_recall(
    *,
    query: str,
    namespace=None,
    tags=None,
    kinds=None,
    limit: int = RECALL_LIMIT_DEFAULT,
    match: str = RECALL_MATCH_DEFAULT,
    mode: str = RECALL_MODE_DEFAULT,
    as_of=None,
    valid_at=None,
    explain: bool = False,
    min_score=None,
    states=None,
    min_confidence=None,
) -> RecallResult:
    """Return the memories that best answer ``query`` as known at ``as_of``, about ``valid_at``.

    ``min_score``: hold back hits scoring below it; None: hold back every hit when none is relevant
    (hybrid mode, ``search.relevance``). The note says how many were held back.
    ``states``: only memories in these states then (``memories.states``); default all but archived.
    ``min_confidence``: leave out hits whose confidence then (``memories.confidence``) is below it; the
    note says how many. Confidence is worked out for the hits (and the candidates the filter reads), never
    for the whole store.
    """
    query = validation.query_text(query)
    validation.limit(limit, maximum=validation.RECALL_LIMIT_MAX)
    match = validation.choice(match, field="match", choices=engine.MATCH_MODES)
    mode = validation.choice(mode, field="mode", choices=engine.MODES)
    if not isinstance(explain, bool):
        raise InvalidInput("explain: expected true or false.", field="explain")
    min_score = validation.min_score(min_score)
    min_confidence = validation.min_confidence(min_confidence)
    namespaces = validation.names(namespace, field="namespace", check=validation.namespace)
    tag_names = validation.tags(tags) if tags else []
    kind_names = validation.names(kinds, field="kinds", check=validation.kind)
    state_names = validation.names(states, field="states", check=_recall_state) or list(
        state_rules.RECALL_STATES_DEFAULT
    )
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    tagged = None
    if tag_names:  # without as_of, now: the memories' current tags
        tagged = _tagged_memories(tag_names, namespaces, as_of=None if as_of is None else as_of_time)

    # Injection-aware ranking (off by default): the injections reported by as_of, per memory.
    injections = telemetry.injection_counts(as_of=as_of_time) if settings.MEMORY_INJECTION_BOOST else None

    def ranked(window: int):
        try:
            return engine.rank(
                query=query,
                namespaces=namespaces,
                kinds=kind_names,
                memory_ids=tagged,
                limit=window,
                match=match,
                mode=mode,
                as_of=as_of_time,
                valid_at=valid_time,
                explain=explain,
                min_score=min_score,
                states=None if set(state_names) == set(state_rules.RECALL_STATES) else state_names,
                stale_after=state_rules.stale_after_micros(),
                injections=injections,
                injection_boost=settings.MEMORY_INJECTION_BOOST,
            )
        except errors.Unavailable as error:
            raise Unavailable(error.message) from None

    window = limit if min_confidence is None else min(limit * CONFIDENCE_CANDIDATES_PER_HIT, CONFIDENCE_CANDIDATES_MAX)
    while True:
        ranking = ranked(window)
        records = records_with_confidence(
            [hit.revision_id for hit in ranking.hits], as_of=as_of_time, valid_at=valid_time
        )
        if min_confidence is None:
            break
        chosen, held_back = _confident(ranking.hits, records, limit=limit, min_confidence=min_confidence)
        # Too few passed while more candidates wait: rank twice as many (the first ones stay the same).
        if len(chosen) == limit or len(ranking.hits) < window or window >= CONFIDENCE_CANDIDATES_MAX:
            break
        window = min(window * 2, CONFIDENCE_CANDIDATES_MAX)
    note = ranking.note
    if min_confidence is not None:
        ranking_hits = chosen
        if held_back:
            checked = (
                f" among the best {len(ranking.hits)} candidates"
                if len(chosen) < limit and len(ranking.hits) == window
                else ""
            )
            note = " ".join(
                filter(
                    None,
                    [
                        note,
                        f"{held_back} hit{'s' if held_back > 1 else ''} held back: "
                        f"confidence below min_confidence {min_confidence:g}{checked}.",
                    ],
                )
            )
    else:
        ranking_hits = ranking.hits
    found = []
    for hit in ranking_hits:
        record = records[hit.revision_id]
        details = None
        if explain:
            details = {
                "revision_id": record.revision_id,
                **hit.explain,
                "known_at": format_instant(record.known_at),
                "valid_from": format_instant(record.valid_from),
                "valid_to": format_instant(record.valid_to),
                "source": record.source,
                "content_hash": record.content_hash,
                "author": record.author,
                "confidence": record.confidence_inputs,
            }
        found.append(
            Hit(
                memory=record,
                score=hit.score,
                snippet=hits.snippet(record.content, ranking.tokens),
                matched_terms=hit.matched_terms,
                relevant=hit.relevant,
                age=_age(record.known_at, as_of_time),
                explain=details,
            )
        )
    return RecallResult(
        query=query,
        terms=ranking.terms,
        match_mode=ranking.match_mode,
        mode=mode,
        as_of=as_of_time,
        valid_at=valid_time,
        hits=found,
        note=note,
        hint=ranking.hint,
    )


def held_memories(memory_ids, *, as_of: dt.datetime) -> set[int]:
    """Of ``memory_ids``, those held at ``as_of``: a candidate whose row says an untrusted writer's text reads as
    an instruction to the agent (``states.HELD``), not yet promoted."""
    # The attributes_memory_known index: each memory's newest row, for these few memories.
    rows = Attributes.objects.as_of(as_of).filter(
        memory_id__in=list(memory_ids), state=Lifecycle.CANDIDATE, reason__startswith=state_rules.HELD_PREFIX
    )
    return set(rows.values_list("memory_id", flat=True))


def _confident(
    ranked: list, records: dict[int, MemoryRecord], *, limit: int, min_confidence: float
) -> tuple[list, int]:
    """The first ``limit`` of ``ranked`` whose confidence is at least ``min_confidence``, and how many ranked
    above the last of them (or anywhere, when fewer pass) fell below it."""
    chosen, held_back = [], 0
    for hit in ranked:
        if len(chosen) == limit:
            break
        if records[hit.revision_id].confidence >= min_confidence:
            chosen.append(hit)
        else:
            held_back += 1
    return chosen, held_back
