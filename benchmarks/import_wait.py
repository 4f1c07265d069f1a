"""How long one remember waits while a large trusted import runs in another process.

    .venv/bin/python benchmarks/import_wait.py --items 100000 --output benchmarks/results/import_wait.json

A store of ``--store`` memories (``history.bulk_load``), a document of ``--items`` new
memories (``history.import_document``) in a file, then ``manage.py import_memories
--trusted FILE`` in a subprocess, as an operator runs it. While it runs, this process
remembers one memory every ``--interval`` seconds through the service (what one REST
request does) and times each, and counts the memories a reader sees: none of the
import's may show before it ends. Goal (issue 26): no remember waits more than 1 s.
The embedder is the hash one for both, so the import's time is the store's, not the model's.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=int, default=10_000, help="memories in the store before the import")
    parser.add_argument("--items", type=int, default=100_000, help="new memories in the imported document")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between two remembers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/import_wait.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-import-wait-"))
    db_path = workdir / "import-wait.db"
    harness.setup(db_path, embedder="hash")
    from corpus import Corpus
    from django.utils import timezone
    from history import bulk_load, import_document, make_history

    from memories.models import Memory
    from memories.services import memory_remember

    corpus = Corpus(args.seed)
    bulk_load(make_history(corpus, args.store, now=timezone.now(), namespace="bench"))
    document = workdir / "import.json"
    extra = make_history(corpus, args.items, now=timezone.now(), namespace="bench", key_prefix="import-")
    document.write_text(json.dumps(import_document(extra)))
    before = Memory.objects.count()

    env = dict(os.environ, MEMORY_DB_PATH=str(db_path), MEMORY_EMBEDDER="hash", MEMORY_LOG_LEVEL="WARNING")
    started = time.perf_counter()
    importer = subprocess.Popen(
        [sys.executable, "manage.py", "import_memories", "--trusted", str(document)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waits, seen = [], set()
    number = 0
    while importer.poll() is None:
        time.sleep(args.interval)
        number += 1
        began = time.perf_counter()
        memory_remember(
            namespace="bench",
            content=f"{corpus.text()} (written during the import, {number})",
            actor="bench",
            interface="cli",
            look_for_near_twin=False,
        )
        waits.append(time.perf_counter() - began)
        seen.add(Memory.objects.count() - before - number)  # the import's memories a reader sees
    import_seconds = time.perf_counter() - started
    out, err = importer.communicate()
    if importer.returncode != 0:
        raise SystemExit(f"the import failed ({importer.returncode}): {err.strip()[-2000:]}")
    seen.discard(args.items)  # a count taken after the import published is not a leak
    after = Memory.objects.count() - before - number
    milliseconds = [wait * 1000 for wait in waits]
    result = {
        "benchmark": "import_wait",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "store": args.store,
        "items": args.items,
        "interval_seconds": args.interval,
        "import_seconds": round(import_seconds, 1),
        "import_output": out.strip()[-500:],
        "imported_memories": after,
        "remembers": len(waits),
        "remember_ms": {
            "p50": round(harness.percentile(milliseconds, 0.5), 1),
            "p99": round(harness.percentile(milliseconds, 0.99), 1),
            "max": round(max(milliseconds), 1) if milliseconds else None,
        },
        "import_memories_seen_before_it_ended": sorted(seen),
        "goal": "every remember within 1,000 ms; none of the import seen before it ends",
    }
    print(
        json.dumps(
            {
                key: result[key]
                for key in (
                    "import_seconds",
                    "imported_memories",
                    "remembers",
                    "remember_ms",
                    "import_memories_seen_before_it_ended",
                )
            }
        )
    )
    harness.save(result, Path(args.output))


if __name__ == "__main__":
    main()
