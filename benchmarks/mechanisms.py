"""What each optimisation search keeps takes off its own stage, measured with it and without it in one run.

    .venv/bin/python benchmarks/mechanisms.py --size 100000 --output benchmarks/results/mechanisms.json

One store of ``--size`` memories (``history.make_history``, hash-embedder vectors), then,
alternating with and without, over the same queries:

- kept term rows (``channels.KEPT_TERM_MIN_POSTINGS``): keyword recall "now", query after
  query, after a pass over the same queries (common terms recur from query to query);
  timed whole, and its own stage (``channels._postings``, the terms' visible rows) alone;
- the packed postings a process keeps (``postings._packed``): the same keyword recalls, with
  and without the cache (capacity 0: every recall reads its terms' packed rows); timed
  whole, and its own stage (``postings.read_terms``) alone;
- the namespace's terms kept as one string (``postings._vocabularies``): keyword recalls of
  the same queries with a word no memory holds added (the substring channel runs), with the
  string kept and built again each time; whole, and its own stage (``postings.containing``);
- the split cosine scan (``cosines.dots`` on two threads from 16,384 rows): one scan of
  every stored vector;
- the room the snapshot grows into (``snapshot._Room``): the refresh after one remember,
  which appends its rows in place, against copying every column.

The rule (README): an optimisation stays where it takes at least 15% off its own stage.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternations of with and without")
    parser.add_argument("--output", default="benchmarks/results/mechanisms.json")
    args = parser.parse_args()

    db_dir = Path(tempfile.mkdtemp(prefix="memory-mechanisms-"))
    harness.setup(db_dir / "mechanisms.db", embedder="hash")
    import random

    import numpy as np
    from corpus import Corpus
    from django.utils import timezone
    from history import bulk_load, make_history
    from latency import make_queries

    from memories.selectors import memory_recall
    from memories.services import memory_remember
    from search import channels, cosines, postings, snapshot

    corpus = Corpus(0)
    memories = make_history(corpus, args.size, now=timezone.now(), namespace="bench")
    bulk_load(memories)
    queries = make_queries(corpus, memories, args.queries, random.Random(1))
    stored = cosines.namespace_vectors(snapshot.current(), ["bench"]).parts[0]
    vector = stored.matrix[len(stored.matrix) // 2].copy()
    split_min = cosines._SPLIT_MIN_ROWS
    samples = {
        name: []
        for name in (
            "keyword_follow_up_kept",
            "keyword_follow_up_not_kept",
            "term_rows_kept",
            "term_rows_not_kept",
            "packed_kept",
            "packed_read_each_time",
            "read_terms_kept",
            "read_terms_read_each_time",
            "substrings_kept",
            "substrings_built_each_time",
            "containing_kept",
            "containing_built_each_time",
            "scan_split",
            "scan_one_thread",
            "refresh_in_room",
            "refresh_copying",
        )
    }
    stage, read_rows = [], channels._postings

    def timed_read_rows(*args, **kwargs):
        started = time.perf_counter()
        try:
            return read_rows(*args, **kwargs)
        finally:
            stage.append(time.perf_counter() - started)

    channels._postings = timed_read_rows
    kept_min = channels.KEPT_TERM_MIN_POSTINGS
    read_stage, read_terms = [], postings.read_terms

    def timed_read_terms(*args, **kwargs):
        started = time.perf_counter()
        try:
            return read_terms(*args, **kwargs)
        finally:
            read_stage.append(time.perf_counter() - started)

    postings.read_terms = timed_read_terms
    containing_stage, containing = [], postings.containing

    def timed_containing(*args, **kwargs):
        started = time.perf_counter()
        try:
            return containing(*args, **kwargs)
        finally:
            containing_stage.append(time.perf_counter() - started)

    postings.containing = timed_containing
    missing = [f"{query} zqx{number}vw" for number, query in enumerate(queries)]
    for query in queries:
        memory_recall(query=query, mode="keyword", limit=10)
    for round_number in range(args.rounds):
        for kept in (True, False):
            channels.KEPT_TERM_MIN_POSTINGS = kept_min if kept else 10**12
            channels._kept_terms.clear()
            name = "keyword_follow_up_kept" if kept else "keyword_follow_up_not_kept"
            for query in queries:
                memory_recall(query=query, mode="keyword", limit=10)
            for query in queries:
                stage.clear()
                started = time.perf_counter()
                memory_recall(query=query, mode="keyword", limit=10)
                samples[name].append(time.perf_counter() - started)
                samples["term_rows_kept" if kept else "term_rows_not_kept"].append(sum(stage))
        channels.KEPT_TERM_MIN_POSTINGS = 10**12  # the packed postings below are read by every recall
        channels._kept_terms.clear()
        capacity = postings._packed.capacity
        for cached in (True, False):
            postings._packed.capacity = capacity if cached else 0
            postings._packed.clear()
            for query in queries:
                memory_recall(query=query, mode="keyword", limit=10)
            for query in queries:
                read_stage.clear()
                started = time.perf_counter()
                memory_recall(query=query, mode="keyword", limit=10)
                samples["packed_kept" if cached else "packed_read_each_time"].append(time.perf_counter() - started)
                samples["read_terms_kept" if cached else "read_terms_read_each_time"].append(sum(read_stage))
        postings._packed.capacity = capacity
        capacity = postings._vocabularies.capacity
        for kept in (True, False):
            postings._vocabularies.capacity = capacity if kept else 0
            postings._vocabularies.clear()
            for query in missing:
                containing_stage.clear()
                started = time.perf_counter()
                memory_recall(query=query, mode="keyword", limit=10)
                samples["substrings_kept" if kept else "substrings_built_each_time"].append(
                    time.perf_counter() - started
                )
                samples["containing_kept" if kept else "containing_built_each_time"].append(sum(containing_stage))
        postings._vocabularies.capacity = capacity
        channels.KEPT_TERM_MIN_POSTINGS = kept_min
        for split in (True, False):
            cosines._SPLIT_MIN_ROWS = split_min if split else 10**12
            for _ in range(50):
                started = time.perf_counter()
                cosines.dots(stored.matrix, vector)
                samples["scan_split" if split else "scan_one_thread"].append(time.perf_counter() - started)
        cosines._SPLIT_MIN_ROWS = split_min
        for in_room in (True, False):
            for number in range(20):
                view = snapshot.current()
                memory_remember(
                    namespace="bench",
                    content=f"{corpus.text()} ({round_number}.{number})",
                    actor="bench",
                    interface="cli",
                    look_for_near_twin=False,
                )
                started = time.perf_counter()
                snapshot._extend(view, after=view.max_id, shared=in_room)
                samples["refresh_in_room" if in_room else "refresh_copying"].append(time.perf_counter() - started)
                snapshot.current()  # the shared view moves on, with its room
    medians = {name: median_ms(values) for name, values in samples.items()}
    result = {
        "benchmark": "mechanisms",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "size": args.size,
        "queries": len(queries),
        "rounds": args.rounds,
        "medians_ms": medians,
        "saving_share": {
            "kept term rows (keyword recall)": round(
                1 - medians["keyword_follow_up_kept"] / medians["keyword_follow_up_not_kept"], 3
            ),
            "kept term rows (their stage: the terms' visible rows)": round(
                1 - medians["term_rows_kept"] / medians["term_rows_not_kept"], 3
            ),
            "packed postings kept (keyword recall)": round(
                1 - medians["packed_kept"] / medians["packed_read_each_time"], 3
            ),
            "packed postings kept (their stage: reading the terms)": round(
                1 - medians["read_terms_kept"] / medians["read_terms_read_each_time"], 3
            ),
            "namespace's terms kept as a string (keyword recall with a missing word)": round(
                1 - medians["substrings_kept"] / medians["substrings_built_each_time"], 3
            ),
            "namespace's terms kept as a string (their stage: postings.containing)": round(
                1 - medians["containing_kept"] / medians["containing_built_each_time"], 3
            ),
            "split cosine scan": round(1 - medians["scan_split"] / medians["scan_one_thread"], 3),
            "snapshot room (refresh after a write)": round(
                1 - medians["refresh_in_room"] / medians["refresh_copying"], 3
            ),
        },
        "stored_vectors": len(stored.ids),
        "rows": len(snapshot.current().columns.revision),
        "numpy": np.__version__,
    }
    print(result["medians_ms"], result["saving_share"])
    harness.save(result, Path(args.output))


if __name__ == "__main__":
    main()
