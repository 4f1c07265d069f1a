"""The knowledge graph at 100k fact memories: neighbours and 4-hop paths now and a year back, and a rebuild.

    .venv/bin/python benchmarks/graph.py --output benchmarks/results/graph.json

A generated graph of ``--facts`` fact memories over two years: 1,000 each of services,
hosts, teams and owners, related by "runs on", "depends on", "owned by", "led by" and
"is in" (hosts in teams' racks), with some facts revised (a new object) and some
forgotten. The rows go in with plain INSERTs in large transactions (as ``history.bulk_load``
does), made searchable with the hash embedder through ``search.indexing.index_revisions``,
and the fact rows come from ``knowledge.facts.rebuild_facts``, which is timed: that is
``manage.py reindex --graph``.

Queries go through ``memories.selectors.memory_graph`` (what every door calls): the
relations of ``--queries`` random entities, and the paths between random pairs, now and
as of one year back. The floor beside them: the same questions over a plain SQLite table
of the edges visible at that point (no history, no visibility rule), with an index per
end and the same bounds (depth 4, fan-out 50), answered by the same meet-in-the-middle
search in plain Python.
"""

import argparse
import datetime as dt
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

KINDS = ("service", "host", "team", "owner")
# (predicate, subject kind, object kind, share of the facts)
RELATIONS = (
    ("runs on", "service", "host", 0.35),
    ("depends on", "service", "service", 0.30),
    ("owned by", "service", "team", 0.15),
    ("led by", "team", "owner", 0.10),
    ("backed up to", "host", "host", 0.10),
)
REVISED = 0.10  # facts whose object changes once, later
FORGOTTEN = 0.03  # facts forgotten at some point after their last text
SPAN_DAYS = 730


def make_facts(count: int, per_kind: int, *, now: dt.datetime, rng: np.random.Generator) -> list[dict]:
    """``count`` fact memories, each a list of revisions (subject, predicate, object, known_at, tombstone)."""
    names = {kind: [f"{kind}-{number}" for number in range(per_kind)] for kind in KINDS}
    shares = np.array([share for *_, share in RELATIONS])
    chosen = rng.choice(len(RELATIONS), size=count, p=shares / shares.sum())
    facts = []
    for number in range(count):
        predicate, subject_kind, object_kind, _ = RELATIONS[chosen[number]]
        subject = names[subject_kind][int(rng.integers(per_kind))]
        object_ = names[object_kind][int(rng.integers(per_kind))]
        known = now - dt.timedelta(seconds=float(rng.uniform(86400, SPAN_DAYS * 86400)))
        known = known.replace(microsecond=int(rng.integers(0, 1_000_000)))
        revisions = [(subject, predicate, object_, known, False)]
        if rng.random() < REVISED:
            known = known + dt.timedelta(seconds=float(rng.uniform(3600, (now - known).total_seconds())))
            revisions.append((subject, predicate, names[object_kind][int(rng.integers(per_kind))], known, False))
        if rng.random() < FORGOTTEN:
            known = known + dt.timedelta(seconds=float(rng.uniform(1, (now - known).total_seconds())))
            revisions.append(("", "", "", known, True))
        facts.append({"key": f"f{number}", "revisions": revisions})
    return facts


def load(facts: list[dict], *, namespace: str, batch: int = 10_000) -> int:
    """Write the facts into an empty store with plain INSERTs (memories, attribute rows, revisions, ids given),
    indexed per batch; return the revisions written."""
    from django.db import connection, transaction

    from memories import validation
    from search import indexing

    adapt = connection.ops.adapt_datetimefield_value
    revision_id = 0
    for start in range(0, len(facts), batch):
        memories, attributes, revisions, indexed = [], [], [], []
        for memory_id, fact in enumerate(facts[start : start + batch], start=start + 1):
            first, last = fact["revisions"][0], fact["revisions"][-1]
            memories.append((memory_id, namespace, fact["key"], "forgotten" if last[4] else "active", adapt(first[3])))
            attributes.append((memory_id, adapt(first[3]), namespace))
            hidden = None
            for subject, predicate, object_, known, tombstone in fact["revisions"]:
                revision_id += 1
                content = "" if tombstone else f"{subject} {predicate} {object_}."
                revisions.append(
                    (
                        revision_id,
                        memory_id,
                        content,
                        subject,
                        predicate,
                        object_,
                        validation.content_hash(content),
                        adapt(known),
                        adapt(known),
                        tombstone,
                        hidden if tombstone else None,
                    )
                )
                if not tombstone:
                    hidden = revision_id
                    indexed.append((revision_id, namespace, "", content))
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memories_memory (id, namespace, key, kind, state, created_at) "
                "VALUES (%s, %s, %s, 'fact', %s, %s)",
                memories,
            )
            cursor.executemany(
                "INSERT INTO memories_attributes (memory_id, known_at, namespace, kind, state, reason, "
                "author, interface) VALUES (%s, %s, %s, 'fact', 'active', '', 'bench', 'cli')",
                attributes,
            )
            cursor.executemany(
                "INSERT INTO memories_revision (id, memory_id, content, title, subject, predicate, object, source, "
                "content_hash, known_at, valid_from, valid_to, expires_at, tombstone, hides_id, reason, author, "
                "interface, embedding_model) "
                "VALUES (%s, %s, %s, '', %s, %s, %s, '', %s, %s, %s, NULL, NULL, %s, %s, '', 'bench', 'cli', '')",
                revisions,
            )
            indexing.index_revisions(indexed)
    return revision_id


