"""Learn from text: store each fact, decision and skill ``knowledge.extraction`` finds, and end the facts a change ends.

The call is one transaction: its items are stored, and the facts its stated changes end
are closed, at instants that follow the text's order. Each item is checked as
``memory_remember`` checks a memory (``new_memory``): one the store refuses (too large,
say) is skipped with the reason, and the others are kept. An item whose triple (in normal
form, ``knowledge.names``) or whose content a memory of the namespace already shows now is
not stored again: the answer names that memory. The rest are written together
(``memories_remember_new``: a few multi-row statements, not a remember each). Stored items
carry ``LEARNED_CONFIDENCE`` (rules, not a person, asserted them) and their span in the
revision's source, e.g. ``learn: notes.md chars 120-188``.

A stated change ("The ledger switched from Oracle to Postgres last month") ends each
current fact of the namespace that matches it (``memory_end``: as of now it holds only
before the stated time, or before now; as of earlier it is as it was), with the learn
call as the closing revision's source, and restates it with the new name where the change
names one. When nothing current matches, the answer says so and only what the sentence
states on its own is stored.
"""

import datetime as dt

from django.db import transaction

from knowledge import changes, extraction, findings
from knowledge.names import entity_name, predicate_name
from memories import selectors, validation
from memories.models import Lifecycle, Revision
from memories.records.learn_results import EndedFact, LearnedItem, LearnResult, SkippedSentence, UnmatchedChange
from memories.services.lifecycle import memory_end
from memories.services.remember import NewMemory, memories_remember_new, memory_remember, new_memory
from memories.services.revisions import check_interface
from memoryproject import dialect
from memoryproject.exceptions import Busy, MemoryServiceError
from memoryproject.storage import WRITE_REFUSALS
from search import indexing

# Rules guess; a writer who knows better states a higher confidence by writing the memory themselves.
LEARNED_CONFIDENCE = 0.5
# What a stored item's source says when the caller names none.
DEFAULT_SOURCE = "text"
# Room the span takes in a revision's source ("learn: " and " chars 12345-12345").
_SPAN_ROOM = 40
SOURCE_MAX = validation.SOURCE_MAX - _SPAN_ROOM
# The database refusing every write (full, read-only, its lock held too long) refuses the whole call, as for any
# write: the answer must not read as success with each sentence "refused".
_THE_STORE_REFUSES = (*WRITE_REFUSALS, Busy)
# Facts of the namespace one change may end, at most: a change that names more is too broad to apply blindly.
ENDS_MAX = 20


def learned_source(source: str, start: int, end: int) -> str:
    """The source a learned revision records: where the text came from, and the item's span in it."""
    return f"learn: {source or DEFAULT_SOURCE} chars {start}-{end}"


def _item_record(item: findings.Item, memory_id: int, revision_id: int, matched_by: str | None = None) -> LearnedItem:
    return LearnedItem(
        memory_id=memory_id,
        revision_id=revision_id,
        kind=item.kind,
        content=item.content,
        subject=item.subject,
        predicate=item.predicate,
        object=item.object,
        valid_from=item.valid_from,
        valid_to=item.valid_to,
        alternatives=list(item.alternatives) or None,
        start=item.start,
        end=item.end,
        matched_by=matched_by,
    )


def _same_name(stored: str, said: str | None) -> bool:
    """Whether a stored name is the one a change says (None: any): equal in normal form, or one holding the other
    as whole words ("checkout" and "checkout service")."""
    if said is None:
        return True
    stored, said = f" {entity_name(stored)} ", f" {entity_name(said)} "
    return stored == said or stored in said or said in stored


def _matches(revision: Revision, ending: findings.Ending) -> bool:
    if ending.predicates and predicate_name(revision.predicate) not in ending.predicates:
        return False
    if not ending.predicates and ending.subject is None and predicate_name(revision.predicate) in changes.TASTES:
        return False  # "we dropped Jira" says nothing of who likes it
    pair = (revision.subject, revision.object)
    if _same_name(pair[0], ending.subject) and _same_name(pair[1], ending.object):
        return True
    return ending.either_way and _same_name(pair[1], ending.subject) and _same_name(pair[0], ending.object)


