"""Stored vectors: one per revision with text, in a sqlite-vec vec0 table (a plain table on PostgreSQL), all from
one embedder.

``search_embedding_space`` (migration 0002) records which embedder filled the
``search_vectors`` table and its dimension; vectors of two models are never mixed,
since their cosines mean nothing to each other. The vec0 table is created with the
space, because its dimension is the embedder's. Its rowid is the revision id:
revisions are immutable, so a stored vector never goes stale, and "pending" simply
means "no vector row yet". Tombstones carry no text and get no vector.

An AFTER DELETE trigger on memories_revision (created with the space) deletes a
revision's vector, so erasure and purge reach vectors without knowing about them.
sqlite-vec zeroes a deleted vector's slot in its chunk blob (since its PR #243; checked
for the pinned 0.1.9 in tests/test_embeddings.py by scanning the database file), and the
connection's ``secure_delete`` zeroes freed pages, so an erased memory leaves no vector
behind once the WAL is checkpointed (erasure does that).

On PostgreSQL (no pgvector) ``search_vectors`` is a plain table of the same bytes,
(revision_id bigint primary key, embedding bytea holding float32 little-endian), created
and dropped with the space as the vec0 table is, and its trigger is a PL/pgSQL function.
Recall never asked the table for neighbours (``search.cosines`` keeps the matrix in memory),
so nothing else changes; an erased vector's bytes are left to erasure's VACUUM.

This module is the only place that writes SQL for vectors.
"""

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from django.db import connection, transaction

from memoryproject import dialect
from search.embeddings import Embedder, get_embedder, revision_text
from search.errors import SpaceConflict

STORE_BATCH_SIZE = 64
# Rows per vec0 chunk (see _create_space); vec0 wants a multiple of 8.
VEC0_CHUNK_SIZE = 128
# vec0 refuses k above 4096.
KNN_MAX = 4096
# SQLite allows 32766 parameters; lists of ids are sent in slices well under that.
_IDS_PER_QUERY = 500
_FETCH_ROWS = 4096


@dataclass(frozen=True)
class EmbeddingSpace:
    """The embedder whose vectors the database holds.

    ``generation`` grows with every change to the stored vectors (insert, delete,
    switch), so a process that keeps a copy reloads only when it moved.
    """

    embedder: str
    dim: int
    created_at: str
    generation: int

    def holds(self, embedder: Embedder) -> bool:
        return self.embedder == embedder.name and self.dim == embedder.dim


class Neighbour(NamedTuple):
    revision_id: int
    cosine: float


@dataclass(frozen=True)
class BackfillBatch:
    """One step of a backfill: the pending revisions it looked at, and how many got a vector."""

    revision_ids: list[int]
    embedded: int


def current_space() -> EmbeddingSpace | None:
    """Return the recorded embedding space, or None until vectors are first stored."""
    with connection.cursor() as cursor:
        # One row at most, found by its primary key.
        cursor.execute("SELECT embedder, dim, created_at, generation FROM search_embedding_space WHERE id = 1")
        row = cursor.fetchone()
    return EmbeddingSpace(*row) if row else None


def _id_column() -> str:
    """The column that holds the revision id: vec0's rowid, or the plain table's primary key."""
    return "revision_id" if dialect.is_postgresql() else "rowid"


def _stored_count(cursor) -> int:
    # vec0 counts from its rowids shadow table; PostgreSQL scans the table (backfill, doctor and space checks).
    cursor.execute("SELECT count(*) FROM search_vectors")
    return cursor.fetchone()[0]


def vector_count() -> int:
    """Return how many vectors are stored."""
    if current_space() is None:
        return 0
    with connection.cursor() as cursor:
        return _stored_count(cursor)


def _create_space(cursor, embedder: Embedder, *, generation: int) -> EmbeddingSpace:
    dim = int(embedder.dim)
    if dialect.is_postgresql():
        _create_postgresql_table(cursor)
    else:
        _create_vec0_table(cursor, dim)
    created_at = dt.datetime.now(dt.timezone.utc).isoformat()
    cursor.execute(
        "INSERT INTO search_embedding_space (id, embedder, dim, created_at, generation) VALUES (1, %s, %s, %s, %s)",
        [embedder.name, dim, created_at, generation],
    )
    return EmbeddingSpace(embedder=embedder.name, dim=dim, created_at=created_at, generation=generation)


