"""A memory's namespace, kind and lifecycle state as of a time, read from its attribute rows.

The newest attribute row known by then that counts (``counts_from``) wins, as a revision
wins for its text; a memory without attribute rows keeps what its revisions were loaded
with. Recall's ``states`` filter reads what ``memories.states`` says (an active memory
whose visible text is older than its kind's age reads ``stale``).
"""

from dataclasses import dataclass, field

import numpy as np

from search.snapshot_columns import AttributeColumns, Columns

# The recorded state of a memory without attribute rows, and the one that reads stale with age (memories.states).
ACTIVE = "active"
STALE = "stale"
# stale_after of a kind that never goes stale: as_of minus it is below every time, without overflow.
_NEVER = 2**62


@dataclass(frozen=True)
class AttributesAt:
    """The namespace, kind and state of each memory as of one time (``as_of``); ``key`` names the attribute rows
    counted then.

    While no memory ever changed namespace (``moved``) or kind (``rekinded``), the values the
    revision rows were loaded with are the only ones, and nothing is worked out; otherwise the
    codes of every memory are, once, on first use. Likewise every memory is active while no
    row ever recorded another state (``lifecycled``).
    """

    attributes: AttributeColumns
    columns: Columns
    as_of: int
    key: tuple
    moved: bool
    rekinded: bool
    states: tuple = ()  # View.states
    lifecycled: bool = False
    kinds: tuple = ()  # View.kinds
    computed: dict = field(default_factory=dict, compare=False, repr=False)

    def namespace(self, rows: np.ndarray) -> np.ndarray:
        """The namespace code of each of revision ``rows``' memories."""
        if not self.moved:
            return self.columns.namespace[rows]
        codes = self._codes()[self.columns.memory[rows]]
        return np.where(codes >= 0, codes >> 32, self.columns.namespace[rows])

    def kind(self, rows: np.ndarray) -> np.ndarray:
        """The kind code of each of revision ``rows``' memories."""
        if not self.rekinded:
            return self.columns.kind[rows]
        codes = self._codes()[self.columns.memory[rows]]
        return np.where(codes >= 0, codes & 0xFFFFFFFF, self.columns.kind[rows])

    def in_states(self, rows: np.ndarray, states: list[str], stale_after: dict[str, int], *, as_of: int) -> np.ndarray:
        """Whether each of revision ``rows`` (visible at ``as_of``, one per memory) shows its memory in one of
        ``states``: its recorded state then, except that an active one whose row was learned more than
        ``stale_after[kind]`` microseconds before ``as_of`` reads ``stale`` (the rule of
        ``memories.states.read_state``). ``as_of`` is the query's own: this object serves every time with the
        same attribute rows counted, and ages differ between them."""
        # Whether active memories split into active and stale ones here: only when one of the two is asked for.
        split = (ACTIVE in states) != (STALE in states)
        active = np.ones(len(rows), dtype=bool)
        keep = np.zeros(len(rows), dtype=bool)
        if not self.lifecycled and not split:  # every memory is active, and its age does not matter
            return active if ACTIVE in states else keep
        if self.lifecycled:
            codes = self._state_codes()[self.columns.memory[rows]]
            active = (codes < 0) | np.isin(codes, [code for code, name in enumerate(self.states) if name == ACTIVE])
            keep = np.isin(codes, [code for code, name in enumerate(self.states) if name in states and name != ACTIVE])
        stale = np.zeros(len(rows), dtype=bool)
        if stale_after and split:
            ages = np.array([stale_after.get(name, _NEVER) for name in self.kinds] or [_NEVER], dtype=np.int64)
            stale = active & (self.columns.known[rows] < as_of - ages[self.kind(rows)])
        if ACTIVE in states:
            keep |= active & ~stale
        elif STALE in states:
            keep |= stale
        return keep

    def _newest(self) -> np.ndarray:
        """The attribute rows counted at as_of that are their memory's newest then."""
        newest = self.computed.get("newest")
        if newest is None:
            a = self.attributes
            newest = np.flatnonzero((a.known <= self.as_of) & (a.counts_from <= self.as_of))
            if len(newest):
                # The newest of each memory's rows: they are sorted by memory, then known_at and id.
                memory = a.memory[newest]
                newest = newest[np.append(memory[1:] != memory[:-1], True)]
            self.computed["newest"] = newest
        return newest

    def _by_memory(self) -> np.ndarray:
        """An array indexed by memory id, every slot -1 (no row then)."""
        a, c = self.attributes, self.columns
        top = max(int(a.memory[-1]) if len(a.id) else 0, int(c.memory[-1]) if len(c.memory) else 0)  # both sorted
        return np.full(top + 1, -1, dtype=np.int64)

    def _codes(self) -> np.ndarray:
        """By memory id: namespace code << 32 | kind code of its newest row counted at as_of, or -1 (none)."""
        codes = self.computed.get("codes")
        if codes is not None:
            return codes
        a, rows = self.attributes, self._newest()
        codes = self._by_memory()
        codes[a.memory[rows]] = a.namespace[rows].astype(np.int64) << 32 | a.kind[rows]
        codes.flags.writeable = False
        self.computed["codes"] = codes
        return codes

    def _state_codes(self) -> np.ndarray:
        """By memory id: the state code of its newest row counted at as_of, or -1 (none: the memory is active)."""
        codes = self.computed.get("states")
        if codes is None:
            a, rows = self.attributes, self._newest()
            codes = self._by_memory()
            codes[a.memory[rows]] = a.state[rows]
            codes.flags.writeable = False
            self.computed["states"] = codes
        return codes