def _current_facts(namespace: str, ending: findings.Ending, *, now: dt.datetime) -> list[Revision]:
    """The facts of ``namespace`` visible now that ``ending`` names, lowest memory id first."""
    names = [entity_name(name) for name in (ending.subject, ending.object) if name]
    # LIKE (ASCII case-insensitive) on a word of a name narrows to the few rows naming it; the rule decides.
    word = max((name.split()[-1] for name in names), key=len)
    candidates = Revision.objects.filter(memory__namespace=namespace).exclude(subject="")
    if ending.either_way:
        candidates = candidates.filter(subject__icontains=word) | candidates.filter(object__icontains=word)
    elif ending.object and entity_name(ending.object).split()[-1] == word:
        candidates = candidates.filter(object__icontains=word)
    else:
        candidates = candidates.filter(subject__icontains=word)
    return [
        revision for revision in candidates.visible(as_of=now).order_by("memory_id", "id") if _matches(revision, ending)
    ]


class _Learning:
    """One learn call's writes, in the text's order, and what became of each.

    Items wait in ``pending`` and are written together (``flush``): before each ending, so
    it sees every fact stated before it, and at the end.
    """

    def __init__(self, *, text: str, namespace: str, source: str, tags: list[str], actor: str, interface: str):
        self.text, self.namespace, self.source, self.tags = text, namespace, source, tags
        self.actor, self.interface = actor, interface
        self.pending: list[findings.Item] = []
        self.stored: list[LearnedItem] = []
        self.deduplicated: list[LearnedItem] = []
        self.ended: list[EndedFact] = []
        self.unmatched: list[UnmatchedChange] = []
        self.skipped: list[SkippedSentence] = []
        # (start, triple in normal form) of each fact this call states: a change never ends its own clause's facts.
        self.stating: set[tuple[int, tuple[str, str, str]]] = set()
        self.written: dict[tuple[str, str, str], tuple[int, int]] = {}  # triple -> (memory, revision) this call wrote

    def store(self, item: findings.Item) -> None:
        self.pending.append(item)

    def _refused(self, item: findings.Item, error: MemoryServiceError) -> None:
        self.skipped.append(
            SkippedSentence(
                text=self.text[item.start : item.end],
                start=item.start,
                end=item.end,
                reason=f"refused: {error.message}",
            )
        )

    def flush(self) -> None:
        """Store the pending items: each one the namespace (or this call) already holds is named, not stored."""
        items, self.pending = self.pending, []
        checked = self._checked(items)
        shown = selectors.visible_same_triples(
            namespace=self.namespace,
            triples=[(item.subject, item.predicate, item.object) for item, _ in checked if item.subject],
        )
        duplicates = selectors.visible_duplicates(
            namespace=self.namespace, content_hashes=[memory.content_hash for _, memory in checked]
        )
        new, first_of_hash, claimed, later = [], {}, set(), []
        for item, memory in checked:
            triple = _normal(item.subject, item.predicate, item.object) if item.subject else None
            if triple in self.written:
                self.deduplicated.append(_item_record(item, *self.written[triple], matched_by="triple"))
            elif triple in claimed:
                later.append(item)  # the same fact as an item written below: named once that one has its ids
            elif triple in shown:
                same = shown[triple]
                self.deduplicated.append(_item_record(item, same.memory_id, same.pk, matched_by="triple"))
            elif memory.content_hash in duplicates or memory.content_hash in first_of_hash:
                # Another memory shows this text: remember gives it this call's tags and names it.
                self._remember_again(item, memory)
            else:
                first_of_hash[memory.content_hash] = item
                new.append((item, memory))
                if triple:
                    claimed.add(triple)
        if not self._write_new(new):
            return
        for item in later:
            ids = self.written[_normal(item.subject, item.predicate, item.object)]
            self.deduplicated.append(_item_record(item, *ids, matched_by="triple"))

    def _checked(self, items: list[findings.Item]) -> list[tuple[findings.Item, NewMemory]]:
        """Each item with its checked memory (``new_memory``); one the store refuses is skipped with the reason."""
        checked = []
        for item in items:
            try:
                checked.append(
                    (
                        item,
                        new_memory(
                            content=item.content,
                            title=item.title or None,
                            kind=item.kind,
                            source=learned_source(self.source, item.start, item.end),
                            subject=item.subject or None,
                            predicate=item.predicate or None,
                            object=item.object or None,
                            confidence=LEARNED_CONFIDENCE,
                            valid_from=item.valid_from,
                            valid_to=item.valid_to,
                        ),
                    )
                )
            except MemoryServiceError as error:
                self._refused(item, error)
        return checked

    def _write_new(self, new: list[tuple[findings.Item, NewMemory]]) -> bool:
        """Store the new items together and record what each became; False when the store refused them all."""
        try:
            with transaction.atomic():
                revisions = memories_remember_new(
                    namespace=self.namespace,
                    memories=[memory for _, memory in new],
                    tags=self.tags,
                    state=Lifecycle.CANDIDATE,
                    actor=self.actor,
                    interface=self.interface,
                )
        except _THE_STORE_REFUSES:
            raise
        except MemoryServiceError as error:
            for item, _ in new:
                self._refused(item, error)
            return False
        for (item, _), revision in zip(new, revisions, strict=True):
            if item.subject:
                self.written[_normal(item.subject, item.predicate, item.object)] = (revision.memory_id, revision.pk)
            self.stored.append(_item_record(item, revision.memory_id, revision.pk))
        return True

    def _remember_again(self, item: findings.Item, memory) -> None:
        try:
            with transaction.atomic():
                result = memory_remember(
                    namespace=self.namespace,
                    content=memory.content,
                    title=memory.title or None,
                    kind=memory.kind,
                    tags=self.tags,
                    source=memory.source,
                    subject=memory.subject or None,
                    predicate=memory.predicate or None,
                    object=memory.object or None,
                    valid_from=memory.valid_from,
                    valid_to=memory.valid_to,
                    confidence=LEARNED_CONFIDENCE,
                    state=Lifecycle.CANDIDATE,
                    actor=self.actor,
                    interface=self.interface,
                    look_for_near_twin=False,
                )
        except _THE_STORE_REFUSES:
            raise
        except MemoryServiceError as error:
            self._refused(item, error)
            return
        record = _item_record(
            item, result.memory.id, result.memory.revision_id, matched_by="content" if result.deduplicated else None
        )
        (self.deduplicated if result.deduplicated else self.stored).append(record)

    def end(self, ending: findings.Ending) -> None:
        self.flush()
        now = dialect.now()
        facts = [
            revision
            for revision in _current_facts(self.namespace, ending, now=now)
            if (ending.start, _normal(revision.subject, revision.predicate, revision.object)) not in self.stating
        ]
        said = self.text[ending.start : ending.end]
        if not facts:
            self._unmatched(ending, f"no current fact matches '{ending.describe()}'; nothing was ended")
            for item in ending.otherwise:
                self.store(item)
            return
        if len(facts) > ENDS_MAX:
            self._unmatched(
                ending,
                f"{len(facts)} current facts match '{ending.describe()}', more than {ENDS_MAX}; nothing was ended. "
                "Name the subject to narrow it.",
            )
            return
        valid_to = ending.at or now
        for number, revision in enumerate(facts):
            result = memory_end(
                memory_id=revision.memory_id,
                valid_to=valid_to,
                actor=self.actor,
                interface=self.interface,
                reason=f"ended by a stated change: {said}"[: validation.REASON_MAX],
                source=learned_source(self.source, ending.start, ending.end),
            )
            self.ended.append(
                EndedFact(
                    memory_id=revision.memory_id,
                    revision_id=result.memory.revision_id,
                    subject=revision.subject,
                    predicate=revision.predicate,
                    object=revision.object,
                    change=ending.rule,
                    start=ending.start,
                    end=ending.end,
                    valid_to=min(valid_to, revision.valid_to) if revision.valid_to else valid_to,
                )
            )
            if ending.becomes:
                self.store(_restated(revision, ending, first=number == 0))

    def _unmatched(self, ending: findings.Ending, why: str) -> None:
        """Record a stated change that ends nothing, and why."""
        self.unmatched.append(
            UnmatchedChange(
                text=self.text[ending.start : ending.end],
                start=ending.start,
                end=ending.end,
                reason=f"change ({ending.rule}): {why}",
            )
        )


