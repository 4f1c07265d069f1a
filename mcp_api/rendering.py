"""What a model reads from a tool: each memory's text under one short header, in plain lines.

A tool's answer carries its record twice: whole, as the structured content that matches
the tool's outputSchema (what clients and programs read), and as this text content, which
is what most clients hand the model. A model pays for every character, and most of a
record (hashes, four timestamps, empty triples) tells it nothing, so the text keeps the
memory text and a header per memory:

    [#12 user.editor · 0.61 · 2025-05-01 · tags: tools, editor]
    The user edits in Helix.

The header holds the id, the key (unless the server made it up), the score (hits), the
day (UTC) the revision became known, and only what differs from the usual (a kind other
than note, a state other than active, a title, a validity interval, an expiry) and the
tags when there are any.
"""

import datetime as dt
import functools

from knowledge.graph import MAX_DEPTH
from memories import validation
from memories.models import Kind, Lifecycle, State
from memories.records import (
    AttributesRecord,
    AuditReport,
    ChangeResult,
    ConflictList,
    ConflictSide,
    CorrectionRecord,
    GraphHop,
    GraphNeighbourhood,
    GraphResult,
    History,
    LearnedItem,
    LearnResult,
    MemoryRecord,
    Page,
    RecallResult,
    RememberResult,
    ResolveResult,
    RevisionRecord,
    RouteResult,
    Stats,
)

# A confidence is worth a model's reading when it is below what an agent's own write starts at (docs/concepts.md):
# learned, imported, aged or in conflict. The structured content always carries it.
CONFIDENCE_SHOWN_BELOW = 0.7


def _day(instant: dt.datetime) -> str:
    return instant.strftime("%Y-%m-%d")


def _moment(instant: dt.datetime) -> str:
    """The day, with the time of day when it is not midnight UTC."""
    return _day(instant) if instant.time() == dt.time() else instant.strftime("%Y-%m-%d %H:%M")


def _validity(known_at: dt.datetime, valid_from: dt.datetime, valid_to: dt.datetime | None) -> str | None:
    """The interval a revision holds for, when it is not the usual 'from when it became known, open'."""
    if valid_to is not None:
        return f"valid {_moment(valid_from)} to {_moment(valid_to)}"
    if valid_from.date() < known_at.date():
        return f"valid from {_moment(valid_from)}"
    return None


def _header(parts: list[str | None]) -> str:
    return "[" + " · ".join(part for part in parts if part) + "]"


def _memory(memory: MemoryRecord, *, lead: str = "", score: float | None = None) -> str:
    """The memory's header line, then its text."""
    header = _header(
        [
            # A key the server made up says nothing the id does not.
            f"{lead}#{memory.id}" + ("" if validation.GENERATED_KEY_RE.fullmatch(memory.key) else f" {memory.key}"),
            f"{score:.2g}" if score is not None else None,
            _day(memory.known_at),
            memory.kind if memory.kind != Kind.NOTE else None,
            memory.state if memory.state != State.ACTIVE else None,
            f"title: {memory.title}" if memory.title else None,
            _validity(memory.known_at, memory.valid_from, memory.valid_to),
            f"expires {_day(memory.expires_at)}" if memory.expires_at else None,
            f"confidence {memory.confidence:g}"
            if memory.confidence is not None and memory.confidence < CONFIDENCE_SHOWN_BELOW
            else None,
            f"tags: {', '.join(memory.tags)}" if memory.tags else None,
        ]
    )
    text = f"{header}\n{memory.content}"
    for conflict in memory.conflicts or ():
        source = f", source {conflict.provenance.source}" if conflict.provenance.source else ""
        text += (
            f"\nConflicts with #{conflict.memory_id}: it says {conflict.object!r} (by "
            f"{conflict.provenance.author}{source}, {_day(conflict.provenance.known_at)}); conflict "
            f"{conflict.conflict_id}."
        )
    return text


