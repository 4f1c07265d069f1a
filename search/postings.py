"""The engine's own postings: which revisions hold a term, and how often (see migration 0003).

A term's key starts with the namespace of the memory whose revision holds it (``key``;
migration 0006), so reading a term costs the same whatever other namespaces hold. A
memory that moved has its revisions' postings under each namespace it has been in
(``add_keys``); the search counts each under the namespace the memory had at the
query's time.

Writes go to a tail table; ``compact`` folds the tail into packed rows (ascending
uint32 revision ids and uint16 counts) once it grows past a threshold, so reading a
term costs a short b-tree range and a ``numpy.frombuffer``. The write that crosses the
threshold does not fold: the fold runs once that write has committed, in transactions
of its own, a range of terms each, so nothing holds the write lock for a whole fold.

Revision ids only grow (revisions are append-only and writes are serialised), so
folding a tail into a term's packed rows is an append, never a merge: each fold adds a
segment holding the new ids, and joins the term's last segments into it only while they
are small beside it (migration 0005), so a fold does not rewrite the long rows of common
terms.

Packed rows change only when a fold or an erasure rewrites them, and each such change
draws a new ``search_state.packed_version`` (migration 0004). A process keeps the
packed postings it has read (``_packed``, a few common terms are most of the
bytes a recall reads) and reads them again only when that version moved; the tail is
read every time.
"""

import threading
from collections import Counter
from dataclasses import dataclass
from itertools import chain, groupby
from typing import NamedTuple

import numpy as np
from django.db import connection, transaction

from memoryproject import dialect
from search import caches, posting_segments, text
from search.embeddings import revision_text

# Tail rows before a write folds them into the packed rows. Large enough that folding
# (a statement per touched term) is rare; small enough that reading a term's tail stays cheap.
COMPACT_AFTER = 20_000
# Terms one fold transaction moves from the tail to the packed rows: bounds how long a fold
# holds the write lock at a time; writers waiting for it get their turn between ranges.
FOLD_TERMS = 500
# CJK bigram terms live in the same tables under a prefix no word can start with, so
# no prefix range of a word ever reaches them.
BIGRAM_PREFIX = "\x01"
# Between a key's namespace and its term: below every character a slug or a term holds.
NAMESPACE_END = "\x1f"
TF_MAX = np.iinfo(np.uint16).max
# The packed postings one process keeps in memory, at most (least recently read go first).
PACKED_CACHE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class DocumentTerms:
    revision_id: int
    terms: dict[str, int]
    ntok: int
    nbigram: int


def _new_packed_version(cursor) -> None:
    """Draw the packed rows' new version, in the transaction that changes them (see the module)."""
    cursor.execute(f"UPDATE search_state SET packed_version = {dialect.new_version()} WHERE id = 1")


def key(namespace: str, term: str) -> str:
    """The postings key of ``term`` in ``namespace``: a namespace's keys are one contiguous range."""
    return namespace + NAMESPACE_END + term


def analyse(revisions: list[tuple[int, str, str, str]]) -> list[DocumentTerms]:
    """Return the keyed terms of each (revision id, namespace, title, content), tokenised exactly as FTS5 does."""
    bodies = [revision_text(title, content) for _, _, title, content in revisions]
    analysed = text.documents_terms(bodies)
    result = []
    for (revision_id, namespace, _, _), body, (terms, ntok) in zip(revisions, bodies, analysed):
        bigrams = Counter(text.cjk_bigrams(body))
        merged = {key(namespace, term): count for term, count in terms.items()}
        merged.update({key(namespace, BIGRAM_PREFIX + gram): count for gram, count in bigrams.items()})
        result.append(DocumentTerms(revision_id, merged, ntok, sum(bigrams.values())))
    return result


