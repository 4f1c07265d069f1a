"""What every benchmark script shares: a fresh database, timing, percentiles, and the JSON it saves.

A benchmark runs against its own SQLite file (never ``data/memory.db``): the settings read
``MEMORY_DB_PATH`` and ``MEMORY_EMBEDDER`` at import, so ``setup`` sets them before
``django.setup()`` and then migrates the empty file.
"""

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import memoryproject  # noqa: E402,F401  (the server's process settings, OpenBLAS's among them, before numpy loads)


def setup(db_path: Path | None, *, embedder: str = "hash", fresh: bool = True, database_url: str | None = None) -> None:
    """Point Django at ``db_path`` (deleted first when ``fresh``), or at PostgreSQL's ``database_url`` (which
    ``db_path`` then leaves alone), migrate it, and return."""
    if database_url is not None:
        os.environ["MEMORY_DATABASE_URL"] = database_url
    else:
        db_path = Path(db_path)
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db_path}{suffix}").unlink(missing_ok=True)
        db_path.parent.mkdir(parents=True, exist_ok=True)
        os.environ["MEMORY_DB_PATH"] = str(db_path)
    os.environ["MEMORY_EMBEDDER"] = embedder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    os.environ.setdefault("MEMORY_LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def percentile(values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0..1) by linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary_ms(seconds: list[float]) -> dict:
    """p50 / p95 / mean / max in milliseconds, and the sample count."""
    ms = [value * 1000.0 for value in seconds]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 0.50), 3),
        "p95_ms": round(percentile(ms, 0.95), 3),
        "mean_ms": round(statistics.fmean(ms), 3) if ms else None,
        "max_ms": round(max(ms), 3) if ms else None,
    }


def timed(function, *args, **kwargs):
    """Return (result, seconds) of one call."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def measured(function, *args, **kwargs):
    """Return (result, wall seconds, CPU seconds of this process) of one call.

    CPU time counts every thread of the process (OpenBLAS's too) and not the time other
    processes held the cores, so on a shared machine it shows what wall time would be alone.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def summary(pairs: list[tuple[float, float]]) -> dict:
    """Wall-clock p50/p95/mean/max and CPU p50/p95, in ms, of (wall, cpu) second pairs."""
    result = summary_ms([wall for wall, _ in pairs])
    cpu = summary_ms([cpu for _, cpu in pairs])
    result["cpu_p50_ms"], result["cpu_p95_ms"] = cpu["p50_ms"], cpu["p95_ms"]
    return result


def peak_rss_mb() -> float:
    """The peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def current_rss_mb() -> float:
    """The resident memory of this process now, in MiB."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def current_anonymous_mb() -> float:
    """The memory this process owns now (RssAnon), in MiB: its resident memory less the files it maps, such as
    the SQLite database under MEMORY_DB_MMAP_MB, whose pages are the kernel's page cache."""
    with open("/proc/self/status") as handle:
        kilobytes = next(int(line.split()[1]) for line in handle if line.startswith("RssAnon:"))
    return round(kilobytes / 1024, 1)


def environment() -> dict:
    """The machine and library versions a result was measured with."""
    import numpy
    import sqlite_vec

    from search.text import sqlite3

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "search", "memories"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        )
    except OSError:
        commit, dirty = None, None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_vec": getattr(sqlite_vec, "__version__", None),
        "numpy": numpy.__version__,
        "git_commit": commit,
        "working_tree_changed_in_search_or_memories": dirty,
    }


def _cpu_model() -> str | None:
    """The processor's name as Linux reports it: which one ran a result moves its numbers (torch, ONNX Runtime)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def save(result: dict, output: Path) -> Path:
    output = Path(output)
    if not output.is_absolute():
        output = ROOT / output
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return output
