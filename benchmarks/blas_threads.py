"""The vector scan (``matrix @ query``, float32, 384 columns) with OpenBLAS on one thread and on two.

    .venv/bin/python benchmarks/blas_threads.py --output benchmarks/results/blas_threads.json

numpy's OpenBLAS starts one thread per core (two here) unless OPENBLAS_NUM_THREADS says
otherwise; the engine's cosine scan is its one BLAS call. Each size is timed with both
settings in alternation (switched at run time through OpenBLAS's own call), first with the
machine as it is, then with a busy loop in another process holding one core, as a server's
other work or a neighbour would; each also with 20 ms of Python work before every scan,
as the rest of a recall does, during which OpenBLAS's idle threads may park.
"""

import argparse
import ctypes
import glob
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

ROWS = (1_300, 13_000, 131_000)


def openblas_setter():
    folder = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for path in glob.glob(str(folder / "libscipy_openblas*.so")):
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(library, name):
                return getattr(library, name)
    raise SystemExit("OpenBLAS's set_num_threads was not found next to numpy")


def other_work(seconds: float) -> None:
    """Python work between two scans, as the rest of a recall does (OpenBLAS's threads may park)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def run(set_threads, repeat: int, pause: float = 0.0) -> dict:
    rng = np.random.default_rng(0)
    results = {}
    for rows in ROWS:
        matrix = rng.random((rows, 384), dtype=np.float32)
        query = matrix[0].copy()
        samples = {1: [], 2: []}
        for _ in range(repeat):
            for threads in (2, 1):
                set_threads(threads)
                matrix @ query  # the first call after a switch starts or parks the threads
                other_work(pause)
                started = time.perf_counter()
                matrix @ query
                samples[threads].append(time.perf_counter() - started)
        results[f"{rows} rows"] = {
            f"{threads} thread(s) p50_ms": round(statistics.median(values) * 1000, 3)
            for threads, values in samples.items()
        }
    set_threads(os.cpu_count() or 1)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--output", default="benchmarks/results/blas_threads.json")
    args = parser.parse_args()
    set_threads = openblas_setter()
    output = {
        "benchmark": "blas_threads",
        "command": " ".join(sys.argv),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "as_is": run(set_threads, args.repeat),
        "as_is_with_20ms_of_other_work_before_each_scan": run(set_threads, args.repeat, pause=0.02),
    }
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        output["one_core_busy"] = run(set_threads, args.repeat)
        output["one_core_busy_with_20ms_of_other_work_before_each_scan"] = run(set_threads, args.repeat, pause=0.02)
    finally:
        busy.kill()
        busy.wait()
    output["load_average_at_end"] = os.getloadavg()
    path = harness.save(output, args.output)
    for phase in (
        "as_is",
        "as_is_with_20ms_of_other_work_before_each_scan",
        "one_core_busy",
        "one_core_busy_with_20ms_of_other_work_before_each_scan",
    ):
        for size, value in output[phase].items():
            print(phase, size, value)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
