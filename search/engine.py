"""rank: hybrid retrieval whose every answer is exact for its point in time.

For a knowledge cutoff ``as_of`` and a valid time ``valid_at``:

1. the visible set is resolved (``snapshot``), within the namespaces searched;
2. the channels score it (``channels``): keyword, bigram and trigram over the query's
   words, the vector channel over its embedding (worked out on a helper thread while
   the word channels run);
3. fusion makes one ranking of them (``fusion``);
4. hits that are not relevant are held back (``relevance``, or the caller's ``min_score``);
5. the best rows become hits (``hits``); the caller cuts each one's snippet (``hits.snippet``).

Every statistic a score depends on comes from the visible set alone, so a recall at any
point returns what a fresh store holding only the revisions visible there would return,
with the same scores: nothing written later, and no other tenant's text, moves a rank.
"""

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from search import bounded, channels, cosines, fusion, hits, relevance, snapshot, text
from search.embeddings import get_embedder
from search.errors import Unavailable

MATCH_MODES = ("auto", "all", "any")
MODES = ("hybrid", "keyword", "semantic")
# Query embeddings run here while the word channels run on the request's thread.
_embedding = ThreadPoolExecutor(max_workers=8, thread_name_prefix="query-embedding")

Ranked = hits.Ranked


@dataclass(frozen=True)
class Ranking:
    tokens: list[text.QueryToken]  # the query's terms, as snippets match them
    terms: list[str]
    match_mode: str
    hits: list[Ranked]
    note: str | None = None
    hint: str | None = None


def rank(
    *,
    query: str,
    namespaces: list[str] | None,
    kinds: list[str] | None,
    memory_ids: list[int] | None,
    limit: int,
    match: str,
    mode: str,
    as_of: dt.datetime,
    valid_at: dt.datetime,
    explain: bool,
    min_score: float | None = None,
    states: list[str] | None = None,
    stale_after: dict[str, int] | None = None,
    injections: dict[int, int] | None = None,
    injection_boost: float = 0.0,
) -> Ranking:
    """Return the revisions that best answer ``query`` as known at ``as_of``, about ``valid_at``.

    The arguments are checked by the caller (``memories.selectors.memory_recall``).
    ``memory_ids``: only these memories may be returned (a tag filter); None: any.
    ``min_score``: hits scoring below it are held back; None: in hybrid mode, every hit is held
    back when none is relevant (``relevance.relevant``).
    ``states``: only memories in these lifecycle states as of ``as_of`` (``stale_after``: the
    microseconds after which an active memory's text of each kind reads stale); None: any.
    ``injections``: {memory id: injections its answer used, by as_of}; with ``injection_boost`` a > 0
    each such memory's score is multiplied by 1 + a*ln(1 + injections).
    """
    cleaned = text.clean_query(query)
    # The embedder reads full-width letters as unknown pieces: it gets the form the words were read in.
    query = text.normal_form(query)
    pending = _embedding_beside(query, mode=mode)
    scope = _scope(
        namespaces=namespaces,
        kinds=kinds,
        memory_ids=memory_ids,
        states=states,
        stale_after=stale_after,
        as_of=as_of,
        valid_at=valid_at,
    )
    found, words, query_cosines, notes = _channels(scope, cleaned, query=query, pending=pending, match=match, mode=mode)
    notes.extend(_loaded(load) for load in (query_cosines.loads if explain and query_cosines is not None else []))
    boost = _injection_boost(scope.view, injections, injection_boost) if injection_boost and injections else None
    rows, scores, context = fusion.fuse(found, scope=scope, limit=limit, hybrid=mode == "hybrid", boost=boost)
    rows, scores, notes = _hold_back(rows, scores, notes, found=found, words=words, min_score=min_score, mode=mode)
    ranked = hits.hits(
        scope.view,
        rows,
        scores,
        channels=found,
        words=words,
        cosines=query_cosines,
        terms=cleaned.terms,
        context=context,
        boost=boost,
        explain=explain,
    )
    return _ranking(cleaned, ranked, notes, scope=scope, words=words, match=match, mode=mode)


