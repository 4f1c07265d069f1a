"""Reading a JSON import: the document parsed, and each item checked into the form the import writes.

``memories.services.imports`` reads a batch with these and writes it. Every error names where in the
document it is (``memories[3].revisions[1].known_at``), so one message can list them all.
"""

import dataclasses
import datetime as dt
from contextlib import contextmanager

from django.conf import settings

from memories import validation
from memories.models import Kind, Lifecycle, Revision, State
from memories.services.export import (
    DOCUMENT_FIELDS,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MEMORY_FIELDS,
    NUMBER_FIELDS,
    REVISION_FIELDS,
    TEXT_FIELDS,
    TIME_FIELDS,
)
from memories.services.revisions import check_interface, validity_interval
from memoryproject.exceptions import InvalidInput, MemoryServiceError, TooLarge
from memoryproject.jsontext import parse_strict_json
from memoryproject.timeparse import format_instant, parse_optional_instant

# What makes two revisions the same assertion; content_hash stands for the content.
COMPARED_FIELDS = tuple(sorted({*TIME_FIELDS, "tombstone", *TEXT_FIELDS, *NUMBER_FIELDS} - {"content"}))
_AUTHOR_MAX = Revision._meta.get_field("author").max_length


@dataclasses.dataclass(frozen=True)
class RevisionIn:
    fields: dict  # Revision field values, as a trusted replay writes them
    hides: int | None  # position of the hidden revision within the memory
    given_valid_from: dt.datetime | None  # valid_from as written, before defaulting to known_at

    @property
    def tombstone(self) -> bool:
        return self.fields["tombstone"]

    def fingerprint(self) -> tuple:
        return (*(self.fields[name] for name in COMPARED_FIELDS), self.hides)


@dataclasses.dataclass(frozen=True)
class MemoryIn:
    path: str
    namespace: str
    key: str
    kind: str
    tags: list[str]
    state: str  # Memory.state: forgotten when the last revision is a tombstone, else active
    lifecycle: str  # the recorded lifecycle state: candidate, active or archived
    created_at: dt.datetime | None
    revisions: list[RevisionIn]


class Located(InvalidInput):
    """An input error whose message already says where in the batch it is."""


def error_at(path: str, error: MemoryServiceError) -> tuple[str, str]:
    """Return (message, field) with ``path`` put in front of the field the error names."""
    field = f"{path}.{error.field}" if error.field else path
    if error.field and error.message.startswith(f"{error.field}:"):
        return f"{path}.{error.message}", field
    return f"{field}: {error.message}", field


@contextmanager
def _at(path: str):
    try:
        yield
    except Located:
        raise
    except InvalidInput as error:
        message, field = error_at(path, error)
        raise Located(message, field=field) from None


def _reject_unknown(raw: dict, allowed: set[str]) -> None:
    for name in raw:
        if name not in allowed:
            raise InvalidInput(f"{name}: unknown field. Allowed: {', '.join(sorted(allowed))}.", field=str(name))


def parse_document(document) -> dict:
    if isinstance(document, (bytes, bytearray)):
        try:
            document = bytes(document).decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidInput(f"document: not UTF-8 text (byte {error.start}).", field="document") from None
    if isinstance(document, str):
        try:
            # The parser every door uses: a repeated key or deep nesting is refused, not guessed at.
            document = parse_strict_json(document)
        except ValueError as error:
            raise InvalidInput(f"document: not valid JSON ({error}).", field="document") from None
    if not isinstance(document, dict) or not isinstance(document.get("memories"), list):
        raise InvalidInput(
            "document: expected a JSON object with a 'memories' list (the format export writes).", field="document"
        )
    _reject_unknown(document, DOCUMENT_FIELDS)
    if document.get("format", EXPORT_FORMAT) != EXPORT_FORMAT:
        raise InvalidInput(f"format: {document['format']!r} is not {EXPORT_FORMAT!r}.", field="format")
    if document.get("version", EXPORT_VERSION) != EXPORT_VERSION:
        raise InvalidInput(
            f"version: {document['version']!r} is not a version this server reads ({EXPORT_VERSION}).", field="version"
        )
    for name in ("exported_at", "as_of"):
        parse_optional_instant(document.get(name), field=name)
    limit = settings.MEMORY_MAX_IMPORT_ITEMS
    if len(document["memories"]) > limit:
        raise TooLarge(
            f"memories: {len(document['memories'])} items is over the limit of {limit} per import "
            "(MEMORY_MAX_IMPORT_ITEMS). Split the file.",
            field="memories",
        )
    return document


