"""The hook services: what an agent harness calls around a prompt (REST ``hooks/recall|ingest|report/``).

- ``hook_recall``: the memories recall finds for a prompt, as a block ready to inject;
- ``hook_ingest``: text the harness captures (a transcript being compacted) stored as a
  memory, unless it is already held or looks like a prompt injection;
- ``hook_report``: the harness says a block was actually injected (injection telemetry);
- ``hook_used``: the harness hands over the answer that followed an injection, and the
  injected memories the answer used are marked (the signal injection-aware ranking counts).

Each takes the ``Caller`` the interface authenticated, whose scope the door has checked
(``api.views``), asks it for namespaces, records telemetry rows through ``telemetry.services`` (ids and counts, never
memory text), and raises domain errors from ``memoryproject.exceptions``.
"""

import datetime as dt
import logging
import re
import unicodedata

from django.conf import settings

from memories import selectors, validation
from memories.access import Caller
from memories.models import Kind, Memory, Revision
from memories.records.memory_record import MemoryRecord
from memories.records.recall_results import Hit, RecallResult
from memories.services.lifecycle import memory_revise
from memories.services.remember import memory_remember
from memories.services.revisions import get_memory
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, NotFound, TooLarge
from memoryproject.storage import SIDE_WRITE_SKIPPED
from search import duplicates, hits, text
from telemetry import screening, wrapper
from telemetry import selectors as telemetry_selectors
from telemetry import services as telemetry
from telemetry.records import HookBlock, HookHit, IngestResult, InjectionRecord, UsedRecord

logger = logging.getLogger(__name__)

HOOK_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:/+-]{0,63}")
SESSION_MAX = 200
# A report's block size is the harness's word; this only keeps nonsense out of the sums.
REPORT_CHARACTERS_MAX = 1_000_000
REPORT_MEMORIES_MAX = validation.RECALL_LIMIT_MAX
# The answer hooks/used/ reads (and never keeps): a harness cuts a longer one to this.
ANSWER_MAX_CHARS = 50_000
# An answer uses an injected memory when it carries at least this many of the memory's words
# (all of them for a shorter memory) and they make a third of the memory's words or half the answer's;
# words of the prompt do not count (recall found the memory by them, and answers repeat them).
USED_MIN_WORDS = 2
# The hits a prompt gets: those that answer it on their own (``Hit.relevant``), the first of them and each
# other scoring at least this share of its score (benchmarks/relevance.py chose it on recall-dev and LoCoMo).
INJECT_SCORE_SHARE = 0.5
# A memory longer than this (a captured transcript, say) is injected as the part of it that matched.
INJECT_WHOLE_CHARS_MAX = 600


class InjectionSuspected(InvalidInput):
    """Captured text looks written to steer a model; it is refused and the refusal counted."""

    code = "injection_suspected"


def _name(value, *, field: str, required: bool) -> str:
    """Return a harness or hook name: 1-64 letters, digits, spaces or . _ : / + - (empty where optional)."""
    if value is None or value == "":
        if required:
            raise InvalidInput(f"{field}: required, e.g. 'claude-code' or 'UserPromptSubmit'.", field=field)
        return ""
    if not isinstance(value, str) or not HOOK_NAME_RE.fullmatch(value):
        raise InvalidInput(
            f"{field}: {value!r} is not a name. Use 1-64 letters, digits, spaces or . _ : / + -, starting with a "
            "letter or digit (e.g. 'claude-code', 'UserPromptSubmit').",
            field=field,
        )
    return value


def _session(value) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"session: expected text, got {type(value).__name__}.", field="session")
    if len(value) > SESSION_MAX:
        raise TooLarge(f"session: {len(value)} characters is over the limit of {SESSION_MAX}.", field="session")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        raise InvalidInput("session: control characters are not allowed.", field="session")
    return value


def _budget(value) -> int:
    if value is None:
        return settings.MEMORY_HOOK_BUDGET
    top = settings.MEMORY_HOOK_BUDGET_MAX
    if isinstance(value, bool) or not isinstance(value, int) or not wrapper.BUDGET_MIN <= value <= top:
        raise InvalidInput(
            f"budget: {value!r} is out of range {wrapper.BUDGET_MIN}..{top} (characters).", field="budget"
        )
    return value


