"""Keeping the indexes in step with the revisions they index.

The FTS5 tables are fed by triggers on memories_revision (search migration 0001),
so they should never drift; ``index_drift`` is how an operator finds out when they
did anyway (a trigger dropped by hand, a restore from a partial copy, a bug).
"""

import logging
import math
import threading
from contextlib import contextmanager

import numpy as np
from django.db import DatabaseError, connection, transaction

from memoryproject import dialect
from search import postings, triggers, vectors
from search.embeddings import EmbedderUnavailable, get_embedder, revision_text
from search.errors import SpaceConflict

logger = logging.getLogger(__name__)

FTS_TABLES = ("search_fts_words",)

# Table names cannot be query parameters, so each statement is written out per table.
_INTEGRITY_CHECK = {
    # rank 1 compares the index with its content view, not only with itself.
    "search_fts_words": "INSERT INTO search_fts_words(search_fts_words, rank) VALUES ('integrity-check', 1)",
}
_INDEXED_ROWS = {
    # The docsize shadow table holds one row per indexed document; counting walks its rowid b-tree.
    "search_fts_words": "SELECT count(*) FROM search_fts_words_docsize",
}
_TRIGGERS = {table: (f"{table}_after_insert", f"{table}_after_delete") for table in FTS_TABLES}
# The triggers that keep search's own tables (postings documents, generations) and the append-only
# rule in step with the store, by the table they sit on: on both engines.
_STORE_TRIGGERS = {
    "memories_revision": (
        "search_revision_deleted",
        "search_revision_updated",
        "memories_revision_no_update",
        "memories_revision_no_delete",
    ),
    "memories_memory": ("search_memory_deleted",),
    "memories_attributes": (
        "search_attributes_deleted",
        "memories_attributes_no_update",
        "memories_attributes_no_delete",
    ),
}


# Running the migrations again would not help: Django records them as applied.
_TRIGGER_FIX = "manage.py audit --fix makes it again, then rebuilds the index."


def _missing_triggers(cursor) -> dict[str, list[str]]:
    """{table (an FTS table stands for its triggers on memories_revision): its triggers that are missing}."""
    wanted = dict(_STORE_TRIGGERS)
    if not dialect.is_postgresql():  # PostgreSQL has no FTS tables
        wanted.update({table: _TRIGGERS[table] for table in FTS_TABLES})
    missing = {}
    for table, names in wanted.items():
        present = dialect.triggers_on(cursor, "memories_revision" if table in FTS_TABLES else table)
        if absent := [name for name in names if name not in present]:
            missing[table] = absent
    return missing


def index_drift(*, full: bool = True) -> list[str]:
    """Return one line per disagreement between the revisions and the indexes that follow them; empty when in step.

    ``full`` adds FTS5's own integrity check of each index against its content, which
    reads all of both (seconds at 100k memories: ``manage.py doctor`` runs it); without
    it, triggers and row counts are checked (milliseconds: the dashboard's overview).
    On both engines, the triggers that feed search's own tables and keep revisions append-only
    must be there; PostgreSQL has no FTS tables (nothing reads them at query time).
    """
    problems = []
    with connection.cursor() as cursor:
        missing_by_table = _missing_triggers(cursor)
        for table in _STORE_TRIGGERS:
            if missing := missing_by_table.get(table):
                problems.append(
                    f"{table}: trigger {', '.join(missing)} is missing, so the store and search's "
                    f"tables can drift apart; {_TRIGGER_FIX}"
                )
        if dialect.is_postgresql():
            return problems
        # A full scan of memories_revision: tombstone has no index, and this runs rarely.
        cursor.execute("SELECT count(*) FROM memories_revision WHERE tombstone = %s", [False])
        with_text = cursor.fetchone()[0]
        for table in FTS_TABLES:
            if missing := missing_by_table.get(table):
                problems.append(
                    f"{table}: trigger {', '.join(missing)} is missing, so writes no longer "
                    f"reach the index; {_TRIGGER_FIX}"
                )
            if full:
                try:
                    # A savepoint, so a failed check leaves the caller's transaction usable.
                    with transaction.atomic():
                        cursor.execute(_INTEGRITY_CHECK[table])
                except DatabaseError as error:
                    problems.append(
                        f"{table}: the index does not match the revisions ({error}); "
                        f"rebuild it with INSERT INTO {table}({table}) VALUES ('rebuild')."
                    )
            cursor.execute(_INDEXED_ROWS[table])
            indexed = cursor.fetchone()[0]
            if indexed != with_text:
                problems.append(f"{table}: {indexed} rows indexed but {with_text} revisions carry text.")
    return problems


