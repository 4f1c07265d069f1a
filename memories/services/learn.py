"""Learn from text: store each fact, decision and skill ``knowledge.learn`` finds as one memory.

Each item goes through ``memory_remember``, so validation, content dedup, indexing and the
write lock apply as for any write, one item per transaction: an item is stored whole or not
at all, and a call that fails half-way keeps the items stored before. An item whose triple
(in normal form, ``knowledge.names``) or whose content a memory of the namespace already
shows now is not stored again: the answer names that memory. Stored items carry
``LEARNED_CONFIDENCE`` (rules, not a person, asserted them) and their span in the revision's
source, e.g. ``learn: notes.md chars 120-188``.
"""

from django.db import transaction

from knowledge import learn
from memories import selectors, validation
from memories.models import Lifecycle
from memories.records import LearnedItem, LearnResult, SkippedSentence
from memories.services.lifecycle import check_interface, memory_remember
from memoryproject.exceptions import MemoryServiceError
from search import indexing

# Rules guess; a writer who knows better states a higher confidence by writing the memory themselves.
LEARNED_CONFIDENCE = 0.5
# What a stored item's source says when the caller names none.
DEFAULT_SOURCE = "text"
# Room the span takes in a revision's source ("learn: " and " chars 12345-12345").
_SPAN_ROOM = 40
SOURCE_MAX = validation.SOURCE_MAX - _SPAN_ROOM


def learned_source(source: str, start: int, end: int) -> str:
    """The source a learned revision records: where the text came from, and the item's span in it."""
    return f"learn: {source or DEFAULT_SOURCE} chars {start}-{end}"


def _item_record(item: learn.Item, memory_id: int, revision_id: int, matched_by: str | None = None) -> LearnedItem:
    return LearnedItem(memory_id=memory_id, revision_id=revision_id, kind=item.kind, content=item.content,
                       subject=item.subject, predicate=item.predicate, object=item.object,
                       alternatives=list(item.alternatives) or None, start=item.start, end=item.end,
                       matched_by=matched_by)


def memory_learn(*, text: str, namespace: str, actor: str, interface: str, source: str | None = None,
                 tags: list[str] | None = None) -> LearnResult:
    """Find facts, decisions and skills in ``text`` by rule, store each as a memory, and say what became of each."""
    check_interface(interface)
    text = validation.text_to_learn(text, limit=learn.TEXT_MAX_CHARS)
    namespace = validation.namespace(namespace)
    source = validation.short_text(source, field="source", limit=SOURCE_MAX)
    tag_names = validation.tags(tags)
    found = learn.extract(text)
    # Embedded together before any write takes the lock; each write then finds its vector ready.
    indexing.prepare_many([(item.title, item.content) for item in found.items])
    stored, deduplicated = [], []
    skipped = [SkippedSentence(text=entry.text, start=entry.start, end=entry.end, reason=entry.reason)
               for entry in found.skipped]
    for item in found.items:
        try:
            # The triple check and the write in one transaction: no other writer slips the same triple in between.
            with transaction.atomic():
                same = selectors.visible_same_triple(namespace=namespace, subject=item.subject,
                                                     predicate=item.predicate, object=item.object) \
                    if item.subject else None
                if same is not None:
                    deduplicated.append(_item_record(item, same.memory_id, same.pk, matched_by="triple"))
                    continue
                result = memory_remember(
                    namespace=namespace, content=item.content, title=item.title or None, kind=item.kind,
                    tags=tag_names, source=learned_source(source, item.start, item.end),
                    subject=item.subject or None, predicate=item.predicate or None, object=item.object or None,
                    confidence=LEARNED_CONFIDENCE, state=Lifecycle.CANDIDATE, actor=actor, interface=interface,
                    look_for_near_twin=False)
        except MemoryServiceError as error:
            skipped.append(SkippedSentence(text=text[item.start:item.end], start=item.start, end=item.end,
                                           reason=f"refused: {error.message}"))
            continue
        record = _item_record(item, result.memory.id, result.memory.revision_id,
                              matched_by="content" if result.deduplicated else None)
        (deduplicated if result.deduplicated else stored).append(record)
    skipped.sort(key=lambda entry: entry.start)
    return LearnResult(namespace=namespace, stored=stored, deduplicated=deduplicated, skipped=skipped)
