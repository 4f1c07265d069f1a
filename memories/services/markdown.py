"""The Markdown import: a folder of ``.md`` files as chunk memories, kept in step with the folder.

Each file is cut at blank lines outside fenced code and packed into chunks of at most
``MARKDOWN_CHUNK_MAX_CHARS``, each remembered under the key
``md:{collection}:{path}#{n}``; a later run revises changed chunks and forgets the ones
the folder no longer has. It writes as the JSON import does (``memories.services.batches``).
"""

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from memories import selectors, validation
from memories.models import Kind, Memory, State
from memories.records.import_export import ImportReport
from memories.records.write_results import RememberResult
from memories.services import batches
from memories.services.imports import PROBLEMS_SHOWN
from memories.services.lifecycle import memory_forget
from memories.services.remember import memory_remember
from memories.services.revisions import audit, check_interface
from memoryproject import dialect
from memoryproject.exceptions import Conflict, DuplicateContent, InvalidInput, TooLarge
from search import indexing

MARKDOWN_CHUNK_MAX_CHARS = 1800
MARKDOWN_FILE_MAX_BYTES = 2 * 1024 * 1024
COLLECTION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclasses.dataclass(frozen=True)
class _Chunk:
    key: str
    source: str
    title: str
    content: str
    content_hash: str