def _injected(result, *, min_score: float | None) -> list:
    """The hits of a recall a prompt gets: never a held memory; with ``min_score``, or in keyword or semantic mode
    (the caller chose what counts), every other hit; otherwise those relevant on their own, the first of them and
    each other scoring at least INJECT_SCORE_SHARE of its score (hits come best first)."""
    held = selectors.held_memories(
        [hit.memory.id for hit in result.hits if hit.memory.state == "candidate"], as_of=result.as_of
    )
    candidates = [hit for hit in result.hits if hit.memory.id not in held]
    if min_score is not None or result.mode != "hybrid":
        return candidates
    chosen = []
    for hit in candidates:
        if not hit.relevant:
            continue
        if chosen and hit.score < INJECT_SCORE_SHARE * chosen[0].score:
            break
        chosen.append(hit)
    return chosen


def hook_recall(
    *,
    caller: Caller,
    query: str,
    namespace=None,
    tags=None,
    kinds=None,
    limit: int = selectors.RECALL_LIMIT_DEFAULT,
    budget: int | None = None,
    mode: str = selectors.RECALL_MODE_DEFAULT,
    min_score: float | None = None,
    states=None,
    min_confidence: float | None = None,
    harness: str = "",
    hook: str = "",
    session: str = "",
) -> HookBlock:
    """Recall for ``query`` and return the hits that answer it as a block of at most ``budget`` characters.

    The hits are recall's own (same arguments, same order), kept when they answer the prompt
    on their own (``_injected``); the block shows as many as fit, the last perhaps cut short, and
    a long memory as the part of it that matched. When nothing is relevant (or nothing reaches
    ``min_score``), the block is empty: nothing is injected. A held memory (``states.HELD``) is
    never injected. A ``HookRecall`` row records the answer's size and the memories recall found
    (so erasing one also removes the query). Recall is a read: where the database refuses that
    row (full, read-only), the block is still returned, with ``recall_id`` None.
    """
    budget = _budget(budget)
    harness = _name(harness, field="harness", required=False)
    hook = _name(hook, field="hook", required=False)
    session = _session(session)
    namespaces = caller.namespaces_to_read(namespace)
    result = selectors.memory_recall(
        query=query,
        namespace=namespaces,
        tags=tags,
        kinds=kinds,
        limit=limit,
        mode=mode,
        min_score=min_score,
        states=states,
        min_confidence=min_confidence,
    )
    answer = _block_answer(result, query=query, budget=budget, min_score=min_score)
    recall_id = _recall_row(caller, result, answer, harness=harness, hook=hook, session=session, namespaces=namespaces)
    return answer.model_copy(update={"recall_id": recall_id})


def _block_answer(result: RecallResult, *, query: str, budget: int, min_score: float | None) -> HookBlock:
    """The block of the hits a prompt gets (``_injected``), and what was left out; no ``recall_id`` yet."""
    injected = _injected(result, min_score=min_score)
    block = wrapper.build(_entries(injected, query=query), budget=budget)
    shown = [_hook_hit(hit) for hit in injected[: block.shown]]
    return HookBlock(
        query=query,
        block=block.text,
        characters=len(block.text),
        budget=budget,
        truncated=block.truncated,
        hits=shown,
        omitted=len(injected) - len(shown),
        held_back=len(result.hits) - len(injected),
        terms=result.terms,
        match_mode=result.match_mode,
        mode=result.mode,
        note=result.note,
        hint=result.hint,
        recall_id=None,
    )


def _entries(injected: list[Hit], *, query: str) -> list[wrapper.Entry]:
    """The block's entries for the hits injected: a long memory as the part of it that matched ``query``."""
    tokens = text.clean_query(query).terms
    return [
        wrapper.Entry(
            memory_id=hit.memory.id,
            namespace=hit.memory.namespace,
            key=hit.memory.key,
            title=hit.memory.title,
            age=hit.age,
            state=hit.memory.state,
            content=hit.memory.content
            if len(hit.memory.content) <= INJECT_WHOLE_CHARS_MAX
            else hits.snippet(hit.memory.content, tokens, marked=False),
        )
        for hit in injected
    ]


