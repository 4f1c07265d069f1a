"""The arguments of each operation (the hooks' too), declared once: type, bounds, default and description.

REST validates query strings and JSON bodies with these models (``api.arguments``), MCP tools
take their parameters from them (``mcp_api.tools``), OpenAPI and each tool's inputSchema
are generated from them, and the CLI checks its options with them (``validated``) and
shows the same descriptions as help. They check shape only: the rules about values
(namespaces, times, tags, bytes, duplicates) are the services', so every interface words
them the same.

Every tool list is read by a model before its first call, so a description says only
what the argument's name, type and bounds do not: ``title``, ``tags`` or ``limit`` have
none. Every time argument ends with the forms a time takes (``INSTANT_HELP``); the MCP
server says those once in its instructions instead.

The models are lax; each interface chooses how strictly to read: JSON (REST bodies, MCP)
must have the declared JSON types, query strings are text.
"""

import functools
from dataclasses import dataclass
from typing import Annotated, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from knowledge import extraction, graph
from memories import selectors, states, validation
from memories.models import Kind
from memories.selectors import conflicts
from memories.services import learn as learning
from memories.services.hooks import ANSWER_MAX_CHARS, SESSION_MAX
from memories.services.resolution import RESOLUTIONS
from memoryproject.exceptions import InvalidInput, TooLarge
from search import engine

INSTANT_MAX = 64
INSTANT_HELP = "YYYY-MM-DD (midnight UTC) or ISO 8601 with a timezone, e.g. 2025-05-01T09:30:00Z."
NAMESPACE_MAX = 64
NAMESPACES_MAX = 50
CURSOR_MAX = 100
CONFLICT_ID_MAX = 40
# SQLite's INTEGER is 64-bit: a larger id can name no memory.
ID_MAX = 2**63 - 1

# Types with their bounds; the fields below add the descriptions.
NamespaceName = Annotated[str, Field(pattern=f"^{validation.NAMESPACE_RE.pattern}$", max_length=NAMESPACE_MAX)]
Namespaces = Annotated[list[NamespaceName], Field(min_length=1, max_length=NAMESPACES_MAX)]
TagName = Annotated[str, Field(min_length=1, max_length=validation.TAG_MAX)]
Tags = Annotated[list[TagName], Field(max_length=settings.MEMORY_MAX_TAGS)]
KindName = Literal[tuple(Kind.values)]
Kinds = Annotated[list[KindName], Field(min_length=1, max_length=len(Kind.values))]
MemoryId = Annotated[int, Field(ge=1, le=ID_MAX)]
Content = Annotated[str, Field(min_length=1, max_length=settings.MEMORY_MAX_CONTENT_BYTES)]
QueryText = Annotated[str, Field(min_length=1, max_length=validation.QUERY_MAX_CHARS)]
Key = Annotated[str, Field(max_length=validation.KEY_MAX)]
Title = Annotated[str, Field(max_length=validation.TITLE_MAX)]
Source = Annotated[str, Field(max_length=validation.SOURCE_MAX)]
TriplePart = Annotated[str, Field(max_length=validation.TRIPLE_PART_MAX)]
Reason = Annotated[str, Field(max_length=validation.REASON_MAX)]
Cursor = Annotated[str, Field(max_length=CURSOR_MAX)]
InstantText = Annotated[str, Field(max_length=INSTANT_MAX)]
# "<memory id>-<memory id>", each a positive integer.
ConflictId = Annotated[str, Field(pattern=r"^[1-9][0-9]{0,18}-[1-9][0-9]{0,18}$", max_length=CONFLICT_ID_MAX)]
TtlDays = Annotated[int, Field(ge=0, le=validation.TTL_DAYS_MAX)]
Confidence = Annotated[float, Field(ge=validation.CONFIDENCE_MIN, le=validation.CONFIDENCE_MAX)]

