"""recall: hybrid retrieval whose every answer is exact for its point in time.

For a knowledge cutoff ``as_of`` and a valid time ``valid_at``, the visible set is
resolved first (``search.snapshot``), and every statistic a score depends on is
computed over that set alone, within the namespaces searched: BM25's document
count, average length and document frequencies. So a recall at any point returns
what a fresh store holding only the revisions visible there would return, with the
same scores; nothing written later, and no other tenant's text, can move a rank.

Channels:
- ``keyword``: BM25 (FTS5's formula and tokeniser) over the engine's postings;
- ``bigram``: BM25 over CJK character bigrams, for two-character words;
- ``trigram``: substring matches through the FTS5 trigram index, for words the
  keyword channel could not find (identifiers, partial words, unspaced scripts);
- ``vector``: exact cosine between the query's embedding and each visible revision's.

Hybrid recall fuses them by score, not by rank (``_fuse``): each channel's score is
brought to a scale that means the same in every query (BM25 as a share of the best
score the query could reach, cosine as itself plus a bonus near the best cosine), the
weighted sum is taken, and a memory then gains a share of the best score among its
neighbours in the namespace, so the answer next to a matching question is found.
``benchmarks/fusion_sweep.py`` measured the alternatives (RRF among them).
"""

import datetime as dt
import functools
import math
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection

from search import arrays, postings, snapshot, snippets, substrings, text
from search.cosines import Cosines, PendingVector
from search.errors import Unavailable

# FTS5's bm25() constants.
K1 = 1.2
B = 0.75
# How deep each channel's own ranking goes (keyword and semantic modes, and the ranks
# that explain shows); hybrid fusion scores every candidate, whatever its rank.
CHANNEL_DEPTH = 200
# Hybrid fusion (see _Scorer and _fuse; settings.py has the fusion settings and the
# measurements, benchmarks/fusion_sweep.py makes them). A keyword score is BM25 over the
# query's ceiling times the matched share of the query's idf to this power, so a hit that
# matches one word of four counts for less than its BM25 alone says (without it:
# recall-dev 36/40, LoCoMo tuning R@10 0.769; with it 39/40, 0.777; power 1: 39/40, 0.770).
COVERAGE_POWER = 0.5
# The vector score is (1 - share) * cosine + share * exp((cosine - best cosine) / width):
# the best semantic match, and those within a few hundredths of it, gain up to ``share``.
# Among a few varied facts the right one stands clear and wins; among many similar chat
# turns the best cosines crowd together and the bonus spreads thin (without it: recall-dev
# 36/40, LoCoMo 0.788; share 0.3: 39/40 but one top-1 ahead by 1%; 0.5: 39/40, 0.773).
TOP_MATCH_SHARE = 0.4
TOP_MATCH_WIDTH = 0.03
# Neighbours on each side (same namespace, memory order) whose score lends context
# (LoCoMo tuning R@10: 1 each side 0.743, 2 0.777, 3 0.769).
CONTEXT_REACH = 2
MATCH_MODES = ("auto", "all", "any")
MODES = ("hybrid", "keyword", "semantic")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)
# A term with at least this many postings keeps its visible rows and counts per visible set
# (``_TermRows``), up to TERM_ROWS_BYTES of them in all.
TERM_ROWS_MIN_IDS = 2048
TERM_ROWS_BYTES = 32 << 20


class _TermRows(arrays.BytesCache):
    """The visible rows holding a term and its counts there, per visible set, least recently used dropped first.

    Queries repeat common terms, and between two writes "now" is one visible set
    (``View.visible_rows``): mapping a common term's postings to its visible rows (tens of
    thousands of ids: a gather through the id positions, one through the visible mask,
    a selection) is then the same work each time. Keyed by the visible set's identity,
    checked through a weak reference (a set gone lets its id be reused, and its entries
    wait to be dropped); the arrays are read-only.
    """

    def __init__(self):
        super().__init__(TERM_ROWS_BYTES, cost=lambda entry: entry[1].nbytes + entry[2].nbytes)

    def rows(self, visible: np.ndarray, key: tuple):
        entry = self.get((id(visible), key))
        if entry is None or entry[0]() is not visible:
            return None
        return entry[1], entry[2]

    def keep(self, visible: np.ndarray, key: tuple, rows: np.ndarray, tf: np.ndarray) -> None:
        rows.flags.writeable = tf.flags.writeable = False
        self.put((id(visible), key), (weakref.ref(visible), rows, tf))


_term_rows = _TermRows()


@dataclass(frozen=True)
class Ranked:
    """One hit as search ranks it; the memories side adds the record."""

    revision_id: int
    memory_id: int
    score: float
    snippet: str
    matched_terms: list[str]
    explain: dict | None = None


@dataclass(frozen=True)
class Ranking:
    terms: list[str]
    match_mode: str
    hits: list[Ranked]
    note: str | None = None
    hint: str | None = None


@dataclass
class _Channel:
    """One channel's scores over the rows it found, best first, with shared (competition) ranks."""

    rows: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray = field(init=False)

    def __post_init__(self):
        self.ranks = _competition_ranks(self.scores)


class _DeferredChannel:
    """A channel worked out only when something reads it (explain's ranks, RRF): hybrid fusion does not."""

    def __init__(self, make):
        self._make = make
        self._channel = None

    def _get(self) -> _Channel:
        if self._channel is None:
            self._channel = self._make()
        return self._channel

    rows = property(lambda self: self._get().rows)
    scores = property(lambda self: self._get().scores)
    ranks = property(lambda self: self._get().ranks)