def _explain(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key}={_explain(item)}" for key, item in value.items())
    return str(value)


@functools.singledispatch
def as_text(record) -> str:
    """The text content of a tool's answer ``record``."""
    raise TypeError(f"No text form for {type(record).__name__}")


@as_text.register
def _(record: MemoryRecord) -> str:
    return _memory(record)


@as_text.register
def _(record: RememberResult) -> str:
    lead = "already stored " if record.deduplicated else "revised " if record.revised else "stored "
    text = _memory(record.memory, lead=lead)
    if record.near_twin is not None:
        twin = record.near_twin
        text += (
            f"\nNear twin: memory {twin.memory_id} says nearly the same (cosine {twin.cosine:.2f}); consider "
            "memory_update on it, or forgetting one of them with memory_set_state."
        )
    if record.held:
        text += f"\nHeld: {record.held[len('held: ') :]}."
    return text


def _correction(correction: CorrectionRecord) -> str:
    until = f" to {_moment(correction.valid_to)}" if correction.valid_to else " on"
    title = f" (title: {correction.title})" if correction.title else ""
    return (
        f"Correction written as revision {correction.revision_id}, holding from "
        f"{_moment(correction.valid_from)}{until}{title}:\n{correction.content}"
    )


@as_text.register
def _(record: ChangeResult) -> str:
    text = _memory(record.memory, lead="changed " if record.changed else "unchanged ")
    if record.correction is not None:
        text += "\n" + _correction(record.correction)
    return text


@as_text.register
def _(record: RecallResult) -> str:
    # The hits speak for themselves; the mode and match used are in the structured content.
    lines = [] if record.hits else [f"No hits ({record.mode} search, match {record.match_mode})."]
    if record.note:
        lines.append(f"Note: {record.note}")
    if record.hint:
        lines.append(f"Hint: {record.hint}")
    for hit in record.hits:
        lines.append(_memory(hit.memory, score=hit.score))
        if hit.explain:
            lines.append(f"explain: {_explain(hit.explain)}")
    return "\n".join(lines)


@as_text.register
def _(record: Page) -> str:
    more = f"next page: cursor {record.next_cursor}" if record.next_cursor else "last page"
    lines = [f"{len(record.items)} memor{'y' if len(record.items) == 1 else 'ies'}, newest first; {more}."]
    lines.extend(_memory(memory) for memory in record.items)
    return "\n".join(lines)


def _revision(revision: RevisionRecord) -> str:
    header = _header(
        [
            f"r{revision.id}",
            revision.known_at.strftime("%Y-%m-%d %H:%M"),
            f"{revision.author} ({revision.interface})",
            f"forgot r{revision.hides}" if revision.tombstone else None,
            f"reason: {revision.reason}" if revision.reason else None,
            f"confidence {revision.confidence:g}" if revision.confidence is not None else None,
            f"title: {revision.title}" if revision.title and not revision.tombstone else None,
            _validity(revision.known_at, revision.valid_from, revision.valid_to) if not revision.tombstone else None,
            f"expires {_day(revision.expires_at)}" if revision.expires_at else None,
        ]
    )
    return header if revision.tombstone else f"{header}\n{revision.content}"


# What a change of lifecycle state did, by (state before, state after): the words the actions have.
_STATE_CHANGES = {
    (Lifecycle.CANDIDATE, Lifecycle.ACTIVE): "promoted",
    (Lifecycle.ACTIVE, Lifecycle.ARCHIVED): "archived",
    (Lifecycle.CANDIDATE, Lifecycle.ARCHIVED): "archived",
    (Lifecycle.ARCHIVED, Lifecycle.ACTIVE): "unarchived",
    (Lifecycle.ARCHIVED, Lifecycle.CANDIDATE): "unarchived",
}