class PlainEdges:
    """The floor: the edges visible at one point in a plain SQLite table, indexed by each end, no history."""

    def __init__(self, edges: list[tuple[str, str, str, int]]):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE TABLE edge (subject TEXT, predicate TEXT, object TEXT, memory_id INTEGER)")
        self.db.executemany("INSERT INTO edge VALUES (?, ?, ?, ?)", edges)
        self.db.execute("CREATE INDEX edge_subject ON edge (subject, predicate)")
        self.db.execute("CREATE INDEX edge_object ON edge (object, predicate)")

    def edges(self, names: list[str]) -> list[tuple]:
        found = []
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self.db.execute(
                f"SELECT subject, predicate, object, memory_id FROM edge WHERE subject IN ({marks}) "
                f"UNION SELECT subject, predicate, object, memory_id FROM edge WHERE object IN ({marks})",
                chunk + chunk,
            ).fetchall()
        return found

    def neighbours(self, name: str, limit: int) -> list[tuple]:
        return sorted(self.edges([name]), key=lambda edge: (edge[1], edge[2] if edge[0] == name else edge[0]))[:limit]

    def paths(self, source: str, target: str, *, fanout: int) -> list[list[str]]:
        """The shortest paths of at most 4 hops: two hops out from each end (``fanout`` edges per name), then a meet."""
        sides = []
        for start in (source, target):
            parents, frontier = {start: []}, [start]
            for _ in range(2):
                reached = {}
                by_name = {}
                for edge in self.edges(frontier):
                    for here in {edge[0], edge[2]} & set(frontier):
                        by_name.setdefault(here, []).append(edge)
                for here in frontier:
                    picked = sorted(by_name.get(here, ()), key=lambda e: (e[1], e[2] if e[0] == here else e[0]))
                    for edge in picked[:fanout]:
                        there = edge[2] if edge[0] == here else edge[0]
                        if there not in parents:
                            reached.setdefault(there, []).append(here)
                for there, froms in reached.items():
                    parents[there] = froms
                frontier = list(reached)
            sides.append(parents)
        meets = [name for name in sides[0] if name in sides[1]]
        return [[source, name, target] for name in sorted(meets)[:10]]


