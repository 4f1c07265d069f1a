"""Hits: the ranked rows as revisions, each with the query words it matched and, asked, its explanation; snippets."""

import math
import re
from dataclasses import dataclass

import numpy as np

from search import relevance, text
from search.channels import Words
from search.fusion import CHANNEL_DEPTH, competition_ranks, ranked

WORD = re.compile(r"[^\W_]+")
WINDOW_CHARS = 240
# Word -> stem, for the words of hits shown lately: the mapping never changes. Cleared when full.
_STEMS_MAX = 100_000
_stems: dict[str, str] = {}


@dataclass(frozen=True)
class Ranked:
    """One hit as search ranks it; the memories side adds the record."""

    revision_id: int
    memory_id: int
    score: float
    matched_terms: list[str]
    relevant: bool  # it answers the query on its own (``relevance.relevant_rows``)
    explain: dict | None = None


def hits(
    view,
    rows: np.ndarray,
    scores: np.ndarray,
    *,
    channels: dict,
    words: Words | None,
    cosines,
    terms: list[text.QueryToken],
    context: np.ndarray | None,  # per one of ``rows``, the part of its score its context lent
    boost: np.ndarray | None,
    explain: bool,
) -> list[Ranked]:
    """The ranked rows as hits, best first, each with the query words it matched and whether it is relevant
    on its own; with ``explain``, each channel's rank of it and its raw scores."""
    if len(rows) == 0:
        return []
    revision_ids = view.columns.revision[rows].tolist()
    ranks = {}
    if explain:
        for name, found in channels.items():
            top = ranked(found, view.columns.memory, CHANNEL_DEPTH)
            ranks[name] = dict(zip(top.tolist(), competition_ranks(found, top).tolist()))
    matched = words.matched(rows) if words is not None else np.zeros((len(terms), len(rows)), dtype=bool)
    bm25 = words.bm25(rows) if words is not None and explain else np.zeros(len(rows))
    alone = relevance.relevant_rows(channels, rows)
    found = []
    for at, (row, revision_id, score) in enumerate(zip(rows.tolist(), revision_ids, scores.tolist())):
        bigram = words.bigram[row] if words is not None and words.bigram is not None else 0.0
        hit_terms = [
            token.raw for index, token in enumerate(terms) if matched[index, at] or (bigram and text.has_cjk(token.raw))
        ]
        details = None
        if explain:
            cosine = cosines.values[row] if cosines is not None else math.nan
            details = {
                "ranks": {name: channel_ranks.get(row) for name, channel_ranks in ranks.items()},
                "bm25": float(bm25[at]) if bm25[at] else None,
                "bigram_bm25": float(bigram) if bigram else None,
                "cosine": None if math.isnan(cosine) else float(cosine),
                # Hybrid: the part of the score lent by neighbouring memories (MEMORY_FUSION_CONTEXT).
                "context": None if context is None else float(context[at]),
                # The factor injection-aware ranking multiplied the score by (MEMORY_INJECTION_BOOST).
                "injection_boost": None if boost is None else float(boost[row]),
            }
        found.append(
            Ranked(
                revision_id=revision_id,
                memory_id=int(view.columns.memory[row]),
                score=score,
                matched_terms=hit_terms,
                relevant=bool(alone[at]),
                explain=details,
            )
        )
    return found


def snippet(content: str, terms: list[text.QueryToken], *, marked: bool = True) -> str:
    """About WINDOW_CHARS of ``content`` around its first matched word, matched words in [brackets] (``marked``).

    A word matches a query term the way the keyword channel does: the same porter stem,
    or a stem that starts with the term's light root. A CJK term matches where it occurs
    in the text (a CJK run is one word to FTS5, so 坐标 lies inside the word 坐标系统).
    """
    distinct = dict.fromkeys(WORD.findall(content)) if terms else {}
    if not distinct:
        return _cut(content, 0)
    global _stems
    stems = _stems
    unseen = [word for word in distinct if word not in stems]
    if unseen:
        if len(stems) + len(unseen) > _STEMS_MAX:
            # A new mapping, not the old one cleared: another thread may be reading that one.
            stems = _stems = {}
            unseen = list(distinct)
        for word, (counts, _) in zip(unseen, text.documents_terms(unseen)):
            # A word FTS5 splits differently (rare: it is a run of letters and digits) is compared folded.
            stems[word] = next(iter(counts)) if len(counts) == 1 else word.casefold()
    exact = {term.stem for term in terms}
    prefixes = tuple(term.prefix for term in terms if term.prefix)
    hit_words = {
        word for word in distinct if (stem := stems[word]) in exact or (prefixes and stem.startswith(prefixes))
    }
    cjk_terms = {term.raw for term in terms if text.has_cjk(term.raw) and term.raw in content}

    def marks(start: int, end: int) -> list[tuple[int, str]]:
        """The matched words and CJK terms wholly inside ``content[start:end]``, in order."""
        return sorted(
            [(at, word) for word in hit_words for at in _whole(content, word, start, end)]
            + [(at, term) for term in cjk_terms for at in _inside(content, term, start, end)]
        )

    found = marks(0, len(content))
    if not found:
        return _cut(content, 0)
    start = max(0, found[0][0] - WINDOW_CHARS // 3)
    # Open the window at a whole word: the next word's start when it fell inside one.
    if start:
        following = WORD.search(content, start)
        if following and following.start() == start and content[start - 1].isalnum():
            following = WORD.search(content, following.end())
        start = following.start() if following else start
    end = min(len(content), start + WINDOW_CHARS)
    # Matched words wholly inside the window (one cut at its end is left as it is); overlaps keep the first.
    pieces, position = [], start
    for at, word in marks(start, end):
        if at < position:
            continue
        pieces.append(content[position:at])
        pieces.append(f"[{word}]" if marked else word)
        position = at + len(word)
    pieces.append(content[position:end])
    return ("…" if start else "") + "".join(pieces).strip() + ("…" if end < len(content) else "")


def _inside(content: str, term: str, start: int, end: int):
    """Yield where ``term`` occurs in ``content[start:end]``, anywhere (CJK text has no spaces between words)."""
    at = content.find(term, start, end)
    while at >= 0:
        yield at
        at = content.find(term, at + len(term), end)


def _whole(content: str, word: str, start: int, end: int):
    """Yield where ``word`` occurs in ``content[start:end]`` as a whole word (no letter or digit beside it)."""
    size = len(word)
    at = content.find(word, start, end)
    while at >= 0:
        if not (at and content[at - 1].isalnum()) and not (at + size < len(content) and content[at + size].isalnum()):
            yield at
        at = content.find(word, at + 1, end)


def _cut(content: str, start: int) -> str:
    end = min(len(content), start + WINDOW_CHARS)
    return content[start:end].strip() + ("…" if end < len(content) else "")