def _hook_hit(hit: Hit) -> HookHit:
    return HookHit(
        memory_id=hit.memory.id,
        revision_id=hit.memory.revision_id,
        namespace=hit.memory.namespace,
        key=hit.memory.key,
        title=hit.memory.title,
        score=hit.score,
        age=hit.age,
        state=hit.memory.state,
    )


def _recall_row(
    caller: Caller, result: RecallResult, answer: HookBlock, *, harness: str, hook: str, session: str, namespaces
) -> int | None:
    """Record the ``HookRecall`` row and return its id; None where the database refuses it (full, read-only)."""
    try:
        return telemetry.hook_recall_create(
            actor=caller.actor,
            harness=harness,
            hook=hook,
            session=session,
            namespaces=namespaces,
            query=answer.query,
            hits=len(answer.hits),
            characters=answer.characters,
            memory_ids=[hit.memory.id for hit in result.hits],
        )
    except SIDE_WRITE_SKIPPED as error:
        # The agent still gets its block; the operator has to act on the database.
        logger.warning("hooks/recall answered without its telemetry row: %s", error.message)
        return None


def _source(harness: str, hook: str, session: str) -> str:
    parts = [part for part in (harness, hook) if part]
    if session:
        parts.append(f"session {session}")
    return " ".join(" ".join(parts).split())  # at most 64 + 64 + 200 characters: within SOURCE_MAX


def _refresh(memory_id: int, *, ttl_days: int, caller: Caller) -> MemoryRecord:
    """Extend the memory's expiry to ``ttl_days`` from now (0: none), never shortening it."""
    current = selectors.memory_get(memory_id=memory_id)
    if current.expires_at is None:
        return current  # it never expires: nothing to renew
    if ttl_days and current.expires_at >= dialect.now() + dt.timedelta(days=ttl_days):
        return current
    return memory_revise(memory_id=memory_id, ttl_days=ttl_days, **caller.credit).memory


def _captured_text(content, text) -> tuple[str, str]:
    """The checked text to keep, given as ``content`` or by its older name ``text``, and the name it came by."""
    if content is None and text is None:
        raise InvalidInput("content: required (the captured text to keep; 'text' is its older name).", field="content")
    if content is not None and text is not None and content != text:
        raise InvalidInput(
            "content and text are two names for the same field and were given different values; send only content.",
            field="text",
        )
    named = "content" if content is not None else "text"
    return validation.content(content if content is not None else text, field=named), named


def hook_ingest(
    *,
    caller: Caller,
    content: str | None = None,
    text: str | None = None,
    namespace=None,
    kind: str = Kind.ARTIFACT,
    title: str | None = None,
    tags=None,
    ttl_days: int | None = None,
    source: str | None = None,
    harness: str = "",
    hook: str = "",
    session: str = "",
) -> IngestResult:
    """Store captured text as a memory that expires after ``ttl_days`` (default MEMORY_HOOK_TTL_DAYS; 0: never).

    Text the namespace already holds, exactly or nearly (``search.duplicates``), is not
    stored again: that memory's expiry is renewed and its id returned. Text that matches
    a prompt-injection pattern (``telemetry.screening``) is refused with
    ``InjectionSuspected`` naming the pattern, and the refusal is counted (a
    ``RefusedIngest`` row, without the text). ``text`` is the older name of ``content``.
    """
    namespace = caller.home_namespace(namespace)
    harness = _name(harness, field="harness", required=False)
    hook = _name(hook, field="hook", required=False)
    session = _session(session)
    content, named = _captured_text(content, text)
    kind = validation.kind(kind)
    title = validation.short_text(title, field="title", limit=validation.TITLE_MAX)
    tags = validation.tags(tags)
    source = (
        validation.short_text(source, field="source", limit=validation.SOURCE_MAX)
        if source is not None
        else _source(harness, hook, session)
    )
    ttl_days = settings.MEMORY_HOOK_TTL_DAYS if ttl_days is None else validation.ttl_days(ttl_days)

    _refuse_suspected_injection(
        caller,
        title=title,
        content=content,
        named=named,
        namespace=namespace,
        harness=harness,
        hook=hook,
        session=session,
    )
    return _store_or_refresh(
        caller,
        namespace=namespace,
        content=content,
        kind=kind,
        title=title,
        tags=tags,
        source=source,
        ttl_days=ttl_days,
    )