def _ranking(
    cleaned: text.CleanQuery,
    ranked: list[Ranked],
    notes: list[str | None],
    *,
    scope: channels.Scope,
    words: channels.Words | None,
    match: str,
    mode: str,
) -> Ranking:
    """The answer: the ``ranked`` hits with the query's terms, the match mode used, the notes, and what to try when
    nothing was found."""
    return Ranking(
        tokens=cleaned.terms,
        terms=[token.raw for token in cleaned.terms],
        match_mode=words.match_used if words else match,
        hits=ranked,
        note=" ".join(note for note in notes if note) or None,
        hint=None
        if ranked
        else _hint(cleaned, visible_count=len(scope.visible), mode=mode, match=match, narrowed=scope.narrowed),
    )


def _embedding_beside(query: str, *, mode: str):
    """The query's embedding, started on a helper thread to run while the word channels do; None where the
    embedder does not run beside them or the mode reads no vectors."""
    if mode != "keyword" and get_embedder().embeds_beside:
        return _embedding.submit(cosines.embed, lambda embedder: embedder.embed_query(query))
    return None


def _scope(
    *,
    namespaces: list[str] | None,
    kinds: list[str] | None,
    memory_ids: list[int] | None,
    states: list[str] | None,
    stale_after: dict[str, int] | None,
    as_of: dt.datetime,
    valid_at: dt.datetime,
) -> channels.Scope:
    """The rows visible at (``as_of``, ``valid_at``) in the namespaces searched, and which of them may be returned."""
    view = snapshot.current()
    if namespaces is not None:  # the memories of those namespaces: the work follows them, not the store
        view = view.narrowed(namespaces)
    # BM25 statistics come from every visible row of the namespaces searched; kinds and
    # tags only choose which of them may be returned. Namespace and kind are the memory's as of as_of.
    as_of_micros = snapshot.to_micros(as_of)
    visible = view.visible_rows(as_of=as_of_micros, valid_at=snapshot.to_micros(valid_at), namespaces=namespaces)
    attributes = view.attributes_at(as_of_micros)
    size = len(view.columns.revision)
    eligible = view.visible_mask(visible)[:size]
    if kinds is not None and size:
        eligible = np.zeros(size, dtype=bool)
        eligible[
            visible[np.isin(attributes.kind(visible), [code for code, name in enumerate(view.kinds) if name in kinds])]
        ] = True
    if memory_ids is not None and size:
        eligible = eligible & np.isin(view.columns.memory, memory_ids)
    # Like kinds, states choose among the visible rows; a filter that leaves every row in narrows nothing.
    narrowed = kinds is not None or memory_ids is not None
    if states is not None and size:
        outside = visible[~attributes.in_states(visible, states, stale_after or {}, as_of=as_of_micros)]
        if len(outside):
            eligible = eligible.copy() if not narrowed else eligible
            eligible[outside] = False
            narrowed = True
    searched = tuple(name for name in view.namespaces if namespaces is None or name in namespaces)
    return channels.Scope(view, searched, visible, eligible, narrowed=narrowed, attributes=attributes)


def _channels(
    scope: channels.Scope, cleaned: text.CleanQuery, *, query: str, pending, match: str, mode: str
) -> tuple[dict[str, channels.Found], channels.Words | None, cosines.Cosines | None, list[str | None]]:
    """Each channel's answer by name; what the word channels found and the query's cosines, for the hits to
    explain themselves; and the notes to show (None where a channel has none)."""
    found, words, notes = {}, None, []
    if mode != "semantic" and cleaned.terms:
        words = channels.words(scope, cleaned.terms, match)
        found.update(words.channels)
        notes.append(words.note)
    size = len(scope.view.columns.revision)
    query_cosines = None
    if mode != "keyword" and size:
        try:
            query_cosines = _cosines(scope, query, pending, compact_scan=mode == "hybrid")
        except Unavailable as error:
            if mode == "semantic":
                raise
            notes.append(f"Semantic search is unavailable ({error.message}); these are keyword results.")
        if query_cosines is not None:
            by_words = (
                (words.found_rows() if words is not None else np.zeros(size, dtype=bool)) if mode == "hybrid" else None
            )
            # Semantic mode asked for meaning alone: it keeps the model's own cosine order.
            query_share = text.english_share(query) if mode == "hybrid" and get_embedder().english_only else None
            if query_cosines.upper is None:
                vector = channels.vector(scope, query_cosines, found_by_words=by_words, query_share=query_share)
            else:  # the compact scan bounded most cosines
                vector = bounded.vector(scope, query_cosines, found_by_words=by_words, query_share=query_share)
            if vector is not None:
                found["vector"] = vector
    return found, words, query_cosines, notes