# Arguments several operations take, described once.
NamespaceToWrite = Annotated[
    NamespaceName | None,
    Field(description=(f"Default: the key's first namespace, or {settings.MEMORY_DEFAULT_NAMESPACE!r}.")),
]
EVERY_NAMESPACE_HELP = "Default: every namespace this key may use."
NamespacesToRead = Annotated[NamespaceName | Namespaces | None, Field(description=EVERY_NAMESPACE_HELP)]
TagFilter = Annotated[Tags | None, Field(description="Only memories carrying all these tags.")]
StateName = Literal[states.RECALL_STATES]
StateFilter = Annotated[
    Annotated[list[StateName], Field(min_length=1, max_length=len(states.RECALL_STATES))] | None,
    Field(description="Only memories in these states then; default: all but archived."),
]
SearchMode = Annotated[
    Literal[engine.MODES],
    Field(description=("hybrid: words and meaning; keyword: words only; semantic: meaning only.")),
]
MinScore = Annotated[
    float | None,
    Field(
        ge=0,
        le=validation.MIN_SCORE_MAX,
        description=(
            "Hold back hits scoring below this (0: keep all); by default, hybrid mode holds back every hit when none "
            "is relevant. The note says how many."
        ),
    ),
]
MinConfidence = Annotated[
    float | None,
    Field(
        ge=0,
        le=1,
        description=("Leave out hits whose confidence at the read's time is below this; the note says how many."),
    ),
]
ChangeReason = Annotated[Reason | None, Field(description="Why; kept in the history.")]
VALID_AT_HELP = "Answer about this time; default as_of."


def at_time(description: str):
    """A time argument (default none): its description, then the forms every time argument takes."""
    return Field(None, description=f"{description} {INSTANT_HELP}")


