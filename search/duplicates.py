"""Near-duplicate detection on write: the visible memory of a namespace whose meaning is closest to new text.

Exact duplicates are the store's own rule (same content hash, ``selectors.visible_duplicate``)
and are never written twice. Near duplicates are written, and the write reports its
near twin so the caller can decide (update the twin instead, or forget one of them): an
agent that remembers "The deploy runs on Fridays" after "Deploys run every Friday"
learns it may be repeating itself. The threshold, ``MEMORY_NEAR_DUPLICATE_COSINE``, is a
cosine between revision vectors (docs/retrieval.md).
"""

import datetime as dt
import logging
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from memoryproject import dialect
from search import cosines, indexing, snapshot
from search.errors import Unavailable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NearTwin:
    """The visible memory closest in meaning to a text, and how close (cosine of their vectors)."""

    memory_id: int
    revision_id: int
    cosine: float

    def as_dict(self) -> dict:
        return {"memory_id": self.memory_id, "revision_id": self.revision_id, "cosine": round(self.cosine, 4)}


def find_near_twin(
    content: str,
    *,
    namespace: str,
    title: str = "",
    exclude_memory_id: int | None = None,
    threshold: float | None = None,
    at: dt.datetime | None = None,
) -> NearTwin | None:
    """Return the memory visible now in ``namespace`` whose current revision is nearest to this text.

    Only a twin at or above ``threshold`` (default MEMORY_NEAR_DUPLICATE_COSINE) counts;
    a threshold above 1 turns detection off. None too when no vectors exist yet or the
    model is unavailable: detection is advice, and a write never fails for want of it.
    Ties go to the lower memory id.
    """
    threshold = settings.MEMORY_NEAR_DUPLICATE_COSINE if threshold is None else threshold
    if threshold > 1.0:
        return None
    view = snapshot.current()
    if namespace not in view.namespaces:
        return None
    view = view.narrowed([namespace])  # the namespace's memories: the check costs what they hold
    now = snapshot.to_micros(at or dialect.now())
    # The visible set recalls in the namespace "now" share; the few rows close enough are then checked against it.
    visible = view.visible_rows(as_of=now, valid_at=now, namespaces=[namespace])
    try:
        scanned = cosines.namespace_vectors(view, [namespace])
        if scanned is None:
            return None
        stored = scanned.parts[0]
        vector = cosines.embed(lambda embedder: indexing.text_vector(embedder, title, content))
    except Unavailable as error:
        logger.info("Near-duplicate check skipped: %s", error.message)
        return None
    # The few stored vectors close enough, then those the namespace shows now.
    dots = cosines.dots(stored.matrix, vector)
    sources = np.flatnonzero(dots >= threshold)
    sources = sources[stored.ids[sources] <= view.max_id]
    found = view.position[stored.ids[sources]]
    keep = view.visible_mask(visible)[found]
    if exclude_memory_id is not None:
        keep &= view.columns.memory[found] != exclude_memory_id
    rows, scores = found[keep], dots[sources][keep]
    if not len(rows):
        return None
    best = np.lexsort((view.columns.memory[rows], -scores))[0]
    return NearTwin(
        memory_id=int(view.columns.memory[rows[best]]),
        revision_id=int(view.columns.revision[rows[best]]),
        cosine=float(scores[best]),
    )
