"""Near-duplicate detection on write: the visible memory of a namespace whose meaning is closest to new text.

Exact duplicates are the store's own rule (same content hash, ``selectors.visible_duplicate``)
and are never written twice. Near duplicates are written, and the write reports its
near twin so the caller can decide (update the twin instead, or forget one of them):
an agent that remembers "The deploy runs on Fridays" after "Deploys run every Friday"
learns it may be repeating itself. The threshold, ``MEMORY_NEAR_DUPLICATE_COSINE``, is a
cosine between revision vectors (README, Retrieval).
"""

import datetime as dt
import logging
from concurrent import futures
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.utils import timezone

from search import cosines, engine, indexing, snapshot

logger = logging.getLogger(__name__)

# A write's scan for its near twin runs beside the write's inserts (under the write lock,
# which the write then holds until the scan ends) only over this many stored vectors or
# fewer; over more, it runs before the lock is taken. At 129k vectors the scan took
# 2.2-2.9 ms and the inserts ~6.5 ms; at 1M (hash vectors) the scan took 52-54 ms, which
# other writers would wait out.
SCAN_BESIDE_MAX_VECTORS = 262_144


@dataclass(frozen=True)
class NearTwin:
    """The visible memory closest in meaning to a text, and how close (cosine of their vectors)."""

    memory_id: int
    revision_id: int
    cosine: float

    def as_dict(self) -> dict:
        return {"memory_id": self.memory_id, "revision_id": self.revision_id, "cosine": round(self.cosine, 4)}


def find_near_twin(content: str, *, namespace: str, title: str = "", exclude_memory_id: int | None = None,
                   threshold: float | None = None, at: dt.datetime | None = None,
                   vector: cosines.PendingVector | None = None) -> NearTwin | None:
    """Return the memory visible now in ``namespace`` whose current revision is nearest to this text.

    Only a twin at or above ``threshold`` (default MEMORY_NEAR_DUPLICATE_COSINE) counts;
    a threshold above 1 turns detection off. Returns None too when no vectors exist
    yet or the embedding model is unavailable: detection is advice, and a write never
    fails for want of it. Ties go to the lower memory id. ``vector``: the text's
    embedding already under way (``indexing.embed_ahead``).
    """
    return NearTwinSearch(content, namespace=namespace, title=title, exclude_memory_id=exclude_memory_id,
                          threshold=threshold, at=at, vector=vector).result()


class NearTwinSearch:
    """``find_near_twin`` in two steps, so that a write's inserts run while the vectors are scanned.

    Made on the thread that owns the connection, it reads what the check needs from
    the database (the namespace's visible rows, this process's copy of the vectors and
    their placement), which the text's embedding, under way on a helper, does not
    hold up. The scan (no database) then runs on the embedding's helper as soon as the
    vector is ready (``PendingVector.then``), beside the write's inserts; over more than
    SCAN_BESIDE_MAX_VECTORS vectors ``start`` waits for it before the write lock is taken.
    Without a helper, ``start`` hands the scan to one (or runs it at once over that many).
    ``result`` waits for it, or scans on the caller's thread when it was never started.
    """

    def __init__(self, content: str, *, namespace: str, title: str = "", exclude_memory_id: int | None = None,
                 threshold: float | None = None, at: dt.datetime | None = None,
                 vector: cosines.PendingVector | None = None):
        self._threshold = settings.MEMORY_NEAR_DUPLICATE_COSINE if threshold is None else threshold
        self._ready = self._scan = None
        if vector is not None:
            self._vector_of = vector.vector_of
        else:
            self._vector_of = lambda embedder: indexing.text_vector(embedder, title, content)
        if self._threshold > 1.0:
            return
        view = snapshot.current()
        if view.columns is None:
            return
        now = engine.to_micros(at or timezone.now())
        rows = view.visible_rows(as_of=now, valid_at=now, namespaces=[namespace])
        if exclude_memory_id is not None and len(rows):
            rows = rows[view.columns.memory[rows] != exclude_memory_id]
        if not len(rows):
            return
        try:
            self._ready = vector.ready(view) if vector is not None else cosines.ready(view)
        except cosines.Unavailable as error:
            logger.info("Near-duplicate check skipped: %s", error.message)
            return
        if self._ready is None:
            return
        # Which rows may be the twin, as a mask made here while the text is embedded: the scan
        # then does little over every row besides the product (see Cosines.at_least).
        self._asked = self._ready.asked_mask(rows)
        if vector is not None:
            self._scan = vector.then(self._scan_now)  # on the helper, as soon as the vector is ready

    def start(self) -> None:
        """Scan on a helper thread from now on (on this one over many vectors); the vector is worked out here.

        A scan chained to the embedding has begun already, or will as soon as the vector
        is ready: over many vectors it is waited for here, before the write lock.
        """
        if self._ready is None:
            return
        if self._scan is not None:
            if len(self._ready.stored.ids) > SCAN_BESIDE_MAX_VECTORS:
                futures.wait([self._scan])
            return
        text_cosines = self._cosines()
        if text_cosines is None:
            self._ready = None
        elif len(self._ready.stored.ids) > SCAN_BESIDE_MAX_VECTORS:
            self._scan = futures.Future()  # scanned now, on this thread; result() reads it like a helper's
            self._scan.set_result(self._nearest(text_cosines))
        else:
            self._scan = cosines.beside(self._nearest, text_cosines)

    def result(self) -> NearTwin | None:
        """The near twin, or None (waits for the scan ``start`` began)."""
        if self._scan is not None:
            return self._scan.result()
        if self._ready is None:
            return None
        return self._scan_now()

    def _scan_now(self) -> NearTwin | None:
        text_cosines = self._cosines()
        return self._nearest(text_cosines) if text_cosines is not None else None

    def _cosines(self) -> cosines.Cosines | None:
        try:
            return self._ready.with_vector(self._vector_of)
        except cosines.Unavailable as error:
            logger.info("Near-duplicate check skipped: %s", error.message)
            return None

    def _nearest(self, text_cosines: cosines.Cosines) -> NearTwin | None:
        rows, scores = text_cosines.at_least(self._threshold, self._asked)
        if not len(rows):
            return None
        view = text_cosines.view
        best = np.lexsort((view.columns.memory[rows], -scores))[0]
        return NearTwin(memory_id=int(view.columns.memory[rows[best]]),
                        revision_id=int(view.columns.revision[rows[best]]), cosine=float(scores[best]))