def read_memory(path, raw, *, trusted, actor, interface, now) -> MemoryIn:
    with _at(path):
        if not isinstance(raw, dict):
            raise InvalidInput(f"expected an object, got {type(raw).__name__}.")
        _reject_unknown(raw, MEMORY_FIELDS)
        namespace = validation.namespace(raw.get("namespace"))
        key = validation.key(raw.get("key"))
        kind = validation.kind(raw.get("kind", Kind.NOTE))
        tags = validation.tags(raw.get("tags"))
        created_at = parse_optional_instant(raw.get("created_at"), field="created_at")
        revisions_raw = raw.get("revisions")
        if not isinstance(revisions_raw, list) or not revisions_raw:
            raise InvalidInput("revisions: expected a non-empty list of revisions, oldest first.", field="revisions")
    revisions = []
    for position, revision_raw in enumerate(revisions_raw):
        with _at(f"{path}.revisions[{position}]"):
            revision = _read_revision(
                revision_raw, earlier=revisions, trusted=trusted, actor=actor, interface=interface, now=now
            )
        revisions.append(revision)
    with _at(path):
        # Forgetting appends a revision, so the history decides whether the memory is forgotten; one that is not
        # gives its recorded lifecycle state (stale is read from age, never exported).
        forgotten = revisions[-1].tombstone
        state = State.FORGOTTEN.value if forgotten else State.ACTIVE.value
        given = raw.get("state", state)
        wrong = given != State.FORGOTTEN if forgotten else given not in Lifecycle.values
        if wrong:
            expected = "forgotten" if forgotten else f"one of {', '.join(Lifecycle.values)}"
            raise InvalidInput(
                f"state: {given!r} contradicts the history, whose last revision "
                f"{'is' if forgotten else 'is not'} a tombstone (expected {expected}).",
                field="state",
            )
        lifecycle = Lifecycle.ACTIVE.value if forgotten else given
    return MemoryIn(
        path=path,
        namespace=namespace,
        key=key,
        kind=kind,
        tags=tags,
        state=state,
        lifecycle=lifecycle,
        created_at=created_at or revisions[0].fields["known_at"],
        revisions=revisions,
    )


def _read_revision(raw, *, earlier: list[RevisionIn], trusted, actor, interface, now) -> RevisionIn:
    if not isinstance(raw, dict):
        raise InvalidInput(f"expected an object, got {type(raw).__name__}.")
    _reject_unknown(raw, REVISION_FIELDS)
    tombstone = raw.get("tombstone", False)
    if not isinstance(tombstone, bool):
        raise InvalidInput(f"tombstone: expected true or false, got {tombstone!r}.", field="tombstone")
    known_at = _known_at(raw, earlier=earlier, trusted=trusted, now=now)
    content, hides = _content_and_hides(raw, tombstone=tombstone, earlier=earlier)
    given_from = parse_optional_instant(raw.get("valid_from"), field="valid_from")
    default_from = known_at or now
    valid_from, valid_to = validity_interval(raw.get("valid_from"), raw.get("valid_to"), default_from=default_from)
    digest = validation.content_hash(content)
    if raw.get("content_hash") not in (None, digest):
        raise InvalidInput(
            "content_hash: does not match the content (the SHA-256 of its UTF-8 text).", field="content_hash"
        )
    subject, predicate, object_ = validation.triple(raw.get("subject"), raw.get("predicate"), raw.get("object"))
    fields = dict(
        content=content,
        title=validation.short_text(raw.get("title"), field="title", limit=validation.TITLE_MAX),
        subject=subject,
        predicate=predicate,
        object=object_,
        source=validation.short_text(raw.get("source"), field="source", limit=validation.SOURCE_MAX),
        confidence=validation.confidence(raw.get("confidence")),
        reason=validation.short_text(raw.get("reason"), field="reason", limit=validation.REASON_MAX),
        author=validation.short_text(raw.get("author"), field="author", limit=_AUTHOR_MAX) or actor,
        # The import's own interface was checked once, before the batch was read.
        interface=check_interface(raw["interface"]) if raw.get("interface") else interface,
        content_hash=digest,
        known_at=known_at,
        valid_from=valid_from,
        valid_to=valid_to,
        expires_at=parse_optional_instant(raw.get("expires_at"), field="expires_at"),
        tombstone=tombstone,
    )
    return RevisionIn(fields=fields, hides=hides, given_valid_from=given_from)


def _known_at(raw: dict, *, earlier: list[RevisionIn], trusted: bool, now: dt.datetime) -> dt.datetime | None:
    """The revision's known_at: required and not in the future in a trusted import, never before the one before it."""
    known_at = parse_optional_instant(raw.get("known_at"), field="known_at")
    if trusted and known_at is None:
        raise InvalidInput("known_at: required in a trusted import (when the revision was learned).", field="known_at")
    if trusted and known_at > now:
        raise InvalidInput(f"known_at: {format_instant(known_at)} is in the future.", field="known_at")
    previous = earlier[-1].fields["known_at"] if earlier else None
    if known_at is not None and previous is not None and known_at < previous:
        raise InvalidInput(
            f"known_at: {format_instant(known_at)} is earlier than the revision before it; "
            "list revisions oldest first.",
            field="known_at",
        )
    return known_at


def _content_and_hides(raw: dict, *, tombstone: bool, earlier: list[RevisionIn]) -> tuple[str, int | None]:
    """The revision's text and, for a tombstone (which has none), the position of the earlier revision it hides."""
    if tombstone:
        content = raw.get("content") or ""
        if content != "":
            raise InvalidInput("content: a tombstone carries no text.", field="content")
        hides = raw.get("hides")
        if not earlier:
            raise InvalidInput(
                "tombstone: the first revision of a memory cannot be a tombstone; there is nothing before it to hide.",
                field="tombstone",
            )
        if isinstance(hides, bool) or not isinstance(hides, int) or not 0 <= hides < len(earlier):
            raise InvalidInput(
                f"hides: {hides!r} is not the position of an earlier revision of this memory (0..{len(earlier) - 1}).",
                field="hides",
            )
        if earlier[hides].tombstone:
            raise InvalidInput(f"hides: revision {hides} is itself a tombstone.", field="hides")
    else:
        content = validation.content(raw.get("content"))
        hides = raw.get("hides")
        if hides is not None:
            raise InvalidInput("hides: only a tombstone hides a revision.", field="hides")
    return content, hides
