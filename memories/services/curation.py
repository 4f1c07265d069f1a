"""Curation writes the admin needs beyond the lifecycle: moving a memory to another namespace.

Keyword-only, atomic, and recording the actor and interface, like every service.
"""

from django.db import transaction

from memories import selectors, validation
from memories.models import Memory, Revision, Tag
from memories.records.memory_record import MemoryRecord
from memories.records.write_results import ChangeResult
from memories.services.revisions import (
    UNFINISHED_IMPORT_ADVICE,
    append_attributes,
    audit,
    check_interface,
    get_memory,
    record_now,
    tag_objects,
)
from memoryproject import dialect
from memoryproject.exceptions import Conflict, DuplicateContent
from search import indexing


def _shown(memory: Memory, now) -> MemoryRecord:
    revision = selectors.visible_revision(memory=memory, as_of=now) or selectors.latest_content_revision(memory)
    return record_now(memory, revision)


def _move_tags(memory: Memory, namespace: str) -> None:
    """Carry the memory's tags over to ``namespace``'s rows (its spelling wins there), dropping rows left unused."""
    old = list(memory.tags.all())
    if not old:
        return
    memory.tags.set(tag_objects(namespace=namespace, names=[tag.name for tag in old]))
    # A tag nothing carries any more, now or in an earlier attribute row, would still show the moved memory's
    # label there; one that history holds stays, so answers as of before the move keep it.
    Tag.objects.filter(pk__in=[tag.pk for tag in old], memories__isnull=True, attribute_rows__isnull=True).delete()


def _refuse_clash(memory: Memory, namespace: str, *, now) -> None:
    """Refuse a move to ``namespace`` that would give it a second memory with the key, or with the text shown now."""
    # Every row: the (namespace, key) unique index also holds the keys of imports not yet published.
    clash = Memory.all_objects.filter(namespace=namespace, key=memory.key).first()
    if clash is not None and not Memory.objects.filter(pk=clash.pk).exists():
        raise Conflict(
            f"Memory {memory.pk} cannot move to {namespace!r}: its key {memory.key!r} there belongs to an "
            f"import that has not finished (batch {clash.batch_id}). {UNFINISHED_IMPORT_ADVICE}",
            field="namespace",
        )
    if clash is not None:
        raise Conflict(
            f"Memory {memory.pk} cannot move to {namespace!r}: memory {clash.pk} there already has the key "
            f"{memory.key!r}. Erase or move that memory first, or pick another namespace.",
            field="namespace",
        )
    visible = selectors.visible_revision(memory=memory, as_of=now)
    if visible is not None:
        twin = selectors.visible_duplicate(namespace=namespace, content_hash=visible.content_hash)
        if twin is not None:
            raise DuplicateContent(
                f"Memory {memory.pk} cannot move to {namespace!r}: memory {twin.pk} ({twin.namespace}/{twin.key}) "
                f"already holds exactly this content there. Forget or erase one of the two first.",
                memory_id=twin.pk,
                field="namespace",
            )


def memory_move(*, memory_id: int, namespace: str, actor: str, interface: str) -> ChangeResult:
    """Move a memory, with its whole history and tags, to another namespace.

    Its tags become the target namespace's tags of the same names (tags belong to a
    namespace), keeping the target's spelling where it already has the tag.

    Refused when the target namespace already has a memory with the same key, or
    one whose visible text is exactly the text this memory shows now: a namespace
    never holds two visible copies of the same content. Moving to the namespace it
    is in changes nothing.
    """
    check_interface(interface)
    namespace = validation.namespace(namespace)
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, like every lifecycle write
        memory = get_memory(memory_id)
        if memory.namespace == namespace:
            return ChangeResult(memory=_shown(memory, now), changed=False)
        _refuse_clash(memory, namespace, now=now)
        moved_from = memory.namespace
        # Search keys a memory's terms by its namespace: they are added under the new one and kept under the
        # old, and the namespace as of each query's time (the attribute rows) decides which count.
        # all_objects: revisions an unfinished import added to the memory move with it.
        indexing.move_revisions(
            list(Revision.all_objects.filter(memory=memory).values_list("pk", flat=True)), to_namespace=namespace
        )
        memory.namespace = namespace
        memory.save(update_fields=["namespace"])
        _move_tags(memory, namespace)
        append_attributes(memory, known_at=now, actor=actor, interface=interface)
        audit(
            actor=actor,
            interface=interface,
            action="move",
            memory_id=memory.pk,
            at=now,
            from_namespace=moved_from,
            to_namespace=namespace,
        )
        return ChangeResult(memory=_shown(memory, now), changed=True)
