"""Conflicts: two visible facts of a namespace with the same subject and a single-valued predicate, different objects.

Names compare in normal form (``knowledge.names``): "Payments API runs on host-7" and
"payments api runs_on host-9" conflict. A predicate is single-valued when the namespace's
``PredicateSetting`` says so, else when it is in ``SINGLE_VALUED``. Visibility is search's
snapshot at (as_of, valid_at), namespaces included, so a conflict that appears after T is
absent as of T, and one resolved (a fact forgotten or bounded) is gone from then on only.

A conflict is named by its two memories, smaller id first ("3-7"): a memory carries one
triple at a time, so two memories share at most one (subject, predicate). This module
returns ids; ``memories.selectors.conflicts`` turns them into records with both provenances.
"""

import datetime as dt
from dataclasses import dataclass

from knowledge import vocabulary
from knowledge.models import Fact, PredicateSetting
from knowledge.names import entity_name, predicate_name
from search import snapshot

# Predicates (normal form) that hold one value per subject unless a namespace says otherwise (docs/concepts.md).
SINGLE_VALUED = frozenset(
    {
        "runs on",
        "hosted on",
        "is hosted on",
        "deployed on",
        "is deployed on",
        "deployed to",
        "is deployed to",
        "owned by",
        "is owned by",
        "owner",
        "lead",
        "led by",
        "is led by",
        "located in",
        "is located in",
        "region",
        "version",
        "ip address",
        "port",
        "deadline",
        "due",
        "status",
    }
) | frozenset(vocabulary.SINGLE_VALUED)
# Revision ids per query when reading the fact rows of a visible set.
_CHUNK = 500


@dataclass(frozen=True)
class Side:
    """One fact of a conflict: the memory and the revision that shows it."""

    memory_id: int
    revision_id: int


@dataclass(frozen=True)
class Pair:
    """Two conflicting facts of ``namespace`` (normal forms of the shared subject and predicate), lower memory first."""

    namespace: str
    subject: str
    predicate: str
    left: Side
    right: Side

    @property
    def id(self) -> str:
        return conflict_id(self.left.memory_id, self.right.memory_id)


def conflict_id(memory_a: int, memory_b: int) -> str:
    """The stable name of the conflict between two memories: their ids, smaller first."""
    return f"{min(memory_a, memory_b)}-{max(memory_a, memory_b)}"


class Predicates:
    """Which predicates are single-valued in some namespaces: their settings read once, the default list otherwise."""

    def __init__(self, namespaces):
        namespaces = sorted(set(namespaces))
        self.settings = {}
        if namespaces:
            # The (namespace, predicate) unique index: the few settings of these namespaces.
            for namespace, predicate, single in PredicateSetting.objects.filter(namespace__in=namespaces).values_list(
                "namespace", "predicate", "single_valued"
            ):
                self.settings[(namespace, predicate)] = single

    def single_valued(self, namespace: str, predicate: str) -> bool:
        """Whether ``predicate`` (normal form) holds one value per subject in ``namespace``."""
        return self.settings.get((namespace, predicate), predicate in SINGLE_VALUED)


def in_conflict(namespace: str, one: tuple[str, str, str], other: tuple[str, str, str]) -> bool:
    """Whether two triples (as written) of ``namespace`` conflict: same subject and single-valued predicate, objects
    that differ. Both must carry a whole triple."""
    one, other = normal_triple(*one), normal_triple(*other)
    if one is None or other is None or one[:2] != other[:2] or one[2] == other[2]:
        return False
    return Predicates([namespace]).single_valued(namespace, one[1])


def normal_triple(subject: str, predicate: str, object_: str) -> tuple[str, str, str] | None:
    """The triple's normal form (names and predicate as the graph keys them); None unless all three are given."""
    triple = entity_name(subject or ""), predicate_name(predicate or ""), entity_name(object_ or "")
    return triple if all(triple) else None


