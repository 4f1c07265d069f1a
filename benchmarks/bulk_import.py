"""Trusted bulk import of new memories: memories/s through ``memories_import(trusted=True)``, wall and CPU time.

    .venv/bin/python benchmarks/bulk_import.py --store 10000 --import-size 5000 --label after \
        --output benchmarks/results/bulk_import.json

A fresh store of ``--store`` memories is written with ``history.bulk_load`` (with the
``--embedder``: hash, or MiniLM), then ``--import-size``
new memories (new keys: the case of a restore or a migration) are imported through the
service, as ``manage.py import_memories --trusted`` and
``POST /api/v1/import/?trusted=true`` do. Each run is saved under its ``--label`` in the
output file, so a run of the code before a change and one after sit side by side. The
import is repeated ``--repeat`` times, each into a fresh copy of the same store, and the
medians are reported.
CPU time (``time.process_time``) is reported beside wall time: on a shared machine it is
what the wall time would be alone.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=int, default=10_000, help="memories already in the store")
    parser.add_argument("--import-size", type=int, default=5_000, help="new memories in the imported document")
    parser.add_argument("--repeat", type=int, default=3, help="imports of the document (medians are reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    parser.add_argument("--label", default="run", help="what code was measured (before, after, ...)")
    parser.add_argument("--output", default="benchmarks/results/bulk_import.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-bulk-import-"))
    db_path = workdir / "import.db"
    harness.setup(db_path, embedder=args.embedder)
    from corpus import Corpus
    from django.core.management import call_command
    from django.db import connections
    from django.utils import timezone
    from history import bulk_load, import_document, make_history

    from memories.models import Memory, Revision
    from memories.services import memories_import
    from search.embeddings import get_embedder

    corpus = Corpus(args.seed)
    now = timezone.now()
    stored = make_history(corpus, args.store, now=now, namespace="bench")
    extra = make_history(corpus, args.import_size, now=now, namespace="bench", key_prefix="import-")
    document = json.dumps(import_document(extra))
    revisions = sum(len(memory.revisions) for memory in extra)
    load = os.getloadavg()
    samples = []
    for number in range(args.repeat):
        # A fresh store each time. (Not a rolled-back transaction around the import: inside
        # one, the import's own transaction is a savepoint, and that made it twice as slow.)
        if number:
            connections.close_all()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db_path}{suffix}").unlink(missing_ok=True)
            call_command("migrate", verbosity=0, interactive=False)
        bulk_load(stored)
        before = Revision.objects.count()
        report, wall, cpu = harness.measured(
            memories_import, document=document, actor="bench", interface="cli", trusted=True
        )
        samples.append((wall, cpu))
    written, memories = Revision.objects.count() - before, Memory.objects.count()
    embedder = get_embedder()
    wall = statistics.median(wall for wall, _ in samples)
    cpu = statistics.median(cpu for _, cpu in samples)
    run = {
        "path": "memories.services.memories_import(trusted=True), JSON text in",
        "embedder": embedder.name,
        "store_memories": args.store,
        "imported_memories": args.import_size,
        "imported_revisions": revisions,
        "written_revisions": written,
        "memories_after": memories,
        "report": report.as_dict(),
        "repeats": args.repeat,
        "samples_seconds_wall_cpu": [[round(wall, 3), round(cpu, 3)] for wall, cpu in samples],
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "memories_per_s": round(args.import_size / wall, 1),
        "memories_per_cpu_s": round(args.import_size / cpu, 1),
        "load_average_at_start": load,
        "load_average_at_end": os.getloadavg(),
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
    }
    print(
        json.dumps(
            {key: run[key] for key in ("report", "seconds", "cpu_seconds", "memories_per_s", "memories_per_cpu_s")}
        )
    )
    output = Path(args.output)
    if not output.is_absolute():
        output = harness.ROOT / output
    saved = json.loads(output.read_text()) if output.exists() else {"benchmark": "bulk_import", "runs": {}}
    saved["runs"][args.label] = run
    print(f"saved {harness.save(saved, output)}")


if __name__ == "__main__":
    main()