def _hold_back(
    rows: np.ndarray,
    scores: np.ndarray,
    notes: list[str | None],
    *,
    found: dict,
    words: channels.Words | None,
    min_score: float | None,
    mode: str,
) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """The fused ``rows`` and ``scores`` less the hits that are not relevant (below ``min_score``; without it, in
    hybrid mode, every hit when none is relevant), and the notes with one saying how many were held back."""
    if min_score is not None:
        kept = scores >= min_score
        notes = [*notes, _held_back(int(np.sum(~kept)), f"below min_score {min_score:g}")]
        return rows[kept], scores[kept], notes
    if mode == "hybrid" and len(rows) and not relevance.relevant(found):
        notes = [note for note in notes if words is None or note != words.note]  # no partial hits to speak of
        notes.append(
            _held_back(
                len(rows),
                "none matched enough of the query's words or came close enough in meaning; min_score=0 shows them",
            )
        )
        return rows[:0], scores[:0], notes
    return rows, scores, notes


def _cosines(scope: channels.Scope, query: str, pending, *, compact_scan: bool) -> cosines.Cosines | None:
    """The query's cosines with the view's rows in the namespaces searched (``compact_scan``: bounded first where a
    partition is packed, ``cosines.Cosines``); None when nothing has been embedded yet."""
    scanned = cosines.namespace_vectors(scope.view, scope.namespaces)
    if scanned is None:
        return None
    vector = pending.result() if pending is not None else cosines.embed(lambda embedder: embedder.embed_query(query))
    return cosines.Cosines(scope.view, scanned, vector, compact_scan=compact_scan)


def _loaded(load: cosines.Load) -> str:
    """What reading a namespace's vectors cost this recall (shown with explain)."""
    return (
        f"The vectors of {load.namespace} ({load.rows} revisions) were read from the database first, "
        f"in {load.seconds * 1000:.0f} ms: this server process had not searched it recently."
    )


def _injection_boost(view, injections: dict[int, int], a: float) -> np.ndarray:
    """Per row of the view, 1 + a*ln(1 + the injections of its memory)."""
    memory = view.columns.memory
    ids = np.array(sorted(injections), dtype=np.int64)
    counts = np.array([injections[memory_id] for memory_id in ids], dtype=float)
    at = np.clip(np.searchsorted(ids, memory), 0, len(ids) - 1)
    return 1.0 + a * np.log1p(np.where(ids[at] == memory, counts[at], 0.0))


def _held_back(count: int, why: str) -> str | None:
    """The note saying how many hits were held back and why; None when none was."""
    if not count:
        return None
    return f"{count} hit{'s' if count > 1 else ''} held back: {why}."


def _hint(cleaned, *, visible_count: int, mode: str, match: str, narrowed: bool) -> str:
    """What to try when nothing matched: only what this recall did not already do."""
    if visible_count == 0:
        return (
            "Nothing is visible here at this time: check the namespace, or ask with an earlier or later "
            "as_of / valid_at."
        )
    if not cleaned.terms and mode == "keyword":
        return "The query has no searchable words; try keywords or mode='hybrid'."
    untried = ["other words"]
    if narrowed:
        untried.append("fewer filters (tags, kinds)")
    if mode == "keyword":
        untried.append("mode='hybrid' for meaning")
    elif mode == "semantic":
        untried.append("mode='hybrid' for exact words too")
    if match == "all":
        untried.append("match='any'")
    return (
        "No memory matched. Try " + (", ".join(untried[:-1]) + " or " if len(untried) > 1 else "") + untried[-1] + "."
    )