# Ids named per line of document_drift, at most.
_DRIFT_IDS_SHOWN = 5


def _drifted_documents() -> tuple[list[int], list[int]]:
    """(revisions with text but no postings document row, document rows of no revision with text)."""
    with connection.cursor() as cursor:
        # Both scans walk one table and look the other up by primary key: an audit's work, not a request's.
        cursor.execute(
            "SELECT r.id FROM memories_revision r WHERE r.tombstone = %s AND NOT EXISTS "
            "(SELECT 1 FROM search_document d WHERE d.revision_id = r.id) ORDER BY r.id",
            [False],
        )
        missing = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT d.revision_id FROM search_document d WHERE NOT EXISTS "
            "(SELECT 1 FROM memories_revision r WHERE r.id = d.revision_id AND r.tombstone = %s) "
            "ORDER BY d.revision_id",
            [False],
        )
        extra = [row[0] for row in cursor.fetchall()]
    return missing, extra


def document_drift() -> list[str]:
    """One line per disagreement between the engine's postings documents and the revisions with text."""
    missing, extra = _drifted_documents()
    problems = []
    for ids, what in (
        (missing, "carry text but have no postings document"),
        (extra, "have a postings document but no revision with text"),
    ):
        if ids:
            shown = ", ".join(map(str, ids[:_DRIFT_IDS_SHOWN])) + (", ..." if len(ids) > _DRIFT_IDS_SHOWN else "")
            problems.append(f"postings: {len(ids)} revision(s) {what} (revision {shown}).")
    return problems


def repair_indexes() -> dict:
    """Make the missing triggers again, rebuild the FTS5 indexes from their content and index again the revisions
    without a postings document; return what was done. Stray postings of revisions that are gone are left (the
    visibility rule never shows them).
    """
    fts_tables = () if dialect.is_postgresql() else FTS_TABLES  # PostgreSQL has none
    with transaction.atomic():
        with connection.cursor() as cursor:
            # First, so that nothing written from here on misses an index.
            made = triggers.create_triggers([name for names in _missing_triggers(cursor).values() for name in names])
            for table in fts_tables:
                cursor.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
            missing, _ = _drifted_documents()
            # Whatever is left of their postings goes first, so each term holds each revision once.
            everywhere = _with_text(missing, every_namespace=True)
            postings.remove(everywhere)
            for start in range(0, len(missing), _IDS_PER_QUERY):
                chunk = missing[start : start + _IDS_PER_QUERY]
                cursor.execute(
                    "DELETE FROM search_posting_tail WHERE revision_id IN (%s)" % ",".join(["%s"] * len(chunk)), chunk
                )
        current = _with_text(missing)
        postings.add(postings.analyse(current))
        # A moved memory's revisions are keyed under its earlier namespaces too (see move_revisions).
        postings.add_keys(postings.analyse(sorted(set(everywhere) - set(current))))
    return {"triggers_made": len(made), "fts_rebuilt": len(fts_tables), "documents_added": len(missing)}


# Vectors embedded before a write took the lock, by (embedder, text); a write finds its
# own there. Bounded: an entry a write never claimed (it failed validation) is dropped.
_PREPARED_MAX = 256
_prepared: dict[tuple[str, str], np.ndarray] = {}
_prepared_lock = threading.Lock()


def prepare(title: str, content: str) -> None:
    """Embed a revision's text ahead of its write, so the write lock is held for the inserts only.

    Failing here costs nothing: the write embeds for itself, or leaves the vector pending.
    Inside ``batched`` it does nothing: the batch embeds all its texts together at the end.
    """
    if in_batch():
        return
    embedder = get_embedder()
    if not embedder.available():
        return
    try:
        text_vector(embedder, title, content)
    except EmbedderUnavailable:
        return


