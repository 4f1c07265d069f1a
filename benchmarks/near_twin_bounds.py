"""The near-duplicate check's first bound: the head codes against the sketch (search/cosines.py).

    .venv/bin/python benchmarks/near_twin_bounds.py --db /tmp/latency/latency-100000.db \
        --output benchmarks/results/near_twin_bounds.json

For each set of stored vectors, ``--queries`` new corpus texts are embedded and each
bound is asked which rows may reach ``--threshold`` (0.90, the default of
``MEMORY_NEAR_DUPLICATE_COSINE``): the rows it leaves open (p50 / p95) and its time
(``cosines.head_open`` with the bound alone, one thread, median; the two in turn for each
query, so they meet the same cache states). Every row whose float32 cosine reaches the
threshold is checked to be among those left open.

- ``minilm``: the vectors of a store written by ``latency.py --embedder minilm --keep-db``
  with real MiniLM vectors (``--db``; skipped without it); the queries embedded with
  MiniLM.
- ``hash``: ``--hash-rows`` corpus texts embedded with the hash embedder here.

Also reported: the share of the rows' squared length the sketch's directions hold, and
the time to work out the basis and sketch every row.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def compare(matrix: np.ndarray, queries: np.ndarray, threshold: float) -> dict:
    from search import cosines

    started = time.perf_counter()
    basis = cosines.sketch_basis(matrix)
    basis_ms = (time.perf_counter() - started) * 1000
    if basis is None:
        return {"rows": len(matrix), "sketch": "none (too little of the rows' length along its directions)"}
    sample = matrix[::max(1, len(matrix) // 8192)][:8192].astype(np.float64)
    values = np.linalg.eigvalsh(sample.T @ sample)
    started = time.perf_counter()
    sketched = cosines.quantize(np.arange(len(matrix)), matrix, basis)
    quantize_ms = (time.perf_counter() - started) * 1000
    head = sketched._replace(basis=None)  # the same codes, first bound from the head
    opened = {"head": [], "sketch": []}
    times = {"head": [], "sketch": []}
    reaching = []
    for query in queries:
        exact = set(np.flatnonzero(cosines.float32_dots(matrix, query) >= threshold).tolist())
        reaching.append(len(exact))
        for name, stored in (("head", head), ("sketch", sketched)):
            started = time.perf_counter()
            rows = cosines.head_open(stored, query, threshold, refine_over=10**9)
            times[name].append((time.perf_counter() - started) * 1000)
            assert exact <= set(rows.tolist()), f"the {name} bound left out a row that reaches {threshold}"
            opened[name].append(len(rows))
    return {
        "rows": len(matrix), "dim": matrix.shape[1], "sketch_width": len(basis),
        "length_share_along_the_sketch": round(float(values[-len(basis):].sum() / values.sum()), 3),
        "basis_ms": round(basis_ms, 1), "quantize_with_sketch_ms": round(quantize_ms, 1),
        "rows_reaching_threshold_p50": float(np.median(reaching)),
        **{f"{name}_open_p50": float(np.median(opened[name])) for name in opened},
        **{f"{name}_open_p95": float(np.percentile(opened[name], 95)) for name in opened},
        **{f"{name}_ms_p50": round(statistics.median(times[name]), 3) for name in times},
        "codes_per_row": {"head": int(head.head.shape[1]), "sketch": int(sketched.sketch.shape[1])},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=None, help="a latency.py store with real MiniLM vectors")
    parser.add_argument("--hash-rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=0.90)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--output", default="benchmarks/results/near_twin_bounds.json")
    args = parser.parse_args()

    os.environ["MEMORY_TORCH_THREADS"] = "1"
    db_path = Path(args.db) if args.db else Path(tempfile.mkdtemp(prefix="memory-near-twin-")) / "hash.db"
    harness.setup(db_path, embedder="minilm" if args.db else "hash", fresh=not args.db)
    from corpus import Corpus

    from search import cosines, vectors
    from search.embeddings import HashEmbedder, get_embedder

    corpus = Corpus(args.seed)
    result = {"benchmark": "near_twin_bounds", "command": " ".join(["benchmarks/near_twin_bounds.py", *sys.argv[1:]]),
              "environment": harness.environment(), "threshold": args.threshold, "queries": args.queries}
    cosines._SPLIT_MIN_ROWS = 10**12  # one thread, as the check runs beside a write
    if args.db:
        _, _, matrix = vectors.load_vectors()
        embedder = get_embedder()
        queries = np.asarray(embedder.embed([corpus.text() for _ in range(args.queries)]), dtype=np.float32)
        result["minilm"] = compare(matrix, queries, args.threshold)
        print("minilm", result["minilm"])
    hasher = HashEmbedder()
    matrix = np.asarray(hasher.embed([corpus.text() for _ in range(args.hash_rows)]), dtype=np.float32)
    queries = np.asarray(hasher.embed([corpus.text() for _ in range(args.queries)]), dtype=np.float32)
    result["hash"] = compare(matrix, queries, args.threshold)
    print("hash", result["hash"])
    if not args.db:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    print("saved", harness.save(result, Path(args.output)))


if __name__ == "__main__":
    main()
