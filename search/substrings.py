"""Proof that a word occurs in no revision's text, so recall can skip its substring search.

The trigram channel asks FTS5's trigram index for each query word no row holds as a
word (``engine._Search._trigram``). For a made-up word, a typo or a name the store
lacks, that MATCH finds nothing, and at 100k memories it still walks the long doclists
of the word's common trigrams: 0.6-3 ms a word, the most of any stage in the slowest
keyword recalls of queries holding such words.

A process keeps, per copy of the database (``snapshot.View.carried``), a table of one
bit per hash of every 5- and 7-byte run of every revision's text, folded as the trigram
tokenizer folds it. A word is a substring of a text only if each of its 5- and 7-byte
runs is a run of that text, so a run whose bit is clear proves that no text holds the
word, and its MATCH would find nothing. A bit set by another run (a collision) or by
text no longer there (an erasure) only costs the MATCH; nothing is ever missed, as
long as the table has seen every text the MATCH could find: every revision up to the
view's last id. Rows a transaction has not committed may roll back and their ids be
reused, so the table never reads them (a recall inside a write's transaction whose view
holds such rows searches every word).

Only ASCII words are checked (a query word as the unicode61
tokenizer folds it, see ``text.QueryToken.raw``): the trigram tokenizer lowercases
A-Z and folds exactly two other characters into ASCII (the Kelvin sign and the long
s; the tests check every code point against SQLite), and ``_FOLD`` does the same, so
the ASCII runs of the folded text are those FTS5 matches against. Any other character
keeps its UTF-8 bytes, which are never ASCII, so no run through it can equal a word's.

The table is built from every text on first use (at 100k memories, 30 MB of text, in
0.75-0.78 s, into 8 MB: ``benchmarks/substring_filter.py``), grows by the texts of new
revisions, and is built again, larger, each time the text it has seen doubles, so its
share of bits set stays low (1.7% at 100k).
"""

import threading

import numpy as np
from django.db import connection

# Run lengths hashed into the table. A made-up word shares most 3- and 4-letter runs with
# real text; its 5- and 7-letter runs are mostly new (on 803 words of another corpus seed
# absent from a 100k store, 5 and 7 together proved 796 absent, 5 alone 611, 4 alone 278).
RUN_LENGTHS = (5, 7)
# Odd 64-bit multipliers (multiplicative hashing: the top bits of the product are the slot).
_MULTIPLIERS = {5: 0x9E3779B97F4A7C15, 7: 0xC2B2AE3D27D4EB4F}
_MASKS = {length: (1 << 8 * length) - 1 for length in RUN_LENGTHS}
# The table holds two to four bits per byte of text it was sized for, within these bounds (2**26 bits: 8 MB).
MIN_BITS, MAX_BITS = 16, 26
# Texts folded and hashed together: bounds the temporary arrays (~16 bytes a text byte a run length).
_CHUNK_BYTES = 1 << 21
# A first table is sized before the text is read, from the token counts the view holds.
_BYTES_PER_TOKEN = 8
# New text up to this size is added to a table bit by bit (see _grown).
_SCATTER_MAX_BYTES = 1 << 16

# The trigram tokenizer's folding (case_sensitive 0, remove_diacritics 0), as far as it
# yields ASCII: A-Z, the Kelvin sign and the long s. Every other character it folds stays
# outside ASCII (tests/test_substrings.py asks SQLite about every code point).
_FOLD = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)} | {0x212A: ord("k"), 0x17F: ord("s")}

_filters_lock = threading.Lock()

# A range of the primary key, read in its order.
_TEXTS = "SELECT title, content FROM memories_revision WHERE id > %s AND id <= %s AND tombstone = 0 ORDER BY id"


class _Table:
    """The bits for every revision with an id up to ``covered``; ``seen``: bytes of text hashed."""

    def __init__(self, bits: int, packed: np.ndarray, *, sized_for: int):
        self.bits = bits
        self.packed = packed  # (1 << bits) // 8 bytes: bit i of byte j is slot 8 * j + i
        self.covered = 0
        self.seen = 0
        self.sized_for = sized_for  # bytes of text

    def holds(self, word: bytes) -> bool:
        """Whether every hashed run of ``word`` has its bit set (so the word may occur)."""
        shift = 64 - self.bits
        for length in RUN_LENGTHS:
            multiplier = _MULTIPLIERS[length]
            for start in range(len(word) - length + 1):
                run = int.from_bytes(word[start:start + length], "little")
                slot = ((run * multiplier) & 0xFFFFFFFFFFFFFFFF) >> shift
                if not self.packed[slot >> 3] >> (slot & 7) & 1:
                    return False
        return True


