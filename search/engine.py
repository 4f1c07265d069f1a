"""recall: hybrid retrieval whose every answer is exact for its point in time.

For a knowledge cutoff ``as_of`` and a valid time ``valid_at``, the visible set is
resolved first (``search.snapshot``), and every statistic a score depends on is
computed over that set alone, within the namespaces searched: BM25's document
count, average length and document frequencies. So a recall at any point returns
what a fresh store holding only the revisions visible there would return, with the
same scores; nothing written later, and no other tenant's text, can move a rank.

Channels, fused by reciprocal rank fusion:
- ``keyword``: BM25 (FTS5's formula and tokeniser) over the engine's postings;
- ``bigram``: BM25 over CJK character bigrams, for two-character words;
- ``trigram``: substring matches through the FTS5 trigram index, for words the
  keyword channel could not find (identifiers, partial words, unspaced scripts);
- ``vector``: exact cosine between the query's embedding and each visible revision's.
"""

import datetime as dt
import math
import threading
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Prefetch
from django.utils import timezone

from memories import validation
from memories.exceptions import InvalidInput, MemoryServiceError
from memories.models import Kind, Revision, Tag
from memories.records import MemoryRecord
from memories.timeparse import format_instant, parse_optional_instant
from search import postings, snapshot, snippets, text, vectors
from search.embeddings import EmbedderUnavailable, get_embedder

# FTS5's bm25() constants.
K1 = 1.2
B = 0.75
QUERY_MAX_CHARS = 2000
LIMIT_MAX = 100
# How deep each channel's ranking goes into the fusion; deeper ranks add < 1/(k+200).
CHANNEL_DEPTH = 200
MATCH_MODES = ("auto", "all", "any")
MODES = ("hybrid", "keyword", "semantic")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)


class Unavailable(MemoryServiceError):
    """A part of the engine the request needs cannot run here (for example, no embedding model)."""

    code = "unavailable"


@dataclass(frozen=True)
class Hit:
    memory: MemoryRecord
    score: float
    snippet: str
    matched_terms: list[str]
    age: str
    explain: dict | None = None

    def as_dict(self) -> dict:
        data = {**self.memory.as_dict(), "score": self.score, "snippet": self.snippet,
                "matched_terms": self.matched_terms, "age": self.age}
        if self.explain is not None:
            data["explain"] = self.explain
        return data


@dataclass(frozen=True)
class RecallResult:
    query: str
    terms: list[str]
    match_mode: str
    mode: str
    as_of: dt.datetime
    valid_at: dt.datetime
    hits: list[Hit]
    note: str | None = None
    hint: str | None = None

    def as_dict(self) -> dict:
        data = {"query": self.query, "terms": self.terms, "match_mode": self.match_mode, "mode": self.mode,
                "as_of": format_instant(self.as_of), "valid_at": format_instant(self.valid_at),
                "hits": [hit.as_dict() for hit in self.hits]}
        if self.note:
            data["note"] = self.note
        if self.hint:
            data["hint"] = self.hint
        return data


@dataclass
class _Channel:
    """One channel's scores over the rows it found, best first, with shared (competition) ranks."""

    rows: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray = field(init=False)

    def __post_init__(self):
        self.ranks = _competition_ranks(self.scores)


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


