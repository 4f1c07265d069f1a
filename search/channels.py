"""The channels of a recall. Each finds rows of a visible set and scores them on a scale that means the same in
every query.

- ``keyword``: BM25 (FTS5's formula and tokeniser) over the engine's postings;
- ``bigram``: BM25 over CJK character bigrams, for two-character words inside a run;
- ``trigram``: substring matches through the FTS5 trigram index, for words no posting holds;
- ``vector``: the cosine of the query's embedding with each revision's.

Every statistic comes from the visible rows of the namespaces searched (``Scope.visible``),
so a recall at any point in time scores as a store holding only those rows would; kinds
and tags only choose which rows may be returned (``Scope.eligible``).

A channel answers with a ``Found``: dense arrays over the view's rows.
"""

import functools
import math
import weakref
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from search import caches, postings, text

# FTS5's bm25() constants.
K1 = 1.2
B = 0.75
# A BM25 score counts as a share of the best score the query could reach, times the share of
# the query's idf the row matched to this power: a hit matching one word of four counts for less.
COVERAGE_POWER = 0.5
# The vector score is (1 - share) * cosine + share * exp((cosine - best cosine) / width): the best
# semantic match and those close to it stand out among a few varied facts, not among many alike.
TOP_MATCH_SHARE = 0.4
TOP_MATCH_WIDTH = 0.03
# Common terms come back query after query, and between two writes "now" is one visible set:
# a term of at least this many postings keeps its visible rows and counts per visible set.
KEPT_TERM_MIN_POSTINGS = 2048
_kept_terms = caches.LeastRecentlyUsed(32 << 20, cost=lambda entry: entry[1].nbytes + entry[2].nbytes)


@dataclass(frozen=True)
class Scope:
    """What one recall searches: the visible rows of a view, and which of them may be returned."""

    view: object  # visibility.View
    namespaces: tuple[str, ...]  # the namespaces searched: a term is read from these alone
    visible: np.ndarray  # rows visible at the point asked, one per memory, ascending
    eligible: np.ndarray  # a mask over the view's rows: visible, and of the kinds and memories asked for
    narrowed: bool  # whether kinds or memories narrowed ``eligible`` below ``visible``
    attributes: object  # memory_attributes.AttributesAt: each memory's namespace and kind at the point asked


@dataclass
class Found:
    """One channel's answer, per view row: whether it holds the row, its own score, and its fusion score.

    ``order`` are the keys of the channel's own ranking, best first (each sorted descending,
    ties to the lower memory id); ``score`` runs from 0 to about 1 and is 0 where the
    channel has nothing to say (the vector channel scores every row with a vector).
    ``coverage`` (word channels): per row, the share of the query's words it matched, weighted by idf.
    ``bounds``: where the channel knows most scores only within bounds (``bounded.Bounds``); ``held`` is exact,
    ``raw``, ``score`` and ``order`` only at the rows it has worked out.
    """

    held: np.ndarray
    raw: np.ndarray
    score: np.ndarray
    order: tuple[np.ndarray, ...]
    coverage: np.ndarray | None = None
    bounds: object | None = None

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """The rows the channel holds, ascending."""
        return np.flatnonzero(self.held)


@dataclass
class Words:
    """What the word channels found: their ``Found`` by name, and what a hit needs to explain itself."""

    channels: dict[str, Found]
    scope: Scope
    terms: list  # per query term, the visible rows holding it, their counts and the term's idf
    counts: np.ndarray  # per row, how many terms it holds
    bigram: np.ndarray | None  # BM25 over the query's CJK bigrams, on eligible rows; None where none matched
    match_used: str
    note: str | None

    def found_rows(self) -> np.ndarray:
        """Per row, whether any query word or CJK bigram matched it."""
        found = self.counts > 0
        return found if self.bigram is None else found | (self.bigram > 0)

    def matched(self, rows: np.ndarray) -> np.ndarray:
        """Per query term and each of ``rows``, whether the row holds the term."""
        holds = np.zeros(len(self.counts), dtype=bool)
        matched = np.zeros((len(self.terms), len(rows)), dtype=bool)
        for index, (term_rows, _, _) in enumerate(self.terms):
            holds[term_rows] = True
            matched[index] = holds[rows]
            holds[term_rows] = False
        return matched

    def bm25(self, rows: np.ndarray) -> np.ndarray:
        """The BM25 of each of ``rows`` (0 where it holds no term)."""
        wanted = np.zeros(len(self.counts), dtype=bool)
        wanted[rows] = True
        return _bm25(self.scope, "ntok", self.terms, wanted)[0][rows]