def text_vector(embedder, title: str, content: str) -> np.ndarray:
    """The vector a revision with this text gets, kept for its write: embedded once however often asked.

    Raises EmbedderUnavailable when the model fails.
    """
    key = (embedder.name, revision_text(title, content))
    with _prepared_lock:
        vector = _prepared.get(key)
    if vector is None:
        vector = embedder.embed([key[1]])[0]
        with _prepared_lock:
            if len(_prepared) >= _PREPARED_MAX:
                _prepared.pop(next(iter(_prepared)))
            _prepared[key] = vector
    return vector


def prepare_many(texts: list[tuple[str, str]]) -> None:
    """Embed many revisions' (title, content) ahead of the transaction that writes them (an import's next chunk).

    Like ``prepare``: the write finds the vectors ready and holds the lock for the inserts only.
    """
    embedder = get_embedder()
    if not texts or not embedder.available():
        return
    bodies = list(dict.fromkeys(revision_text(title, content) for title, content in texts))
    with _prepared_lock:
        bodies = [body for body in bodies if (embedder.name, body) not in _prepared]
    try:
        embedded = [
            vector
            for start in range(0, len(bodies), EMBED_CHUNK)
            for vector in embedder.embed(bodies[start : start + EMBED_CHUNK])
        ]
    except EmbedderUnavailable:
        return
    with _prepared_lock:
        for body, vector in zip(bodies, embedded):
            _prepared[(embedder.name, body)] = vector
        # Room for this chunk beside what single writes prepared; the oldest go first.
        while len(_prepared) > _PREPARED_MAX + len(bodies):
            _prepared.pop(next(iter(_prepared)))


def import_published() -> None:
    """Tell every process's search snapshot that an import was published: rows it holds now count (search 0006)."""
    with connection.cursor() as cursor:
        # The one-row state table; readers compare the counter before every query.
        cursor.execute("UPDATE search_state SET published = published + 1 WHERE id = 1")


# Texts per embedding call when indexing many revisions: sentence-transformers sorts each
# call's texts by length, so larger calls pad less; this bounds the memory one call takes.
EMBED_CHUNK = 512
# Revision ids looked up per query when a batch is re-read (SQLite allows 32766 parameters).
_IDS_PER_QUERY = 500

_batch = threading.local()


@contextmanager
def batched():
    """Index the revisions written inside this block together when it ends, in the same transaction.

    For imports: tokenizing, postings and embedding cost far less per revision in one
    large call than one revision at a time. Use it inside the transaction that writes
    the revisions; their postings and vectors appear when the block ends, so nothing
    inside the block may read them back (the duplicate and visibility rules read
    revision rows only). A nested block leaves the indexing to the outermost one; after
    an exception, or with the transaction marked for rollback (a dry run), nothing is
    indexed, since it would be undone anyway.
    """
    if in_batch():
        yield
        return
    _batch.ids = []
    try:
        yield
        ids = _batch.ids
    finally:
        _batch.ids = None
    if connection.in_atomic_block and connection.get_rollback():
        return  # marked to roll back (a dry run): indexing would only be undone
    _index_stored(ids)


def in_batch() -> bool:
    """True inside ``batched``: an import, where per-write work that reads the indexes is skipped."""
    return getattr(_batch, "ids", None) is not None


def _index_stored(revision_ids: list[int]) -> None:
    """Index the revisions with these ids as the database holds them now.

    Re-reading, rather than trusting the objects written, keeps the batch exact when a
    savepoint inside it rolled back: a revision written there is gone (or its id was
    given to a later revision, which is then indexed once, with its own text).
    """
    index_revisions(_with_text(sorted(set(revision_ids))))