def add(documents: list[DocumentTerms]) -> None:
    """Record the postings of new revisions (inside the caller's write transaction)."""
    if not documents:
        return
    rows = _Rows.of(documents)
    with connection.cursor() as cursor:
        # INTEGER PRIMARY KEY: one b-tree insert per revision.
        cursor.executemany(
            "INSERT INTO search_document (revision_id, ntok, nbigram) VALUES (%s, %s, %s)",
            [(document.revision_id, document.ntok, document.nbigram) for document in documents],
        )
        if len(rows.terms) >= COMPACT_AFTER:
            # A batch (an import) this large would be folded at once: fold it straight into the
            # packed rows with the tail, instead of writing it to the tail and reading it back.
            _fold(cursor, rows)
            return
        # Primary key (term, revision_id): inserts land where reads look them up.
        cursor.executemany(
            "INSERT INTO search_posting_tail (revision_id, term, tf) VALUES (%s, %s, %s)",
            zip(rows.ids.tolist(), rows.terms, rows.tfs.tolist()),
        )
        cursor.execute(
            "UPDATE search_state SET tail_rows = tail_rows + %s WHERE id = 1 RETURNING tail_rows", [len(rows.terms)]
        )
        tail_rows = cursor.fetchone()[0]
    if tail_rows >= COMPACT_AFTER:
        # Once this write has committed; a fold that fails (a busy lock) is logged, and the next write tries again.
        transaction.on_commit(compact, robust=True)


class _Rows(NamedTuple):
    """Postings as columns: ``terms[i]`` is held by revision ``ids[i]`` ``tfs[i]`` times (counts capped at TF_MAX)."""

    terms: list[str]
    ids: np.ndarray  # int64
    tfs: np.ndarray  # int64

    @classmethod
    def of(cls, documents: list[DocumentTerms]) -> "_Rows":
        sizes = [len(document.terms) for document in documents]
        ids = np.repeat(np.array([document.revision_id for document in documents], dtype=np.int64), sizes)
        counts = np.fromiter(
            chain.from_iterable(document.terms.values() for document in documents), dtype=np.int64, count=len(ids)
        )
        # Iterating a dict gives its keys, in the order of its values.
        return cls(list(chain.from_iterable(document.terms for document in documents)), ids, np.minimum(counts, TF_MAX))

    @classmethod
    def concatenated(cls, first: "_Rows", second: "_Rows") -> "_Rows":
        return cls(
            first.terms + second.terms, np.concatenate([first.ids, second.ids]), np.concatenate([first.tfs, second.tfs])
        )


