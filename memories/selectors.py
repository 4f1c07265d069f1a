"""Reads that carry rules: visibility, the shape of prefetches, ordering, pagination, and the aggregates pages show."""

import base64
import datetime as dt

from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Count, Exists, IntegerField, Max, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from knowledge import graph
from knowledge.models import Fact
from knowledge.names import entity_name, predicate_name
from memories import confidence as confidence_rules
from memories import staging, validation
from memories import states as state_rules
from memories.models import Attributes, Kind, Lifecycle, Memory, Revision, State, Tag
from memories.records import AttributesRecord, GraphResult, Hit, MemoryRecord, Page, RecallResult, RevisionRecord
from memoryproject import dialect
from memoryproject.dbfunctions import UtcDay
from memoryproject.exceptions import InvalidInput, MemoryNotFound, Unavailable
from memoryproject.metrics import RECALL_SECONDS, observed
from memoryproject.timeparse import format_instant, stored_instant
from search import engine, errors, hits
from telemetry import selectors as telemetry

LIST_LIMIT_DEFAULT = 20
LIST_LIMIT_MAX = 200
# active: visible (whatever its lifecycle state); candidate, stale, archived: visible and in that state.
LIST_STATES = ("active", "candidate", "stale", "archived", "hidden", "forgotten", "all")
_LIFECYCLE_STATES = ("candidate", "stale", "archived")
RECALL_LIMIT_DEFAULT = 8
RECALL_MATCH_DEFAULT = "auto"
RECALL_MODE_DEFAULT = "hybrid"
GRAPH_LIMIT_DEFAULT = 20
GRAPH_LIMIT_MAX = 200
EXPIRING_DAYS = 7
EXPIRING_SHOWN = 50
# With min_confidence, recall ranks this many candidates first for every hit it may return, then twice as many
# while too few pass, up to CONFIDENCE_CANDIDATES_MAX.
CONFIDENCE_CANDIDATES_PER_HIT = 4
CONFIDENCE_CANDIDATES_MAX = 400


def _tag_prefetch():
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


def _records(
    revision_ids: list[int], *, as_of: dt.datetime | None
) -> tuple[dict[int, MemoryRecord], dict[int, confidence_rules.Provenance]]:
    """records_for_revisions, and beside them each revision's provenance (its confidence's inputs), by revision id."""
    records, provenance, rows = {}, {}, []
    with connection.cursor() as cursor:
        for start in range(0, len(revision_ids), _IDS_PER_QUERY):
            chunk = revision_ids[start : start + _IDS_PER_QUERY]
            # Primary-key lookups, each joined to its memory by primary key.
            cursor.execute(_RECORD_SQL.format(marks=",".join(["%s"] * len(chunk))), chunk)
            rows.extend(cursor.fetchall())
        memory_ids = sorted({row[1] for row in rows})
        then = _attributes_as_of(cursor, memory_ids, as_of) if as_of is not None else {}
        tags: dict[int, list[str]] = {}
        # Memories without a row then (written outside the services) show their current tags.
        current = [memory_id for memory_id in memory_ids if memory_id not in then]
        for start in range(0, len(current), _IDS_PER_QUERY):
            chunk = current[start : start + _IDS_PER_QUERY]
            # The m2m table's (memory_id, tag_id) unique index serves the IN; tags are few per memory.
            cursor.execute(_TAGS_SQL.format(marks=",".join(["%s"] * len(chunk))), chunk)
            for memory_id, name in cursor.fetchall():
                tags.setdefault(memory_id, []).append(name)
    for (
        revision_id,
        memory_id,
        key,
        namespace,
        kind,
        state,
        title,
        content,
        known_at,
        valid_from,
        valid_to,
        expires_at,
        source,
        content_hash,
        subject,
        predicate,
        object_,
        confidence,
        author,
        created_at,
        interface,
        trusted,
    ) in rows:
        recorded = Lifecycle.ACTIVE.value
        if memory_id in then:
            namespace, kind, tags[memory_id], recorded = then[memory_id]
        if as_of is not None:
            state = state_rules.read_state(recorded, kind=kind, known_at=stored_instant(known_at), as_of=as_of)
        records[revision_id] = MemoryRecord(
            id=memory_id,
            key=key,
            namespace=namespace,
            kind=kind,
            state=state,
            title=title,
            content=content,
            tags=tags.get(memory_id, []),
            revision_id=revision_id,
            known_at=stored_instant(known_at),
            valid_from=stored_instant(valid_from),
            valid_to=stored_instant(valid_to),
            expires_at=stored_instant(expires_at),
            source=source,
            content_hash=content_hash,
            subject=subject,
            predicate=predicate,
            object=object_,
            stated_confidence=confidence,
            author=author,
            created_at=stored_instant(created_at),
        )
        provenance[revision_id] = confidence_rules.Provenance.of(interface, source, author, trusted)
    return records, provenance


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


