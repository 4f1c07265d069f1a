"""How a fold lays a term's postings into its packed segments (see ``postings``, migration 0005).

A fold packs the postings it gathers by term, then writes one segment per term: its new
ids, joined with the term's last segments while those are small beside them, so long
rows of common terms are not rewritten at every fold.
"""

import numpy as np

# A fold joins a term's last segment into the one it writes while that segment holds at
# most this many times the ids gathered so far: each segment then holds more than twice
# the ids of the next, so a term of n ids has at most log2(n) + 1 segments, and a segment
# is rewritten once the ids after it reach half its size (the term grown by half), not
# at every fold.
SEGMENT_JOIN_RATIO = 2


def packed_by_term(terms: list[str], ids: np.ndarray, tfs: np.ndarray) -> tuple[list[str], list[int], bytes, bytes]:
    """Each of ``terms`` once (first seen first), where its postings end, and the postings' ids and counts (``terms[i]``
    held by revision ``ids[i]`` ``tfs[i]`` times) packed as the packed rows hold them (uint32, uint16), grouped by
    term, ids ascending within a term."""
    names = list(dict.fromkeys(terms))  # each term once, first seen first
    number = dict(zip(names, range(len(names))))
    codes = np.fromiter(map(number.__getitem__, terms), dtype=np.int64, count=len(terms))
    # Grouped by term, each term's rows in the order given.
    order = np.argsort(codes, kind="stable")
    grouped_ids, grouped = ids[order], codes[order]
    if np.any((grouped_ids[1:] <= grouped_ids[:-1]) & (grouped[1:] == grouped[:-1])):  # new rows not given in id order
        order = np.lexsort((ids, codes))
        grouped_ids = ids[order]
    id_bytes = grouped_ids.astype("<u4").tobytes()
    tf_bytes = tfs[order].astype("<u2").tobytes()
    ends = np.cumsum(np.bincount(codes, minlength=len(names))).tolist()
    return names, ends, id_bytes, tf_bytes


def segment_sizes(cursor, names: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Per term of ``names`` that has packed rows, (segment, ids) in segment order."""
    segments: dict[str, list[tuple[int, int]]] = {}
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        # The (term, segment) index, a range per term; length() of a blob reads its size, not its bytes.
        cursor.execute(
            "SELECT term, segment, length(revision_ids) / 4 FROM search_posting WHERE term IN (%s) "
            "ORDER BY term, segment" % ",".join(["%s"] * len(chunk)),
            chunk,
        )
        for term, segment, size in cursor.fetchall():
            segments.setdefault(term, []).append((segment, size))
    return segments


def segment_writes(
    cursor, names: list[str], ends: list[int], id_bytes: bytes, tf_bytes: bytes
) -> tuple[list[tuple[str, int, bytes, bytes]], list[tuple[str, int]]]:
    """The segment each term of ``names`` writes (term, segment, ids, counts): its new postings (those of
    ``packed_by_term``), after its last segments while those are small beside them; and per term whose
    segments after the one written are joined into it, (term, that segment), to delete those."""
    segments = segment_sizes(cursor, names)
    writes, dropped = [], []
    for term, low, high in zip(names, [0] + ends[:-1], ends):
        held = segments.get(term, [])
        joined, gathered = len(held), high - low
        while joined and held[joined - 1][1] <= SEGMENT_JOIN_RATIO * gathered:
            joined -= 1
            gathered += held[joined][1]
        new_ids, new_tfs = id_bytes[4 * low : 4 * high], tf_bytes[2 * low : 2 * high]
        if joined == len(held):  # nothing to join: a segment after the last
            writes.append((term, held[-1][0] + 1 if held else 0, new_ids, new_tfs))
            continue
        first = held[joined][0]
        # The (term, segment) index: the segments joined, in order (their ids below the new ones).
        cursor.execute(
            "SELECT revision_ids, tfs FROM search_posting WHERE term = %s AND segment >= %s ORDER BY segment",
            [term, first],
        )
        old = cursor.fetchall()
        writes.append(
            (
                term,
                first,
                b"".join([bytes(row[0]) for row in old] + [new_ids]),
                b"".join([bytes(row[1]) for row in old] + [new_tfs]),
            )
        )
        if joined < len(held) - 1:
            dropped.append((term, first))
    return writes, dropped
