"""How long a fresh process takes to answer: a command, a one-shot CLI recall, a server's first recall.

    .venv/bin/python benchmarks/startup.py --output benchmarks/results/startup.json

The store: ``--memories`` corpus texts (the latency benchmark's corpus, ~55 tokens at
p50) imported once through ``memories_import`` with the real MiniLM model, into a
SQLite file in a temporary data directory, plus an API key from ``manage.py
create_api_key``. Then, alternating, ``--repeat`` times each, every one a new process
with that data directory:

1. ``manage.py version``: Django's start-up alone, the yardstick;
2. ``manage.py memory recall QUERY`` (hybrid, the default mode), with its peak RSS;
3. ``manage.py serve --port P`` (what ``make run`` runs), from spawn until the first
   ``POST /api/v1/recall/`` (hybrid) is answered, polled every 20 ms; also when its
   URLs were printed.

Each is reported as its median and as a ratio to the median of (1). All of that with the
ONNX export already in the model cache (the usual case), and then, reported apart, the
CLI recall and the server each with an empty cache, so the process makes the export.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

QUERY = "when does the billing deploy happen"


def run_measured(command: list[str], env: dict) -> dict:
    """Run ``command`` to its end: seconds, peak RSS in MB (its own, from wait4), exit status, output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=harness.ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        return {
            "seconds": seconds,
            "peak_rss_mb": usage.ru_maxrss / 1024,
            "returncode": process.returncode,
            "stdout": out.read().decode(),
            "stderr": err.read().decode(),
        }


def first_recall_over_http(env: dict, token: str) -> dict:
    """Start ``manage.py serve`` on a free port; seconds until its first hybrid recall is answered."""
    port = _free_port()
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=harness.ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    printed = {}

    def read_urls():
        for line in process.stdout:
            if line.startswith("Dashboard:"):
                printed["seconds"] = time.perf_counter() - start

    reader = threading.Thread(target=read_urls, daemon=True)
    reader.start()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/recall/",
        method="POST",
        data=json.dumps({"query": QUERY}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server stopped with {process.returncode}")
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    hits = len(json.load(response)["hits"])
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.02)
        seconds = time.perf_counter() - start
    finally:
        process.terminate()
        _, _, usage = os.wait4(process.pid, 0)
        process.returncode = 0
        reader.join(5)
    return {
        "seconds": seconds,
        "urls_printed_seconds": printed.get("seconds"),
        "hits": hits,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def build_store(data_dir: Path, memories: int, seed: int) -> str:
    """Import ``memories`` corpus texts with MiniLM through the service; return a new API key."""
    env = child_env(data_dir, data_dir / "models")
    migrate = run_measured([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env)
    assert migrate["returncode"] == 0, migrate["stderr"]
    code = f"""
import json, sys
sys.path.insert(0, "benchmarks")
import django
django.setup()
from corpus import Corpus
from memories.services import memories_import
corpus = Corpus({seed})
document = {{"format": "memory-export", "version": 1, "memories": [
    {{"namespace": "bench", "key": f"m{{number}}", "revisions": [{{"content": corpus.text()}}]}}
    for number in range({memories})]}}
report = memories_import(document=json.dumps(document), actor="bench", interface="cli", trusted=False)
print(json.dumps(report.as_dict()))
"""
    built = run_measured([sys.executable, "-c", code], env)
    assert built["returncode"] == 0, built["stderr"]
    key = run_measured([sys.executable, "manage.py", "create_api_key", "--name", "startup bench"], env)
    assert key["returncode"] == 0, key["stderr"]
    return key["stdout"].strip()


def child_env(data_dir: Path, cache: Path) -> dict:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMORY_")}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        MEMORY_DATA_DIR=str(data_dir),
        MEMORY_DB_PATH=str(data_dir / "memory.db"),
        MEMORY_EMBEDDER="minilm",
        MEMORY_MODEL_CACHE=str(cache),
        HF_HUB_OFFLINE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def median(samples: list[dict], field: str) -> float:
    return round(statistics.median(sample[field] for sample in samples), 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each process, alternating")
    parser.add_argument("--cold-repeat", type=int, default=2, help="runs of each with an empty model cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/startup.json")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="memory-startup-"))
    built_at = time.perf_counter()
    token = build_store(data_dir, args.memories, args.seed)
    build_seconds = time.perf_counter() - built_at
    env = child_env(data_dir, data_dir / "models")
    manage = [sys.executable, "manage.py"]
    version, cli, server = [], [], []
    load = os.getloadavg()
    for _ in range(args.repeat):
        version.append(run_measured([*manage, "version"], env))
        recalled = run_measured([*manage, "memory", "recall", QUERY], env)
        assert recalled["returncode"] == 0, recalled["stderr"]
        recalled["hits"] = len(json.loads(recalled["stdout"])["hits"])
        cli.append(recalled)
        server.append(first_recall_over_http(env, token))
    cold_cli, cold_server = [], []
    for number in range(args.cold_repeat):
        cold = child_env(data_dir, data_dir / f"empty-cache-{number}")
        recalled = run_measured([*manage, "memory", "recall", QUERY], cold)
        assert recalled["returncode"] == 0, recalled["stderr"]
        cold_cli.append(recalled)
        cold_server.append(first_recall_over_http(child_env(data_dir, data_dir / f"empty-cache-s{number}"), token))

    yardstick = median(version, "seconds")

    def summary(samples, *fields):
        result = {field: median(samples, field) for field in fields}
        result["ratio_to_version"] = round(result["seconds"] / yardstick, 2)
        result["samples_seconds"] = [round(sample["seconds"], 3) for sample in samples]
        return result

    output = {
        "benchmark": "startup",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "load_average_at_start": load,
        "load_average_at_end": os.getloadavg(),
        "store": {
            "memories": args.memories,
            "how": "corpus texts imported by memories_import with MiniLM",
            "built_in_seconds": round(build_seconds, 1),
        },
        "query": QUERY,
        "repeats": args.repeat,
        "version": {
            "seconds": yardstick,
            "peak_rss_mb": median(version, "peak_rss_mb"),
            "samples_seconds": [round(sample["seconds"], 3) for sample in version],
        },
        "cli_recall": {**summary(cli, "seconds", "peak_rss_mb"), "hits": cli[0]["hits"]},
        "server_first_recall": {
            **summary(server, "seconds", "urls_printed_seconds", "peak_rss_mb"),
            "hits": server[0]["hits"],
        },
        "with_an_empty_model_cache": {
            "repeats": args.cold_repeat,
            "cli_recall": summary(cold_cli, "seconds", "peak_rss_mb"),
            "server_first_recall": summary(cold_server, "seconds", "urls_printed_seconds", "peak_rss_mb"),
        },
    }
    print(json.dumps({name: output[name] for name in ("version", "cli_recall", "server_first_recall")}, indent=1))
    print(f"saved {harness.save(output, args.output)}")
    shutil.rmtree(data_dir)  # the store and four exports of ~90 MB


if __name__ == "__main__":
    main()
