"""What the admin shows of a memory: the revision history with word diffs, and the text each row previews.

Reads only. The templates escape every piece of text; nothing here builds HTML.
"""

import datetime as dt
import difflib
import re
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from memories.models import Memory, Revision

# Word and whitespace runs, so a diff marks whole words and keeps the spacing.
_TOKENS = re.compile(r"\s+|[^\s]+")
# Past this many tokens on either side a word diff costs more than it tells; show the new text as inserted.
DIFF_TOKEN_LIMIT = 20_000


@dataclass(frozen=True)
class HistoryRow:
    revision: Revision
    diff: list[tuple[str, str]]  # (equal | insert | delete, text), against the previous revision with text
    previous_id: int | None
    title_before: str | None  # the previous title, when this revision changed it
    shown_now: bool


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """Return ``after`` as segments marked equal, insert or delete against ``before``."""
    old, new = _TOKENS.findall(before), _TOKENS.findall(after)
    if len(old) > DIFF_TOKEN_LIMIT or len(new) > DIFF_TOKEN_LIMIT:
        return [("delete", before), ("insert", after)] if before != after else [("equal", after)]
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    # A lone run of spaces between two changes joins them: "<del>a b</del><ins>c d</ins>", not four pieces.
    opcodes = matcher.get_opcodes()
    merged: list[list] = []
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal" and 0 < index < len(opcodes) - 1 and "".join(old[i1:i2]).isspace():
            tag = "replace"
        if tag != "equal" and merged and merged[-1][0] != "equal":
            merged[-1] = ["replace", merged[-1][1], i2, merged[-1][3], j2]
        else:
            merged.append([tag, i1, i2, j1, j2])
    segments: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in merged:
        if tag == "equal":
            segments.append(("equal", "".join(old[i1:i2])))
            continue
        if i2 > i1:
            segments.append(("delete", "".join(old[i1:i2])))
        if j2 > j1:
            segments.append(("insert", "".join(new[j1:j2])))
    return segments


def revision_history(memory: Memory, *, now: dt.datetime) -> list[HistoryRow]:
    """Every revision of ``memory``, newest first, each diffed against the revision with text before it."""
    revisions = list(memory.revisions.order_by("known_at", "id"))
    shown = Revision.objects.filter(memory=memory).visible(as_of=now).values_list("id", flat=True).first()
    rows, previous = [], None
    for revision in revisions:
        if revision.tombstone:
            rows.append(HistoryRow(revision=revision, diff=[], previous_id=None, title_before=None, shown_now=False))
            continue
        if previous is None:
            diff = [("insert", revision.content)]
        else:
            diff = word_diff(previous.content, revision.content)
        title_before = previous.title if previous is not None and previous.title != revision.title else None
        rows.append(
            HistoryRow(
                revision=revision,
                diff=diff,
                previous_id=previous.pk if previous else None,
                title_before=title_before,
                shown_now=revision.pk == shown,
            )
        )
        previous = revision
    rows.reverse()
    return rows


def attach_shown_revisions(memories: list[Memory], *, now: dt.datetime) -> None:
    """Set ``memory.shown_revision`` on each: the revision visible now, else its newest with text (two queries).

    The same choice as ``selectors.memory_list``, for a whole page at once; ``shown_is_visible``
    says which of the two it is.
    """
    ids = [memory.pk for memory in memories]
    shown_now = Revision.objects.filter(memory_id__in=ids).visible(as_of=now)
    visible = {revision.memory_id: revision for revision in shown_now}
    missing = [memory_id for memory_id in ids if memory_id not in visible]
    latest = {}
    if missing:
        newest_text = Revision.objects.filter(memory_id=OuterRef("pk"), tombstone=False).latest_known().values("id")[:1]
        latest_ids = Memory.objects.filter(pk__in=missing).annotate(latest=Subquery(newest_text)).values("latest")
        latest = {revision.memory_id: revision for revision in Revision.objects.filter(pk__in=latest_ids)}
    for memory in memories:
        memory.shown_at = now  # the page's one reading of the clock, for the columns that need "now"
        memory.shown_is_visible = memory.pk in visible
        memory.shown_revision = visible.get(memory.pk) or latest.get(memory.pk)