def index_revisions(revisions: list[tuple[int, str, str, str]]) -> None:
    """Make new revisions searchable, inside the writer's transaction.

    ``revisions``: (id, namespace of its memory, title, content) of each new revision
    that carries text (tombstones have nothing to index). The FTS5 tables follow by
    trigger; this adds the engine's postings and, when the embedding model is available
    and the stored vectors are its own, the vectors. Otherwise the vectors stay pending
    for ``manage.py backfill`` and the write still succeeds: keyword recall finds it at
    once, semantic recall after a backfill. Inside ``batched`` the revisions are only
    noted, and indexed when the block ends.
    """
    pending = getattr(_batch, "ids", None)
    if pending is not None:
        pending.extend(revision_id for revision_id, *_ in revisions)
        return
    if not revisions:
        return
    postings.add(postings.analyse(revisions))
    embedder = get_embedder()
    if not embedder.available():
        logger.warning(
            "Embedding model unavailable (%s); vectors left pending for 'manage.py backfill'.", embedder.load_error
        )
        return
    try:
        vectors.ensure_space(embedder)
    except SpaceConflict:
        logger.warning("Stored vectors belong to another embedder; run 'manage.py backfill --reembed'.")
        return
    bodies = [revision_text(title, content) for _, _, title, content in revisions]
    with _prepared_lock:
        ready = [_prepared.pop((embedder.name, body), None) for body in bodies]
    try:
        missing = [index for index, vector in enumerate(ready) if vector is None]
        if missing:
            # Calls of equal size, each at most EMBED_CHUNK texts.
            size = math.ceil(len(missing) / math.ceil(len(missing) / EMBED_CHUNK))
            for start in range(0, len(missing), size):
                batch = missing[start : start + size]
                for index, vector in zip(batch, embedder.embed([bodies[index] for index in batch])):
                    ready[index] = vector
    except EmbedderUnavailable as error:
        logger.warning("Embedding failed (%s); vectors left pending for 'manage.py backfill'.", error)
        return
    vectors.insert_vectors([revision_id for revision_id, *_ in revisions], np.stack(ready), embedder=embedder)


# Every namespace a revision's memory has been in: its current one and those of its attribute rows.
_EVERY_NAMESPACE = """
    SELECT r.id, m.namespace, r.title, r.content FROM memories_revision r JOIN memories_memory m ON m.id = r.memory_id
    WHERE r.tombstone = %s AND r.id IN ({marks})
    UNION
    SELECT r.id, a.namespace, r.title, r.content FROM memories_revision r
    JOIN memories_attributes a ON a.memory_id = r.memory_id
    WHERE r.tombstone = %s AND r.id IN ({marks})
    ORDER BY 1, 2"""


def _with_text(revision_ids, *, every_namespace: bool = False) -> list[tuple[int, str, str, str]]:
    """(id, namespace, title, content) of the revisions with these ids that carry text.

    ``every_namespace``: one tuple per namespace the revision's memory has been in, not only its current one.
    """
    rows, ids = [], list(revision_ids)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            if every_namespace:
                # Primary key lookups; the attribute rows by their (memory, known_at, id) index.
                marks = ",".join(["%s"] * len(chunk))
                cursor.execute(_EVERY_NAMESPACE.format(marks=marks), [False, *chunk, False, *chunk])
                rows.extend(cursor.fetchall())
                continue
            # Primary key lookups on both tables.
            cursor.execute(
                "SELECT r.id, m.namespace, r.title, r.content FROM memories_revision r JOIN memories_memory m "
                "ON m.id = r.memory_id WHERE r.tombstone = %s AND r.id IN ({}) ORDER BY r.id".format(
                    ",".join(["%s"] * len(chunk))
                ),
                [False, *chunk],
            )
            rows.extend(cursor.fetchall())
    return rows


def unindex_revisions(revision_ids) -> None:
    """Before revision rows are deleted (erase, purge): take their terms out of the packed postings.

    Their FTS5 entries, tail postings, document rows and vectors follow the row
    deletion by trigger; a term in a packed row is text, so it is removed here, under
    every namespace the revision's memory has been in (a move keeps the old keys).
    """
    postings.remove(_with_text(revision_ids, every_namespace=True))


def move_revisions(revision_ids, *, to_namespace: str) -> None:
    """When a memory moves: key its revisions' postings under ``to_namespace`` too (in the move's transaction).

    The old keys stay: as of a time before the move the memory is still in its old
    namespace, and the snapshot's namespace as of each query says which keys count.
    """
    rows = _with_text(revision_ids)
    postings.add_keys(postings.analyse([(pk, to_namespace, title, content) for pk, _, title, content in rows]))