def _normal(subject: str, predicate: str, object_: str) -> tuple[str, str, str]:
    return entity_name(subject), predicate_name(predicate), entity_name(object_)


def _restated(revision: Revision, ending: findings.Ending, *, first: bool) -> findings.Item:
    """The fact an ended one becomes: the change's new name in place of the old one, holding from the change on."""
    subject, object_ = revision.subject, revision.object
    old = ending.subject if ending.replaced == "subject" else ending.object
    # The old name's side of the stored fact, whichever way round it stands ("the pipeline is owned by Kofi").
    if old and not _same_name(subject if ending.replaced == "subject" else object_, old):
        replaced = "object" if ending.replaced == "subject" else "subject"
    else:
        replaced = ending.replaced
    if replaced == "subject":
        subject = ending.becomes
    else:
        object_ = ending.becomes
    # One change may restate several facts: each but the first says its own triple, so no two share a content.
    content = ending.content if first else f"{subject} {revision.predicate} {object_} ({ending.content.rstrip('.')})."
    return findings.Item(
        kind=findings.FACT,
        content=content,
        start=ending.start,
        end=ending.end,
        subject=subject,
        predicate=revision.predicate,
        object=object_,
        valid_from=ending.at,
    )


def memory_learn(
    *, text: str, namespace: str, actor: str, interface: str, source: str | None = None, tags: list[str] | None = None
) -> LearnResult:
    """Find facts, decisions, skills and changes in ``text`` by rule, store and end what they say, and say what became
    of each sentence."""
    check_interface(interface)
    text = validation.text_to_learn(text, limit=extraction.TEXT_MAX_CHARS)
    namespace = validation.namespace(namespace)
    source = validation.short_text(source, field="source", limit=SOURCE_MAX)
    tag_names = validation.tags(tags)
    found = extraction.extract(text, now=dialect.now())
    # Embedded together before any write takes the lock; each write then finds its vector ready.
    indexing.prepare_many(
        [(item.title, item.content) for item in found.items] + [("", ending.content) for ending in found.endings]
    )
    learning = _Learning(
        text=text, namespace=namespace, source=source or "", tags=tag_names, actor=actor, interface=interface
    )
    learning.stating = {
        (item.start, _normal(item.subject, item.predicate, item.object)) for item in found.items if item.subject
    }
    learning.skipped = [
        SkippedSentence(text=entry.text, start=entry.start, end=entry.end, reason=entry.reason)
        for entry in found.skipped
    ]
    # A clause's endings go before its own facts: "The cache now runs on node-9" ends node-4, then states node-9.
    steps = sorted([*found.endings, *found.items], key=lambda entry: (entry.start, isinstance(entry, findings.Item)))
    with transaction.atomic():
        for step in steps:
            if isinstance(step, findings.Ending):
                learning.end(step)
            else:
                learning.store(step)
        learning.flush()
    learning.stored.sort(key=lambda record: record.start)
    learning.deduplicated.sort(key=lambda record: record.start)
    learning.skipped.sort(key=lambda entry: entry.start)
    return LearnResult(
        namespace=namespace,
        stored=learning.stored,
        deduplicated=learning.deduplicated,
        ended=learning.ended,
        unmatched_changes=learning.unmatched,
        skipped=learning.skipped,
    )