def find_conflicts(*, namespaces: list[str] | None, as_of: dt.datetime, valid_at: dt.datetime) -> list[Pair]:
    """Every conflict among the facts visible at (as_of, valid_at) in ``namespaces`` (None: all), in order of
    namespace, subject, predicate and memory ids.

    Reads the fact rows of those namespaces' visible revisions only, by revision id: no
    other namespace's facts are read.
    """
    view = snapshot.current()
    if namespaces is not None:
        view = view.narrowed(namespaces)
    as_of_micros = snapshot.to_micros(as_of)
    rows = view.visible_rows(as_of=as_of_micros, valid_at=snapshot.to_micros(valid_at), namespaces=namespaces)
    # Each visible revision's namespace as of as_of (a memory may have moved since).
    codes = view.attributes_at(as_of_micros).namespace(rows)
    namespace_of = dict(zip(view.columns.revision[rows].tolist(), (view.namespaces[code] for code in codes.tolist())))
    predicates = Predicates(set(namespace_of.values()))
    revision_ids = sorted(namespace_of)
    groups: dict[tuple[str, str, str], list[tuple[int, int, str]]] = {}
    for start in range(0, len(revision_ids), _CHUNK):
        chunk = revision_ids[start : start + _CHUNK]
        # The unique revision_id index: one lookup per visible revision.
        for revision_id, memory_id, subject, predicate, object_ in Fact.objects.filter(
            revision_id__in=chunk
        ).values_list("revision_id", "memory_id", "subject", "predicate", "object"):
            namespace = namespace_of[revision_id]
            if predicates.single_valued(namespace, predicate):
                groups.setdefault((namespace, subject, predicate), []).append((memory_id, revision_id, object_))
    pairs = []
    for (namespace, subject, predicate), facts in sorted(groups.items()):
        facts.sort()
        for at, (memory_a, revision_a, object_a) in enumerate(facts):
            for memory_b, revision_b, object_b in facts[at + 1 :]:
                if object_a != object_b:
                    pairs.append(
                        Pair(namespace, subject, predicate, Side(memory_a, revision_a), Side(memory_b, revision_b))
                    )
    return pairs


@dataclass(frozen=True)
class Probe:
    """A visible fact to check: its memory, revision, namespace then, and its triple as written."""

    memory_id: int
    revision_id: int
    namespace: str
    subject: str
    predicate: str
    object: str


def conflicts_of(probes: list[Probe], *, as_of: dt.datetime, valid_at: dt.datetime) -> dict[int, list[Side]]:
    """{probe's revision id: the other facts it conflicts with at (as_of, valid_at)}, for probes with any.

    Only a probe whose predicate is single-valued in its namespace costs a lookup (the
    (subject, predicate) index); a probe without a triple costs nothing, and probes
    without any triple cost no query at all.
    """
    normal = {probe.revision_id: normal_triple(probe.subject, probe.predicate, probe.object) for probe in probes}
    probes = [probe for probe in probes if normal[probe.revision_id] is not None]
    if not probes:
        return {}
    predicates = Predicates(probe.namespace for probe in probes)
    probes = [probe for probe in probes if predicates.single_valued(probe.namespace, normal[probe.revision_id][1])]
    if not probes:
        return {}
    view = snapshot.current()
    as_of_micros, valid_at_micros = snapshot.to_micros(as_of), snapshot.to_micros(valid_at)
    found = {}
    for probe in probes:
        subject, predicate, object_ = normal[probe.revision_id]
        # Which rows are visible in the probe's namespace then: kept with the view, shared by every probe of it.
        there = view.narrowed([probe.namespace])
        visible = there.visible_mask(
            there.visible_rows(as_of=as_of_micros, valid_at=valid_at_micros, namespaces=[probe.namespace])
        )
        others = []
        # The (subject, predicate) index: this subject's facts with this predicate, of every time.
        for revision_id, memory_id in (
            Fact.objects.filter(subject=subject, predicate=predicate)
            .exclude(object=object_)
            .exclude(memory_id=probe.memory_id)
            .order_by("memory_id")
            .values_list("revision_id", "memory_id")
        ):
            # A fact row newer than the view (written since it was read) is not visible in it.
            row = there.position[revision_id] if revision_id < len(there.position) else -1
            if visible[row]:
                others.append(Side(memory_id, revision_id))
        if others:
            found[probe.revision_id] = others
    return found