def _postings(scope: Scope, column: str, ranges_per_term) -> tuple[list, float]:
    """Per term, the visible rows holding it, their counts and the term's idf; and the idf of all the terms.

    ``ranges_per_term``: per term, per namespace searched (in ``scope.namespaces`` order), that
    namespace's key ranges. ``column`` names the document lengths (ntok or nbigram). A term no
    visible row holds counts with the formula's idf for no hits: the query asked for it.
    """
    view, n_docs = scope.view, len(scope.visible)
    visible_set, _, avgdl = view.visible_stats(scope.visible, column)
    if n_docs == 0 or avgdl == 0:
        return [], 0.0
    keys = [(id(scope.visible), column, tuple(map(tuple, ranges))) for ranges in ranges_per_term]
    # Keyed by the visible set's identity, checked through a weak reference (a set gone lets its id be reused).
    kept = [_kept_terms.get(key) for key in keys]
    kept = [(entry[1], entry[2]) if entry is not None and entry[0]() is scope.visible else None for entry in kept]
    unread = [index for index, entry in enumerate(kept) if entry is None]
    # A moved memory's postings sit under each namespace it has been in; only those of its namespace at the
    # point asked count. Otherwise each revision is under one key, and the namespaces are read as one.
    apart = view.moved and len(scope.namespaces) > 1
    groups = [
        ranges
        for index in unread
        for ranges in (
            ranges_per_term[index] if apart else [[item for ranges in ranges_per_term[index] for item in ranges]]
        )
    ]
    read = iter(postings.read_terms(groups, max_id=view.max_id) if unread else [])
    codes = [view.namespaces.index(name) for name in scope.namespaces]
    for index in unread:
        parts = []
        for code in codes if apart else [None]:
            ids, tfs = next(read)
            # An id the view lacks maps to -1, the mask's last slot, which is always False.
            rows = view.position[ids]
            keep = visible_set[rows]
            if code is not None:
                keep[keep] = scope.attributes.namespace(rows[keep]) == code
            parts.append((rows[keep], tfs[keep]))
        kept[index] = parts[0] if len(parts) == 1 else tuple(np.concatenate(part) for part in zip(*parts))
        if len(ids) >= KEPT_TERM_MIN_POSTINGS:
            kept[index][0].flags.writeable = kept[index][1].flags.writeable = False
            # Dropped when its visible set goes (a write replaces "now"): stale entries slowed what came after.
            gone = weakref.ref(scope.visible, lambda _, key=keys[index]: _kept_terms.drop(key))
            _kept_terms.put(keys[index], (gone, *kept[index]))
    found, total = [], 0.0
    for rows, tf in kept:
        idf = math.log((n_docs - len(rows) + 0.5) / (len(rows) + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        total += idf
        found.append((rows, tf, idf))
    return found, total


def _bm25(scope: Scope, column: str, found, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per ``wanted`` row, BM25 summed over the terms in query order (as FTS5 sums it), and the idf of the terms
    it holds; 0 elsewhere."""
    size = len(scope.eligible)
    scores, matched_idf = np.zeros(size), np.zeros(size)
    if not found:
        return scores, matched_idf
    lengths, avgdl = scope.view.visible_stats(scope.visible, column)[1:]
    # FTS5's length normalisation depends only on the visible set: computed once per set.
    norm = scope.view.visible_memo(scope.visible, ("bm25 norm", column), lambda: K1 * (1.0 - B + B * lengths / avgdl))
    for rows, tf, idf in found:
        keep = wanted[rows]
        rows, tf = rows[keep], tf[keep]
        scores[rows] += idf * ((tf * (K1 + 1.0)) / (tf + norm[rows]))
        matched_idf[rows] += idf
    return scores, matched_idf


def _share_score(
    bm25: np.ndarray, matched_idf: np.ndarray, idf_total: float, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 over the most the query could reach ((K1 + 1) times its idf), times the matched share of that idf;
    and that share (the coverage)."""
    score, coverage = np.zeros(len(bm25)), np.zeros(len(bm25))
    coverage[rows] = matched_idf[rows] / idf_total
    score[rows] = bm25[rows] / ((K1 + 1.0) * idf_total) * coverage[rows] ** COVERAGE_POWER
    return score, coverage


def words(scope: Scope, terms: list[text.QueryToken], match: str) -> Words:
    """The keyword, bigram and trigram channels for the query's terms (those that found something)."""
    eligible = scope.eligible
    found, idf_total = _postings(
        scope,
        "ntok",
        [[_ranges(namespace, token) for namespace in scope.namespaces] for token in terms],
    )
    counts = np.zeros(len(eligible), dtype=np.int16)
    for rows, _, _ in found:
        counts[rows] += 1
    every = (counts == len(terms)) & eligible
    some = (counts > 0) & eligible
    match_used, note = _match_used(match, every=every, some=some)
    held = every if match_used == "all" else some
    channels = {}
    if held.any():
        channels["keyword"] = _keyword(scope, found, idf_total, counts, held=held, match_used=match_used)
    bigram, bigram_found = _bigram(scope, terms)
    if bigram_found is not None:
        channels["bigram"] = bigram_found
    trigram = _trigram(scope, terms, found)
    if trigram is not None:
        channels["trigram"] = trigram
    return Words(channels, scope, found, counts, bigram, match_used, note)


def _ranges(namespace: str, token: text.QueryToken) -> list[tuple[str, str | None]]:
    """The key ranges of one query word in ``namespace``: its normal form's, and its exact stem as typed."""
    ranges = postings.term_ranges(namespace, token.stem, token.prefix)
    return ranges + [(postings.key(namespace, token.typed.stem), None)] if token.typed else ranges


def _match_used(match: str, *, every: np.ndarray, some: np.ndarray) -> tuple[str, str | None]:
    """The match mode a recall uses, and a note when ``auto`` fell back to ``any``: ``auto`` is ``all`` while an
    eligible row holds every term (``every``) or none holds any (``some``)."""
    if match != "auto":
        return match, None
    if every.any() or not some.any():
        return "all", None
    return "any", (
        "No memory matches every term; these match some of them (hits are partial). "
        "Use fewer or different words for exact matches."
    )


def _keyword(scope: Scope, found, idf_total: float, counts: np.ndarray, *, held: np.ndarray, match_used: str) -> Found:
    """The keyword channel over the ``held`` rows: BM25 of the query's terms (``found``, from ``_postings``)."""
    bm25, matched_idf = _bm25(scope, "ntok", found, held)
    # "any" ranks by matched terms first, then BM25, then the most recently learned.
    order = (bm25,) if match_used == "all" else (counts, bm25, scope.view.columns.known)
    keyword = Found(held, bm25, None, order)
    keyword.score, keyword.coverage = _share_score(bm25, matched_idf, idf_total, keyword.rows)
    return keyword


def _bigram(scope: Scope, terms: list[text.QueryToken]) -> tuple[np.ndarray | None, Found | None]:
    """Per row, BM25 over the query's CJK bigrams (0 where none, or not eligible), and the bigram channel; both None
    when it holds no row."""
    eligible = scope.eligible
    grams = list(dict.fromkeys(text.cjk_bigrams(" ".join(token.raw for token in terms))))
    if not grams:
        return None, None
    found, bigram_idf_total = _postings(
        scope,
        "nbigram",
        [
            [[(postings.key(namespace, postings.BIGRAM_PREFIX + gram), None)] for namespace in scope.namespaces]
            for gram in grams
        ],
    )
    bigram, bigram_idf = _bm25(scope, "nbigram", found, eligible)
    held = (bigram > 0) & eligible
    if not held.any():
        return None, None
    channel = Found(held, bigram, None, (bigram,))
    channel.score, channel.coverage = _share_score(bigram, bigram_idf, bigram_idf_total, channel.rows)
    return bigram, channel


def _trigram(scope: Scope, terms: list[text.QueryToken], keyword_found: list) -> Found | None:
    """The trigram channel: substrings, for the words the keyword channel found nowhere it may look (its
    ``keyword_found`` per term); None when it holds no row."""
    eligible = scope.eligible
    missing = [
        token for token, (rows, _, _) in zip(terms, keyword_found) if len(token.raw) >= 3 and not eligible[rows].any()
    ]
    if not missing:
        return None
    count = _substrings(scope, missing)
    held = (count > 0) & eligible
    if not held.any():
        return None
    # As a share of the query's terms, so it scales like the keyword score.
    share = np.where(eligible, count, 0.0) / len(terms)
    return Found(held, count, share, (count,), coverage=share)


def _substrings(scope: Scope, tokens: list[text.QueryToken]) -> np.ndarray:
    """Per row, how many of the query words ``tokens`` occur inside one of its terms (as written or as stemmed)."""
    view = scope.view
    count = np.zeros(len(view.columns.revision))
    for token in tokens:
        forms = (token.raw, token.stem) + ((token.typed.raw, token.typed.stem) if token.typed else ())
        fragments = list(dict.fromkeys(fragment for fragment in forms if len(fragment) >= 3))
        ids = np.concatenate(
            [postings.containing(namespace, fragments, max_id=view.max_id) for namespace in scope.namespaces]
            or [np.zeros(0, dtype=np.int64)]
        )
        rows = view.position[ids]
        count[np.unique(rows[rows >= 0])] += 1.0
    return count


def vector(scope: Scope, cosines, *, found_by_words: np.ndarray | None, query_share: float | None) -> Found | None:
    """The vector channel: every eligible row with a vector; with ``found_by_words`` (hybrid), only those
    a word found or whose judged cosine reaches MEMORY_COSINE_FLOOR. None when it holds no row.

    ``query_share``: for an English-only model, how English the query is (``text.english_share``); each
    row's cosine and score are then weighed by it times the row's share of text outside CJK scripts, so
    the cosine of texts the model cannot read does not outvote a word match. ``raw`` is that judged cosine.
    """
    cosine = cosines.values
    usable = scope.eligible & cosines.has_vector & ~np.isnan(cosine)
    known = np.where(usable, cosine, 0.0)
    weight = 1.0 if query_share is None else query_share * script_shares(scope.view)
    judged = known * weight
    held = usable
    if found_by_words is not None:
        # A hit only the vectors found must be close enough to mean something.
        held = usable & (found_by_words | (judged >= settings.MEMORY_COSINE_FLOOR))
    if not held.any():
        return None
    score = np.where(usable, vector_score(known, judged, np.max(judged, where=usable, initial=-1.0), weight), 0.0)
    return Found(held, np.where(usable, judged, np.nan), score, (judged,))


def vector_score(known: np.ndarray, judged: np.ndarray, best: float, weight) -> np.ndarray:
    """The vector channel's score of rows with these cosines and judged cosines (``vector``), ``best`` the best
    judged cosine of the rows it may return."""
    # Near the best judged cosine: a text the model cannot read does not set the mark.
    near_best = np.exp(np.minimum(judged - best, 0.0) / TOP_MATCH_WIDTH)
    return weight * ((1.0 - TOP_MATCH_SHARE) * np.maximum(known, 0.0) + TOP_MATCH_SHARE * near_best)


def script_shares(view) -> np.ndarray:
    """Per row of ``view``, the share of its text outside CJK scripts (``text.script_share``)."""
    return view.visible_memo(
        view.columns.ntok, "script shares", lambda: text.script_share(view.columns.ntok, view.columns.nbigram)
    )