def _create_vec0_table(cursor, dim: int) -> None:
    # DDL takes no parameters; dim is an int. L2 distance (the default) is cheaper in vec0
    # than cosine and ranks unit vectors the same way; vec0_knn converts it.
    # vec0 keeps vectors in chunk blobs and each insert rewrites one through SQLite's
    # overflow-page chain: small chunks keep inserts cheap (benchmarks/write_costs.py).
    cursor.execute(
        f"CREATE VIRTUAL TABLE search_vectors USING vec0(embedding float[{dim:d}], chunk_size={VEC0_CHUNK_SIZE:d})"
    )
    cursor.execute(
        """CREATE TRIGGER search_vectors_after_delete AFTER DELETE ON memories_revision
           WHEN OLD.tombstone = 0
           BEGIN
               DELETE FROM search_vectors WHERE rowid = OLD.id;
               UPDATE search_embedding_space SET generation = generation + 1 WHERE id = 1;
           END"""
    )


def _create_postgresql_table(cursor) -> None:
    # The same bytes vec0 holds; the dimension is the space's, checked by insert_vectors.
    cursor.execute("CREATE TABLE search_vectors (revision_id bigint PRIMARY KEY, embedding bytea NOT NULL)")
    # The vec0 trigger's body, run once per deleted revision with text.
    cursor.execute(
        """CREATE OR REPLACE FUNCTION search_vectors_after_delete() RETURNS trigger LANGUAGE plpgsql AS $body$
           BEGIN
               DELETE FROM search_vectors WHERE revision_id = OLD.id;
               UPDATE search_embedding_space SET generation = generation + 1 WHERE id = 1;
               RETURN NULL;
           END
           $body$"""
    )
    cursor.execute(
        """CREATE TRIGGER search_vectors_after_delete AFTER DELETE ON memories_revision
           FOR EACH ROW WHEN (NOT OLD.tombstone) EXECUTE FUNCTION search_vectors_after_delete()"""
    )


def _drop_space(cursor) -> None:
    # The trigger goes first: once the vec0 table is gone it would make revision deletes fail.
    if dialect.is_postgresql():
        cursor.execute("DROP TRIGGER IF EXISTS search_vectors_after_delete ON memories_revision")
        cursor.execute("DROP FUNCTION IF EXISTS search_vectors_after_delete()")
    else:
        cursor.execute("DROP TRIGGER IF EXISTS search_vectors_after_delete")
    cursor.execute("DROP TABLE IF EXISTS search_vectors")
    cursor.execute("DELETE FROM search_embedding_space")


def _mismatch(space: EmbeddingSpace, embedder: Embedder) -> SpaceConflict:
    return SpaceConflict(
        f"The database holds vectors from the embedder {space.embedder} ({space.dim} dimensions), but "
        f"MEMORY_EMBEDDER selects {embedder.name} ({embedder.dim} dimensions); vectors of two models cannot be "
        f"mixed. Run `manage.py backfill --reembed` to re-embed every revision with {embedder.name}, or set "
        "MEMORY_EMBEDDER back."
    )


def check_space(embedder: Embedder) -> None:
    """Raise SpaceConflict when the database holds vectors of an embedder other than ``embedder``; write nothing."""
    space = current_space()
    if space is not None and not space.holds(embedder) and vector_count():
        raise _mismatch(space, embedder)


def ensure_space(embedder: Embedder) -> EmbeddingSpace:
    """Return the space for ``embedder``, creating it on first use; raise SpaceConflict if it holds another
    model's vectors.

    An empty space of another embedder is switched without asking: there is nothing to mix.
    """
    space = current_space()
    if space is not None and space.holds(embedder):
        return space
    with transaction.atomic(), connection.cursor() as cursor:
        # Read again under the write lock: another process may have created or switched it meanwhile.
        space = current_space()
        if space is None:
            return _create_space(cursor, embedder, generation=0)
        if space.holds(embedder):
            return space
        if _stored_count(cursor):
            raise _mismatch(space, embedder)
        _drop_space(cursor)
        return _create_space(cursor, embedder, generation=space.generation + 1)


