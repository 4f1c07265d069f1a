"""Recall: the engine's hits for a query as memory records, within the caller's namespaces, states and confidence."""

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class _Request:
    """A recall's arguments, checked, with its times resolved and its tags read as the memories carrying them."""

    query: str
    limit: int
    match: str
    mode: str
    explain: bool
    min_score: float | None
    min_confidence: float | None
    namespaces: list[str] | None
    kinds: list[str] | None
    states: list[str]
    as_of: dt.datetime
    valid_at: dt.datetime
    tagged: list[int] | None  # None: no tag asked for


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
    request = _checked_request(
        query=query,
        namespace=namespace,
        tags=tags,
        kinds=kinds,
        limit=limit,
        match=match,
        mode=mode,
        as_of=as_of,
        valid_at=valid_at,
        explain=explain,
        min_score=min_score,
        states=states,
        min_confidence=min_confidence,
    )
    ranking, chosen, records, note = _confident_ranking(request)
    return RecallResult(
        query=request.query,
        terms=ranking.terms,
        match_mode=ranking.match_mode,
        mode=request.mode,
        as_of=request.as_of,
        valid_at=request.valid_at,
        hits=[_hit(hit, records[hit.revision_id], tokens=ranking.tokens, request=request) for hit in chosen],
        note=note,
        hint=ranking.hint,
    )


def _checked_request(
    *, query, namespace, tags, kinds, limit, match, mode, as_of, valid_at, explain, min_score, states, min_confidence
) -> _Request:
    """memory_recall's arguments checked one by one, in the order their errors are reported."""
    query = validation.query_text(query)
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
    return _Request(
        query=query,
        limit=limit,
        match=match,
        mode=mode,
        explain=explain,
        min_score=min_score,
        min_confidence=min_confidence,
        namespaces=namespaces,
        kinds=kind_names,
        states=state_names,
        as_of=as_of_time,
        valid_at=valid_time,
        tagged=tagged,
    )


def _rank(request: _Request, *, window: int, injections: dict[int, int] | None) -> engine.Ranking:
    """The engine's best ``window`` revisions for ``request``; an engine that cannot answer is Unavailable."""
    try:
        return engine.rank(
            query=request.query,
            namespaces=request.namespaces,
            kinds=request.kinds,
            memory_ids=request.tagged,
            limit=window,
            match=request.match,
            mode=request.mode,
            as_of=request.as_of,
            valid_at=request.valid_at,
            explain=request.explain,
            min_score=request.min_score,
            states=None if set(request.states) == set(state_rules.RECALL_STATES) else request.states,
            stale_after=state_rules.stale_after_micros(),
            injections=injections,
            injection_boost=settings.MEMORY_INJECTION_BOOST,
        )
    except errors.Unavailable as error:
        raise Unavailable(error.message) from None


def _confident_ranking(
    request: _Request,
) -> tuple[engine.Ranking, list[engine.Ranked], dict[int, MemoryRecord], str | None]:
    """The ranking, the hits recall returns (with min_confidence, the first ``limit`` confident enough), their
    records by revision id, and the note."""
    # Injection-aware ranking (off by default): the injections reported by as_of, per memory.
    injections = telemetry.injection_counts(as_of=request.as_of) if settings.MEMORY_INJECTION_BOOST else None
    limit, min_confidence = request.limit, request.min_confidence
    window = limit if min_confidence is None else min(limit * CONFIDENCE_CANDIDATES_PER_HIT, CONFIDENCE_CANDIDATES_MAX)
    while True:
        ranking = _rank(request, window=window, injections=injections)
        records = records_with_confidence(
            [hit.revision_id for hit in ranking.hits], as_of=request.as_of, valid_at=request.valid_at
        )
        if min_confidence is None:
            return ranking, ranking.hits, records, ranking.note
        chosen, held_back = _confident(ranking.hits, records, limit=limit, min_confidence=min_confidence)
        # Too few passed while more candidates wait: rank twice as many (the first ones stay the same).
        if len(chosen) == limit or len(ranking.hits) < window or window >= CONFIDENCE_CANDIDATES_MAX:
            break
        window = min(window * 2, CONFIDENCE_CANDIDATES_MAX)
    among = len(ranking.hits) if len(chosen) < limit and len(ranking.hits) == window else None
    note = _held_back_note(ranking.note, held_back=held_back, min_confidence=min_confidence, among=among)
    return ranking, chosen, records, note


def _held_back_note(note: str | None, *, held_back: int, min_confidence: float, among: int | None) -> str | None:
    """``note``, then how many hits min_confidence held back (``among``: of how many candidates, when it checked
    them all and fewer passed than asked for)."""
    if not held_back:
        return note
    checked = f" among the best {among} candidates" if among is not None else ""
    return " ".join(
        filter(
            None,
            [
                note,
                f"{held_back} hit{'s' if held_back > 1 else ''} held back: "
                f"confidence below min_confidence {min_confidence:g}{checked}.",
            ],
        )
    )


def _hit(hit: engine.Ranked, record: MemoryRecord, *, tokens: list, request: _Request) -> Hit:
    """One of the engine's hits as recall returns it: its memory, snippet, age and (with explain) why it ranked."""
    return Hit(
        memory=record,
        score=hit.score,
        snippet=hits.snippet(record.content, tokens),
        matched_terms=hit.matched_terms,
        relevant=hit.relevant,
        age=_age(record.known_at, request.as_of),
        explain=_explained(hit, record) if request.explain else None,
    )


def _explained(hit: engine.Ranked, record: MemoryRecord) -> dict:
    """The explain of a hit: the engine's ranks and raw scores, the revision's provenance and its confidence inputs."""
    return {
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