def _micros(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def _names(value, *, field: str, check) -> list[str] | None:
    if value is None or value == [] or value == "":
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not all(isinstance(item, str) for item in values):
        raise InvalidInput(f"{field}: expected a name or a list of names.", field=field)
    return [check(item) for item in values]


def _choice(value, *, field: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidInput(f"{field}: {value!r} is not one of {', '.join(choices)}.", field=field)
    return value


def _tagged_memories(tags: list[str]) -> np.ndarray:
    """Ids of the memories that carry every one of ``tags``."""
    slugs = sorted({tag.casefold() for tag in tags})
    ids = None
    for slug in slugs:
        found = set(Tag.objects.filter(slug=slug).values_list("memories__id", flat=True))
        ids = found if ids is None else ids & found
    ids.discard(None)
    return np.fromiter(ids, dtype=np.int64, count=len(ids))


def recall(
    *,
    query: str,
    namespace=None,
    tags=None,
    kinds=None,
    limit: int = 8,
    match: str = "auto",
    mode: str = "hybrid",
    as_of=None,
    valid_at=None,
    explain: bool = False,
) -> RecallResult:
    """Return the memories that best answer ``query`` as known at ``as_of``, about ``valid_at``."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query: must be non-empty text.", field="query")
    if len(query) > QUERY_MAX_CHARS:
        raise InvalidInput(f"query: {len(query)} characters is over the limit of {QUERY_MAX_CHARS}.", field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise InvalidInput(f"limit: {limit!r} is out of range 1..{LIMIT_MAX}.", field="limit")
    match = _choice(match, field="match", choices=MATCH_MODES)
    mode = _choice(mode, field="mode", choices=MODES)
    if not isinstance(explain, bool):
        raise InvalidInput("explain: expected true or false.", field="explain")
    namespaces = _names(namespace, field="namespace", check=validation.namespace)
    tag_names = validation.tags(tags) if tags else []
    kind_names = _names(kinds, field="kinds", check=validation.kind)
    as_of_time = parse_optional_instant(as_of, field="as_of") or timezone.now()
    valid_time = parse_optional_instant(valid_at, field="valid_at") or as_of_time
    cleaned = text.clean_query(query)

    view = snapshot.current()
    # BM25 statistics come from every visible row of the namespaces searched; kinds and
    # tags only choose which of them may be returned.
    visible = view.visible_rows(as_of=_micros(as_of_time), valid_at=_micros(valid_time), namespaces=namespaces)
    eligible = np.zeros(len(view.columns.revision) if view.columns is not None else 0, dtype=bool)
    eligible[visible] = True
    if kind_names is not None and view.columns is not None:
        eligible &= np.isin(view.columns.kind, [code for code, name in enumerate(view.kinds) if name in kind_names])
    if tag_names and view.columns is not None:
        eligible &= np.isin(view.columns.memory, _tagged_memories(tag_names))

    search = _Search(view=view, visible=visible, eligible=eligible, terms=cleaned.terms, match=match)
    channels: dict[str, _Channel] = {}
    note = None
    if mode != "semantic" and cleaned.terms:
        channels.update(search.keyword_channels())
        note = search.note
    vector_note = None
    cosines = None
    if mode != "keyword":
        try:
            cosines = _cosines(view, query)
        except Unavailable as error:
            if mode == "semantic":
                raise
            vector_note = f"Semantic search is unavailable ({error.message}); these are keyword results."
        if cosines is not None:
            channels["vector"] = search.vector_channel(cosines, floor_for_new=mode == "hybrid",
                                                       floor=settings.MEMORY_COSINE_FLOOR)
            if not len(channels["vector"].rows):
                del channels["vector"]
    ranked_rows, fused = _fuse(channels, limit=limit, memory=view.columns.memory if view.columns else None)
    hits = _hits(view, ranked_rows, fused, channels=channels, search=search, cosines=cosines, explain=explain,
                 as_of=as_of_time)
    hint = None
    if not hits:
        hint = _hint(cleaned, visible_count=len(visible), mode=mode)
    return RecallResult(
        query=query, terms=[token.raw for token in cleaned.terms], match_mode=search.match_used, mode=mode,
        as_of=as_of_time, valid_at=valid_time, hits=hits,
        note=" ".join(part for part in (note, vector_note) if part) or None, hint=hint,
    )


class _Search:
    """The keyword side of one recall: BM25 per term over the visible rows, and match-mode filtering."""

    def __init__(self, *, view, visible, eligible, terms, match):
        self.view = view
        self.visible = visible
        self.eligible = eligible
        self.terms = terms
        self.match = match
        self.match_used = match
        self.note = None
        size = len(eligible)
        self.bm25 = np.zeros(size, dtype=np.float64)
        self.bigram = np.zeros(size, dtype=np.float64)
        self.matched = np.zeros((len(terms), size), dtype=bool)

    def _rows_and_tfs(self, ids: np.ndarray, tfs: np.ndarray, in_set: np.ndarray):
        """Map posting revision ids to rows of the view, keep those in ``in_set``, and sum counts per row."""
        ids_ok = ids[ids <= self.view.max_id]
        tfs = tfs[ids <= self.view.max_id]
        rows = self.view.position[ids_ok]
        keep = rows >= 0
        rows, tfs = rows[keep], tfs[keep]
        keep = in_set[rows]
        rows, tfs = rows[keep], tfs[keep]
        if len(rows) == 0:
            return rows, tfs
        unique, inverse = np.unique(rows, return_inverse=True)
        if len(unique) != len(rows):  # a prefix matched several terms of one revision
            tfs = np.bincount(inverse, weights=tfs, minlength=len(unique))
        else:
            tfs = tfs[np.argsort(rows, kind="stable")]
        return unique, tfs

    def _bm25(self, scores, lengths_column, ranges_per_term, *, record_matches: bool):
        """Add each term's BM25 contribution to ``scores`` (in query order, as FTS5 sums them)."""
        visible_set = np.zeros(len(self.eligible), dtype=bool)
        visible_set[self.visible] = True
        n_docs = len(self.visible)
        if n_docs == 0:
            return
        lengths = lengths_column.astype(np.float64)
        avgdl = float(lengths[self.visible].sum()) / n_docs
        if avgdl == 0:
            return
        for index, term_postings in enumerate(postings.read_many(ranges_per_term)):
            ids, tfs = term_postings
            rows, tf = self._rows_and_tfs(ids, tfs, visible_set)
            hits = len(rows)
            if hits == 0:
                continue
            idf = math.log((n_docs - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            scores[rows] += idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * lengths[rows] / avgdl))
            if record_matches:
                self.matched[index, rows] = True

    def keyword_channels(self) -> dict[str, _Channel]:
        view = self.view
        self.ranges = [postings.term_ranges(token.stem, token.prefix) for token in self.terms]
        self._bm25(self.bm25, view.columns.ntok, self.ranges, record_matches=True)
        channels = {}
        counts = self.matched.sum(axis=0)
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
        rows = np.flatnonzero(keep)
        if len(rows):
            if self.match_used == "any":
                # More matched terms first, then BM25, then the most recently learned.
                keys = np.stack([counts[rows].astype(np.float64), self.bm25[rows],
                                 view.columns.known[rows].astype(np.float64)], axis=1)
                order = np.lexsort((view.columns.memory[rows], -keys[:, 2], -keys[:, 1], -keys[:, 0]))
                rows = rows[order][:CHANNEL_DEPTH]
                channels["keyword"] = _Channel(rows=rows, scores=keys[order][:CHANNEL_DEPTH])
            else:
                order = np.lexsort((view.columns.memory[rows], -self.bm25[rows]))
                rows = rows[order][:CHANNEL_DEPTH]
                channels["keyword"] = _Channel(rows=rows, scores=self.bm25[rows])
        # Two-character CJK words: BM25 over character bigrams.
        grams = text.cjk_bigrams(" ".join(token.raw for token in self.terms))
        if grams:
            self.bigram_terms = list(dict.fromkeys(grams))
            self._bm25(self.bigram, view.columns.nbigram,
                       [[(postings.BIGRAM_PREFIX + gram, None)] for gram in self.bigram_terms],
                       record_matches=False)
            rows = np.flatnonzero((self.bigram > 0) & self.eligible)
            if len(rows):
                order = np.lexsort((view.columns.memory[rows], -self.bigram[rows]))
                rows = rows[order][:CHANNEL_DEPTH]
                channels["bigram"] = _Channel(rows=rows, scores=self.bigram[rows])
        # Substrings, for the words the keyword channel found nowhere visible.
        missing = [token.raw for index, token in enumerate(self.terms)
                   if len(token.raw) >= 3 and not (self.matched[index] & self.eligible).any()]
        if missing:
            trigram = self._trigram(missing)
            rows = np.flatnonzero((trigram > 0) & self.eligible)
            if len(rows):
                order = np.lexsort((view.columns.memory[rows], -trigram[rows]))
                rows = rows[order][:CHANNEL_DEPTH]
                channels["trigram"] = _Channel(rows=rows, scores=trigram[rows])
        return channels

    def _trigram(self, words: list[str]) -> np.ndarray:
        """Per row, how many of ``words`` occur in it as substrings (a score that depends on the row alone)."""
        found = np.zeros(len(self.eligible), dtype=np.float64)
        with connection.cursor() as cursor:
            for word in words:
                # The trigram index answers substring MATCHes; user text is quoted by the one quoting function.
                cursor.execute("SELECT rowid FROM search_fts_trigram WHERE search_fts_trigram MATCH %s",
                               [text.fts5_quote(word)])
                ids = np.fromiter((row[0] for row in cursor.fetchall()), dtype=np.int64)
                ids = ids[ids <= self.view.max_id]
                rows = self.view.position[ids]
                rows = rows[rows >= 0]
                found[np.unique(rows)] += 1.0
        return found

    def vector_channel(self, cosines: np.ndarray, *, floor_for_new: bool, floor: float) -> _Channel:
        rows = np.flatnonzero(self.eligible & ~np.isnan(cosines))
        scores = cosines[rows]
        if floor_for_new:
            # A hit that only the vectors found must be close enough to mean something.
            found_by_words = np.zeros(len(self.eligible), dtype=bool)
            found_by_words[self.matched.any(axis=0)] = True
            found_by_words[self.bigram > 0] = True
            keep = found_by_words[rows] | (scores >= floor)
            rows, scores = rows[keep], scores[keep]
        if len(rows) > CHANNEL_DEPTH:
            top = np.argpartition(-scores, CHANNEL_DEPTH - 1)[:CHANNEL_DEPTH]
            rows, scores = rows[top], scores[top]
        order = np.lexsort((self.view.columns.memory[rows], -scores))
        return _Channel(rows=rows[order], scores=scores[order])


class _VectorCopy:
    """The stored vectors of one database, as a matrix in this process, refreshed like the snapshot."""

    def __init__(self):
        self.lock = threading.Lock()
        self.generation = None
        self.embedder = None
        self.ids = np.zeros(0, dtype=np.int64)
        self.matrix = np.zeros((0, 0), dtype=np.float32)

    def current(self, space):
        with self.lock:
            ids, matrix = self.ids, self.matrix
            if space.generation != self.generation or space.embedder != self.embedder:
                after = int(ids[-1]) if len(ids) and space.embedder == self.embedder else 0
                if after == 0:
                    ids, matrix = vectors.load_matrix(after_id=0)
                else:
                    new_ids, new_matrix = vectors.load_matrix(after_id=after)
                    grown = space.generation - (self.generation or 0)
                    if grown == len(new_ids):
                        ids, matrix = np.concatenate([ids, new_ids]), np.concatenate([matrix, new_matrix])
                    else:  # something else changed (an erasure, a backfill): start over
                        ids, matrix = vectors.load_matrix(after_id=0)
                if not connection.in_atomic_block:
                    self.ids, self.matrix, self.generation, self.embedder = ids, matrix, space.generation, \
                        space.embedder
            return ids, matrix


_vector_copies: dict[str, _VectorCopy] = {}
_vector_copies_lock = threading.Lock()


def _cosines(view, query: str) -> np.ndarray | None:
    """Cosine of the query with each row's revision (NaN where a revision has no vector yet)."""
    embedder = get_embedder()
    if not embedder.available():
        raise Unavailable(f"the embedding model cannot load: {embedder.load_error}")
    space = vectors.current_space()
    if space is None or view.columns is None:
        return None
    if not space.holds(embedder):
        raise Unavailable(f"the stored vectors come from {space.embedder}, not the configured {embedder.name}; "
                          "run 'manage.py backfill --reembed'")
    key = str(connection.settings_dict["NAME"])
    with _vector_copies_lock:
        copy = _vector_copies.setdefault(key, _VectorCopy())
    ids, matrix = copy.current(space)
    cosines = np.full(len(view.columns.revision), np.nan, dtype=np.float64)
    if len(ids) == 0:
        return cosines
    try:
        query_vector = embedder.embed_query(query)
    except EmbedderUnavailable as error:
        raise Unavailable(str(error)) from None
    scores = matrix @ query_vector
    ids_ok = ids <= view.max_id
    rows = view.position[ids[ids_ok]]
    keep = rows >= 0
    cosines[rows[keep]] = scores[ids_ok][keep].astype(np.float64)
    return cosines


def _fuse(channels: dict[str, _Channel], *, limit: int, memory) -> tuple[np.ndarray, np.ndarray]:
    """Return the best ``limit`` rows and their fused scores: RRF, ties broken by memory id."""
    if not channels:
        return np.empty(0, dtype=np.int64), np.empty(0)
    k = settings.MEMORY_RRF_K
    if len(channels) == 1:
        # One ranking: keep its order (which may rest on more than one key), score it as RRF would.
        name, channel = next(iter(channels.items()))
        return channel.rows[:limit], settings.MEMORY_RRF_WEIGHTS[name] / (k + channel.ranks[:limit])
    fused: dict[int, float] = {}
    for name, channel in channels.items():
        weight = settings.MEMORY_RRF_WEIGHTS[name]
        for row, rank in zip(channel.rows.tolist(), channel.ranks.tolist()):
            fused[row] = fused.get(row, 0.0) + weight / (k + rank)
    rows = np.fromiter(fused, dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    order = np.lexsort((memory[rows], -scores))[:limit]
    return rows[order], scores[order]


def _age(known_at: dt.datetime, now: dt.datetime) -> str:
    seconds = (now - known_at).total_seconds()
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400), ("day", 86400),
                       ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def _hits(view, rows, fused, *, channels, search, cosines, explain, as_of) -> list[Hit]:
    if len(rows) == 0:
        return []
    revision_ids = view.columns.revision[rows].tolist()
    revisions = {
        revision.pk: revision
        for revision in Revision.objects.filter(pk__in=revision_ids).select_related("memory").prefetch_related(
            Prefetch("memory__tags", queryset=Tag.objects.order_by("slug")))
    }
    ranks = {name: dict(zip(channel.rows.tolist(), channel.ranks.tolist())) for name, channel in channels.items()}
    hits = []
    for row, revision_id, score in zip(rows.tolist(), revision_ids, fused.tolist()):
        revision = revisions[revision_id]
        record = MemoryRecord.from_revision(revision)
        matched = [token.raw for index, token in enumerate(search.terms)
                   if search.matched[index, row] or (search.bigram[row] and text.has_cjk(token.raw))]
        body = snippets.highlight(record.content, search.terms)
        details = None
        if explain:
            details = {
                "revision_id": revision_id,
                "ranks": {name: channel_ranks.get(row) for name, channel_ranks in ranks.items()},
                "bm25": float(search.bm25[row]) if search.bm25[row] else None,
                "bigram_bm25": float(search.bigram[row]) if search.bigram[row] else None,
                "cosine": None if cosines is None or np.isnan(cosines[row]) else float(cosines[row]),
                "known_at": format_instant(revision.known_at),
                "valid_from": format_instant(revision.valid_from),
                "valid_to": format_instant(revision.valid_to),
                "source": revision.source,
                "content_hash": revision.content_hash,
                "author": revision.author,
            }
        hits.append(Hit(memory=record, score=score, snippet=body, matched_terms=matched,
                        age=_age(revision.known_at, as_of), explain=details))
    return hits


def _hint(cleaned, *, visible_count: int, mode: str) -> str:
    if visible_count == 0:
        return ("Nothing is visible here at this time: check the namespace, or ask with an earlier or later "
                "as_of / valid_at.")
    if not cleaned.terms and mode == "keyword":
        return "The query has no searchable words; try keywords or mode='hybrid'."
    return ("No memory matched. Try other words, fewer filters (tags, kinds), mode='hybrid' for meaning, "
            "or match='any'.")
