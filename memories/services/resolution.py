"""Resolving a conflict (``knowledge.contradictions``) by appending revisions: nothing is deleted, every step is
audited.

- ``keep``: the other memory is forgotten (a tombstone with the reason).
- ``split``: both hold, in turn: the earlier memory until ``boundary``, the later one from it.
  Each is re-asserted for its interval after a tombstone that hides it at every other time
  (a revision can only add an interval; the tombstone takes the rest away), in one instant,
  so no time shows the memory hidden. A bounded correction inside that interval is not kept.
- ``merge``: the other memory is forgotten and the kept one revised with the given text.

The conflict must still exist now (as of now, about now): resolving one that is gone is
refused (``Conflict``, 409), since the caller decided on what it no longer is.
"""

import datetime as dt

from django.db import transaction
from django.db.models import Max

from knowledge.contradictions import conflict_id, in_conflict
from memories import selectors, validation
from memories.models import Memory, Revision
from memories.records.conflict_records import ResolveResult
from memories.records.memory_record import MemoryRecord
from memories.services.lifecycle import hold_only, memory_forget, memory_revise, prepare_revision
from memories.services.revisions import audit_many, check_interface, get_memory
from memoryproject import dialect
from memoryproject.exceptions import Conflict, InvalidInput
from memoryproject.timeparse import format_instant, parse_optional_instant

RESOLUTIONS = ("keep", "split", "merge")
# SQLite's INTEGER is 64-bit: a larger id can name no memory.
_ID_MAX = 2**63 - 1
# The arguments each resolution takes besides the conflict and the reason.
_TAKES = {"keep": ("keep",), "split": ("boundary", "earlier"), "merge": ("keep", "content")}
_REQUIRED = {"keep": ("keep",), "split": ("boundary",), "merge": ("keep", "content")}


def conflict_memory_ids(value) -> tuple[int, int]:
    """The two memory ids a conflict id names ("3-7"), smaller first; InvalidInput naming ``id`` otherwise."""
    parts = value.split("-") if isinstance(value, str) else []
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() and part[0] != "0" for part in parts):
        raise InvalidInput(
            f"id: {value!r} is not a conflict id ('<memory id>-<memory id>', e.g. '3-7', as "
            "memory_conflicts gives it).",
            field="id",
        )
    first, second = int(parts[0]), int(parts[1])
    if second > _ID_MAX:
        raise InvalidInput(f"id: {value!r} names no memory (ids are at most {_ID_MAX}).", field="id")
    if first >= second:
        raise InvalidInput(
            f"id: {value!r} is not a conflict id: it names two different memories, smaller id "
            f"first ({conflict_id(first, second)!r}).",
            field="id",
        )
    return first, second


def _check_arguments(resolution, given: dict, pair: tuple[int, int]) -> None:
    if resolution not in RESOLUTIONS:
        raise InvalidInput(f"resolution: {resolution!r} is not one of {', '.join(RESOLUTIONS)}.", field="resolution")
    for name, value in given.items():
        if value is not None and name not in _TAKES[resolution]:
            takes = ", ".join(_TAKES[resolution])
            raise InvalidInput(f"{name}: {resolution} does not take {name} (it takes {takes}).", field=name)
    for name in _REQUIRED[resolution]:
        if given[name] is None:
            raise InvalidInput(f"{name}: required with resolution {resolution}.", field=name)
    for name in ("keep", "earlier"):
        # True == 1 in Python: a flag is not a memory id.
        if given[name] is not None and (isinstance(given[name], bool) or given[name] not in pair):
            raise InvalidInput(
                f"{name}: {given[name]!r} is not one of the conflict's memories ({pair[0]} or {pair[1]}).", field=name
            )


