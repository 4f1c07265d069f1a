"""Relevance: whether anything a hybrid recall found answers the query at all.

Fusion always ranks something: the vector channel has a nearest neighbour however unrelated,
and one common word finds many memories. A recall is relevant when one of its candidates
carries evidence that means the same in every store:

- words: it matched at least MEMORY_RELEVANT_COVERAGE of the query's words, weighted by idf
  (a word channel's ``coverage``: keyword, CJK bigrams, or substrings);
- meaning: its judged cosine (the cosine as far as the model can read query and text, see
  ``channels.vector``) reaches MEMORY_RELEVANT_COSINE.

Both come from the visible set alone, so the decision is as exact for its point in time as
the scores. ``benchmarks/relevance.py`` calibrates the two bars.

``relevant_rows`` asks the same of each hit on its own: hooks inject only the hits that
answer the prompt themselves, not their neighbours (``memories.services.hooks``).
"""

import numpy as np
from django.conf import settings

from search.channels import Found


def evidence(channels: dict[str, Found]) -> tuple[float, float]:
    """The best coverage of any word channel's candidate, and the best judged cosine of any vector candidate (0 if
    none)."""
    coverage, cosine = 0.0, 0.0
    for name, found in channels.items():
        if name == "vector":
            # Over the held rows alone: a large namespace's vector channel scores every row, and holds few.
            cosine = max(cosine, float(np.fmax.reduce(found.raw[found.rows], initial=0.0)))  # NaN: no cosine
        elif found.coverage is not None:
            coverage = max(coverage, float(np.max(found.coverage[found.rows], initial=0.0)))
    return coverage, cosine


def relevant(channels: dict[str, Found]) -> bool:
    """Whether a candidate of ``channels`` meets either bar."""
    coverage, cosine = evidence(channels)
    return coverage >= settings.MEMORY_RELEVANT_COVERAGE or cosine >= settings.MEMORY_RELEVANT_COSINE


def relevant_rows(channels: dict[str, Found], rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: whether its own evidence meets either bar (what ``relevant`` asks of the best one)."""
    coverage, cosine = np.zeros(len(rows)), np.zeros(len(rows))
    for name, found in channels.items():
        if name == "vector":
            cosine = np.maximum(cosine, np.where(found.held[rows], np.nan_to_num(found.raw[rows], nan=0.0), 0.0))
        elif found.coverage is not None:
            coverage = np.maximum(coverage, np.where(found.held[rows], found.coverage[rows], 0.0))
    return (coverage >= settings.MEMORY_RELEVANT_COVERAGE) | (cosine >= settings.MEMORY_RELEVANT_COSINE)