def _competition_ranks(ordered_scores: np.ndarray) -> np.ndarray:
    """Ranks 1, 2, 2, 4 ... for scores already sorted best first: equal scores share a rank."""
    if ordered_scores.ndim == 1:
        changes = np.ones(len(ordered_scores), dtype=bool)
        changes[1:] = ordered_scores[1:] != ordered_scores[:-1]
    else:  # composite keys, one row per hit
        changes = np.ones(len(ordered_scores), dtype=bool)
        changes[1:] = np.any(ordered_scores[1:] != ordered_scores[:-1], axis=1)
    starts = np.flatnonzero(changes)
    return (starts + 1)[np.cumsum(changes) - 1]


def _top_order(keys: tuple[np.ndarray, ...], depth: int) -> np.ndarray:
    """Return ``np.lexsort(keys)[:depth]`` (primary key last) without sorting every row.

    A partition on each key in turn keeps the rows that can be among the first ``depth``
    (those tied at the cut go on to the next key); only they are sorted. For an "any"
    query matching 100k rows: ~2 ms against 36 ms for the full lexsort (storage_micro.py).
    """
    candidates = np.sort(_top_candidates(keys, depth, np.arange(len(keys[0]))))
    return candidates[np.lexsort(tuple(key[candidates] for key in keys))][:depth]


def _top_candidates(keys, depth: int, rows: np.ndarray) -> np.ndarray:
    if len(rows) <= depth or not keys:
        return rows
    values = keys[-1][rows]
    cut = np.partition(values, depth - 1)[depth - 1]
    below = rows[values < cut]
    return np.concatenate([below, _top_candidates(keys[:-1], depth - len(below), rows[values == cut])])


