"""The columns a search snapshot holds: its revision rows, its attribute rows, and their times sorted.

Each set of rows is a dataclass of numpy arrays, one per field, the rows sorted by
(memory, known_at, id); the tuples of field names let the loading and the merging
treat every column alike.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class Columns:
    revision: np.ndarray  # int64
    memory: np.ndarray  # int64
    # The memory's namespace and kind when the row was loaded: only for a memory without attribute rows
    # (written outside the services); every other one reads them as of the query (View.attributes_at).
    namespace: np.ndarray  # int32 code into View.namespaces
    kind: np.ndarray  # int32 code into View.kinds
    known: np.ndarray  # int64 microseconds
    valid_from: np.ndarray
    valid_to: np.ndarray
    expires: np.ndarray
    tombstone: np.ndarray  # bool
    ntok: np.ndarray  # int64
    nbigram: np.ndarray  # int64
    counts_from: np.ndarray  # int64 microseconds (snapshot.ALWAYS, snapshot.OPEN, or an import's publication)
    batch: np.ndarray  # int64 id of the import that wrote the row, 0 for none


_COLUMNS = (
    "revision",
    "memory",
    "namespace",
    "kind",
    "known",
    "valid_from",
    "valid_to",
    "expires",
    "tombstone",
    "ntok",
    "nbigram",
    "counts_from",
    "batch",
)


@dataclass
class AttributeColumns:
    """The attribute rows, sorted by (memory, known_at, id); namespace and kind coded as in ``Columns``, the state
    into ``View.states``."""

    id: np.ndarray  # int64
    memory: np.ndarray  # int64
    namespace: np.ndarray  # int32
    kind: np.ndarray  # int32
    state: np.ndarray  # int32
    known: np.ndarray  # int64 microseconds
    counts_from: np.ndarray  # int64 microseconds (snapshot.ALWAYS, snapshot.OPEN, or an import's publication)
    batch: np.ndarray  # int64


_ATTRIBUTE_COLUMNS = ("id", "memory", "namespace", "kind", "state", "known", "counts_from", "batch")


@dataclass
class Events:
    """Each time column sorted: where the visibility rule can change its answer (see ``View.visible_rows``)."""

    known: np.ndarray
    expires: np.ndarray
    valid_from: np.ndarray
    valid_to: np.ndarray

    @classmethod
    def of(cls, columns: Columns) -> "Events":
        return cls(*(np.sort(getattr(columns, name)) for name in _EVENT_COLUMNS))

    def plus(self, new: Columns) -> "Events":
        """These events and those of ``new`` rows: a merge by insertion, O(rows) rather than a sort."""
        merged = []
        for name in _EVENT_COLUMNS:
            old, values = getattr(self, name), np.sort(getattr(new, name))
            merged.append(np.insert(old, np.searchsorted(old, values), values))
        return Events(*merged)


_EVENT_COLUMNS = ("known", "expires", "valid_from", "valid_to")