def reset_space(embedder: Embedder) -> EmbeddingSpace:
    """Drop every stored vector and start an empty space for ``embedder`` (``backfill --reembed``)."""
    with transaction.atomic(), connection.cursor() as cursor:
        previous = current_space()
        _drop_space(cursor)
        return _create_space(cursor, embedder, generation=previous.generation + 1 if previous else 0)


def _slices(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _ids_with_vectors(cursor, revision_ids: list[int]) -> set[int]:
    found = set()
    for chunk in _slices(revision_ids, _IDS_PER_QUERY):
        placeholders = ", ".join(["%s"] * len(chunk))
        # CROSS JOIN keeps memories_revision outside: its primary key takes the IN list, then
        # one vec0 rowid lookup per id (vec0 itself answers `rowid IN (...)` with a full scan).
        cursor.execute(
            f"SELECT r.id FROM memories_revision r {dialect.ordered_join()} search_vectors v "
            f"ON v.{_id_column()} = r.id WHERE r.id IN ({placeholders})",
            chunk,
        )
        found.update(row[0] for row in cursor.fetchall())
    return found


def insert_vectors(revision_ids: Sequence[int], vectors: np.ndarray, *, embedder: Embedder) -> int:
    """Store precomputed vectors from ``embedder`` for these revisions; return how many were added.

    Revisions that already have a vector keep it (revisions are immutable, so it is
    the same one); ids of tombstones or of revisions that no longer exist store
    nothing. Runs in one transaction (the caller's, when there is one). Raises
    SpaceConflict when the database holds another embedder's vectors.
    """
    revision_ids = [int(revision_id) for revision_id in revision_ids]
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.shape != (len(revision_ids), embedder.dim):
        raise ValueError(f"Expected {len(revision_ids)} vectors of {embedder.dim} dimensions, got {vectors.shape}.")
    if not revision_ids:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        ensure_space(embedder)
        skip = _ids_with_vectors(cursor, revision_ids)
        rows = []
        for revision_id, vector in zip(revision_ids, vectors):
            if revision_id not in skip:
                skip.add(revision_id)  # the first of repeated ids wins
                rows.append((vector.tobytes(), revision_id))
        if not rows:
            return 0
        # The SELECT finds each revision by primary key, so a tombstone or a missing id inserts no row.
        cursor.executemany(
            f"INSERT INTO search_vectors ({_id_column()}, embedding) "
            "SELECT id, %s FROM memories_revision WHERE id = %s AND tombstone = %s",
            [(vector, revision_id, False) for vector, revision_id in rows],
        )
        added = cursor.rowcount
        if added:
            # One row, by primary key.
            cursor.execute("UPDATE search_embedding_space SET generation = generation + %s WHERE id = 1", [added])
    return added


def store_vectors(
    revision_ids: Sequence[int],
    texts: Sequence[str],
    *,
    embedder: Embedder | None = None,
    batch_size: int = STORE_BATCH_SIZE,
) -> int:
    """Embed ``texts`` (see ``revision_text``) in batches, store them for ``revision_ids``; return how many were added.

    Embedding runs outside any transaction this function opens, so when the caller
    holds none, the write lock is taken only for the inserts of each batch.
    """
    embedder = embedder or get_embedder()
    revision_ids, texts = list(revision_ids), list(texts)
    if len(revision_ids) != len(texts):
        raise ValueError(f"Got {len(revision_ids)} revision ids but {len(texts)} texts.")
    added = 0
    for start in range(0, len(texts), batch_size):
        vectors = embedder.embed(texts[start : start + batch_size])
        added += insert_vectors(revision_ids[start : start + batch_size], vectors, embedder=embedder)
    return added


def pending_revision_ids(*, after_id: int = 0, limit: int = 1000) -> list[int]:
    """Return ids of revisions with text but no vector, above ``after_id``, in id order."""
    with connection.cursor() as cursor:
        if current_space() is None:
            # Primary-key range in id order; nothing has a vector yet.
            cursor.execute(
                "SELECT id FROM memories_revision WHERE id > %s AND tombstone = %s ORDER BY id LIMIT %s",
                [after_id, False, limit],
            )
        else:
            # Primary-key range in id order; NOT EXISTS is one vec0 rowid lookup per revision,
            # so resuming from ``after_id`` costs only the rows past it.
            cursor.execute(
                "SELECT r.id FROM memories_revision r WHERE r.id > %s AND r.tombstone = %s "
                f"AND NOT EXISTS (SELECT 1 FROM search_vectors v WHERE v.{_id_column()} = r.id) ORDER BY r.id LIMIT %s",
                [after_id, False, limit],
            )
        return [row[0] for row in cursor.fetchall()]


def pending_count(*, reembed: bool = False) -> int:
    """Return how many revisions a backfill would embed: those without a vector, or with ``reembed`` all with text."""
    with connection.cursor() as cursor:
        if reembed or current_space() is None:
            # A full scan of memories_revision (tombstone has no index); backfill and doctor only.
            cursor.execute("SELECT count(*) FROM memories_revision WHERE tombstone = %s", [False])
        else:
            # A full scan with one vec0 rowid lookup per revision (backfill and doctor only).
            cursor.execute(
                "SELECT count(*) FROM memories_revision r WHERE r.tombstone = %s "
                f"AND NOT EXISTS (SELECT 1 FROM search_vectors v WHERE v.{_id_column()} = r.id)",
                [False],
            )
        return cursor.fetchone()[0]


def backfill_batch(*, after_id: int, limit: int, embedder: Embedder | None = None) -> BackfillBatch:
    """Embed and store the next ``limit`` pending revisions above ``after_id``.

    The texts are read and embedded without a transaction; only the insert takes the
    write lock, so a running server keeps writing during a long backfill. A revision
    erased in between is skipped.
    """
    embedder = embedder or get_embedder()
    revision_ids = pending_revision_ids(after_id=after_id, limit=limit)
    if not revision_ids:
        return BackfillBatch(revision_ids=[], embedded=0)
    with connection.cursor() as cursor:
        # Primary-key lookups.
        cursor.execute(
            "SELECT id, title, content FROM memories_revision WHERE id IN (%s)" % ",".join(["%s"] * len(revision_ids)),
            revision_ids,
        )
        texts = {revision_id: revision_text(title, content) for revision_id, title, content in cursor.fetchall()}
    present = [revision_id for revision_id in revision_ids if revision_id in texts]
    vectors = embedder.embed([texts[revision_id] for revision_id in present])
    embedded = insert_vectors(present, vectors, embedder=embedder)
    return BackfillBatch(revision_ids=revision_ids, embedded=embedded)


def load_matrix(*, after_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return (revision ids as int64, vectors as a float32 (n, dim) matrix) above ``after_id``, in id order: every
    stored vector, for a scan of the whole store (vec0_knn on PostgreSQL, the benchmarks' floors)."""
    _, ids, matrix = load_vectors(after_id=after_id)
    return ids, matrix


def load_vectors(*, after_id: int = 0) -> tuple[tuple[int, str] | None, np.ndarray, np.ndarray]:
    """Return ((the space's generation, embedder), revision ids, float32 vectors) above ``after_id``, in id order.

    The space is read by the statement that reads the rows, so the two are one state of the database. None (and
    no rows) when no vectors have been stored yet.
    """
    ids, blocks, state = [], [], None
    if current_space() is None:
        return None, np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    with connection.cursor() as cursor:
        # The join's order keeps memories_revision outside: its primary key gives the id range in order, then one
        # vec0 rowid lookup per revision; the scalar subqueries are evaluated once each, by primary key. Read in
        # chunks: never the whole result in memory at once.
        sql = (
            "SELECT r.id, v.embedding, (SELECT generation FROM search_embedding_space WHERE id = 1), "
            "(SELECT embedder FROM search_embedding_space WHERE id = 1) "
            f"FROM memories_revision r {dialect.ordered_join()} search_vectors v ON v.{_id_column()} = r.id "
            "WHERE r.id > %s ORDER BY r.id"
        )
        for rows in dialect.chunks(cursor, sql, [after_id], size=_FETCH_ROWS):
            state = rows[0][2:]
            ids.extend(row[0] for row in rows)
            blocks.append(np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), -1))
    if not blocks:
        # No rows to read it with: read it now.
        space = current_space()
        return (
            (space.generation, space.embedder) if space else None,
            np.zeros(0, dtype=np.int64),
            np.zeros((0, space.dim if space else 0), dtype=np.float32),
        )
    return state, np.array(ids, dtype=np.int64), np.concatenate(blocks)


class VectorRows(NamedTuple):
    """Stored vectors with whose they are: revision ids, memory ids, and float32 rows."""

    ids: np.ndarray
    memories: np.ndarray
    matrix: np.ndarray


def _rows(chunks, dim: int, *, extra: int = 0, expected: int = 0) -> tuple[VectorRows, list]:
    """Rows of (revision id, memory id, [``extra`` columns,] embedding, ...) as VectorRows, with the extra columns.

    ``expected``: about how many rows will come; the first that many go straight into one matrix, so a large
    read holds its vectors once rather than its chunks and their concatenation both.
    """
    ids, memories, extras = [], [], []
    matrix, filled, blocks = np.empty((expected, dim), dtype=np.float32), 0, []
    for rows in chunks:
        ids.extend(row[0] for row in rows)
        memories.extend(row[1] for row in rows)
        extras.extend(row[2 : 2 + extra] for row in rows)
        block = np.frombuffer(b"".join(row[2 + extra] for row in rows), dtype=np.float32).reshape(len(rows), -1)
        if not blocks and filled + len(rows) <= expected:
            matrix[filled : filled + len(rows)] = block
            filled += len(rows)
        else:
            blocks.append(block)
    matrix = matrix[:filled] if not blocks else np.concatenate([matrix[:filled], *blocks])
    return VectorRows(np.array(ids, dtype=np.int64), np.array(memories, dtype=np.int64), matrix), extras


def vector_state() -> tuple[tuple[int, str] | None, int]:
    """The space's (generation, embedder) and the highest revision id, read by one statement: a copy that starts
    over from these holds every vector of a revision up to that id."""
    with connection.cursor() as cursor:
        # Primary-key lookups: the space's one row, the revisions' last id.
        cursor.execute(
            "SELECT generation, embedder, (SELECT max(id) FROM memories_revision) FROM search_embedding_space "
            "WHERE id = 1"
        )
        row = cursor.fetchone()
    return ((row[0], row[1]), row[2] or 0) if row else (None, 0)


def poll_vectors(*, after_id: int) -> tuple[tuple[int, str] | None, VectorRows, list[str]]:
    """The space's (generation, embedder), and the vectors of revisions above ``after_id`` with each one's memory
    and that memory's namespace now, in id order: what was written since a copy's last look.

    Read by one statement, so the space and the rows are one state: a copy appends them when the space grew by
    exactly their number, and otherwise starts over.
    """
    space = current_space()
    if space is None:
        return None, VectorRows(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, 0))), []
    with connection.cursor() as cursor:
        # The revisions' primary key past after_id, one vec0 rowid lookup and one memory lookup by primary key each.
        cursor.execute(
            "SELECT r.id, r.memory_id, m.namespace, v.embedding, "
            "(SELECT generation FROM search_embedding_space WHERE id = 1), "
            "(SELECT embedder FROM search_embedding_space WHERE id = 1) "
            f"FROM memories_revision r {dialect.ordered_join()} search_vectors v ON v.{_id_column()} = r.id "
            f"{dialect.ordered_join()} memories_memory m ON m.id = r.memory_id WHERE r.id > %s ORDER BY r.id",
            [after_id],
        )
        found = cursor.fetchall()
    if not found:
        space = current_space()  # no row to read it with; a write landing in between costs a start over
        state = (space.generation, space.embedder) if space else None
    else:
        state = tuple(found[-1][4:6])
    rows, extras = _rows([found] if found else [], space.dim if space else 0, extra=1)
    return state, rows, [extra[0] for extra in extras]