def to_micros(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def rank(*, query: str, namespaces: list[str] | None, kinds: list[str] | None, memory_ids: np.ndarray | None,
         limit: int, match: str, mode: str, as_of: dt.datetime, valid_at: dt.datetime, explain: bool) -> Ranking:
    """Return the revisions that best answer ``query`` as known at ``as_of``, about ``valid_at``.

    The arguments are checked by the caller (``memories.selectors.memory_recall``).
    ``memory_ids``: only these memories may be returned (a tag filter); None: any.
    """
    cleaned = text.clean_query(query)
    # The query's vector is worked out on another thread while the keyword channels run (PendingVector says when).
    query_vector = PendingVector(lambda embedder: embedder.embed_query(query)) if mode != "keyword" else None

    view = snapshot.current()
    # BM25 statistics come from every visible row of the namespaces searched; kinds and
    # tags only choose which of them may be returned.
    visible = view.visible_rows(as_of=to_micros(as_of), valid_at=to_micros(valid_at),
                                namespaces=namespaces)
    size = len(view.columns.revision) if view.columns is not None else 0
    # The visible set's own mask (shared, read-only; one slot longer than the rows), unless
    # kinds or tags narrow it.
    eligible = view.visible_mask(visible)[:size] if size else np.zeros(0, dtype=bool)
    if kinds is not None and size:
        eligible = eligible & np.isin(view.columns.kind, [code for code, name in enumerate(view.kinds) if name in kinds])
    if memory_ids is not None and size:
        eligible = eligible & np.isin(view.columns.memory, memory_ids)

    search = _Search(view=view, visible=visible, eligible=eligible, terms=cleaned.terms, match=match,
                     narrowed=kinds is not None or memory_ids is not None)
    channels: dict[str, _Channel] = {}
    note = None
    if mode != "semantic" and cleaned.terms:
        channels.update(search.keyword_channels(every_row=mode == "hybrid"))
        note = search.note
    vector_note = None
    cosines = None
    if mode != "keyword":
        try:
            cosines = query_vector.cosines(view)
        except Unavailable as error:
            if mode == "semantic":
                raise
            vector_note = f"Semantic search is unavailable ({error.message}); these are keyword results."
        if cosines is not None:
            vector = search.vector_channel(cosines, floor_for_new=mode == "hybrid", floor=settings.MEMORY_COSINE_FLOOR)
            if vector is not None:
                channels["vector"] = vector
    ranked_rows, fused, context = _fuse(channels, search=search, cosines=cosines, limit=limit,
                                        hybrid=mode == "hybrid")
    if explain:
        search.ensure_scored(ranked_rows)
    hits = _hits(view, ranked_rows, fused, channels=channels, search=search, cosines=cosines, explain=explain,
                 context=context)
    hint = None
    if not hits:
        hint = _hint(cleaned, visible_count=len(visible), mode=mode)
    return Ranking(terms=[token.raw for token in cleaned.terms], match_mode=search.match_used, hits=hits,
                   note=" ".join(part for part in (note, vector_note) if part) or None, hint=hint)


_zeros_lock = threading.Lock()
_zeros_shared: dict = {}


def _zeros(size: int, dtype=np.float64) -> np.ndarray:
    """A read-only array of ``size`` zeros, shared (grown when a larger one is asked for)."""
    shared = _zeros_shared.get(dtype)
    if shared is None or len(shared) < size:
        with _zeros_lock:
            shared = _zeros_shared.get(dtype)
            if shared is None or len(shared) < size:
                shared = np.zeros(size + size // 8, dtype=dtype)
                shared.flags.writeable = False
                _zeros_shared[dtype] = shared
    return shared[:size]


class _Search:
    """The keyword side of one recall: BM25 per term over the visible rows, and match-mode filtering."""

    def __init__(self, *, view, visible, eligible, terms, match, narrowed=False):
        self.view = view
        self.visible = visible
        self.eligible = eligible
        self.narrowed = narrowed  # kinds or tags chose among the visible rows (else eligible is visible's mask)
        self.terms = terms
        self.match = match
        self.match_used = match
        self.note = None
        size = len(eligible)
        self.bm25 = np.zeros(size, dtype=np.float64)
        # Most queries have no CJK bigrams and no missing words: those channels read one
        # shared, read-only array of zeros until a channel runs and gets its own.
        nothing = _zeros(size)
        self.bigram = self.trigram = self.bigram_matched_idf = nothing
        self.matched = np.zeros((len(terms), size), dtype=bool)
        self.match_counts = _zeros(size, np.uint16)  # per row, how many terms it matched (keyword_channels)
        self._found = []  # per term: (rows, counts, idf), see _term_rows
        self._scored = None  # rows whose BM25 is computed, when not every matched row's is
        # For fusion: per row, the idf of the query terms it matched; per query, the idf of all
        # its terms (each BM25 channel's ceiling is (K1 + 1) times it).
        self.matched_idf = np.zeros(size, dtype=np.float64)
        self.idf_total = self.bigram_idf_total = 0.0
        self.keyword_rows = _zeros(size, bool)  # rows the keyword channel holds, at any depth
        self._vector_candidates = None  # (cosines, floor, rows): the vector channel and the fusion both ask
        self._found_by_words = None  # the vector channel and the fusion both ask (see found_by_words)

    def _term_rows(self, column: str, ranges_per_term, *, record_matches: bool):
        """Per query term, the visible rows holding it, their counts and the term's idf; and the idf of all terms.

        ``column`` names the document lengths (ntok or nbigram) the terms are counted
        against. A term no visible row holds counts too, with the formula's idf for no
        hits (the query asked for it; that nothing has it makes every hit partial).
        """
        view = self.view
        n_docs = len(self.visible)
        if n_docs == 0:
            return [], 0.0
        visible_set, _, avgdl = view.visible_stats(self.visible, column)
        if avgdl == 0:
            return [], 0.0
        keys = [(column, tuple(ranges)) for ranges in ranges_per_term]
        kept = [_term_rows.rows(self.visible, key) for key in keys]
        unread = [index for index, entry in enumerate(kept) if entry is None]
        read = postings.read_terms([ranges_per_term[index] for index in unread], max_id=view.max_id) if unread else []
        for index, (ids, tfs) in zip(unread, read):
            # Each id appears once per term; an id the view lacks maps to -1, the mask's last slot, always False.
            rows = view.position[ids]
            keep = visible_set[rows]
            rows, tf = arrays.select(keep, rows, tfs)
            kept[index] = rows, tf
            if len(ids) >= TERM_ROWS_MIN_IDS:
                _term_rows.keep(self.visible, keys[index], rows, tf)
        found, total = [], 0.0
        for index, (rows, tf) in enumerate(kept):
            hits = len(rows)
            idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            total += idf
            found.append((rows, tf, idf))
            if record_matches and hits:
                self.matched[index, rows] = True
        return found, total

    def _score(self, scores, matched_idf, column: str, found, only: np.ndarray | None = None) -> None:
        """Add each term's BM25 to ``scores`` (in query order, as FTS5 sums them) and its idf to ``matched_idf``.

        Every row a term holds, or with ``only`` (distinct rows) just those: a query whose
        hits must hold every term need not score the rows that hold one.
        """
        if not found:
            return
        view = self.view
        lengths, avgdl = view.visible_stats(self.visible, column)[1:]
        # FTS5's length normalisation, k1 * (1 - b + b * D / avgdl), per row: it depends only on
        # the visible set, so it is computed once per set (the same operations, so the same bits).
        norm = view.visible_memo(self.visible, ("bm25 norm", column, K1, B),
                                 lambda: K1 * (1.0 - B + B * lengths / avgdl))
        if only is not None:
            counts = postings.scratch_arrays(len(scores))[0]
        for rows, tf, idf in found:
            if only is not None:
                # The term's count at each of ``only`` (0 where it is absent), through a dense scratch array.
                try:
                    counts[rows] = tf
                    tf = counts[only]
                finally:
                    counts[rows] = 0.0  # clean for the next user
                held = tf > 0
                rows, tf = only[held], tf[held]
            if len(rows):
                scores[rows] += idf * ((tf * (K1 + 1.0)) / (tf + norm[rows]))
                matched_idf[rows] += idf

    def keyword_channels(self, *, every_row: bool) -> dict[str, _Channel]:
        """The keyword, bigram and trigram channels; ``every_row``: score every row the keyword channel holds.

        Without it, rows that cannot reach the channel's CHANNEL_DEPTH places keep no BM25
        until ``ensure_scored`` asks (fusion over several channels does).
        """
        view = self.view
        self.ranges = [postings.term_ranges(token.stem, token.prefix) for token in self.terms]
        self._found, self.idf_total = self._term_rows("ntok", self.ranges, record_matches=True)
        counts = self.match_counts = np.zeros(len(self.eligible), dtype=np.uint16)
        for matched in self.matched:
            counts += matched
        channels = {}
        found_all = (counts == len(self.terms)) & self.eligible
        found_any = (counts > 0) & self.eligible
        if self.match == "auto":
            if found_all.any() or not found_any.any():
                self.match_used = "all"
            else:
                self.match_used = "any"
                self.note = ("No memory matches every term; these match some of them (hits are partial). "
                             "Use fewer or different words for exact matches.")
        keep = found_all if self.match_used == "all" else found_any
        self.keyword_rows = keep
        rows = np.flatnonzero(keep)
        if self.match_used == "all":
            # Only rows holding every term are keyword hits: score just them (see ensure_scored).
            self._score(self.bm25, self.matched_idf, "ntok", self._found, only=rows)
            self._scored = keep
        elif every_row:
            self._score(self.bm25, self.matched_idf, "ntok", self._found)
        else:
            # "any" ranks by matched terms first: rows below the fewest matched terms that still
            # fill CHANNEL_DEPTH places cannot reach the channel, so they need no score yet.
            matched_rows = counts[rows]
            reaching = np.cumsum(np.bincount(matched_rows)[::-1])[::-1]  # [c]: rows matching c or more terms
            fewest = int(np.flatnonzero(reaching >= CHANNEL_DEPTH)[-1]) if len(rows) >= CHANNEL_DEPTH else 0
            if fewest > 1:
                rows = rows[matched_rows >= fewest]
                self._score(self.bm25, self.matched_idf, "ntok", self._found, only=rows)
                self._scored = np.zeros(len(keep), dtype=bool)
                self._scored[rows] = True
            else:
                self._score(self.bm25, self.matched_idf, "ntok", self._found)
        if len(rows):
            if self.match_used == "any":
                # More matched terms first, then BM25, then the most recently learned.
                keys = np.stack([counts[rows].astype(np.float64), self.bm25[rows],
                                 view.columns.known[rows].astype(np.float64)], axis=1)
                order = _top_order((view.columns.memory[rows], -keys[:, 2], -keys[:, 1], -keys[:, 0]), CHANNEL_DEPTH)
                rows = rows[order][:CHANNEL_DEPTH]
                channels["keyword"] = _Channel(rows=rows, scores=keys[order][:CHANNEL_DEPTH])
            else:
                order = _top_order((view.columns.memory[rows], -self.bm25[rows]), CHANNEL_DEPTH)
                rows = rows[order][:CHANNEL_DEPTH]
                channels["keyword"] = _Channel(rows=rows, scores=self.bm25[rows])
        # Two-character CJK words: BM25 over character bigrams.
        grams = text.cjk_bigrams(" ".join(token.raw for token in self.terms))
        if grams:
            self.bigram_terms = list(dict.fromkeys(grams))
            self.bigram, self.bigram_matched_idf = np.zeros(len(self.eligible)), np.zeros(len(self.eligible))
            found, self.bigram_idf_total = self._term_rows(
                "nbigram", [[(postings.BIGRAM_PREFIX + gram, None)] for gram in self.bigram_terms],
                record_matches=False)
            self._score(self.bigram, self.bigram_matched_idf, "nbigram", found)
            rows = np.flatnonzero((self.bigram > 0) & self.eligible)
            if len(rows):
                order = _top_order((view.columns.memory[rows], -self.bigram[rows]), CHANNEL_DEPTH)
                rows = rows[order][:CHANNEL_DEPTH]
                channels["bigram"] = _Channel(rows=rows, scores=self.bigram[rows])
        # Substrings, for the words the keyword channel found nowhere visible.
        missing = [token.raw for index, token in enumerate(self.terms)
                   if len(token.raw) >= 3 and not (self.matched[index] & self.eligible).any()]
        if missing:
            trigram = self._trigram(missing)
            if trigram is not None:
                # As a share of the query's terms, so it scales like the keyword score.
                self.trigram = np.where(self.eligible, trigram, 0.0) / len(self.terms)
                rows = np.flatnonzero((trigram > 0) & self.eligible)
                if len(rows):
                    order = _top_order((view.columns.memory[rows], -trigram[rows]), CHANNEL_DEPTH)
                    rows = rows[order][:CHANNEL_DEPTH]
                    channels["trigram"] = _Channel(rows=rows, scores=trigram[rows])
        self._found_by_words = None  # the word matches just changed
        return channels

    def _trigram(self, words: list[str]) -> np.ndarray | None:
        """Per row, how many of ``words`` occur in it as substrings (a score that depends on the row alone).

        None when no row holds any of them. Words the process can prove absent from every
        text (``substrings``) are not searched.
        """
        proven = substrings.absent(self.view, words)
        words = [word for word in words if word not in proven]
        found = None
        with connection.cursor() as cursor:
            for word in words:
                # The trigram index answers substring MATCHes; user text is quoted by the one quoting function.
                cursor.execute("SELECT rowid FROM search_fts_trigram WHERE search_fts_trigram MATCH %s",
                               [text.fts5_quote(word)])
                ids = np.fromiter((row[0] for row in cursor.fetchall()), dtype=np.int64)
                ids = ids[ids <= self.view.max_id]
                rows = self.view.position[ids]
                rows = rows[rows >= 0]  # the position of an id the view lacks is -1
                if len(rows):
                    if found is None:
                        found = np.zeros(len(self.eligible), dtype=np.float64)
                    found[np.unique(rows)] += 1.0
        return found

    def ensure_scored(self, rows: np.ndarray | None = None) -> None:
        """Complete the BM25 of ``rows`` (default: every row the keyword channel holds) that hold query terms.

        Only rows that can rank are scored at first (see keyword_channels); explain and a
        fusion over several channels need the rest.
        """
        if self._scored is None:
            return
        if rows is None:
            rows = np.flatnonzero(self.keyword_rows)
        missing = rows[~self._scored[rows] & (self.match_counts[rows] > 0)]
        if len(missing):
            missing = np.unique(missing)
            self._score(self.bm25, self.matched_idf, "ntok", self._found, only=missing)
            scored = self._scored.copy()
            scored[missing] = True
            self._scored = scored

    def neighbours(self) -> "_Neighbours":
        """The eligible rows' neighbours (hybrid context); kept with the visible set unless kinds or tags narrow it."""
        if self.narrowed:
            return _Neighbours(self.view, self.eligible)
        return self.view.visible_memo(self.visible, "neighbours", lambda: _Neighbours(self.view, self.eligible))

    def found_by_words(self) -> np.ndarray:
        """Per row, whether any query word (or CJK bigram) matched it (once keyword_channels has run)."""
        if self._found_by_words is None:
            words = (self.match_counts > 0) | (self.bigram > 0)
            words.flags.writeable = False  # shared by every caller
            self._found_by_words = words
        return self._found_by_words

    def vector_candidates(self, cosines: Cosines, *, floor: float | None) -> np.ndarray:
        """The eligible rows with a vector; with a floor, those close enough to mean something or found by words."""
        cached = self._vector_candidates
        if cached is not None and cached[0] is cosines and cached[1] == floor:
            return cached[2]
        keep = self.eligible & cosines.has_vector
        if floor is not None:
            # A hit that only the vectors found must be close enough to mean something.
            keep &= self.found_by_words() | (np.nan_to_num(cosines.dense(), nan=-2.0) >= floor)
        self._vector_candidates = (cosines, floor, keep)
        return keep

    def vector_channel(self, cosines: Cosines, *, floor_for_new: bool,
                       floor: float) -> _Channel | _DeferredChannel | None:
        """The CHANNEL_DEPTH candidates with the highest cosines, best first (ties: lower memory id); None if none.

        Every eligible row with a vector is a candidate; with ``floor_for_new`` (hybrid),
        one no word found must reach ``floor``. There the fusion scores candidates
        itself, so the channel is worked out only if read, and only whether it has a
        row is settled now: from the int8 bounds (search/cosines.py) where they decide.
        """
        if not floor_for_new:  # the int8 bounds can narrow the search
            rows = cosines.top(CHANNEL_DEPTH, self.eligible)
            return _Channel(rows=rows, scores=cosines.at(rows)) if len(rows) else None

        def channel():
            rows = cosines.top(CHANNEL_DEPTH, self.vector_candidates(cosines, floor=floor))
            return _Channel(rows=rows, scores=cosines.at(rows))

        if not cosines.bounded():
            found = channel()
            return found if len(found.rows) else None
        if (self.eligible & cosines.has_vector & self.found_by_words()).any():
            return _DeferredChannel(channel)
        rows = cosines.reaching(floor, self.eligible)
        # A lower bound at the floor settles it; otherwise only the rows near the floor are computed.
        if len(rows) and ((cosines.bounds_at(rows)[0] >= floor).any() or (cosines.at(rows) >= floor).any()):
            return _DeferredChannel(channel)
        return None


class _Scorer:
    """The fusion score of every row: each channel's score, weighted by MEMORY_FUSION_WEIGHTS, summed.

    Channel scores run from 0 to about 1 on a scale that means the same in any query.
    keyword, bigram: BM25 over its ceiling ((K1 + 1) times the idf of every query term,
    the most a row could reach), times the share of that idf the row matched to
    COVERAGE_POWER; trigram: the share of query words found as substrings; vector: the
    cosine (floored at 0), plus a bonus for lying near the best cosine (TOP_MATCH_*). A
    row a channel does not hold scores 0 there. Every statistic is over visible rows.
    """

    def __init__(self, channels, *, search: "_Search", cosines):
        self.search = search
        self.cosines = cosines
        self.weights = settings.MEMORY_FUSION_WEIGHTS
        self.names = [name for name in channels
                      if name not in ("keyword", "bigram") or (search.idf_total if name == "keyword"
                                                              else search.bigram_idf_total) > 0]
        if "vector" in self.names:
            self.best_cosine = cosines.best(search.eligible)
        self._words = self._all = None

    @functools.cached_property
    def per_row(self) -> bool:
        """Whether rows are scored one by one (cosines computed only where asked), not all at once from a full scan."""
        return "vector" in self.names and self.cosines.bounded()

    def channel(self, name: str, rows: np.ndarray) -> np.ndarray:
        """The channel's score at ``rows``."""
        search = self.search
        if name == "keyword":
            share = search.matched_idf[rows] / search.idf_total
            return np.where(search.keyword_rows[rows],
                            search.bm25[rows] / ((K1 + 1.0) * search.idf_total) * share ** COVERAGE_POWER, 0.0)
        if name == "bigram":
            share = search.bigram_matched_idf[rows] / search.bigram_idf_total
            return np.where(search.eligible[rows], search.bigram[rows] / ((K1 + 1.0) * search.bigram_idf_total)
                            * share ** COVERAGE_POWER, 0.0)
        if name == "trigram":
            return search.trigram[rows]
        return self.vector(self.cosines.at(rows), usable=search.eligible[rows])

    def vector(self, cosine: np.ndarray, *, usable) -> np.ndarray:
        usable = usable & ~np.isnan(cosine)
        cosine = np.where(usable, cosine, 0.0)
        near_best = np.exp(np.minimum(cosine - self.best_cosine, 0.0) / TOP_MATCH_WIDTH)
        return np.where(usable, (1.0 - TOP_MATCH_SHARE) * np.maximum(cosine, 0.0) + TOP_MATCH_SHARE * near_best, 0.0)

    def _word_sum(self) -> np.ndarray:
        """The weighted sum of every channel but the vectors' (the last added), over every row."""
        if self._words is None:
            search = self.search
            total = np.zeros(len(search.eligible))
            for name in self.names:
                if name == "trigram":
                    total += self.weights[name] * search.trigram
                elif name != "vector":
                    held = np.flatnonzero(search.keyword_rows if name == "keyword" else search.bigram > 0)
                    total[held] += self.weights[name] * self.channel(name, held)
            self._words = total
        return self._words

    def fused(self, rows: np.ndarray) -> np.ndarray:
        """The weighted sum at ``rows`` (without ``per_row``, from one pass over every row: contiguous arrays beat gathers)."""
        if "vector" not in self.names:
            return self._word_sum()[rows]
        weight, usable = self.weights["vector"], self.search.eligible
        if self.per_row:
            return self._with_cosines(rows, self.cosines.at(rows))[0]
        if self._all is None:
            self._all = self._word_sum() + weight * self.vector(self.cosines.dense(), usable=usable)
        return self._all[rows]

    def fused_bounds(self, rows: np.ndarray, cosine_bounds=None) -> tuple[np.ndarray, np.ndarray]:
        """A lower and an upper bound on the weighted sum at ``rows``, from the cosines' bounds (``per_row`` only).

        The vector score never falls as the cosine grows, so the cosine's bounds bound it.
        ``cosine_bounds``: the rows' ``bounds_at``, when the caller has them already.
        """
        return self._with_cosines(rows, *(cosine_bounds or self.cosines.bounds_at(rows)))

    def fused_bound(self, rows: np.ndarray, side: int) -> np.ndarray:
        """``fused_bounds(rows)[side]`` (0: lower, 1: upper), without working out the other one."""
        return self._with_cosines(rows, self.cosines.bounds_at(rows)[side])[0]

    def _with_cosines(self, rows: np.ndarray, *cosines: np.ndarray) -> tuple[np.ndarray, ...]:
        """For each of ``cosines`` (one per row), the weighted sum at ``rows`` with the vectors scored at it."""
        words, usable, weight = self._word_sum()[rows], self.search.eligible[rows], self.weights["vector"]
        return tuple(words + weight * self.vector(values, usable=usable) for values in cosines)


class _Neighbours:
    """Neighbours of rows: eligible rows (one per visible memory) of the same namespace, in memory order.

    Memory order is the order memories were first remembered, so a conversation stored
    turn by turn keeps its turns in sequence.
    """

    def __init__(self, view, eligible: np.ndarray):
        sequence = np.flatnonzero(eligible)  # row order is memory order
        codes = view.columns.namespace[sequence]
        self.single = not (len(codes) and np.any(codes != codes[0]))
        if not self.single:
            # Group by namespace, keeping memory order inside each (a radix sort for small codes).
            key = codes.astype(np.uint16) if int(codes.max()) < 1 << 16 else codes
            order = np.argsort(key, kind="stable")
            sequence, codes = sequence[order], codes[order]
            self.where = np.full(len(eligible), -1, dtype=np.int64)
            self.where[sequence] = np.arange(len(sequence))
        self.sequence, self.codes = sequence, None if self.single else codes  # kept per visible set: only what is read

    def around(self, rows: np.ndarray) -> list[np.ndarray]:
        """For each distance 1..CONTEXT_REACH and side, the row that far from each of ``rows`` (-1 if none)."""
        # One namespace: the sequence is sorted rows, so a binary search finds each row.
        at = np.searchsorted(self.sequence, rows) if self.single else self.where[rows]
        size = len(self.sequence)
        found = []
        for distance in range(1, CONTEXT_REACH + 1):
            for step in (-distance, distance):
                other = at + step
                inside = (other >= 0) & (other < size)
                other = np.where(inside, other, 0)
                same = inside if self.single else inside & (self.codes[other] == self.codes[at])
                found.append(np.where(same, self.sequence[other], -1))
        return found


def _rrf(channels: dict[str, _Channel], *, search: "_Search", limit: int,
         hybrid: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Reciprocal rank fusion (MEMORY_FUSION=rrf): each channel adds weight / (MEMORY_RRF_K + rank).

    Ranks are the channels' competition ranks (ties share one), over the CHANNEL_DEPTH rows
    each channel holds; in hybrid mode a row also gains MEMORY_FUSION_CONTEXT times the
    best such score among its CONTEXT_REACH neighbours on each side. Not the default:
    it ranks below the weighted fusion on both benchmark sets (README, Retrieval).
    """
    weights, k = settings.MEMORY_FUSION_WEIGHTS, settings.MEMORY_RRF_K
    fused = np.zeros(len(search.eligible))
    held = np.zeros(len(search.eligible), dtype=bool)
    for name, channel in channels.items():
        fused[channel.rows] += weights[name] / (k + channel.ranks)
        held[channel.rows] = True
    rows = np.flatnonzero(held)
    weight = settings.MEMORY_FUSION_CONTEXT if hybrid else 0.0
    context = None
    if weight:
        best = np.zeros(len(rows))
        for found in search.neighbours().around(rows):
            best = np.maximum(best, np.where(found >= 0, fused[np.maximum(found, 0)], 0.0))
        context = np.zeros(len(search.eligible))
        context[rows] = weight * best
        fused[rows] += context[rows]
    order = np.lexsort((search.view.columns.memory[rows], -fused[rows]))[:limit]
    return rows[order], fused[rows][order], context


def _fuse(channels: dict[str, _Channel], *, search: "_Search", cosines, limit: int,
          hybrid: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return the best ``limit`` rows, their scores, and (hybrid) the context part of each score.

    One channel outside hybrid mode keeps its own order (which may rest on more than one
    key), scored by its channel score. Otherwise every candidate (a row some channel
    holds, at any depth) scores its fused score (``_Scorer``), plus in hybrid mode
    MEMORY_FUSION_CONTEXT times the best fused score among its CONTEXT_REACH neighbours
    on each side; ties go to the lower memory id.
    """
    if not channels:
        return np.empty(0, dtype=np.int64), np.empty(0), None
    if settings.MEMORY_FUSION == "rrf":
        return _rrf(channels, search=search, limit=limit, hybrid=hybrid)
    memory = search.view.columns.memory
    if len(channels) == 1 and not hybrid:
        name, channel = next(iter(channels.items()))
        rows = channel.rows[:limit]
        scorer = _Scorer(channels, search=search, cosines=cosines)
        return rows, scorer.channel(name, rows) if name in scorer.names else np.zeros(len(rows)), None
    search.ensure_scored()  # every keyword row takes part in the fused scores
    scorer = _Scorer(channels, search=search, cosines=cosines)
    if hybrid and scorer.per_row:
        return _fuse_bounded(channels, search=search, scorer=scorer, limit=limit)
    candidates = np.zeros(len(search.eligible), dtype=bool)
    for name in channels:
        if name == "keyword":
            candidates |= search.keyword_rows
        elif name == "vector":
            candidates |= search.vector_candidates(cosines, floor=settings.MEMORY_COSINE_FLOOR if hybrid else None)
        else:
            candidates |= (search.bigram if name == "bigram" else search.trigram) > 0
    rows = np.flatnonzero(candidates & search.eligible)
    fused = scorer.fused(rows)
    weight = settings.MEMORY_FUSION_CONTEXT if hybrid else 0.0
    if not weight:
        top = _best(rows, fused, memory, limit)
        return rows[top], fused[top], None
    # Only rows that can reach the top need their context, the costly part at 100k rows.
    # The first ``limit`` rows by fused score give a lower bound on the final limit-th
    # score, and ``_may_reach`` drops the rows that cannot reach it.
    neighbours = search.neighbours()
    first = _best(rows, fused, memory, limit)
    if len(first) == limit:
        bound = float(np.min(fused[first] + weight * _context(scorer.fused, neighbours, rows[first])))
        keep = _may_reach(rows, fused, bound, outside=_outside(scorer), weight=weight, neighbours=neighbours,
                          size=len(search.eligible))
        rows, fused = rows[keep], fused[keep]
    context = np.zeros(len(search.eligible))
    context[rows] = weight * _context(scorer.fused, neighbours, rows)
    total = fused + context[rows]
    top = _best(rows, total, memory, limit)
    return rows[top], total[top], context


def _fuse_bounded(channels, *, search: "_Search", scorer: _Scorer,
                  limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``_fuse`` in hybrid mode from the cosines' int8 bounds: the same answer, exact cosines only where needed.

    Candidates are the rows a word channel found and those whose cosine may reach the
    floor. From bounds on every candidate's fused score, the ``limit`` surest rows give
    a lower bound on the final limit-th score; only rows whose upper bound can reach
    it (and, for context, their neighbours) get exact cosines, and only those rows are
    ranked exactly, as ``_fuse`` ranks them. The argument is ``_fuse``'s with bounds in
    place of scores.
    """
    cosines, eligible, memory = scorer.cosines, search.eligible, search.view.columns.memory
    floor, weight = settings.MEMORY_COSINE_FLOOR, settings.MEMORY_FUSION_CONTEXT
    words = np.zeros(len(eligible), dtype=bool)
    for name in channels:
        if name == "keyword":
            words |= search.keyword_rows
        elif name in ("bigram", "trigram"):
            words |= (search.bigram if name == "bigram" else search.trigram) > 0
    words |= search.found_by_words() & cosines.has_vector  # a vector candidate whatever its cosine
    words &= eligible
    candidates = words.copy()
    candidates[cosines.reaching(floor, eligible)] = True
    rows = np.flatnonzero(candidates)
    cosine_bounds = cosines.bounds_at(rows)
    lower, upper = scorer.fused_bounds(rows, cosine_bounds)
    # Sure candidates: found by words, or with a cosine surely at the floor.
    sure = np.flatnonzero(words[rows] | (cosine_bounds[0] >= floor))
    neighbours = search.neighbours()
    first = sure[_best(rows[sure], lower[sure], memory, limit)]
    if len(first) == limit:
        bound = lower[first]
        if weight:
            bound = bound + weight * _context(lambda found: scorer.fused_bound(found, 0), neighbours, rows[first])
        bound = float(np.min(bound))
        if not weight:
            rows = rows[upper >= bound]
        else:
            keep = _may_reach(rows, upper, bound, outside=_outside(scorer), weight=weight, neighbours=neighbours,
                              size=len(eligible))
            rows, upper = rows[keep], upper[keep]
            # Then each remaining row's whole score, context included, bounded from above.
            upper = upper + weight * _context(lambda found: scorer.fused_bound(found, 1), neighbours, rows)
            rows = rows[upper >= bound]
    # Exact from here on: which rows are candidates, their fused scores and their context.
    rows = rows[words[rows] | (np.nan_to_num(cosines.at(rows), nan=-2.0) >= floor)]
    fused = scorer.fused(rows)
    if not weight:
        top = _best(rows, fused, memory, limit)
        return rows[top], fused[top], None
    context = np.zeros(len(eligible))
    context[rows] = weight * _context(scorer.fused, neighbours, rows)
    total = fused + context[rows]
    top = _best(rows, total, memory, limit)
    return rows[top], total[top], context


def _outside(scorer: _Scorer) -> float:
    """The most a row no candidate list holds (no word found, a cosine below the floor) can score."""
    if "vector" not in scorer.names:
        return 0.0
    at_floor = scorer.vector(np.array([settings.MEMORY_COSINE_FLOOR]), usable=np.ones(1, dtype=bool))
    return scorer.weights["vector"] * float(at_floor[0])


def _may_reach(rows: np.ndarray, scores: np.ndarray, bound: float, *, outside: float, weight: float,
               neighbours: _Neighbours, size: int) -> np.ndarray:
    """Which of the candidate ``rows`` may reach ``bound`` once their context is added (a mask over ``rows``).

    ``scores``: each row's fused score, or an upper bound on it. A row's context is
    ``weight`` times its best neighbour's score. A neighbour among the candidates that
    reaches ``bound`` marks its neighbours as near; every other neighbour scores below
    ``bound`` or at most ``outside`` (``_outside``). So a row that is not near gains less
    than weight * max(bound, outside), and needs the rest of ``bound`` itself.
    """
    near = np.zeros(size, dtype=bool)
    for found in neighbours.around(rows[scores >= bound]):
        near[found[found >= 0]] = True
    return (scores >= bound - weight * max(bound, outside)) | near[rows]


def _context(score, neighbours: _Neighbours, rows: np.ndarray) -> np.ndarray:
    """Per row, the best ``score(rows)`` (a fused score, or a bound on it) among its neighbours (0 without any).

    ``score`` is asked once for every neighbour of every row: its cost is mostly per call.
    """
    found = np.stack(neighbours.around(rows)) if len(rows) else np.zeros((0, 0), dtype=np.int64)
    present = found >= 0
    scores = np.zeros(found.shape)
    scores[present] = score(found[present])
    return np.max(scores, axis=0, initial=0.0)


def _best(rows: np.ndarray, scores: np.ndarray, memory: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the best ``limit`` of ``rows`` by score, ties to the lower memory id, best first."""
    if len(rows) > limit:  # sort only the rows tied with or above the limit-th score
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        within = np.flatnonzero(scores >= cut)
    else:
        within = np.arange(len(rows))
    return within[np.lexsort((memory[rows[within]], -scores[within]))][:limit]


def _hits(view, rows, fused, *, channels, search, cosines, explain, context) -> list[Ranked]:
    if len(rows) == 0:
        return []
    revision_ids = view.columns.revision[rows].tolist()
    with connection.cursor() as cursor:
        # Primary-key lookups: the text each snippet is cut from.
        cursor.execute("SELECT id, content FROM memories_revision WHERE id IN (%s)" % ",".join(["%s"] * len(rows)),
                       revision_ids)
        contents = dict(cursor.fetchall())
    ranks = {name: dict(zip(channel.rows.tolist(), channel.ranks.tolist()))
             for name, channel in channels.items()} if explain else {}
    hit_cosines = cosines.at(rows).tolist() if cosines is not None else [math.nan] * len(rows)
    hits = []
    for row, revision_id, score, cosine in zip(rows.tolist(), revision_ids, fused.tolist(), hit_cosines):
        matched = [token.raw for index, token in enumerate(search.terms)
                   if search.matched[index, row] or (search.bigram[row] and text.has_cjk(token.raw))]
        details = None
        if explain:
            details = {
                "ranks": {name: channel_ranks.get(row) for name, channel_ranks in ranks.items()},
                "bm25": float(search.bm25[row]) if search.bm25[row] else None,
                "bigram_bm25": float(search.bigram[row]) if search.bigram[row] else None,
                "cosine": None if math.isnan(cosine) else cosine,
                # Hybrid: the part of the score lent by neighbouring memories (MEMORY_FUSION_CONTEXT).
                "context": None if context is None else float(context[row]),
            }
        hits.append(Ranked(revision_id=revision_id, memory_id=int(view.columns.memory[row]), score=score,
                           snippet=snippets.highlight(contents[revision_id], search.terms), matched_terms=matched,
                           explain=details))
    return hits


def _hint(cleaned, *, visible_count: int, mode: str) -> str:
    if visible_count == 0:
        return ("Nothing is visible here at this time: check the namespace, or ask with an earlier or later "
                "as_of / valid_at.")
    if not cleaned.terms and mode == "keyword":
        return "The query has no searchable words; try keywords or mode='hybrid'."
    return ("No memory matched. Try other words, fewer filters (tags, kinds), mode='hybrid' for meaning, "
            "or match='any'.")