def conflict_resolve(
    *,
    conflict_id: str,
    resolution: str,
    actor: str,
    interface: str,
    keep: int | None = None,
    boundary=None,
    earlier: int | None = None,
    content: str | None = None,
    reason: str | None = None,
) -> ResolveResult:
    """Resolve the conflict between two memories by appending revisions (see the module's docstring)."""
    check_interface(interface)
    pair = conflict_memory_ids(conflict_id)
    _check_arguments(resolution, {"keep": keep, "boundary": boundary, "earlier": earlier, "content": content}, pair)
    reason = validation.short_text(reason, field="reason", limit=validation.REASON_MAX)
    boundary = parse_optional_instant(boundary, field="boundary")
    if content is not None:
        content = validation.content(content)
        prepare_revision(keep, {"content": content})  # embedded before the write lock, as memory_revise does
    name = f"{pair[0]}-{pair[1]}"
    with transaction.atomic():
        now = dialect.locked_now()  # under the write lock, see memory_remember
        memories = [get_memory(memory_id) for memory_id in pair]
        shown = [selectors.visible_revision(memory=memory, as_of=now) for memory in memories]
        if not _still_open(memories, shown):
            raise Conflict(
                f"Conflict {name} no longer exists: the two memories no longer state different values "
                "for one subject now (one was changed, forgotten or moved). List the conflicts again.",
                field="id",
            )
        before = Revision.objects.filter(memory_id__in=pair).aggregate(last=Max("pk"))["last"]
        other = pair[1] if keep == pair[0] else pair[0]
        why = reason or f"resolved conflict {name}: kept memory {keep}"
        detail = {"conflict_id": name, "resolution": resolution, "reason": reason}
        if resolution == "keep":
            memory_forget(memory_id=other, reason=why, actor=actor, interface=interface)
            detail.update(kept=keep, forgotten=other)
        elif resolution == "merge":
            memory_forget(memory_id=other, reason=why, actor=actor, interface=interface)
            memory_revise(memory_id=keep, content=content, actor=actor, interface=interface)
            detail.update(kept=keep, forgotten=other)
        else:
            first = _split(
                memories,
                shown,
                boundary=boundary,
                earlier=earlier,
                now=now,
                actor=actor,
                interface=interface,
                reason=reason or f"resolved conflict {name}: split at {format_instant(boundary)}",
            )
            detail.update(boundary=format_instant(boundary), earlier=first)
        appended = _audit_resolution(pair, detail, before=before, now=now, actor=actor, interface=interface)
        records = [_after(memory_id, now=dialect.now()) for memory_id in pair]
    return ResolveResult(conflict_id=name, resolution=resolution, memories=records, revision_ids=appended)


def _audit_resolution(pair, detail: dict, *, before: int, now: dt.datetime, actor: str, interface: str) -> list[int]:
    """Record the resolution on both memories with the revisions it appended (ids after ``before``); return those."""
    appended = list(
        Revision.objects.filter(memory_id__in=pair, pk__gt=before).order_by("pk").values_list("pk", flat=True)
    )
    detail["revision_ids"] = appended
    audit_many(
        actor=actor,
        interface=interface,
        action="resolve_conflict",
        at=now,
        events=[(memory_id, detail) for memory_id in pair],
    )
    return appended


def _still_open(memories: list[Memory], shown: list[Revision | None]) -> bool:
    """Whether the two memories, as now shows them, are in conflict in one namespace."""
    if None in shown or memories[0].namespace != memories[1].namespace:
        return False
    return in_conflict(
        memories[0].namespace, *((revision.subject, revision.predicate, revision.object) for revision in shown)
    )


def _split(
    memories,
    shown,
    *,
    boundary: dt.datetime,
    earlier: int | None,
    now: dt.datetime,
    actor: str,
    interface: str,
    reason: str,
) -> int:
    """Make the earlier memory hold until ``boundary`` and the later one from it; return the earlier's id."""
    if earlier is None:
        # The fact whose validity starts first held first; on a tie, the one learned first.
        first = min((0, 1), key=lambda side: (shown[side].valid_from, shown[side].pk))
    else:
        first = 0 if memories[0].pk == earlier else 1
    later = 1 - first
    start, end = shown[first].valid_from, shown[later].valid_to
    if boundary <= start:
        raise InvalidInput(
            f"boundary: must be later than {format_instant(start)}, when memory "
            f"{memories[first].pk}'s fact starts to hold.",
            field="boundary",
        )
    if end is not None and boundary >= end:
        raise InvalidInput(
            f"boundary: must be earlier than {format_instant(end)}, when memory "
            f"{memories[later].pk}'s fact stops holding.",
            field="boundary",
        )
    hold_only(memories[first], shown[first], start, boundary, now=now, actor=actor, interface=interface, reason=reason)
    hold_only(memories[later], shown[later], boundary, end, now=now, actor=actor, interface=interface, reason=reason)
    return memories[first].pk


def _after(memory_id: int, *, now: dt.datetime):
    """The record of a memory after a resolution: the revision shown now, else its newest with text."""
    memory = Memory.objects.get(pk=memory_id)
    revision = selectors.visible_revision(memory=memory, as_of=now) or selectors.latest_content_revision(memory)
    revision.memory = memory
    return MemoryRecord.from_revision(revision)