def namespace_vectors(namespace: str, *, up_to_id: int) -> VectorRows:
    """The vectors of every revision up to ``up_to_id`` of the memories in ``namespace`` now."""
    space = current_space()
    # The memories by the (namespace, key) index, their revisions by memory.
    revisions = f"FROM memories_memory m {dialect.ordered_join()} memories_revision r ON r.memory_id = m.id "
    where = "WHERE m.namespace = %s AND r.id <= %s"
    with connection.cursor() as cursor:
        # Counted by the indexes alone: about how many vectors will come.
        cursor.execute(f"SELECT count(*) {revisions}{where}", [namespace, up_to_id])
        expected = cursor.fetchone()[0]
        # Then each revision's vector, one vec0 rowid lookup each.
        sql = (
            f"SELECT r.id, r.memory_id, v.embedding {revisions}"
            f"{dialect.ordered_join()} search_vectors v ON v.{_id_column()} = r.id {where}"
        )
        chunks = dialect.chunks(cursor, sql, [namespace, up_to_id], size=_FETCH_ROWS)
        rows, _ = _rows(chunks, space.dim if space else 0, expected=expected)
    return rows


def memory_vectors(memory_ids, *, up_to_id: int) -> VectorRows:
    """The vectors of every revision up to ``up_to_id`` of ``memory_ids`` (memories that moved, a few)."""
    space = current_space()
    found = []
    with connection.cursor() as cursor:
        for chunk in _slices(sorted(memory_ids), _IDS_PER_QUERY):
            # Revisions by memory, one vec0 rowid lookup each.
            cursor.execute(
                f"SELECT r.id, r.memory_id, v.embedding FROM memories_revision r {dialect.ordered_join()} "
                f"search_vectors v ON v.{_id_column()} = r.id WHERE r.memory_id IN ({','.join(['%s'] * len(chunk))}) "
                "AND r.id <= %s",
                [*chunk, up_to_id],
            )
            found.append(cursor.fetchall())
    rows, _ = _rows([chunk for chunk in found if chunk], space.dim if space else 0)
    return rows


