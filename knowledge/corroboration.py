"""Corroboration: the same fact (the same triple in normal form) visible in a namespace from other memories.

"Payments API runs on host-7" in one memory and "payments api runs_on host-7" in another
state one fact. Visibility is search's snapshot at (as_of, valid_at), namespaces
included, so a corroborating memory learned after T does not count as of T.
``memories.confidence`` reads who wrote each one: only other authors raise a confidence.
"""

import datetime as dt

from knowledge.contradictions import Probe, Side, normal_triple
from knowledge.models import Fact
from search import snapshot


def same_facts(probes: list[Probe], *, as_of: dt.datetime, valid_at: dt.datetime) -> dict[int, list[Side]]:
    """{probe's revision id: the other memories' visible facts with the same triple at (as_of, valid_at)}, for
    probes with any. A probe without a whole triple costs nothing; each other one costs one lookup (the
    (subject, predicate) index)."""
    normal = {probe.revision_id: normal_triple(probe.subject, probe.predicate, probe.object) for probe in probes}
    probes = [probe for probe in probes if normal[probe.revision_id] is not None]
    if not probes:
        return {}
    view = snapshot.current()
    as_of_micros, valid_at_micros = snapshot.to_micros(as_of), snapshot.to_micros(valid_at)
    found = {}
    for probe in probes:
        subject, predicate, object_ = normal[probe.revision_id]
        there = view.narrowed([probe.namespace])  # the namespace's memories: the work follows them
        visible = there.visible_mask(
            there.visible_rows(as_of=as_of_micros, valid_at=valid_at_micros, namespaces=[probe.namespace])
        )
        same = []
        # The (subject, predicate) index: this subject's facts with this predicate, of every time.
        for revision_id, memory_id in (
            Fact.objects.filter(subject=subject, predicate=predicate, object=object_)
            .exclude(memory_id=probe.memory_id)
            .order_by("memory_id")
            .values_list("revision_id", "memory_id")
        ):
            # A fact row newer than the view (written since it was read) is not visible in it.
            row = there.position[revision_id] if revision_id < len(there.position) else -1
            if visible[row]:
                same.append(Side(memory_id, revision_id))
        if same:
            found[probe.revision_id] = same
    return found