_NO_ROWS = _Rows([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def compact() -> int:
    """Fold the tail into the packed rows, FOLD_TERMS terms per transaction; return how many terms were rewritten.

    Each transaction moves its terms' postings from the tail to the packed rows and draws
    a new packed_version, so a reader finds each posting once, before, during and after a
    fold. Postings written meanwhile to terms already folded wait in the tail for the next.
    """
    rewritten, after = 0, ""  # every key is above "": it starts with its namespace
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            # The tail's primary key: the next terms, in order.
            cursor.execute(
                "SELECT DISTINCT term FROM search_posting_tail WHERE term > %s ORDER BY term LIMIT %s",
                [after, FOLD_TERMS],
            )
            terms = [row[0] for row in cursor.fetchall()]
            if not terms:
                return rewritten
            rewritten += _fold(cursor, _NO_ROWS, after=after, through=terms[-1])
        after = terms[-1]


def _fold(cursor, new: _Rows, *, after: str = "", through: str | None = None) -> int:
    """Append the tail's postings of the terms above ``after`` up to ``through`` (all of them without it), then
    the ``new`` ones, to the packed rows; take those out of the tail.

    Per touched term, one segment is written: its new ids, joined with the term's last
    segments while those are small beside them (``posting_segments.SEGMENT_JOIN_RATIO``).
    Returns the number of terms touched.
    """
    # A fixed clause, values as parameters: the terms in (after, through].
    where, bounds = ("term > %s", [after]) if through is None else ("term > %s AND term <= %s", [after, through])
    # The tail's primary key: grouped by term, ids ascending within a term.
    cursor.execute(
        f"SELECT revision_id, term, tf FROM search_posting_tail WHERE {where} ORDER BY term, revision_id", bounds
    )
    tail = cursor.fetchall()
    if not tail and not new.terms:
        return 0
    # Tail ids are all below new ids (revisions only grow), so tail first, then new, stays ascending.
    rows = _Rows.concatenated(
        _Rows(
            [term for _, term, _ in tail],
            np.array([row[0] for row in tail], dtype=np.int64),
            np.array([row[2] for row in tail], dtype=np.int64),
        ),
        new,
    )
    names, ends, id_bytes, tf_bytes = posting_segments.packed_by_term(rows.terms, rows.ids, rows.tfs)
    writes, dropped = posting_segments.segment_writes(cursor, names, ends, id_bytes, tf_bytes)
    cursor.executemany("DELETE FROM search_posting WHERE term = %s AND segment > %s", dropped)
    cursor.executemany(
        "INSERT INTO search_posting (term, segment, revision_ids, tfs) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (term, segment) DO UPDATE SET revision_ids = excluded.revision_ids, tfs = excluded.tfs",
        writes,
    )
    _new_packed_version(cursor)
    if tail:
        cursor.execute(f"DELETE FROM search_posting_tail WHERE {where}", bounds)
        # Counted (the tail's revision index, its smaller b-tree) rather than subtracted: an erasure's
        # trigger deletes tail rows without counting them.
        cursor.execute("UPDATE search_state SET tail_rows = (SELECT count(*) FROM search_posting_tail) WHERE id = 1")
    return len(writes)


def remove(revisions: list[tuple[int, str, str, str]]) -> None:
    """Take these revisions (id, namespace, title, content) out of the packed rows, dropping terms no revision
    holds any more.

    Only erasure and purge call this: a term is text, so a term that only erased
    revisions held must leave the database with them. (Tail rows and document rows
    go with the revision rows, by trigger.)
    """
    remove_terms(analyse(revisions))


def remove_terms(documents: list[DocumentTerms]) -> None:
    """Take these documents' revisions out of the packed rows of their terms (see ``remove``)."""
    if not documents:
        return
    gone = np.asarray([document.revision_id for document in documents], dtype=np.int64)
    terms = sorted({term for document in documents for term in document.terms})
    changed = False
    with connection.cursor() as cursor:
        for term in terms:
            # The (term, segment) index, per term of the removed revisions: its segments.
            cursor.execute("SELECT segment, revision_ids, tfs FROM search_posting WHERE term = %s", [term])
            for segment, segment_ids, segment_tfs in cursor.fetchall():
                ids = np.frombuffer(segment_ids, dtype="<u4")
                tfs = np.frombuffer(segment_tfs, dtype="<u2")
                keep = ~np.isin(ids, gone)
                if keep.all():
                    continue
                if keep.any():
                    cursor.execute(
                        "UPDATE search_posting SET revision_ids = %s, tfs = %s WHERE term = %s AND segment = %s",
                        [ids[keep].tobytes(), tfs[keep].tobytes(), term, segment],
                    )
                else:
                    # A term whose every segment goes leaves the database with them.
                    cursor.execute("DELETE FROM search_posting WHERE term = %s AND segment = %s", [term, segment])
                changed = True
        if changed:
            _new_packed_version(cursor)


def add_keys(new: list[DocumentTerms]) -> None:
    """Add existing revisions' postings under ``new`` keys (a memory moved to another namespace); ids a key holds
    already (a memory moved back) are left as they are.

    Rare (an admin's move), so simple: the tail is folded first, so every posting of these
    revisions is packed; then each new key's rows are rewritten whole as one segment, since
    the old ids would break the ascending order an appended segment keeps.
    """
    compact()
    added: dict[str, list[tuple[int, int]]] = {}
    for document in new:
        for term, count in document.terms.items():
            added.setdefault(term, []).append((document.revision_id, min(count, TF_MAX)))
    with connection.cursor() as cursor:
        for term, pairs in added.items():
            # The (term, segment) index: the term's segments.
            cursor.execute("SELECT revision_ids, tfs FROM search_posting WHERE term = %s ORDER BY segment", [term])
            held = cursor.fetchall()
            ids = np.concatenate(
                [np.frombuffer(row[0], dtype="<u4") for row in held]
                + [np.array([pair[0] for pair in pairs], dtype="<u4")]
            )
            tfs = np.concatenate(
                [np.frombuffer(row[1], dtype="<u2") for row in held]
                + [np.array([pair[1] for pair in pairs], dtype="<u2")]
            )
            # Stable: a held id comes before the same id added again, and np.unique keeps the first.
            order = np.argsort(ids, kind="stable")
            ids, first = np.unique(ids[order], return_index=True)
            order = order[first]
            cursor.execute("DELETE FROM search_posting WHERE term = %s", [term])
            cursor.execute(
                "INSERT INTO search_posting (term, segment, revision_ids, tfs) VALUES (%s, 0, %s, %s)",
                [term, ids.astype("<u4").tobytes(), tfs[order].tobytes()],
            )
        _new_packed_version(cursor)


def term_ranges(namespace: str, stem: str, prefix: str | None) -> list[tuple[str, str | None]]:
    """The key ranges one query word matches in ``namespace``: its exact stem, and every stem its light root begins.

    Porter does not stem a word and its family alike ("deploy" -> "deploi" but
    "deployment" -> "deploy"), so the exact stem and the root's prefix range are both
    needed; when the stem already lies in the prefix range, the range alone is enough.
    """
    if not prefix:
        return [(key(namespace, stem), None)]
    high = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    if prefix <= stem < high:
        return [(key(namespace, prefix), key(namespace, high))]
    return [(key(namespace, stem), None), (key(namespace, prefix), key(namespace, high))]


class _Vocabulary(NamedTuple):
    """A namespace's packed terms as read under one ``packed_version``, as one string to search."""

    version: int
    text: str  # each term followed by "\n"
    starts: np.ndarray  # where each term starts in ``text``, then len(text)

    def term(self, index: int) -> str:
        return self.text[self.starts[index] : self.starts[index + 1] - 1]


_vocabularies = caches.LeastRecentlyUsed(32 << 20, cost=lambda entry: 4 * len(entry.text) + entry.starts.nbytes)


def containing(namespace: str, fragments: list[str], *, max_id: int) -> np.ndarray:
    """The revision ids up to ``max_id`` holding a term of ``namespace`` that contains one of ``fragments``.

    Only this namespace's terms are searched (not its bigrams), so the work follows what
    it holds and nothing another namespace holds. Its packed terms are kept as one string
    per ``packed_version``, searched by ``str.find`` rather than row by row in SQL.
    """
    # Bigram keys start with BIGRAM_PREFIX ("\x01"), below every word.
    low, high = key(namespace, "\x02"), namespace + chr(ord(NAMESPACE_END) + 1)
    start = len(key(namespace, "")) + 1  # substr() counts characters from 1
    found = " OR ".join([dialect.contains("substr(term, %s)", "%s")] * len(fragments))
    with connection.cursor() as cursor:
        # The tail's primary key: the namespace's range of terms (a few rows); the packed rows' version with them.
        cursor.execute(
            f"SELECT revision_id, NULL FROM search_posting_tail WHERE term >= %s AND term < %s AND ({found}) "
            f"UNION ALL SELECT NULL, packed_version FROM search_state WHERE id = 1",
            [low, high] + [value for fragment in fragments for value in (start, fragment)],
        )
        rows = cursor.fetchall()
        version = next(row[1] for row in rows if row[0] is None)
        tail_ids = np.array([row[0] for row in rows if row[0] is not None], dtype=np.int64)
        cache_key = (dialect.database_key(), namespace)
        vocabulary = _vocabularies.get(cache_key)
        if vocabulary is None or vocabulary.version != version:
            # The (term, segment) index: the namespace's range of terms.
            cursor.execute(
                "SELECT DISTINCT substr(term, %s) FROM search_posting WHERE term >= %s AND term < %s",
                [start, low, high],
            )
            terms = [row[0] for row in cursor.fetchall()]
            starts = np.cumsum([0] + [len(term) + 1 for term in terms])
            vocabulary = _Vocabulary(version, "".join(term + "\n" for term in terms), starts)
            if not connection.in_atomic_block:  # rows read inside a transaction may roll back
                _vocabularies.put(cache_key, vocabulary)
        matched = set()
        for fragment in fragments:
            at = vocabulary.text.find(fragment)
            while at >= 0:
                index = int(np.searchsorted(vocabulary.starts, at, side="right")) - 1
                matched.add(key(namespace, vocabulary.term(index)))
                at = vocabulary.text.find(fragment, int(vocabulary.starts[index + 1]))  # one match per term
        parts, keys = [tail_ids], sorted(matched)
        for chunk_start in range(0, len(keys), 500):
            chunk = keys[chunk_start : chunk_start + 500]
            # The (term, segment) index.
            cursor.execute(
                "SELECT revision_ids FROM search_posting WHERE term IN (%s)" % ",".join(["%s"] * len(chunk)), chunk
            )
            parts += [np.frombuffer(row[0], dtype="<u4").astype(np.int64) for row in cursor.fetchall()]
    ids = np.unique(np.concatenate(parts))
    return ids[ids <= max_id]


def read_terms(terms: list[list[tuple[str, str | None]]], *, max_id: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query term (a list of ranges): each revision id up to ``max_id`` holding it, once, and its count.

    A revision that holds several terms of the ranges (a prefix matching "deploy" and
    "deployment") appears once, with the counts summed, as FTS5 counts a prefix query's
    instances. Ids are int64 (not sorted); counts are exact integers, as uint16 or float64.
    The arrays may be shared with later calls: read-only.
    """
    flat = _read_parts([item for ranges in terms for item in ranges], max_id=max_id)
    result, start = [], 0
    for ranges in terms:
        parts = [part for found in flat[start : start + len(ranges)] for part in found]
        start += len(ranges)
        result.append(_union(parts))
    return result


class _Packed(NamedTuple):
    """One range's packed postings as read under one ``packed_version``: its terms' union."""

    version: int
    ids: np.ndarray  # int64, distinct and ascending, read-only
    tfs: np.ndarray  # read-only
    top: int  # the largest id (0 when empty)


_packed = caches.LeastRecentlyUsed(PACKED_CACHE_BYTES, cost=lambda entry: entry.ids.nbytes + entry.tfs.nbytes)


def _read_parts(ranges: list[tuple[str, str | None]], *, max_id: int) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Per range, its postings as parts whose ids are distinct and ascending within each part, all <= max_id.

    One statement reads every range's tail rows with the packed rows' version; a second
    reads the packed rows of the ranges this process holds no copy of at that version.
    (One statement for both cost as much as reading the packed rows every time: the
    version test runs after each row's seek.)
    """
    if not ranges:
        return []
    database = dialect.database_key()
    keys = [(database, low, high) for low, high in ranges]
    while True:
        version, tails = _select(ranges, "search_posting_tail")
        entries = [_packed.get(key) for key in keys]
        stale = [index for index, entry in enumerate(entries) if entry is None or entry.version != version]
        if not stale:
            break
        packed_version, packed = _select([ranges[index] for index in stale], "search_posting")
        if packed_version != version:
            # A fold between the two statements: the tail rows read may be packed rows now.
            continue
        for index, rows in zip(stale, packed):
            # Per term, its segments joined in order: the term's ids (ascending) and counts.
            rows.sort(key=lambda row: (row[2], row[3]))
            terms = [list(segments) for _, segments in groupby(rows, key=lambda row: row[2])]
            ids, tfs = _union(
                [
                    (
                        np.frombuffer(b"".join(row[0] for row in segments), dtype="<u4").astype(np.int64),
                        np.frombuffer(b"".join(row[1] for row in segments), dtype="<u2"),
                    )
                    for segments in terms
                ]
            )
            if len(ids) > 1 and np.any(ids[1:] < ids[:-1]):
                # The union of a common term and rare ones appends the rare ids: two ascending
                # runs, which a stable sort (timsort) merges in one pass.
                order = np.argsort(ids, kind="stable")
                ids, tfs = ids[order], tfs[order]
            ids.flags.writeable = tfs.flags.writeable = False
            entries[index] = _Packed(version, ids, tfs, int(ids[-1]) if len(ids) else 0)
            _packed.put(keys[index], entries[index])
        break
    result = []
    for entry, tail in zip(entries, tails):
        parts = []
        if len(entry.ids):
            end = len(entry.ids) if entry.top <= max_id else int(np.searchsorted(entry.ids, max_id, side="right"))
            if end:  # ids above max_id were packed after the caller's view was taken
                parts.append((entry.ids[:end], entry.tfs[:end]))
        if tail:
            array = np.asarray(tail, dtype=np.int64)
            array = array[array[:, 0] <= max_id]
            if len(array):
                # Ascending, and a revision holding several terms of the range once, its counts summed.
                ids, inverse = np.unique(array[:, 0], return_inverse=True)
                parts.append((ids, np.bincount(inverse, weights=array[:, 1], minlength=len(ids))))
        result.append(parts)
    return result


def _select(ranges: list[tuple[str, str | None]], table: str) -> tuple[int, list[list[tuple]]]:
    """The packed rows' version and, per range, its rows of ``table``: one statement.

    A tail row is (id, count); a packed row (ids, counts, term, segment).
    """
    # The version has a column of its own: PostgreSQL types each column of a UNION once, and ids are blobs here.
    selects, params = ["SELECT -1, packed_version, NULL, NULL, NULL, NULL FROM search_state WHERE id = 1"], []
    packed = table == "search_posting"
    columns = "revision_ids, tfs, term, segment" if packed else "revision_id, tf, NULL, NULL"
    for index, (low, high) in enumerate(ranges):
        # Equality on term, or a range of terms (a prefix's terms are contiguous): the tail's
        # primary key, the packed rows' (term, segment) index.
        where, values = ("term = %s", [low]) if high is None else ("term >= %s AND term < %s", [low, high])
        selects.append(f"SELECT {index}, NULL, {columns} FROM {table} WHERE {where}")
        params += values
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        rows = cursor.fetchall()
    version, found = None, [[] for _ in ranges]
    for index, packed_version, *row in rows:
        if index < 0:
            version = packed_version
        else:
            found[index].append(tuple(row) if packed else (row[0], row[1]))
    return version, found


_scratch = threading.local()


def _union(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The ids of all ``parts`` once each, with their counts summed (each part's ids distinct and ascending).

    The usual prefix range is one common term and a few rare ones: the rare ids are looked
    up in the common term's by binary search. Parts of similar size are summed into a
    dense array per id instead, which costs less than sorting them.
    """
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    if len(parts) == 1:
        return parts[0]
    parts = sorted(parts, key=lambda part: len(part[0]), reverse=True)
    base_ids, base_tfs = parts[0]
    rest = sum(len(ids) for ids, _ in parts[1:])
    if rest * 4 <= len(base_ids):
        ids = np.concatenate([ids for ids, _ in parts[1:]])
        tfs = np.concatenate([tfs for _, tfs in parts[1:]])
        if len(parts) > 2:
            ids, inverse = np.unique(ids, return_inverse=True)
            tfs = np.bincount(inverse, weights=tfs, minlength=len(ids))
        at = np.minimum(np.searchsorted(base_ids, ids), len(base_ids) - 1)
        found = base_ids[at] == ids
        base_tfs = base_tfs.astype(np.float64)  # a copy, wide enough for sums
        base_tfs[at[found]] += tfs[found]  # ids are distinct, so each slot is added to once
        new = ~found
        return np.concatenate([base_ids, ids[new]]), np.concatenate([base_tfs, tfs[new]])
    counts, seen = scratch_arrays(max(int(ids[-1]) for ids, _ in parts) + 1)  # each part ascending
    try:
        for ids, tfs in parts:
            counts[ids] += tfs
            seen[ids] = True
        ids = np.flatnonzero(seen)  # over bools: several times faster than over floats
        return ids, counts[ids]
    finally:  # leave the scratch clean for the next call, whatever happened
        touched = np.flatnonzero(seen)
        counts[touched] = 0.0
        seen[touched] = False


def scratch_arrays(size: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's zeroed (float64 counts, bool seen) arrays of at least ``size`` slots.

    Whoever writes into them sets the slots it used back to zero (False) before returning.
    """
    counts = getattr(_scratch, "counts", None)
    if counts is None or len(counts) < size:
        room = size + size // 8 + 1024
        _scratch.counts, _scratch.seen = np.zeros(room, dtype=np.float64), np.zeros(room, dtype=bool)
    return _scratch.counts, _scratch.seen