def vec0_knn(query_vector: np.ndarray, *, k: int) -> list[Neighbour]:
    """Return the ``k`` stored vectors nearest to ``query_vector`` by sqlite-vec, best first, with their cosines.

    For processes without a copy of the matrix, and as the benchmark's floor. It
    sees every stored vector: visibility and namespaces are the caller's to apply.
    On PostgreSQL (no vec0) the same exact scan runs in numpy over every stored vector.
    """
    if not 1 <= k <= KNN_MAX:
        raise ValueError(f"k must be from 1 to {KNN_MAX}, got {k}.")
    space = current_space()
    if space is None:
        return []
    query = np.ascontiguousarray(query_vector, dtype=np.float32).reshape(-1)
    if query.shape != (space.dim,):
        raise ValueError(f"The query vector has {query.shape[0]} dimensions; the stored ones have {space.dim}.")
    if dialect.is_postgresql():
        ids, matrix = load_matrix()
        cosines = matrix @ query
        # Best first; equal cosines in id order.
        best = np.lexsort((ids, -cosines))[:k]
        return [Neighbour(int(ids[index]), float(cosines[index])) for index in best]
    with connection.cursor() as cursor:
        # vec0's KNN: a brute-force scan of every chunk, cost linear in rows and growing with k.
        cursor.execute(
            "SELECT rowid, distance FROM search_vectors WHERE embedding MATCH %s AND k = %s ORDER BY distance",
            [query.tobytes(), k],
        )
        # For unit vectors |a - b|^2 = 2 - 2 cos(a, b).
        return [Neighbour(revision_id, 1.0 - distance * distance / 2.0) for revision_id, distance in cursor.fetchall()]


def vector_drift() -> list[str]:
    """Return one line per problem with the stored vectors (for ``doctor``); empty when they are sound."""
    space = current_space()
    if space is None:
        return []
    problems = []
    with connection.cursor() as cursor:
        present = dialect.existing(cursor, ["search_vectors", "search_vectors_after_delete"])
        if "search_vectors" not in present:
            return [
                f"The vector table search_vectors is missing though the space records {space.embedder}; "
                "run `manage.py backfill --reembed`."
            ]
        if "search_vectors_after_delete" not in present:
            problems.append(
                "The trigger search_vectors_after_delete is missing, so erased revisions keep their "
                "vectors; run `manage.py backfill --reembed` to rebuild the vector table."
            )
        # A scan of vec0's rowids with one primary-key lookup in memories_revision each.
        cursor.execute(
            "SELECT count(*) FROM search_vectors v WHERE NOT EXISTS "
            f"(SELECT 1 FROM memories_revision r WHERE r.id = v.{_id_column()} AND r.tombstone = %s)",
            [False],
        )
        stray = cursor.fetchone()[0]
    if stray:
        problems.append(f"{stray} vector(s) belong to no revision with text; run `manage.py backfill --reembed`.")
    return problems