def _refuse_suspected_injection(
    caller: Caller, *, title: str, content: str, named: str, namespace: str, harness: str, hook: str, session: str
) -> None:
    """Raise InjectionSuspected when the text matches a prompt-injection pattern, once the refusal is counted."""
    pattern = screening.suspected_injection(f"{title}\n{content}")
    if pattern is None:
        return
    # Outside any transaction of ours: the count must stay although the request fails.
    telemetry.refused_ingest_create(
        actor=caller.actor,
        harness=harness,
        hook=hook,
        session=session,
        namespace=namespace,
        pattern=pattern.name,
        characters=len(content),
    )
    raise InjectionSuspected(
        f"{named}: refused because it {pattern.description} (pattern {pattern.name!r}); captured text is "
        "replayed to models as memory, so text written to steer one is not stored. Remove that passage "
        "and send the rest.",
        field=named,
    )


def _store_or_refresh(
    caller: Caller, *, namespace: str, content: str, kind: str, title: str, tags: list[str], source: str, ttl_days: int
) -> IngestResult:
    """Store the text as a new memory, unless the namespace holds it already, exactly or nearly: then renew that
    memory's expiry."""
    exact = selectors.visible_duplicate(namespace=namespace, content_hash=validation.content_hash(content))
    if exact is None:
        twin = duplicates.find_near_twin(content, namespace=namespace, title=title)
        if twin is not None:
            record = _refresh(twin.memory_id, ttl_days=ttl_days, caller=caller)
            return _ingest_result("refreshed", record, cosine=twin.cosine)
    # No near twin was found above (or the text is an exact duplicate): no need to look again.
    result = memory_remember(
        namespace=namespace,
        content=content,
        kind=kind,
        title=title or None,
        tags=tags,
        source=source or None,
        ttl_days=ttl_days,
        look_for_near_twin=False,
        state=caller.new_memory_state,
        **caller.credit,
    )
    if result.deduplicated:
        return _ingest_result("duplicate", _refresh(result.memory.id, ttl_days=ttl_days, caller=caller))
    return _ingest_result("created", result.memory)


def _ingest_result(status: str, record: MemoryRecord, *, cosine: float | None = None) -> IngestResult:
    return IngestResult(
        status=status,
        memory_id=record.id,
        revision_id=record.revision_id,
        namespace=record.namespace,
        cosine=cosine,
        expires_at=record.expires_at,
    )


