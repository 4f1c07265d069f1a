"""What one fold of the postings tail costs in a large store: the pause of the write that triggers it.

    .venv/bin/python benchmarks/fold_cost.py --store /tmp/fold/m1m.db --size 1000000 \
        --output benchmarks/results/fold_cost.json

Builds the store the first time (``history.bulk_load`` of ``--size`` memories, the hash
embedder; ~11 minutes at 1M here) and keeps it; each later run works on a copy, so every
run starts from the same store. On the copy (migrated first, which is timed): ``--folds``
times, ~20,000 tail rows of new corpus texts are written (``postings.add``) and then
folded (``postings.compact``, timed, in its own transaction, as a write would). The
copy is deleted at the end. To compare with older code, copy this script into a
checkout of it and run it there on the same store.
"""

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="the store to build once and fold into copies of")
    parser.add_argument("--size", type=int, default=1_000_000, help="memories, when the store is built")
    parser.add_argument("--folds", type=int, default=6)
    parser.add_argument("--tail-rows", type=int, default=20_000, help="tail rows per fold (postings.COMPACT_AFTER)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/fold_cost.json")
    args = parser.parse_args()

    store = Path(args.store).resolve()
    built_seconds = None
    if not store.exists():
        built_seconds = build(store, args)
    copy = store.with_name(store.stem + "-fold-copy.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(store, copy)
    try:
        output = fold_copy(copy, args)
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    output.update({"store_built_seconds": built_seconds, "size": args.size})
    print(f"saved {harness.save(output, args.output)}")


def build(store: Path, args) -> float:
    """Load the store in a process of its own (Django's settings are read once per process)."""
    import subprocess

    code = (
        "import sys, time; sys.path.insert(0, sys.argv[3]); import harness; "
        "harness.setup(harness.Path(sys.argv[1]), embedder='hash'); "
        "from django.utils import timezone; from corpus import Corpus; "
        "from history import bulk_load, make_history; "
        "bulk_load(make_history(Corpus(int(sys.argv[4])), int(sys.argv[2]), now=timezone.now(), "
        "namespace='bench'), batch=20000)"
    )
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, str(store), str(args.size), str(Path(__file__).resolve().parent), str(args.seed)],
        check=True,
    )
    return round(time.perf_counter() - start, 1)


def fold_copy(copy: Path, args) -> dict:
    start = time.perf_counter()
    harness.setup(copy, embedder="hash", fresh=False)  # migrates what the store lacks
    migrate_seconds = time.perf_counter() - start
    from corpus import Corpus
    from django.db import connection, transaction

    from search import postings

    postings.COMPACT_AFTER = 10**9  # folded below, when timed
    corpus = Corpus(args.seed + 11)
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(revision_id) FROM search_document")
        next_id = cursor.fetchone()[0] + 1000  # postings of revisions to come: the postings do not look
    folds = []
    for _ in range(args.folds):
        documents, rows = [], 0
        while rows < args.tail_rows:
            analysed = postings.analyse([(next_id + offset, "bench", "", corpus.text()) for offset in range(100)])
            next_id += 100
            documents.extend(analysed)
            rows += sum(len(document.terms) for document in analysed)
        with transaction.atomic():
            postings.add(documents)
        with transaction.atomic():
            terms, wall, cpu = harness.measured(postings.compact)
        folds.append({"tail_rows": rows, "terms": terms, "ms": round(wall * 1000, 1), "cpu_ms": round(cpu * 1000, 1)})
        print(folds[-1], flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT term) FROM search_posting")
        packed_rows, terms = cursor.fetchone()
    return {
        "benchmark": "fold_cost",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "load_average_at_start": os.getloadavg(),
        "migrate_and_setup_seconds": round(migrate_seconds, 1),
        "folds": folds,
        "packed_rows_after": packed_rows,
        "terms_after": terms,
    }


if __name__ == "__main__":
    main()