def markdown_import(
    *,
    root: Path,
    namespace: str,
    collection: str,
    actor: str,
    interface: str,
    tags: list[str] | None = None,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Import a folder of ``.md`` files as chunk memories keyed ``md:{collection}:{path}#{n}``; return what changed.

    Hidden files and folders and symlinks are skipped. Every file is read and checked
    before anything is written; then, all or nothing, unchanged chunks are left alone,
    changed ones get a revision, and chunks the folder no longer has (a shorter or
    deleted file) are forgotten. It writes as the JSON import does, a chunk per short
    transaction into an import batch that one last transaction publishes
    (``memories.services.batches``). ``dry_run`` does it all and takes it out unpublished.
    """
    check_interface(interface)
    namespace = validation.namespace(namespace)
    _check_collection(collection)
    tag_names = validation.tags(tags)
    prefix = f"md:{collection}:"
    chunks = _folder_chunks(Path(root), prefix=prefix)
    counts, done = Counter(), 0

    def advance():
        nonlocal done
        done += 1
        if progress:
            progress(done, len(chunks))

    context = dict(
        namespace=namespace, tags=tag_names, actor=actor, interface=interface, counts=counts, advance=advance
    )
    # New chunks (a first import: most of the work) are embedded before their transaction takes the
    # write lock. An unlocked read: a stale guess costs a miss.
    stored = set(Memory.objects.filter(namespace=namespace, key__startswith=prefix).values_list("key", flat=True))
    with batches.import_batch(actor=actor, interface=interface, trusted=False, dry_run=dry_run) as batch:
        later = _write_adding_chunks(batch, chunks, stored=stored, context=context)
        with batches.publishing(batch, dry_run=dry_run):
            _write_waiting_chunks(later, wanted={chunk.key for chunk in chunks}, prefix=prefix, context=context)
            report = ImportReport(**counts)
            audit(
                actor=actor,
                interface=interface,
                action="import_markdown",
                memory_id=None,
                at=dialect.now(),
                collection=collection,
                batch_id=batch.pk,
                **report.as_dict(),
            )
    return report


def _check_collection(collection) -> None:
    if not isinstance(collection, str) or not COLLECTION_RE.fullmatch(collection):
        raise InvalidInput(
            f"collection: {collection!r} is not a collection name. Use 1-64 letters, digits, "
            "'.', '-' or '_', starting with a letter or digit.",
            field="collection",
        )


def _folder_chunks(root: Path, *, prefix: str) -> list[_Chunk]:
    """The chunks of the folder ``root``, at most as many as one import takes."""
    if not root.is_dir():
        raise InvalidInput(f"root: {str(root)!r} is not a folder.", field="root")
    chunks = _markdown_chunks(root, prefix=prefix)
    limit = settings.MEMORY_MAX_IMPORT_ITEMS
    if len(chunks) > limit:
        raise TooLarge(
            f"root: the folder makes {len(chunks)} chunks, over the limit of {limit} per import "
            "(MEMORY_MAX_IMPORT_ITEMS). Import its subfolders separately.",
            field="root",
        )
    return chunks


def _write_adding_chunks(batch, chunks: list[_Chunk], *, stored: set[str], context: dict) -> list[_Chunk]:
    """Write the chunks that can only add a memory, a part per transaction into ``batch``; return the others.

    Chunks whose outcome depends on the import's other writes wait for the step that publishes. ``stored``: the
    keys the namespace held before, whose chunks are not embedded ahead.
    """
    namespace = context["namespace"]
    later: list[_Chunk] = []
    # Texts more than one chunk carries: which chunk keeps one depends on the order of the writes.
    repeated = {digest for digest, number in Counter(chunk.content_hash for chunk in chunks).items() if number > 1}

    def new_texts(part: list[_Chunk]) -> list[tuple[str, str]]:
        return [(chunk.title, chunk.content) for chunk in part if chunk.key not in stored]

    def write(part: list[_Chunk]) -> None:
        ready = _only_adding(part, namespace=namespace, repeated=repeated)
        adding = {chunk.key for chunk in ready}
        later.extend(chunk for chunk in part if chunk.key not in adding)
        _write_chunks(ready, owners={}, **context)

    batches.write_chunks(batch, chunks, texts=new_texts, write=write)
    indexing.prepare_many(new_texts(later))
    return later


def _write_waiting_chunks(later: list[_Chunk], *, wanted: set[str], prefix: str, context: dict) -> None:
    """In the step that publishes: forget the stored chunks the folder no longer has, then write the waiting ones."""
    actor, interface = context["actor"], context["interface"]
    # startswith is a case-insensitive LIKE in SQLite; the exact test is done here.
    existing = {
        memory.key: memory
        for memory in Memory.objects.filter(namespace=context["namespace"], key__startswith=prefix)
        if memory.key.startswith(prefix)
    }
    # Surplus chunks go first, so their text is free for the chunks that take it over (a renamed file).
    for key, memory in sorted(existing.items()):
        if key not in wanted and memory.state == State.ACTIVE and _forget(memory.pk, actor, interface):
            context["counts"]["forgotten"] += 1
    waiting = {chunk.key for chunk in later}
    owners = {memory.pk: key for key, memory in existing.items() if key in waiting}
    _write_chunks(later, owners=owners, **context)


# Keys and hashes per query when a chunk of the import is looked up.
_LOOKUP_CHUNK = 500


def _only_adding(part: list[_Chunk], *, namespace: str, repeated: set[str]) -> list[_Chunk]:
    """The chunks of ``part`` that can only add a memory, whatever else the import writes.

    Run under the write lock, in the transaction that writes them. A chunk whose key
    names a stored memory, whose text another chunk of the import carries, or whose
    text a visible memory shows (one that the import may forget, or move on) waits
    for the step that publishes: there the chunks are written in the order their texts
    move, as ``_write_chunks`` explains.
    """
    stored = set()
    for start in range(0, len(part), _LOOKUP_CHUNK):
        keys = [chunk.key for chunk in part[start : start + _LOOKUP_CHUNK]]
        # The (namespace, key) unique index serves the IN.
        stored.update(Memory.objects.filter(namespace=namespace, key__in=keys).values_list("key", flat=True))
    fresh = [chunk for chunk in part if chunk.key not in stored and chunk.content_hash not in repeated]
    shown = selectors.visible_duplicates(namespace=namespace, content_hashes=[chunk.content_hash for chunk in fresh])
    return [chunk for chunk in fresh if chunk.content_hash not in shown]


def _forget(memory_id: int, actor: str, interface: str) -> bool:
    try:
        return memory_forget(
            memory_id=memory_id,
            actor=actor,
            interface=interface,
            reason="markdown import: the chunk is no longer in its file",
        ).changed
    except Conflict:  # not visible now (its TTL passed): nothing to hide
        return False


def _write_chunks(
    chunks: list[_Chunk], *, owners: dict[int, str], namespace, tags, actor, interface, counts, advance
) -> None:
    """Remember every chunk, writing a chunk after any chunk of this import whose old text it takes.

    Deleting a paragraph moves text from chunk n+1 to chunk n. Remembering chunk n
    first would collide with chunk n+1, which still shows that text (the duplicate
    rule), so the chunk that must change first goes first; two chunks that swap texts
    are untied by forgetting one, which its own write then brings back. ``owners``:
    the key of each stored memory among ``chunks``, by memory id.
    """
    by_key = {chunk.key: chunk for chunk in chunks}
    status = dict.fromkeys(by_key, "pending")
    for start in by_key:
        stack = [start] if status[start] == "pending" else []
        while stack:
            key = stack[-1]
            status[key] = "writing"
            chunk = by_key[key]
            result, holder = _remember_chunk(chunk, namespace=namespace, tags=tags, actor=actor, interface=interface)
            if holder is not None:
                blocker = owners.get(holder)
                if blocker is not None and status[blocker] == "pending":
                    stack.append(blocker)
                    continue
                if blocker is not None and status[blocker] == "writing":
                    memory_forget(
                        memory_id=holder,
                        actor=actor,
                        interface=interface,
                        reason="markdown import: the chunk's text moved to another chunk",
                    )
                    continue
                # The same text is already elsewhere: leave it there, and do not let this key keep stale text.
                if result is None:
                    _forget(Memory.objects.get(namespace=namespace, key=key).pk, actor, interface)
                counts["duplicates"] += 1
            elif result.created:
                counts["created"] += 1
            elif result.revised:
                counts["revised"] += 1
            else:
                counts["unchanged"] += 1
            status[key] = "done"
            stack.pop()
            advance()


def _remember_chunk(chunk: _Chunk, *, namespace, tags, actor, interface) -> tuple[RememberResult | None, int | None]:
    """Remember ``chunk`` under its key; return the result, and the id of another memory that holds its text."""
    try:
        result = memory_remember(
            namespace=namespace,
            key=chunk.key,
            content=chunk.content,
            title=chunk.title,
            kind=Kind.NOTE,
            tags=tags,
            source=chunk.source,
            actor=actor,
            interface=interface,
            force=True,
        )
    except DuplicateContent as error:
        return None, error.memory_id
    return result, None if result.memory.key == chunk.key else result.memory.id


def _markdown_chunks(root: Path, *, prefix: str) -> list[_Chunk]:
    """Read and chunk every Markdown file under ``root``, or raise one error naming every bad file."""
    chunks, problems = [], []
    for relpath, path in _markdown_files(root):
        try:
            text = _read_markdown(path, relpath)
            blocks, heading = _blocks(text)
            title = " ".join(heading.split())[: validation.TITLE_MAX] or Path(relpath).stem
            source = validation.short_text(relpath, field="source", limit=validation.SOURCE_MAX)
            for number, content in enumerate(_pack_blocks(blocks, MARKDOWN_CHUNK_MAX_CHARS), start=1):
                key = validation.key(f"{prefix}{relpath}#{number}")
                content = validation.content(content, field=f"chunk {number}")
                chunks.append(
                    _Chunk(
                        key=key,
                        source=source,
                        title=title,
                        content=content,
                        content_hash=validation.content_hash(content),
                    )
                )
        except InvalidInput as error:
            problems.append(f"{relpath}: {error.message}")
    if problems:
        shown = "\n".join(problems[:PROBLEMS_SHOWN])
        more = f"\n...and {len(problems) - PROBLEMS_SHOWN} more." if len(problems) > PROBLEMS_SHOWN else ""
        raise InvalidInput(
            f"Nothing was imported: {len(problems)} file(s) could not be read.\n{shown}{more}", field="root"
        )
    return chunks


def _markdown_files(root: Path) -> list[tuple[str, Path]]:
    """Return (relative path, path) of the ``.md`` files under ``root``, sorted; no hidden entries, no symlinks."""
    found, folders = [], [(root, "")]
    while folders:
        folder, relfolder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                # A symlink could lead outside the folder, or around in a loop.
                if entry.name.startswith(".") or entry.is_symlink():
                    continue
                relpath = f"{relfolder}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    folders.append((Path(entry.path), f"{relpath}/"))
                elif entry.is_file(follow_symlinks=False) and entry.name.lower().endswith(".md"):
                    found.append((relpath, Path(entry.path)))
    return sorted(found)


def _read_markdown(path: Path, relpath: str) -> str:
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("the file name is not valid UTF-8.") from None
    try:
        size = path.lstat().st_size
        if size > MARKDOWN_FILE_MAX_BYTES:
            raise TooLarge(f"{size} bytes is over the limit of {MARKDOWN_FILE_MAX_BYTES} bytes for one file.")
        with path.open("rb") as handle:
            data = handle.read(MARKDOWN_FILE_MAX_BYTES + 1)
    except OSError as error:
        raise InvalidInput(f"cannot be read ({error.strerror}).") from None
    if len(data) > MARKDOWN_FILE_MAX_BYTES:  # it grew after the size check
        raise TooLarge(f"over the limit of {MARKDOWN_FILE_MAX_BYTES} bytes for one file.")
    nul = data.find(b"\x00")
    if nul != -1:
        raise InvalidInput(f"contains a NUL byte (at byte {nul}); is it a binary file?")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"is not valid UTF-8 (byte {error.start}).") from None
    return text.removeprefix("\ufeff")


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


def _blocks(text: str) -> tuple[list[str], str]:
    """Split ``text`` at blank lines outside fenced code; return the blocks and the first heading's text."""
    blocks, lines, fence, heading = [], [], None, ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if fence is not None:
            lines.append(line)
            closing = _FENCE_CLOSE.fullmatch(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                fence = None
            continue
        opening = _FENCE_OPEN.fullmatch(line)
        # A backtick fence's info string cannot hold a backtick (CommonMark), so ```x``` is inline code.
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            lines.append(line)
            continue
        if not line.strip():
            if lines:
                blocks.append("\n".join(lines))
                lines = []
            continue
        if not heading and (match := _HEADING.fullmatch(line)):
            heading = (match.group(1) or "").strip()
        lines.append(line)
    if lines:
        blocks.append("\n".join(lines))
    return blocks, heading


def _pack_blocks(blocks: list[str], limit: int) -> list[str]:
    """Pack blocks greedily into chunks of at most ``limit`` characters.

    A block that fits is never split (so a fenced code block stays whole when it can);
    a longer one is split at line boundaries, and a longer line at spaces.
    """
    pieces = []
    for block in blocks:
        pieces.extend([block] if len(block) <= limit else _split_block(block, limit))
    return _pack([piece for piece in pieces if piece.strip()], "\n\n", limit)


def _split_block(block: str, limit: int) -> list[str]:
    lines = []
    for line in block.split("\n"):
        lines.extend([line] if len(line) <= limit else _split_line(line, limit))
    return _pack(lines, "\n", limit)


def _split_line(line: str, limit: int) -> list[str]:
    words = []
    for word in line.split(" "):
        words.extend([word] if len(word) <= limit else [word[at : at + limit] for at in range(0, len(word), limit)])
    return _pack(words, " ", limit)


def _pack(parts: list[str], separator: str, limit: int) -> list[str]:
    packed, current = [], None
    for part in parts:
        if current is None:
            current = part
        elif len(current) + len(separator) + len(part) <= limit:
            current += separator + part
        else:
            packed.append(current)
            current = part
    if current is not None:
        packed.append(current)
    return packed