class Arguments(BaseModel):
    """Base of the argument models: unknown arguments are refused, and read arguments do not change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    @functools.cache
    def without(cls, *names: str) -> type["Arguments"]:
        """These arguments but ``names``, which an interface takes elsewhere (REST: the id, from the path)."""
        kept = {name: (field.annotation, field) for name, field in cls.model_fields.items() if name not in names}
        return create_model(cls.__name__, __base__=Arguments, __doc__=cls.__doc__, __module__=cls.__module__, **kept)


# Memories -------------------------------------------------------------------------------------------------------


class RememberArgs(Arguments):
    content: Content = Field(description="The memory, written to stand on its own.")
    namespace: NamespaceToWrite = None
    key: Key | None = Field(
        None, description=("A stable key (e.g. 'user.editor'); remembering under an existing key revises that memory.")
    )
    title: Title | None = None
    kind: KindName | None = Field(None, description="Default: fact with a triple, else note.")
    tags: Tags | None = None
    ttl_days: TtlDays | None = Field(None, description="Expire after this many days; 0 or absent: never.")
    valid_from: InstantText | None = at_time("When the fact starts to hold; default now.")
    valid_to: InstantText | None = at_time("When it stops holding (exclusive); default open.")
    source: Source | None = Field(None, description="Where it came from (a URL, a file, 'user').")
    subject: TriplePart | None = Field(
        None, description=("A fact's triple: give subject, predicate and object, or none.")
    )
    predicate: TriplePart | None = None
    object: TriplePart | None = None
    force: bool = Field(
        False,
        description=(
            "Store it even if it is only a pleasantry or an acknowledgement ('thanks', 'ok'), refused otherwise."
        ),
    )
    confidence: Confidence | None = Field(None, description="How sure you are that it holds; absent: not stated.")


class RecallArgs(Arguments):
    query: QueryText = Field(description="A few key words or a question.")
    namespace: NamespacesToRead = None
    tags: TagFilter = None
    kinds: Kinds | None = None
    limit: int = Field(selectors.RECALL_LIMIT_DEFAULT, ge=1, le=validation.RECALL_LIMIT_MAX)
    match: Literal[engine.MATCH_MODES] = Field(
        selectors.RECALL_MATCH_DEFAULT, description=("auto: all words, else any (with a note); all; any.")
    )
    mode: SearchMode = selectors.RECALL_MODE_DEFAULT
    as_of: InstantText | None = at_time("Answer with what was known at this time; default now.")
    valid_at: InstantText | None = at_time(VALID_AT_HELP)
    explain: bool = Field(False, description="Add each hit's component ranks and raw scores.")
    min_score: MinScore = None
    states: StateFilter = None
    min_confidence: MinConfidence = None


class GetArgs(Arguments):
    id: MemoryId | None = None
    namespace: NamespaceName | None = Field(None, description="With key; default as for memory_remember.")
    key: Key | None = Field(None, description="Instead of id.")
    as_of: InstantText | None = at_time("Show it as known at this time; default now.")
    valid_at: InstantText | None = at_time("Show the value that held at this time; default as_of.")


class UpdateArgs(Arguments):
    id: MemoryId
    content: Content | None = Field(None, description="The new text, from now on (history keeps the old).")
    title: Title | None = None
    add_tags: Tags | None = None
    remove_tags: Tags | None = None
    ttl_days: int = Field(
        -1,
        ge=-1,
        le=validation.TTL_DAYS_MAX,
        description=("-1: keep the current expiry; 0: never expire; N: expire N days from now."),
    )
    valid_from: InstantText | None = at_time(
        "With valid_to, a bounded correction: the new value holds only in [valid_from, valid_to)."
    )
    valid_to: InstantText | None = at_time("End (exclusive) of a bounded correction.")
    source: Source | None = None


class ForgetArgs(Arguments):
    id: MemoryId
    reason: ChangeReason = None


# Restoring takes what forgetting takes.
class RestoreArgs(ForgetArgs):
    pass


# So do the lifecycle's transitions: promote, archive, unarchive.
class StateChangeArgs(ForgetArgs):
    pass


# The five changes of state one MCP tool makes (REST and the CLI have one endpoint or command each).
STATE_ACTIONS = ("forget", "restore", "promote", "archive", "unarchive")


class SetStateArgs(Arguments):
    id: MemoryId
    action: Literal[STATE_ACTIONS]
    reason: ChangeReason = None


class HistoryArgs(Arguments):
    id: MemoryId
    as_of: InstantText | None = at_time("Only revisions known by this time; default now.")


class ListArgs(Arguments):
    namespace: NamespaceName | None = Field(None, description=EVERY_NAMESPACE_HELP)
    tags: TagFilter = None
    kind: KindName | None = None
    state: Literal[selectors.LIST_STATES] = Field(
        "active",
        description=(
            "active: visible now, in any lifecycle state; candidate, stale, archived: visible now and in that state; "
            "hidden: not forgotten but not visible now (expired, or outside its validity); forgotten; all."
        ),
    )
    limit: int = Field(
        selectors.LIST_LIMIT_DEFAULT, ge=1, le=selectors.LIST_LIMIT_MAX, description="Memories per page."
    )
    cursor: Cursor | None = Field(None, description="next_cursor from the previous page.")
    as_of: InstantText | None = at_time("List what was known at this time, each memory as it was then; default now.")
    valid_at: InstantText | None = at_time("List what held at this time; default as_of.")


class AuditArgs(Arguments):
    """The audit takes no arguments: it checks the whole store."""


class StatsArgs(Arguments):
    namespace: NamespaceName | None = Field(
        None,
        description=(
            "The namespace to count; default: all this key may use (a key limited to several namespaces must name one)."
        ),
    )


class ExportArgs(Arguments):
    namespace: NamespaceName | None = Field(
        None,
        description=(
            "The namespace to export; default: all this key may use (a key limited to several namespaces must name "
            "one)."
        ),
    )
    as_of: InstantText | None = at_time("Export what was known at this time; default now.")


class ImportArgs(Arguments):
    trusted: bool = Field(
        False,
        description=(
            "Replay every revision with its recorded times (known_at), tombstones included: a restore from a trusted "
            "export. Needs the admin scope. Otherwise the server clock applies and only each memory's current text "
            "is remembered."
        ),
    )
    dry_run: bool = Field(False, description="Check and count everything, then write nothing.")


class LearnArgs(Arguments):
    text: Annotated[str, Field(min_length=1, max_length=extraction.TEXT_MAX_CHARS)] = Field(
        description=(
            "Notes, a conversation or a document: its facts ('X runs on Y'), decisions ('we chose X over Z because "
            "Y') and skills ('To X: 1. ... 2. ...') are stored, one memory each."
        )
    )
    namespace: NamespaceToWrite = None
    source: Annotated[str, Field(max_length=learning.SOURCE_MAX)] | None = Field(
        None, description=("Where the text came from; each memory's source adds the item's span.")
    )
    tags: Tags | None = None


# Conflicts (memories.selectors.conflicts, memories.services.resolution) -----------------------------------------------


class ConflictsArgs(Arguments):
    namespace: NamespacesToRead = None
    as_of: InstantText | None = at_time("Conflicts as known at this time; default now.")
    valid_at: InstantText | None = at_time("Conflicts about this time; default as_of.")
    limit: int = Field(
        conflicts.CONFLICTS_LIMIT_DEFAULT,
        ge=1,
        le=conflicts.CONFLICTS_LIMIT_MAX,
        description="How many conflicts at most.",
    )


class ResolveConflictArgs(Arguments):
    id: ConflictId = Field(description="The conflict's id (e.g. '3-7'), as recall, get and conflicts give it.")
    resolution: Literal[RESOLUTIONS] = Field(
        description=(
            "keep: keep one memory, forget the other; split: the earlier holds until boundary, the later from it; "
            "merge: one text replaces both (the kept memory is revised, the other forgotten)."
        )
    )
    keep: MemoryId | None = Field(None, description="With keep and merge: the memory that stays.")
    boundary: InstantText | None = at_time("With split: when the later fact starts holding.")
    earlier: MemoryId | None = Field(
        None, description=("With split: the memory that held first; default: the one whose validity starts first.")
    )
    content: Content | None = Field(None, description="With merge: the kept memory's new text.")
    reason: ChangeReason = None


# The knowledge graph (memories.selectors.memory_graph) ------------------------------------------------------------


class GraphArgs(Arguments):
    namespace: NamespaceName | None = Field(None, description="Whose facts; default as for memory_remember.")
    entity: TriplePart | None = Field(None, description="An entity's name or alias: its relations.")
    source: TriplePart | None = Field(
        None,
        description=(f"With target: the shortest paths between the two entities (at most {graph.MAX_DEPTH} hops)."),
    )
    target: TriplePart | None = Field(None, description="With source: where the paths end.")
    query: QueryText | None = Field(None, description=("Free text: the entities it names, each with its relations."))
    limit: int = Field(
        selectors.GRAPH_LIMIT_DEFAULT,
        ge=1,
        le=selectors.GRAPH_LIMIT_MAX,
        description="Relations shown per entity, at most.",
    )
    as_of: InstantText | None = at_time("Answer with the facts known at this time; default now.")
    valid_at: InstantText | None = at_time(VALID_AT_HELP)


# Query routing (memories.selectors.routing) ---------------------------------------------------------------------------


class RouteArgs(Arguments):
    question: QueryText = Field(
        description=(
            "A question: an id ('#42', 'memory 42'), a key ('key user.editor'), a tag ('tagged deploy'), an attribute "
            "('IP of the db host'), a graph question ('how are X and Y related', 'what does X run on'), a time "
            "('what did we know in March', 'as of 2026-01-15', 'last week') or anything else (recall)."
        )
    )
    namespace: NamespacesToRead = None
    limit: int = Field(
        selectors.RECALL_LIMIT_DEFAULT,
        ge=1,
        le=validation.RECALL_LIMIT_MAX,
        description="How many memories or hits at most.",
    )


# Hooks (memories.services.hooks) --------------------------------------------------------------------------------

HOOK_NAME_MAX = 64
HARNESS_HELP = "The agent harness, e.g. 'claude-code'."
HOOK_HELP = "The hook event, e.g. 'UserPromptSubmit'."

HookName = Annotated[str, Field(max_length=HOOK_NAME_MAX)]
Session = Annotated[str, Field(max_length=SESSION_MAX)]
SessionId = Annotated[Session | None, Field(description="The harness's session id.")]


class HookNames(Arguments):
    """Who is calling, for telemetry: the harness, its hook event and its session."""

    harness: HookName | None = Field(None, description=HARNESS_HELP)
    hook: HookName | None = Field(None, description=HOOK_HELP)
    session: SessionId = None


class HookRecallArgs(HookNames):
    query: QueryText = Field(description="The prompt, or key words from it.")
    namespace: NamespacesToRead = None
    tags: TagFilter = None
    kinds: Kinds | None = None
    limit: int = Field(
        selectors.RECALL_LIMIT_DEFAULT,
        ge=1,
        le=validation.RECALL_LIMIT_MAX,
        description=("How many hits at most (the block shows those that fit the budget)."),
    )
    budget: int | None = Field(
        None,
        description=(
            "The block's size limit in characters; default MEMORY_HOOK_BUDGET, at most MEMORY_HOOK_BUDGET_MAX."
        ),
    )
    mode: SearchMode = selectors.RECALL_MODE_DEFAULT
    min_score: MinScore = None
    states: StateFilter = None
    min_confidence: MinConfidence = None


class HookIngestArgs(HookNames):
    content: Content | None = Field(None, description="The captured text to keep (required, as content or text).")
    text: Content | None = Field(None, description="The older name of content, still taken; give one of them.")
    namespace: NamespaceToWrite = None
    kind: KindName = Kind.ARTIFACT.value
    title: Title | None = None
    tags: Tags | None = None
    ttl_days: TtlDays | None = Field(
        None, description=("Expire after this many days; default MEMORY_HOOK_TTL_DAYS; 0: never.")
    )
    source: Source | None = Field(None, description="Where it came from; default: the harness, hook and session.")


class InjectedMemory(Arguments):
    memory_id: int = Field(ge=1)
    revision_id: int = Field(ge=1)


class HookReportArgs(Arguments):
    harness: HookName = Field(description=HARNESS_HELP)
    hook: HookName = Field(description=HOOK_HELP)
    query: Annotated[str, Field(max_length=validation.QUERY_MAX_CHARS)] | None = Field(
        None, description=("The query the block was recalled for.")
    )
    session: SessionId = None
    characters: int = Field(ge=0, description="The size of the block injected, in characters.")
    memories: list[InjectedMemory] = Field(
        max_length=validation.RECALL_LIMIT_MAX,
        description=("The memory revisions the block carried: memory_id and revision_id from hooks/recall/'s hits."),
    )


class HookUsedArgs(Arguments):
    session: SessionId = None
    answer: Annotated[str, Field(max_length=ANSWER_MAX_CHARS)] = Field(
        description=(
            "The answer that followed the injection (read for the memories' words, never kept); send the end of a "
            "longer one."
        )
    )
    injection: int | None = Field(
        None, ge=1, description=("The id hooks/report/ returned; default: this key's newest injection in session.")
    )


# Refusals -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """What is wrong with one argument: ``message`` follows its name, or its ``path`` inside a list."""

    argument: str
    path: str
    message: str
    too_long: bool


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _wrong_type(item) -> bool:
    return item["type"].endswith("_type")


def _path(location: tuple) -> str:
    path = str(location[0]) if location else "arguments"
    for step in location[1:]:
        if isinstance(step, int):
            path += f"[{step}]"
        elif step.isidentifier():
            path += f".{step}"
        # Anything else names a form of a union (e.g. 'list[constrained-str]'), not a place in the value.
    return path


def problems(error: ValidationError) -> list[Problem]:
    """One problem per argument, in the order given, e.g. ``limit``: ``Input should be ... (got 500)``.

    An argument that takes several forms (a namespace, or a list of them) fails once per
    form; what is wrong with the value beats "not this type" for the other forms.
    """
    chosen = {}
    for item in error.errors():
        argument = str(item["loc"][0]) if item["loc"] else "arguments"
        if argument not in chosen or (_wrong_type(chosen[argument]) and not _wrong_type(item)):
            chosen[argument] = item
    return [
        Problem(
            argument=argument,
            path=_path(item["loc"]),
            message="required" if item["type"] == "missing" else f"{item['msg']} (got {_shown(item['input'])})",
            too_long=item["type"] in ("string_too_long", "too_long"),
        )
        for argument, item in chosen.items()
    ]


def validated(model: type[Arguments], data: dict, *, strict: bool) -> Arguments:
    """Return ``model`` read from ``data``; its first problem becomes the domain error naming the argument.

    REST reads through here strictly from JSON bodies and loosely from query strings, the CLI
    loosely from its parsed options.
    """
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as error:
        problem = problems(error)[0]
        refusal = TooLarge if problem.too_long else InvalidInput
        raise refusal(f"{problem.path}: {problem.message}", field=problem.argument) from None