def _attributes_change(before: AttributesRecord, after: AttributesRecord) -> str | None:
    """The header line of a change to a memory's namespace, kind, tags or state; None when none of them changed."""
    changes = [
        _STATE_CHANGES.get((before.state, after.state), f"state {after.state}")
        if after.state != before.state
        else None,
        f"moved to {after.namespace}" if after.namespace != before.namespace else None,
        f"kind {after.kind}" if after.kind != before.kind else None,
        f"tags: {', '.join(after.tags) or 'none'}" if after.tags != before.tags else None,
    ]
    if not any(changes):
        return None
    return _header(
        [
            after.known_at.strftime("%Y-%m-%d %H:%M"),
            f"{after.author} ({after.interface})",
            *changes,
            f"reason: {after.reason}" if after.reason else None,
        ]
    )


@as_text.register
def _(record: History) -> str:
    if not record.revisions:
        return f"Memory {record.memory_id} has no revision known by then."
    # Revisions and the later changes of the memory's own fields, in the order they became known (a revision
    # first at the same instant); the first attribute row is the memory's creation, which its revision shows.
    entries = [(revision.known_at, 0, _revision(revision)) for revision in record.revisions]
    for before, after in zip(record.attributes, record.attributes[1:]):
        line = _attributes_change(before, after)
        if line:
            entries.append((after.known_at, 1, line))
    return "\n".join(line for *_, line in sorted(entries, key=lambda entry: entry[:2]))


def _learned(item: LearnedItem, lead: str) -> str:
    triple = f"{item.subject} | {item.predicate} | {item.object}" if item.subject else None
    same = f"same {item.matched_by}" if item.matched_by else None
    since = f"from {_moment(item.valid_from)}" if item.valid_from else None
    until = f"until {_moment(item.valid_to)}" if item.valid_to else None
    return f"{_header([f'{lead} #{item.memory_id}', item.kind, triple, since, until, same])}\n{item.content}"


def _why(reason: str) -> str:
    """The kind of reason ("question"), or a refusal whole: its message says what the store objected to."""
    return reason if reason.startswith("refused") else reason.split(":")[0]


@as_text.register
def _(record: LearnResult) -> str:
    lines = [
        f"Learned from the text in {record.namespace}: {len(record.stored)} stored, {len(record.deduplicated)} "
        f"already held, {len(record.ended)} ended by a stated change, {len(record.skipped)} sentences skipped."
    ]
    lines.extend(_learned(item, "stored") for item in record.stored)
    lines.extend(_learned(item, "already held by") for item in record.deduplicated)
    lines.extend(
        f"Ended #{fact.memory_id}: {fact.subject} | {fact.predicate} | {fact.object} holds until "
        f"{_moment(fact.valid_to)} ({fact.change})"
        for fact in record.ended
    )
    lines.extend(f"Nothing ended: {change.reason}" for change in record.unmatched_changes)
    lines.extend(f"Skipped ({_why(sentence.reason)}): {sentence.text}" for sentence in record.skipped)
    return "\n".join(lines)


@as_text.register
def _(record: Stats) -> str:
    kinds = ", ".join(f"{kind} {count}" for kind, count in record.kinds.items()) or "none"
    namespaces = (
        ", ".join(f"{name} {count.visible} of {count.memories}" for name, count in record.namespaces.items()) or "none"
    )
    tags = ", ".join(f"{tag.tag} ({tag.namespace}) {tag.count}" for tag in record.top_tags) or "none"
    return "\n".join(
        [
            f"{record.visible} memories visible of {record.memories} stored; {record.forgotten} forgotten, "
            f"{record.revisions} revisions, {record.with_ttl} expiring.",
            f"Visible per kind: {kinds}.",
            f"Visible per namespace (of stored): {namespaces}.",
            f"Top tags: {tags}.",
            f"Embedder: {record.embedder}.",
        ]
    )


