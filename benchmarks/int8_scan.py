"""The int8 scan against the float32 scan, by store size: where the bounds pay (search/cosines.py).

    .venv/bin/python benchmarks/int8_scan.py --output benchmarks/results/int8_scan.json

For each size, random unit vectors of 384 dimensions stand in for the stored matrix
and 30 random queries are timed (wall time, median; the three ways in turn for each
query, so they meet the same cache states; both scans use two threads):

- ``float32_scan``: ``matrix @ query``, what every recall did before;
- ``int8_bounds``: the int8 product plus the per-row bounds (``cosines.bounds``);
- ``int8_top200``: bounds, then the float32 cosine of only the rows whose upper bound
  reaches the 200th-best lower bound, then their top 200; checked equal to the top
  200 of the full float32 scan, and the rows it had to compute are reported.

Random vectors are the hard case for the bounds' usefulness as far as spread goes (their
cosines crowd near 0); recall on real stores is measured in latency.py.

Runs vary with the machine's shared memory bandwidth: at 135k rows the saved run (12710d2)
has the int8 bounds at 6.8 ms against 7.7 ms for the float32 scan; earlier runs had 7.4
against 10.3 and 10.4 against 9.9; with no float32 scans in between, the int8 bounds took
4.9 ms at 129k vectors (latency.py). Below 32k rows the int8 path gains nothing (at 16k:
0.65 against 0.46 ms for the top 200), hence ``cosines.QUANTIZED_MIN_ROWS``. What recall gains is measured end to end
(latency.py; README, issue 3's notes).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

SIZES = (8_192, 16_384, 32_768, 65_536, 135_000)
DIM = 384
QUERIES = 30


def wall_ms(functions: dict, queries) -> dict:
    """Median wall time of each function over the queries, taken in turn per query (so they share cache states)."""
    samples = {name: [] for name in functions}
    for query in queries:
        for name, function in functions.items():
            started = time.perf_counter()
            function(query)
            samples[name].append(time.perf_counter() - started)
    return {name: round(statistics.median(values) * 1000, 3) for name, values in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="benchmarks/results/int8_scan.json")
    args = parser.parse_args()
    import tempfile

    harness.setup(Path(tempfile.mkdtemp(prefix="memory-int8-")) / "int8.db", embedder="hash")
    from search import cosines

    rng = np.random.default_rng(0)
    results = {}
    for size in SIZES:
        matrix = rng.standard_normal((size, DIM)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        stored = cosines.quantize(np.arange(size), matrix)
        queries = rng.standard_normal((QUERIES, DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        computed = []

        def top200(query):
            lower, upper = cosines.bounds(stored, query)
            least = np.partition(lower, size - 200)[size - 200]
            rows = np.flatnonzero(upper >= least)
            computed.append(len(rows))
            scores = matrix[rows] @ query
            return rows[np.argsort(-scores, kind="stable")[:200]]

        for query in queries:
            full = matrix @ query
            assert set(top200(query).tolist()) == set(np.argsort(-full, kind="stable")[:200].tolist())
        computed.clear()
        for query in queries[:3]:  # warm both paths
            matrix @ query
            cosines.bounds(stored, query)
        results[str(size)] = {
            **wall_ms({"float32_scan_ms": lambda query: matrix @ query,
                       "int8_bounds_ms": lambda query: cosines.bounds(stored, query),
                       "int8_top200_ms": top200}, queries),
            "rows_computed_in_float32_median": int(np.median(computed)),
            "int8_copy_mb": round(sum(column.nbytes for column in stored.rows()[2:]) / 2**20, 1),
            "float32_matrix_mb": round(matrix.nbytes / 2**20, 1),
        }
        print(size, results[str(size)], flush=True)
    output = {"benchmark": "int8_scan", "command": " ".join(sys.argv), "environment": harness.environment(),
              "load_average": os.getloadavg(), "unit": "ms of wall time, median of 30 queries",
              "results": results}
    print(f"saved {harness.save(output, args.output)}")


if __name__ == "__main__":
    main()