def visible_revision(*, memory: Memory, as_of: dt.datetime, valid_at: dt.datetime | None = None) -> Revision | None:
    """Return the revision ``memory`` shows at (as_of, valid_at), or None when it is hidden there."""
    return Revision.objects.filter(memory=memory).visible(as_of=as_of, valid_at=valid_at).first()


def latest_content_revision(memory: Memory) -> Revision | None:
    """The newest revision that carries text (tombstones carry none), visible or not."""
    return memory.revisions.filter(tombstone=False).latest_known().first()


def memory_get(*, memory_id=None, namespace=None, key=None, as_of=None, valid_at=None) -> MemoryRecord:
    """Return the memory as it was known at ``as_of`` for valid time ``valid_at`` (both default to now)."""
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    memories = Memory.objects.all()
    if memory_id is not None:
        if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id < 1:
            raise InvalidInput(f"id: {memory_id!r} is not a memory id (a positive integer).", field="id")
        memories = memories.filter(pk=memory_id)
        wanted = memory_id
    elif namespace is not None and key is not None:
        namespace, key = validation.namespace(namespace), validation.key(key)
        if as_of is None:  # now: where the memory is, by the unique (namespace, key) index
            memories = memories.filter(namespace=namespace, key=key)
        else:
            # The memory with this key (memory_key index) that was in the namespace then: one at most, since a
            # key names one memory of a namespace at a time. Memories without attribute rows by their own.
            there = Exists(Attributes.objects.as_of(as_of_time).filter(memory=OuterRef("pk"), namespace=namespace))
            rowless = ~Exists(Attributes.all_objects.filter(memory=OuterRef("pk")))
            memories = memories.filter(Q(there) | (Q(namespace=namespace) & Q(rowless)), key=key)
        wanted = f"{namespace}/{key}"
    else:
        raise InvalidInput("Give an id, or a namespace and a key.", field="id")
    revision_id = (
        Revision.objects.filter(memory__in=memories)
        .visible(as_of=as_of_time, valid_at=valid_time)
        .values_list("pk", flat=True)
        .first()
    )
    if revision_id is None:
        raise MemoryNotFound(wanted)
    record = records_for_revisions([revision_id], as_of=as_of_time)[revision_id]
    return confidence_rules.with_confidence([record], as_of=as_of_time, valid_at=valid_time)[0]


def memory_history(*, memory_id: int, as_of=None) -> list[RevisionRecord]:
    """Return every revision known by ``as_of`` (default now), tombstones included, oldest first."""
    as_of_time, _ = validation.resolve_times(as_of)
    if not Memory.objects.filter(pk=memory_id).exists():
        raise MemoryNotFound(memory_id, maybe_hidden=False)
    revisions = Revision.objects.filter(memory_id=memory_id).known_by(as_of_time).order_by("known_at", "id")
    return [RevisionRecord.from_model(revision) for revision in revisions]