def _positive_int(value, *, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{field}: {value!r} is not a positive integer.", field=field.split("[")[0])
    return value


def _report_items(memories) -> list[tuple[int, int]]:
    """Return ``(memory_id, revision_id)`` pairs from a report's ``memories`` list, checked for shape."""
    if not isinstance(memories, (list, tuple)):
        raise InvalidInput("memories: expected a list of {memory_id, revision_id} objects.", field="memories")
    if len(memories) > REPORT_MEMORIES_MAX:
        raise TooLarge(f"memories: {len(memories)} items is over the limit of {REPORT_MEMORIES_MAX}.", field="memories")
    items, seen = [], set()
    for index, item in enumerate(memories):
        where = f"memories[{index}]"
        if not isinstance(item, dict) or set(item) != {"memory_id", "revision_id"}:
            raise InvalidInput(f"{where}: expected an object with exactly memory_id and revision_id.", field="memories")
        memory_id = _positive_int(item["memory_id"], field=f"{where}.memory_id")
        revision_id = _positive_int(item["revision_id"], field=f"{where}.revision_id")
        if memory_id in seen:
            raise InvalidInput(f"{where}: memory {memory_id} is listed twice.", field="memories")
        seen.add(memory_id)
        items.append((memory_id, revision_id))
    return items


def _check_reported(caller: Caller, items: list[tuple[int, int]]) -> None:
    """Refuse memories the caller may not see exactly as ``check_memory`` does, and foreign revision ids."""
    namespaces = dict(
        Memory.objects.filter(pk__in=[memory_id for memory_id, _ in items]).values_list("pk", "namespace")
    )
    for memory_id, _ in items:
        if memory_id not in namespaces or not caller.may_use(namespaces[memory_id]):
            caller.check_memory(memory_id)  # raises for a caller limited to some namespaces
            get_memory(memory_id)  # raises for a missing memory
            raise NotFound(f"Memory {memory_id} not found.", field="id")  # not reached
    owners = dict(
        Revision.objects.filter(pk__in=[revision_id for _, revision_id in items]).values_list("pk", "memory_id")
    )
    for index, (memory_id, revision_id) in enumerate(items):
        if owners.get(revision_id) != memory_id:
            raise InvalidInput(
                f"memories[{index}].revision_id: {revision_id} is not a revision of memory "
                f"{memory_id}. Report the revision_id the recall gave.",
                field="memories",
            )


def hook_report(
    *,
    caller: Caller,
    harness: str,
    hook: str,
    query: str = "",
    session: str = "",
    characters: int,
    memories: list,
) -> InjectionRecord:
    """Record that ``harness``'s ``hook`` injected a block of ``characters`` carrying these memory revisions."""
    harness = _name(harness, field="harness", required=True)
    hook = _name(hook, field="hook", required=True)
    session = _session(session)
    query = validation.query_text(query, required=False)
    if isinstance(characters, bool) or not isinstance(characters, int) or not 0 <= characters <= REPORT_CHARACTERS_MAX:
        raise InvalidInput(
            f"characters: {characters!r} is out of range 0..{REPORT_CHARACTERS_MAX}.", field="characters"
        )
    items = _report_items(memories)
    _check_reported(caller, items)
    return telemetry.injection_create(
        actor=caller.actor, harness=harness, hook=hook, session=session, query=query, characters=characters, items=items
    )


def answer_uses(memory_words: set[str], answer_words: set[str]) -> bool:
    """Whether an answer with ``answer_words`` used a memory with ``memory_words`` (stems, no filler words).

    Words carried from a memory into the answer (a name, a number, a host) are the sign it was
    used; a third of the memory's words, or half of a short answer's, keeps one shared common
    word from counting.
    """
    shared = len(memory_words & answer_words)
    if shared < min(USED_MIN_WORDS, len(memory_words)) or not shared:
        return False
    return 3 * shared >= len(memory_words) or 2 * shared >= len(answer_words)


def hook_used(*, caller: Caller, session: str = "", answer: str, injection: int | None = None) -> UsedRecord:
    """Mark which memories of an injection the answer that followed it used (``answer_uses``, less the words of
    the injection's query); the answer is not kept.

    ``injection``: the id ``hook_report`` returned; without it, the caller's newest injection
    in ``session``. Nothing to mark (no injection yet) is an answer with ``injection`` null.
    """
    session = _session(session)
    if not isinstance(answer, str):
        raise InvalidInput(f"answer: expected text, got {type(answer).__name__}.", field="answer")
    if len(answer) > ANSWER_MAX_CHARS:
        raise TooLarge(
            f"answer: {len(answer)} characters is over the limit of {ANSWER_MAX_CHARS}; send its end.", field="answer"
        )
    if injection is None:
        if not session:
            raise InvalidInput(
                "Give injection (the id hooks/report/ returned) or the session it was reported in.", field="injection"
            )
        injection = telemetry_selectors.latest_injection(actor=caller.actor, session=session)
        if injection is None:
            return UsedRecord(injection=None, used=[], unused=[])
    else:
        injection = _positive_int(injection, field="injection")
    reported = telemetry_selectors.injection_items(injection_id=injection, actor=caller.actor)
    if reported is None:
        raise NotFound(f"Injection {injection} not found among this key's reports.", field="injection")
    query, items = reported
    contents = dict(
        Revision.objects.filter(pk__in=[revision_id for _, revision_id in items]).values_list("pk", "content")
    )
    asked = text.content_stems(query)
    answer_words = text.content_stems(answer) - asked
    used, unused = [], []
    for memory_id, revision_id in items:
        content = contents.get(revision_id)
        uses = content is not None and answer_uses(text.content_stems(content) - asked, answer_words)
        (used if uses else unused).append(memory_id)
    if used:
        telemetry.injection_used_mark(injection_id=injection, memory_ids=used)
    return UsedRecord(injection=injection, used=used, unused=unused)