def _slots(blob: bytes, bits: int) -> list[np.ndarray]:
    """The table slots of every RUN_LENGTHS-byte run in ``blob``, as arrays (one per alignment and length)."""
    data = blob + bytes(8)  # so the last runs are read whole; runs into the padding only set more bits
    shift = np.uint64(64 - bits)
    slots = []
    for offset in range(8):
        # The 8 bytes from offset + 8 * i as one integer: runs are its low bytes, no copy made.
        words = np.frombuffer(data, dtype="<u8", offset=offset, count=(len(data) - offset) // 8)
        for length in RUN_LENGTHS:
            runs = words & np.uint64(_MASKS[length])
            runs *= np.uint64(_MULTIPLIERS[length])  # wraps modulo 2**64, as the hash means
            runs >>= shift
            slots.append(runs)
    return slots


def folded(texts: list[str]) -> bytes:
    """``texts`` as the table hashes them: folded (``_FOLD``), UTF-8, joined by NUL bytes.

    Runs across a NUL only set more bits (and a query word holds no NUL).
    """
    return "\0".join(texts).translate(_FOLD).encode()


def _texts(after: int, upto: int):
    """Yield the text of the revisions with ids in (after, upto], ``folded`` in chunks of about _CHUNK_BYTES."""
    with connection.cursor() as cursor:
        cursor.execute(_TEXTS, [after, upto])
        parts, size = [], 0
        while rows := cursor.fetchmany(2048):
            for title, content in rows:
                parts += (title or "", content or "")
                size += len(parts[-2]) + len(parts[-1])
            if size >= _CHUNK_BYTES:
                yield folded(parts)
                parts, size = [], 0
        if parts:
            yield folded(parts)


def _built(blobs, size_hint: int) -> _Table:
    """A table of the runs of ``blobs`` (``folded`` texts), sized for ``size_hint`` bytes of text."""
    bits = min(MAX_BITS, max(MIN_BITS, size_hint.bit_length() + 1))
    present = np.zeros(1 << bits, dtype=bool)
    seen = 0
    for blob in blobs:
        for slots in _slots(blob, bits):
            present[slots] = True
        seen += len(blob)
    # Doubling is counted from at least half the smallest table, so a store with little or no
    # text is not rebuilt at every write.
    table = _Table(bits, np.packbits(present, bitorder="little"), sized_for=max(size_hint, 1 << MIN_BITS - 1))
    table.seen = seen
    return table


def _grown(table: _Table, upto: int) -> None:
    """Add the texts of revisions with ids in (table.covered, upto] to ``table``.

    A write's few hundred runs are set bit by bit; much text (an import) through the
    table unpacked, set and packed again, which only adds bits, so a reader of the
    table meanwhile sees what it saw or more.
    """
    present = None
    for blob in _texts(table.covered, upto):
        if present is None and len(blob) >= _SCATTER_MAX_BYTES:
            present = np.unpackbits(table.packed, bitorder="little").view(bool)
        for slots in _slots(blob, table.bits):
            if present is not None:
                present[slots] = True
            else:
                slots = slots.astype(np.intp)
                np.bitwise_or.at(table.packed, slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8))
        table.seen += len(blob)
    if present is not None:
        table.packed[:] = np.packbits(present, bitorder="little")
    table.covered = upto


class _Filter:
    """The table of one copy of the database, replaced (never changed back) as it is rebuilt."""

    def __init__(self):
        self.lock = threading.Lock()
        self.table: _Table | None = None

    def table_for(self, view) -> _Table | None:
        """A table that has seen every revision up to ``view.max_id``; None where none may be made."""
        table = self.table
        if table is not None and table.covered >= view.max_id:
            return table
        if connection.in_atomic_block:
            return None  # the view may hold rows that roll back (see the module docstring)
        with self.lock:
            table = self.table
            if table is None:
                # Sized by the text its rows likely hold (~8 bytes a token), rebuilt below when more.
                table = _built(_texts(0, view.max_id), _BYTES_PER_TOKEN * int(view.columns.ntok.sum()))
                table.covered = view.max_id
            elif table.covered < view.max_id:
                # Bits are only ever set, and ``covered`` moves after them: a reader holding
                # this table reads a bit it needs only once that bit is set.
                _grown(table, view.max_id)
            if table.seen >= 2 * table.sized_for and table.bits < MAX_BITS:
                table = _built(_texts(0, view.max_id), table.seen)
                table.covered = view.max_id
            self.table = table
            return table


def absent(view, words: list[str]) -> set[str]:
    """Those of ``words`` (folded query words) that no revision up to ``view.max_id`` holds as a substring.

    A word left out may occur or not (search it); one returned occurs in no text the
    trigram index holds for those revisions.
    """
    candidates = [word for word in words if word.isascii() and len(word) >= min(RUN_LENGTHS)]
    if not candidates or view.columns is None:
        return set()
    with _filters_lock:  # one filter per copy, however many threads ask first
        keeper = view.carried.setdefault("substrings", _Filter())
    table = keeper.table_for(view)
    if table is None:
        return set()
    return {word for word in candidates if not table.holds(word.lower().encode())}