def attribute_history(*, memory_id: int, as_of=None) -> list[AttributesRecord]:
    """Return the memory's namespace, kind, tags and lifecycle state after each change known by ``as_of`` (default now),
    oldest first."""
    as_of_time, _ = validation.resolve_times(as_of)
    rows = (
        Attributes.objects.filter(memory_id=memory_id)
        .known_by(as_of_time)
        .order_by("known_at", "id")
        .prefetch_related(Prefetch("tags", queryset=Tag.objects.order_by("slug")))
    )
    return [
        AttributesRecord(
            known_at=row.known_at,
            namespace=row.namespace,
            kind=row.kind,
            tags=[tag.name for tag in row.tags.all()],
            state=row.state,
            reason=row.reason,
            author=row.author,
            interface=row.interface,
        )
        for row in rows
    ]


def _encode_cursor(memory_id: int) -> str:
    return base64.urlsafe_b64encode(f"m:{memory_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, value = text.split(":", 1)
        if prefix != "m":
            raise ValueError
        return int(value)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor: not a cursor this server gave out. Start again without one.", field="cursor")


def memory_list(
    *,
    namespace: str | list[str] | None = None,
    tags: list[str] | None = None,
    kind: str | None = None,
    state: str = "active",
    limit: int = LIST_LIMIT_DEFAULT,
    cursor: str | None = None,
    as_of=None,
    valid_at=None,
) -> Page:
    """Return memories newest first, one page at a time.

    ``state``: ``active`` (visible now, whatever its lifecycle state), ``candidate``,
    ``stale`` or ``archived`` (visible now and in that state, ``memories.states``),
    ``hidden`` (not forgotten, but not visible now: TTL passed or outside its validity),
    ``forgotten``, or ``all``. Each item shows its visible revision, or its newest
    revision with text when hidden. With ``as_of`` or ``valid_at``, all of it is read
    at that point instead of now.
    """
    if state not in LIST_STATES:
        raise InvalidInput(f"state: {state!r} is not one of {', '.join(LIST_STATES)}.", field="state")
    validation.limit(limit, maximum=LIST_LIMIT_MAX)
    if as_of is not None or valid_at is not None or state in _LIFECYCLE_STATES:
        # The lifecycle states are read from the attribute rows, as of now when no time is given.
        return _list_at(
            *validation.resolve_times(as_of, valid_at),
            namespace=namespace,
            tags=tags,
            kind=kind,
            state=state,
            limit=limit,
            cursor=cursor,
        )
    now = dialect.now()
    memories = Memory.objects.all()
    if namespace:
        names = [namespace] if isinstance(namespace, str) else list(namespace)
        memories = memories.filter(namespace__in=[validation.namespace(name) for name in names])
    if kind:
        memories = memories.filter(kind=validation.kind(kind))
    for tag in validation.tags(tags):
        memories = memories.filter(tags__slug=tag.casefold())
    if state == "active":
        memories = memories.visible(as_of=now)
    elif state == "hidden":
        memories = memories.filter(state=State.ACTIVE).hidden(as_of=now)
    elif state == "forgotten":
        memories = memories.filter(state=State.FORGOTTEN)
    if cursor:
        memories = memories.filter(pk__lt=_decode_cursor(cursor))
    page = list(memories.order_by("-pk").prefetch_related(_tag_prefetch())[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    shown = {revision.memory_id: revision for revision in Revision.objects.filter(memory__in=page).visible(as_of=now)}
    recorded = dict(Attributes.objects.as_of(now).filter(memory__in=page).values_list("memory_id", "state"))
    items = []
    for memory in page:
        revision = shown.get(memory.pk) or latest_content_revision(memory)
        revision.memory = memory
        read = (
            state_rules.FORGOTTEN
            if memory.state == State.FORGOTTEN
            else state_rules.read_state(
                recorded.get(memory.pk, Lifecycle.ACTIVE.value), kind=memory.kind, known_at=revision.known_at, as_of=now
            )
        )
        items.append(MemoryRecord.from_revision(revision, state=read))
    items = _scored_where_visible(items, {revision.pk for revision in shown.values()}, as_of=now, valid_at=now)
    return Page(items=items, next_cursor=_encode_cursor(page[-1].pk) if more and page else None)


def _scored_where_visible(
    items: list[MemoryRecord], visible: set[int], *, as_of: dt.datetime, valid_at: dt.datetime
) -> list[MemoryRecord]:
    """``items``, those whose revision is in ``visible`` with their conflicts and confidence (memories.confidence);
    a hidden or forgotten memory shows no confidence."""
    scored = {
        record.revision_id: record
        for record in confidence_rules.with_confidence(
            [item for item in items if item.revision_id in visible], as_of=as_of, valid_at=valid_at
        )
    }
    return [scored.get(item.revision_id, item) for item in items]


def _list_at(
    as_of: dt.datetime, valid_at: dt.datetime, *, namespace, tags, kind, state: str, limit: int, cursor
) -> Page:
    """memory_list at a past or chosen point: filters match the namespace, kind, tags and lifecycle state each memory
    carried at ``as_of``, and states follow the visibility rule there (a tombstone winner is forgotten, no winner is
    hidden)."""
    carried = Attributes.objects.as_of(as_of)
    rowless = Memory.objects.exclude(Exists(Attributes.all_objects.filter(memory=OuterRef("pk"))))
    if namespace:
        names = [validation.namespace(name) for name in ([namespace] if isinstance(namespace, str) else namespace)]
        carried, rowless = carried.filter(namespace__in=names), rowless.filter(namespace__in=names)
    if kind:
        carried, rowless = carried.filter(kind=validation.kind(kind)), rowless.filter(kind=validation.kind(kind))
    for tag in validation.tags(tags):
        carried, rowless = carried.filter(tags__slug=tag.casefold()), rowless.filter(tags__slug=tag.casefold())
    if state in (Lifecycle.CANDIDATE, Lifecycle.ARCHIVED):
        carried, rowless = carried.filter(state=state), rowless.none()  # a memory without rows is active
    elif state == state_rules.STALE:
        carried, rowless = _reading_stale(
            carried.filter(state=Lifecycle.ACTIVE), rowless, as_of=as_of, valid_at=valid_at
        )
    # Memories written outside the services have no attribute rows: their current values stand in.
    memories = (
        Memory.objects.filter(Q(pk__in=carried.values("memory_id")) | Q(pk__in=rowless.values("pk")))
        .filter(Exists(Revision.objects.filter(memory=OuterRef("pk")).known_by(as_of)))
        ._with_winner(as_of=as_of, valid_at=valid_at)
    )
    if state == "active" or state in _LIFECYCLE_STATES:
        memories = memories.filter(winning_revision_id__isnull=False, winner_is_tombstone=False)
    elif state == "hidden":
        memories = memories.filter(winning_revision_id__isnull=True)
    elif state == "forgotten":
        memories = memories.filter(winner_is_tombstone=True)
    if cursor:
        memories = memories.filter(pk__lt=_decode_cursor(cursor))
    page = list(memories.order_by("-pk").values_list("pk", "winning_revision_id", "winner_is_tombstone")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    shown = {}
    for memory_id, revision_id, tombstone in page:
        if revision_id is None or tombstone:  # hidden or forgotten then: its newest text known by then
            revision_id = (
                Revision.objects.filter(memory_id=memory_id, tombstone=False)
                .known_by(as_of)
                .latest_known()
                .values_list("pk", flat=True)
                .first()
            )
        shown[memory_id] = revision_id
    records = records_for_revisions(
        [revision_id for revision_id in shown.values() if revision_id is not None], as_of=as_of
    )
    items = []
    for memory_id, _, tombstone in page:
        record = records.get(shown[memory_id])
        if record is not None:
            items.append(record.model_copy(update={"state": State.FORGOTTEN.value}) if tombstone else record)
    visible = {revision_id for _, revision_id, tombstone in page if revision_id is not None and not tombstone}
    items = _scored_where_visible(items, visible, as_of=as_of, valid_at=valid_at)
    return Page(items=items, next_cursor=_encode_cursor(page[-1][0]) if more and page else None)


def _reading_stale(carried, rowless, *, as_of: dt.datetime, valid_at: dt.datetime):
    """The attribute rows ``carried`` and rowless memories ``rowless`` whose memory's revision visible at (as_of,
    valid_at) is older than its kind's stale age (``memories.states``): the active ones among them read stale."""
    rows, memories = Q(pk__in=[]), Q(pk__in=[])
    for kind in settings.MEMORY_STALE_AFTER_DAYS:

        def old(memory_ref, cutoff=as_of - state_rules.stale_after(kind)):
            shown = Revision.objects.filter(memory=OuterRef(memory_ref)).visible(as_of=as_of, valid_at=valid_at)
            return Exists(shown.filter(known_at__lt=cutoff))

        rows |= Q(kind=kind) & Q(old("memory_id"))
        memories |= Q(kind=kind) & Q(old("pk"))
    return carried.filter(rows), rowless.filter(memories)


def visible_duplicate(*, namespace: str, content_hash: str, exclude_memory_id: int | None = None) -> Memory | None:
    """Return a memory in ``namespace`` whose visible-now revision has this hash, if any.

    Only the revision a memory shows now counts: text it held in the past is not a duplicate.
    """
    # revision_content_hash narrows to the few rows with this hash before visibility is checked.
    revisions = Revision.objects.filter(memory__namespace=namespace, content_hash=content_hash)
    if exclude_memory_id is not None:
        revisions = revisions.exclude(memory_id=exclude_memory_id)
    # Most writes carry new text: no row has the hash, a far cheaper query than the visibility one.
    if not revisions.exists():
        return None
    shown = revisions.visible(as_of=dialect.now()).values("memory_id")
    return Memory.objects.filter(pk__in=shown).order_by("pk").first()


def visible_same_triple(*, namespace: str, subject: str, predicate: str, object: str) -> Revision | None:
    """Return the visible-now revision in ``namespace`` whose triple is this one in normal form (knowledge.names).

    "The Billing API runs_on K8s" and "billing API runs on k8s" are the same triple. The
    lowest memory id wins when several memories hold it.
    """
    wanted = (entity_name(subject), predicate_name(predicate), entity_name(object))
    # LIKE (ASCII case-insensitive) narrows to the few rows naming both before visibility and the exact comparison.
    candidates = (
        Revision.objects.filter(
            memory__namespace=namespace,
            subject__icontains=wanted[0].split()[-1],
            object__icontains=wanted[2].split()[-1],
        )
        .visible(as_of=dialect.now())
        .order_by("memory_id", "id")
    )
    for revision in candidates:
        if (entity_name(revision.subject), predicate_name(revision.predicate), entity_name(revision.object)) == wanted:
            return revision
    return None


# Hashes (and names) per query in visible_duplicates and visible_same_triples: well under SQLite's 999 parameters.
_HASHES_PER_QUERY = 500


def visible_same_triples(*, namespace: str, triples) -> dict[tuple[str, str, str], Revision]:
    """visible_same_triple for many triples at once: {triple in normal form: the visible-now revision stating it}.

    Triples no visible-now revision of ``namespace`` states are left out; the lowest memory
    id wins. Reads the fact rows (normal forms, by subject), then the visibility rule for
    the few revisions stating one of these triples.
    """
    wanted = {
        (entity_name(subject), predicate_name(predicate), entity_name(object_))
        for subject, predicate, object_ in triples
    }
    subjects = sorted({triple[0] for triple in wanted})
    revision_ids = []
    for start in range(0, len(subjects), _HASHES_PER_QUERY):
        # The fact_subject_predicate index: the rows naming these subjects, of every namespace and time.
        rows = Fact.objects.filter(subject__in=subjects[start : start + _HASHES_PER_QUERY]).values_list(
            "revision_id", "subject", "predicate", "object"
        )
        revision_ids += [row[0] for row in rows if row[1:] in wanted]
    found: dict[tuple[str, str, str], Revision] = {}
    for start in range(0, len(revision_ids), _HASHES_PER_QUERY):
        shown = (
            Revision.objects.filter(pk__in=revision_ids[start : start + _HASHES_PER_QUERY], memory__namespace=namespace)
            .visible(as_of=dialect.now())
            .order_by("memory_id", "id")
        )
        for revision in shown:
            triple = (entity_name(revision.subject), predicate_name(revision.predicate), entity_name(revision.object))
            if triple not in found or revision.memory_id < found[triple].memory_id:
                found[triple] = revision
    return found


def visible_duplicates(*, namespace: str, content_hashes) -> dict[str, int]:
    """visible_duplicate for many hashes at once: {hash: id of the first memory showing it now}.

    Hashes no visible-now revision of ``namespace`` carries are left out. Two queries per
    500 hashes at most: which memories of the namespace have a revision with one of them,
    then the visibility rule for those few memories.
    """
    hashes, found = sorted(set(content_hashes)), {}
    now = dialect.now()
    for start in range(0, len(hashes), _HASHES_PER_QUERY):
        # By hash alone: with the namespace in the WHERE clause SQLite walks the namespace, not the hash index.
        stored = Revision.objects.filter(content_hash__in=hashes[start : start + _HASHES_PER_QUERY])
        memory_ids = {
            memory_id
            for memory_id, memory_namespace in stored.values_list("memory_id", "memory__namespace")
            if memory_namespace == namespace
        }
        if not memory_ids:
            continue
        shown = stored.filter(memory_id__in=sorted(memory_ids)).visible(as_of=now)
        for content_hash, memory_id in shown.values_list("content_hash", "memory_id"):
            found[content_hash] = min(memory_id, found.get(content_hash, memory_id))
    return found


def schema_version() -> dict:
    applied = MigrationRecorder.Migration.objects.filter(app__in=("memories", "search")).order_by("-applied", "-id")
    return {row.app: row.name for row in reversed(list(applied))}


def search_mode() -> dict:
    """How recall works here: the embedder configured, the one the stored vectors come from, and how many wait."""
    from search import vectors

    space = vectors.current_space()
    stored = vectors.vector_count()
    # Every revision with text has one document row (search_document), so the difference
    # is what a backfill would embed, without the scan pending_count() makes.
    documents = Revision.objects.filter(tombstone=False).count()
    return {
        "mode": "hybrid",
        "embedder": settings.MEMORY_EMBEDDER,
        "stored_vectors_from": space.embedder if space else None,
        "vectors": stored,
        "pending_vectors": max(documents - stored, 0),
    }


def memory_stats(*, namespace: str | None = None) -> dict:
    """Return totals, per-namespace counts, top tags, TTL count, database size, schema and search mode."""
    now = dialect.now()
    memories = Memory.objects.all()
    if namespace:
        memories = memories.filter(namespace=validation.namespace(namespace))
    visible = memories.visible(as_of=now)
    per_namespace = {
        row["namespace"]: {"memories": row["total"], "visible": 0}
        for row in memories.values("namespace").annotate(total=Count("pk")).order_by("namespace")
    }
    # One grouped count (covered by the memory_namespace_kind index) gives both per namespace and per kind.
    kinds: dict[str, int] = {}
    for row in visible.values("namespace", "kind").annotate(total=Count("pk")).order_by("namespace", "kind"):
        per_namespace[row["namespace"]]["visible"] += row["total"]
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + row["total"]
    visible_revisions = Revision.objects.filter(memory__in=memories.values("pk")).visible(as_of=now)
    # Tags are rows of one namespace each: the visible memories asked for reach only their own namespaces' rows.
    top_tags = (
        Tag.objects.filter(memories__in=visible.values("pk"))
        .annotate(uses=Count("memories"))
        .order_by("-uses", "slug", "namespace")[:10]
    )
    return {
        "memories": sum(entry["memories"] for entry in per_namespace.values()),
        "visible": sum(entry["visible"] for entry in per_namespace.values()),
        "forgotten": memories.filter(state=State.FORGOTTEN).count(),
        "revisions": Revision.objects.filter(memory__in=memories.values("pk")).count(),
        "with_ttl": visible_revisions.filter(expires_at__isnull=False).count(),
        "kinds": {kind: kinds.get(kind, 0) for kind in Kind.values},
        "namespaces": per_namespace,
        "top_tags": [{"tag": tag.name, "namespace": tag.namespace, "count": tag.uses} for tag in top_tags],
        "database_bytes": dialect.size_bytes(),
        "database_path": dialect.location(),
        "database_engine": dialect.engine(),
        "sqlite_version": None if dialect.is_postgresql() else connection.Database.sqlite_version,
        "schema": schema_version(),
        "search_mode": search_mode(),
    }


def store_counts() -> dict:
    """Return the stored memories per (namespace, state) and revisions per (namespace, tombstone), for /metrics.

    Two grouped scans of the rows as stored, whatever the time: no visibility rule, so the
    cost grows with the rows, not with the rule's subqueries.
    """
    memories = {
        (row["namespace"], row["state"]): row["total"]
        for row in Memory.objects.values("namespace", "state").annotate(total=Count("pk")).order_by()
    }
    revisions = {
        (row["memory__namespace"], row["tombstone"]): row["total"]
        for row in Revision.objects.values("memory__namespace", "tombstone").annotate(total=Count("pk")).order_by()
    }
    return {"memories": memories, "revisions": revisions}


# Aggregates for the dashboard and the admin: a fixed number of queries whatever the size of the store --------------


def memories_with_revision_totals(memories: QuerySet) -> QuerySet:
    """Return ``memories`` with ``revision_count``, ``last_change`` (newest known_at) and ``recorded_state`` (its
    lifecycle state now) per row, tags prefetched."""
    revisions = Revision.objects.filter(memory=OuterRef("pk")).order_by().values("memory")
    newest_row = Attributes.objects.filter(memory=OuterRef("pk")).order_by("-known_at", "-id").values("state")[:1]
    return memories.annotate(
        # The attributes_memory_known index: the newest row of each memory.
        recorded_state=Coalesce(Subquery(newest_row), Value(Lifecycle.ACTIVE.value)),
        # Both read the (memory, known_at, id) index; subqueries, so the tag filter's join cannot multiply them.
        revision_count=Subquery(revisions.annotate(n=Count("pk")).values("n"), output_field=IntegerField()),
        last_change=Subquery(revisions.annotate(at=Max("known_at")).values("at")),
    ).prefetch_related(_tag_prefetch())


def _per_day(queryset, field: str) -> dict[dt.date, int]:
    """Return {day: rows} for the rows of ``queryset``, grouped by the UTC day of ``field``."""
    rows = queryset.annotate(day=UtcDay(field)).values("day").annotate(total=Count("pk")).order_by("day")
    return {row["day"]: row["total"] for row in rows}


def memory_activity_per_day() -> dict[str, dict[dt.date, int]]:
    """Return the memories added (their creation) and forgotten (their tombstones) per UTC day: two queries."""
    return {
        "added": _per_day(Memory.objects.all(), "created_at"),
        "forgotten": _per_day(Revision.objects.filter(tombstone=True), "known_at"),
    }


def namespace_kind_totals(*, now: dt.datetime) -> list[dict]:
    """Return one row per (namespace, kind): memories in all, and visible now."""
    # memory_namespace_kind covers the grouping; the visible count adds the visibility subquery per memory.
    totals = {
        (row["namespace"], row["kind"]): {
            "namespace": row["namespace"],
            "kind": row["kind"],
            "memories": row["n"],
            "visible": 0,
        }
        for row in Memory.objects.values("namespace", "kind").annotate(n=Count("pk")).order_by("namespace", "kind")
    }
    visible = Memory.objects.visible(as_of=now).values("namespace", "kind").annotate(n=Count("pk"))
    for row in visible.order_by("namespace", "kind"):
        totals[(row["namespace"], row["kind"])]["visible"] = row["n"]
    return list(totals.values())


def revisions_expiring_soon(*, now: dt.datetime, days: int = EXPIRING_DAYS) -> list[Revision]:
    """Return the revisions shown now whose TTL runs out within ``days``, soonest first."""
    # revision_expires (partial index on expires_at) narrows to the few rows with a TTL in range first.
    return list(
        Revision.objects.filter(expires_at__gt=now, expires_at__lte=now + dt.timedelta(days=days))
        .visible(as_of=now)
        .select_related("memory")
        .order_by("expires_at", "id")[:EXPIRING_SHOWN]
    )


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


_GRAPH_QUESTIONS = (
    "Give entity (its relations), source and target (the paths between them), or query (the entities it names)."
)


def memory_graph(
    *,
    namespace: str,
    entity: str | None = None,
    source: str | None = None,
    target: str | None = None,
    query: str | None = None,
    limit: int = GRAPH_LIMIT_DEFAULT,
    as_of=None,
    valid_at=None,
    only=None,
) -> GraphResult:
    """Answer one question about the facts of ``namespace`` as known at ``as_of`` about ``valid_at``.

    Exactly one of: ``entity`` (its relations), ``source`` with ``target`` (paths), ``query``
    (the entities it names). The facts are the visible revisions with a triple, so the
    answer is the one a store holding only what was visible then would give. With ``entity``,
    ``only`` keeps the relations of these (predicate, direction) pairs (query routing's graph questions).
    """
    namespace = validation.namespace(namespace)
    entity, source, target = (
        validation.short_text(value, field=name, limit=validation.TRIPLE_PART_MAX)
        for name, value in (("entity", entity), ("source", source), ("target", target))
    )
    query = validation.short_text(query, field="query", limit=validation.QUERY_MAX_CHARS)
    given = [
        name for name, value in (("entity", entity), ("source", source), ("target", target), ("query", query)) if value
    ]
    if not given:
        raise InvalidInput(f"Nothing to ask. {_GRAPH_QUESTIONS}", field="entity")
    if ("source" in given) != ("target" in given):
        missing = "target" if "source" in given else "source"
        raise InvalidInput(f"{missing}: missing; paths need both source and target.", field=missing)
    if len(given) > (2 if "source" in given else 1):
        raise InvalidInput(
            f"{' and '.join(given)} ask different questions; ask one at a time. {_GRAPH_QUESTIONS}", field=given[-1]
        )
    validation.limit(limit, maximum=GRAPH_LIMIT_MAX)
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    at = {"namespace": namespace, "as_of": as_of_time, "valid_at": valid_time}
    if entity:
        found = {"entities": [graph.graph_neighbours(entity=entity, limit=limit, only=only, **at)]}
    elif query:
        found = {"entities": graph.graph_mentions(query=query, limit=limit, **at).entities}
    else:
        paths = graph.graph_paths(source=source, target=target, **at)
        found = {"source": paths.source, "target": paths.target, "paths": paths.paths, "truncated": paths.truncated}
    return GraphResult.model_validate({**at, **found}, from_attributes=True)