def _side(side: ConflictSide) -> str:
    provenance = side.provenance
    return "\n".join(
        [
            _header(
                [
                    f"#{side.memory_id}" + ("" if validation.GENERATED_KEY_RE.fullmatch(side.key) else f" {side.key}"),
                    f"says {side.object!r}",
                    f"by {provenance.author} ({provenance.interface})",
                    f"source {provenance.source}" if provenance.source else None,
                    _day(provenance.known_at),
                    _validity(provenance.known_at, side.valid_from, side.valid_to),
                ]
            ),
            side.content,
        ]
    )


@as_text.register
def _(record: ConflictList) -> str:
    if not record.conflicts:
        return "No conflicts."
    lines = [
        f"{record.total} conflict{'' if record.total == 1 else 's'}"
        + (f", the first {len(record.conflicts)} shown:" if record.total > len(record.conflicts) else ":")
    ]
    for conflict in record.conflicts:
        lines.append(f"Conflict {conflict.id} in {conflict.namespace}: {conflict.subject} / {conflict.predicate}")
        lines.extend((_side(conflict.left), _side(conflict.right)))
    return "\n".join(lines)


@as_text.register
def _(record: ResolveResult) -> str:
    lines = [
        f"Resolved conflict {record.conflict_id} ({record.resolution}); revisions appended: "
        f"{', '.join(str(revision_id) for revision_id in record.revision_ids) or 'none'}."
    ]
    lines.extend(_memory(memory) for memory in record.memories)
    return "\n".join(lines)


def _neighbourhood(found: GraphNeighbourhood) -> list[str]:
    """The entity, then one line per relation in the direction the fact reads, with its memory id."""
    entity = found.entity.display
    aliases = f" (also: {', '.join(found.aliases)})" if found.aliases else ""
    more = "; more left out (raise limit)" if found.truncated else ""
    lines = [f"{entity}{aliases}: {len(found.relations)} relation{'' if len(found.relations) == 1 else 's'}{more}"]
    for relation in found.relations:
        ends = (entity, relation.other.display) if relation.direction == "out" else (relation.other.display, entity)
        lines.append(f"  {ends[0]} {relation.predicate} {ends[1]} [#{relation.memory_id}]")
    return lines


def _hop(hop: GraphHop) -> str:
    if hop.direction == "out":
        return f" -[{hop.predicate} #{hop.memory_id}]-> {hop.target.display}"
    return f" <-[{hop.predicate} #{hop.memory_id}]- {hop.target.display}"


@as_text.register
def _(record: GraphResult) -> str:
    if record.paths is not None:
        cut = " The search was cut by its bounds: more paths may exist." if record.truncated else ""
        if not record.paths:
            return (
                f"No path of at most {MAX_DEPTH} hops between {record.source.display} and {record.target.display}.{cut}"
            )
        lines = [f"{len(record.paths)} path{'' if len(record.paths) == 1 else 's'}, shortest first.{cut}"]
        lines.extend(path[0].source.display + "".join(_hop(hop) for hop in path) for path in record.paths)
        return "\n".join(lines)
    if not record.entities:
        return "The text names no entity the facts know."
    return "\n".join(line for found in record.entities for line in _neighbourhood(found))


@as_text.register
def _(record: RouteResult) -> str:
    lines = [f"Route: {record.route}. {record.why}"]
    lines.extend(_memory(memory) for memory in record.memories or [])
    for answer in (record.graph, record.recall):
        if answer is not None:
            lines.append(as_text(answer))
    return "\n".join(line for line in lines if line)


@as_text.register
def _(record: AuditReport) -> str:
    lines = [f"Audit at {_moment(record.at)}: " + ("every check passed." if record.ok else "problems found.")]
    for finding in record.findings:
        ids = f" Ids: {', '.join(map(str, finding.ids))}." if finding.ids else ""
        fix = f" Fix: {finding.fix}." if finding.fix else ""
        lines.append(f"{'ok' if finding.ok else 'FAIL'} {finding.check}: {finding.detail}{ids}{fix}")
    return "\n".join(lines)
