"""How long one remember holds the write lock, on SQLite and on PostgreSQL: the ceiling on writes a second.

    .venv/bin/python benchmarks/lock_hold.py --output benchmarks/results/lock_hold.json

Per engine, in a fresh store of ``--size`` memories (``history.bulk_load``, hash embedder):
``--writes`` single ``memory_remember`` calls one after the other, each timed whole, and
each of their transactions from the moment it holds the write lock (SQLite's, or
PostgreSQL's advisory lock) to the end of its commit. Every writer of a deployment waits
for that lock, so writes top out near one over the time it is held, however many app
servers there are. PostgreSQL runs on a throwaway cluster with its default durability
(every commit flushed to disk); SQLite with the server's pragmas (WAL, synchronous=NORMAL).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def measure(engine: str, size: int, writes: int) -> dict:
    cluster = None
    if engine == "postgresql":
        from tests.postgres import Cluster

        cluster = Cluster(durable=True)
        harness.setup(None, database_url=cluster.create("lock_hold"))
    else:
        harness.setup(Path(tempfile.mkdtemp(prefix="memory-lock-")) / "lock.db")
    from corpus import Corpus
    from django.db import connection, connections
    from django.utils import timezone
    from history import bulk_load, make_history

    from memories.services import memory_remember

    corpus = Corpus(0)
    bulk_load(make_history(corpus, size, now=timezone.now(), namespace="bench"))
    # Both backends take the lock as the outermost atomic block starts, and hold it to the end of its commit.
    wrapper = type(connections["default"])
    held, began = [], []
    real_start, real_commit = wrapper._start_transaction_under_autocommit, wrapper._commit

    def start(self):
        real_start(self)
        began.append(time.perf_counter())

    def commit(self):
        try:
            return real_commit(self)
        finally:
            held.append(time.perf_counter() - began.pop())

    wrapper._start_transaction_under_autocommit, wrapper._commit = start, commit
    for _ in range(20):  # warm-up: caches and the model's first calls
        memory_remember(namespace="bench", content=corpus.text(), actor="bench", interface="cli")
    held.clear()
    calls = []
    for _ in range(writes):
        started = time.perf_counter()
        memory_remember(namespace="bench", content=corpus.text(), actor="bench", interface="cli")
        calls.append(time.perf_counter() - started)
    connection.close()
    if cluster is not None:
        cluster.stop()
    ordered = sorted(held)
    return {
        "engine": engine,
        "size": size,
        "writes": writes,
        "transactions": len(held),
        "held_p50_ms": round(statistics.median(ordered) * 1000, 2),
        "held_p95_ms": round(harness.percentile(ordered, 0.95) * 1000, 2),
        "remember_p50_ms": round(statistics.median(calls) * 1000, 2),
        "writes_per_s_ceiling": round(1 / statistics.median(ordered), 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument(
        "--engine",
        choices=("sqlite", "postgresql"),
        default=None,
        help="one engine in this process (default: both, each in a process of its own)",
    )
    parser.add_argument("--output", default="benchmarks/results/lock_hold.json")
    args = parser.parse_args()
    if args.engine:
        print(json.dumps(measure(args.engine, args.size, args.writes)))
        return
    runs = []
    for engine in ("sqlite", "postgresql"):
        done = subprocess.run(
            [sys.executable, __file__, "--engine", engine, "--size", str(args.size), "--writes", str(args.writes)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    path = harness.save(
        {"benchmark": "lock_hold", "command": " ".join(sys.argv), "environment": harness.environment(), "runs": runs},
        args.output,
    )
    print(json.dumps(runs, indent=1))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