def visible_edges(namespace: str, as_of: dt.datetime) -> list[tuple[str, str, str, int]]:
    """The triples visible at ``as_of`` by the SQL form of the rule, in normal form (what the floor's table holds)."""
    from knowledge.names import entity_name, predicate_name
    from memories.models import Revision

    rows = (
        Revision.objects.visible(as_of=as_of)
        .filter(memory__namespace=namespace)
        .exclude(subject="")
        .values_list("subject", "predicate", "object", "memory_id")
    )
    return [(entity_name(s), predicate_name(p), entity_name(o), m) for s, p, o, m in rows.iterator(chunk_size=5000)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="fact memories in the store")
    parser.add_argument("--per-kind", type=int, default=1_000, help="services, hosts, teams and owners, each")
    parser.add_argument(
        "--queries",
        type=int,
        default=200,
        help="neighbour queries at each point (half as many path queries per fan-out)",
    )
    parser.add_argument(
        "--fanouts",
        default=None,
        help="fan-outs to measure paths with, comma-separated (default: the graph's own, and twice it)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/graph.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-graph-"))
    harness.setup(workdir / "graph.db", embedder="hash")
    from django.utils import timezone

    from knowledge import graph
    from knowledge.facts import fact_drift, rebuild_facts
    from memories import selectors
    from search import snapshot

    fanouts = [int(value) for value in args.fanouts.split(",")] if args.fanouts else [graph.FANOUT, 2 * graph.FANOUT]
    rng = np.random.default_rng(args.seed)
    now = timezone.now()
    facts = make_facts(args.facts, args.per_kind, now=now, rng=rng)
    started = time.perf_counter()
    revisions = load(facts, namespace="bench")
    load_seconds = time.perf_counter() - started
    print(f"loaded {args.facts} fact memories ({revisions} revisions) in {load_seconds:.1f} s", flush=True)

    _, rebuild_wall, rebuild_cpu = harness.measured(rebuild_facts)
    rows, drift_seconds = harness.timed(fact_drift)
    print(
        f"rebuilt the fact rows in {rebuild_wall:.1f} s (drift check {drift_seconds:.1f} s: {rows or 'none'})",
        flush=True,
    )
    snapshot.current()  # the snapshot's first load is recall's cost too, not a graph query's
    # The graph's in-memory copy of the fact rows: loaded once per process, then kept in step by the queries.
    _, copy_wall, copy_cpu = harness.measured(graph._known)

    entities = [f"{kind}-{number}" for kind in KINDS for number in range(args.per_kind)]
    singles = [entities[int(index)] for index in rng.integers(len(entities), size=args.queries)]
    pairs = [
        (entities[int(a)], entities[int(b)])
        for a, b in rng.integers(len(entities), size=(args.queries // 2, 2))
        if a != b
    ]
    points = {"now": now, "one_year_back": now - dt.timedelta(days=365)}
    result = {
        "benchmark": "graph",
        "facts": args.facts,
        "revisions": revisions,
        "entities": len(entities),
        "neighbour_queries": len(singles),
        "path_queries": len(pairs),
        "bounds": {
            "max_depth": graph.MAX_DEPTH,
            "fanout": graph.FANOUT,
            "paths_max": graph.PATHS_MAX,
            "neighbours_limit": selectors.GRAPH_LIMIT_DEFAULT,
        },
        "load_seconds": round(load_seconds, 1),
        "rebuild": {
            "seconds": round(rebuild_wall, 2),
            "cpu_seconds": round(rebuild_cpu, 2),
            "drift_check_seconds": round(drift_seconds, 2),
            "drift": rows,
        },
        "fact_rows_copy_first_load": {"seconds": round(copy_wall, 2), "cpu_seconds": round(copy_cpu, 2)},
        "points": {},
    }
    default_fanout = graph.FANOUT
    for label, as_of in points.items():
        at = {"namespace": "bench", "as_of": as_of.isoformat()}
        floor = PlainEdges(visible_edges("bench", as_of))
        measured = {"visible_edges": floor.db.execute("SELECT count(*) FROM edge").fetchone()[0]}
        ours, plain, relations = [], [], 0
        for name in singles:
            answer, wall, cpu = harness.measured(selectors.memory_graph, entity=name, **at)
            ours.append((wall, cpu))
            relations += len(answer.entities[0].relations)
            _, wall, cpu = harness.measured(floor.neighbours, name, selectors.GRAPH_LIMIT_DEFAULT)
            plain.append((wall, cpu))
        measured["neighbours"] = {**harness.summary(ours), "relations_per_answer": round(relations / len(singles), 1)}
        measured["neighbours_floor"] = harness.summary(plain)
        for fanout in fanouts:
            graph.FANOUT = fanout
            ours, plain, connected, cut, lengths = [], [], 0, 0, {}
            for source, target in pairs:
                answer, wall, cpu = harness.measured(selectors.memory_graph, source=source, target=target, **at)
                ours.append((wall, cpu))
                connected += bool(answer.paths)
                cut += answer.truncated
                if answer.paths:
                    lengths[len(answer.paths[0])] = lengths.get(len(answer.paths[0]), 0) + 1
                _, wall, cpu = harness.measured(floor.paths, source, target, fanout=fanout)
                plain.append((wall, cpu))
            measured[f"paths_fanout_{fanout}"] = {
                **harness.summary(ours),
                "pairs_connected": connected,
                "truncated": cut,
                "shortest_lengths": dict(sorted(lengths.items())),
            }
            measured[f"paths_fanout_{fanout}_floor"] = harness.summary(plain)
        graph.FANOUT = default_fanout
        measured["as_of"] = at["as_of"]
        result["points"][label] = measured
        print(
            label,
            json.dumps(
                {
                    key: (value["p50_ms"], value["p95_ms"], value["cpu_p50_ms"], value["cpu_p95_ms"])
                    for key, value in measured.items()
                    if isinstance(value, dict)
                }
            ),
            flush=True,
        )
    now_point, past_point = result["points"]["now"], result["points"]["one_year_back"]
    result["one_year_back_over_now_p95"] = {
        kind: round(past_point[kind]["p95_ms"] / now_point[kind]["p95_ms"], 2)
        for kind in now_point
        if isinstance(now_point[kind], dict) and not kind.endswith("_floor")
    }
    result.update(load_average_at_end=os.getloadavg(), command=" ".join(sys.argv), environment=harness.environment())
    print(f"saved {harness.save(result, Path(args.output))}")


if __name__ == "__main__":
    main()
