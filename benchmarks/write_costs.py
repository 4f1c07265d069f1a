"""Where a write's time goes: per-revision costs of each storage step, of the services, and of embedding.

    .venv/bin/python benchmarks/write_costs.py --output benchmarks/results/write_costs.json

It explains the bulk-import and remember numbers of ``latency.py``:

1. ``sqlite``: raw SQLite (the project's pysqlite3 build and pragmas, no Django), per row:
   a plain insert into a table like memories_revision, and the same with an external-content
   FTS5 table fed by trigger, for each of the project's two tokenizers (``porter unicode61``
   and ``trigram``, search migration 0001).
2. ``store``: ``history.bulk_load`` of ``--memories`` memories into a fresh store, each step
   of ``search.indexing.index_revisions`` timed (tokenizing, postings, embedding with the
   hash embedder, vector inserts); the rest is the INSERTs with their FTS5 triggers. Done
   twice: with the vec0 chunk size the project now uses and with vec0's default (1,024).
3. ``remember`` and ``import``: the services, each stage timed: single ``memory_remember``
   writes (hash embedder) and one trusted ``memories_import``.
4. ``minilm``: MiniLM embedding throughput, one text at a time (a single write) and in
   batches (an import), with one and two torch threads.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


class Stages:
    """Wraps functions so the CPU and wall time spent in each is summed under a label."""

    def __init__(self):
        self.wall, self.cpu, self.calls, self._undo = {}, {}, {}, []

    def wrap(self, owner, name, label):
        function = getattr(owner, name)

        def timed_stage(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.wall[label] = self.wall.get(label, 0.0) + time.perf_counter() - wall
                self.cpu[label] = self.cpu.get(label, 0.0) + time.process_time() - cpu
                self.calls[label] = self.calls.get(label, 0) + 1

        self._undo.append((owner, name, function))
        setattr(owner, name, timed_stage)

    def restore(self):
        for owner, name, function in reversed(self._undo):
            setattr(owner, name, function)
        self._undo.clear()

    def per(self, count: int, unit: str = "us") -> dict:
        scale = 1e6 if unit == "us" else 1e3
        return {
            label: {
                f"wall_{unit}": round(self.wall[label] * scale / count, 1),
                f"cpu_{unit}": round(self.cpu[label] * scale / count, 1),
            }
            for label in self.wall
        }


def sqlite_costs(texts: list[str]) -> dict:
    import sqlite_vec

    from search.text import sqlite3

    results = {}
    for label, tokenizer in (
        ("plain row", None),
        ("row + FTS5 porter unicode61", "porter unicode61 remove_diacritics 2"),
        ("row + FTS5 trigram", "trigram"),
    ):
        path = Path(tempfile.mkdtemp(prefix="memory-sqlite-")) / "costs.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "secure_delete = ON"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE r (id INTEGER PRIMARY KEY, title TEXT, content TEXT)")
        if tokenizer:
            db.execute(
                f"CREATE VIRTUAL TABLE f USING fts5(title, content, content='r', content_rowid='id', "
                f"tokenize='{tokenizer}')"
            )
            db.execute(
                "CREATE TRIGGER t AFTER INSERT ON r BEGIN "
                "INSERT INTO f(rowid, title, content) VALUES (new.id, new.title, new.content); END"
            )
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(texts), 5000):
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO r (title, content) VALUES ('', ?)", [(text,) for text in texts[start : start + 5000]]
            )
            db.execute("COMMIT")
        results[label] = {
            "wall_us": round((time.perf_counter() - wall) * 1e6 / len(texts), 1),
            "cpu_us": round((time.process_time() - cpu) * 1e6 / len(texts), 1),
        }
        db.close()
    return {"rows": len(texts), "per_row": results}


def store_costs(memories, chunk_size: int) -> dict:
    from history import bulk_load

    from search import postings, vectors
    from search.embeddings import HashEmbedder

    vectors.VEC0_CHUNK_SIZE = chunk_size
    stages = Stages()
    stages.wrap(postings, "analyse", "tokenize (scratch FTS5, postings.analyse)")
    stages.wrap(postings, "add", "postings write (postings.add, incl. folding)")
    stages.wrap(HashEmbedder, "_encode", "embed (hash embedder)")
    stages.wrap(vectors, "insert_vectors", "vector inserts (vec0)")
    revisions = sum(len(memory.revisions) for memory in memories)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        bulk_load(memories)
    finally:
        stages.restore()
    total_wall, total_cpu = time.perf_counter() - wall, time.process_time() - cpu
    # What the chunk size does to reads: a KNN (the latency floor) and a full load of the matrix.
    from search.embeddings import get_embedder

    knn = []
    for query in ("database cluster migrate", "alice budget review", "slow kafka queue", "tokyo incident"):
        vector = get_embedder().embed_query(query)
        for _ in range(3):
            knn.append(harness.measured(vectors.vec0_knn, vector, k=10)[2])
    _, _, load_cpu = harness.measured(vectors.load_matrix)
    per = stages.per(revisions)
    per["revision + memory INSERTs with FTS5 triggers (the rest)"] = {
        "wall_us": round((total_wall - sum(stages.wall.values())) * 1e6 / revisions, 1),
        "cpu_us": round((total_cpu - sum(stages.cpu.values())) * 1e6 / revisions, 1),
    }
    return {
        "vec0_chunk_size": chunk_size,
        "memories": len(memories),
        "revisions": revisions,
        "total_wall_s": round(total_wall, 2),
        "revisions_per_s": round(revisions / total_wall, 1),
        "per_revision": per,
        "vec0_knn_k10_cpu_ms_median": round(sorted(knn)[len(knn) // 2] * 1000, 2),
        "load_matrix_cpu_ms": round(load_cpu * 1000, 1),
    }


def remember_costs(corpus, count: int) -> dict:
    from memories import selectors
    from memories.models import Revision
    from memories.services import remember
    from search import indexing

    stages = Stages()
    stages.wrap(remember, "memory_remember", "total")
    stages.wrap(indexing, "prepare", "embed ahead of the write (indexing.prepare)")
    stages.wrap(selectors, "visible_duplicate", "duplicate check (selectors.visible_duplicate, ORM)")
    stages.wrap(Revision.objects, "create", "revision INSERT with FTS5 triggers (ORM)")
    stages.wrap(indexing, "index_revisions", "postings + vector (indexing.index_revisions)")
    stages.wrap(remember, "audit", "audit event (ORM)")
    stages.wrap(remember, "record_now", "response record (tags query)")
    texts = [corpus.text() for _ in range(count)]
    try:
        for number, text in enumerate(texts):
            remember.memory_remember(namespace="costs", content=text, key=f"r{number}", actor="bench", interface="cli")
    finally:
        stages.restore()
    per = stages.per(count, unit="ms")
    accounted = sum(stages.wall[label] for label in stages.wall if label != "total")
    per["other (memory row, tags, transaction, ORM)"] = {
        "wall_ms": round((stages.wall["total"] - accounted) * 1e3 / count, 2)
    }
    return {"writes": count, "embedder": "hash", "per_write": per}


def import_costs(corpus, count: int, now) -> dict:
    from history import import_document, make_history

    from memories import selectors
    from memories.services import imports
    from search import indexing

    stages = Stages()
    stages.wrap(imports, "memories_import", "total")
    stages.wrap(imports, "_read_batch", "parse and validate")
    # New memories go through the bulk path (imports._NewMemories): set-wise duplicate checks,
    # multi-row INSERTs of revisions (FTS5 triggers fire per row), one audit INSERT per chunk.
    stages.wrap(selectors, "visible_duplicates", "duplicate checks, set-wise")
    stages.wrap(imports, "append_revisions", "revision INSERTs with FTS5 triggers (bulk)")
    stages.wrap(indexing, "_index_stored", "indexing, one batch (postings, hash embedding, vectors)")
    stages.wrap(imports, "audit_many", "audit events (bulk)")
    document = import_document(make_history(corpus, count, now=now, namespace="costs", key_prefix="i"))
    try:
        imports.memories_import(document=document, actor="bench", interface="cli", trusted=True)
    finally:
        stages.restore()
    per = stages.per(count, unit="us")
    accounted = sum(stages.wall[label] for label in stages.wall if label != "total")
    per["other (memory and tag rows, key lookups, ORM)"] = {
        "wall_us": round((stages.wall["total"] - accounted) * 1e6 / count, 1)
    }
    return {
        "memories": count,
        "embedder": "hash",
        "memories_per_s": round(count / stages.wall["total"], 1),
        "per_memory": per,
    }


def minilm_costs(texts: list[str]) -> dict:
    import torch

    from search.embeddings import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    results = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        single = texts[:100]
        wall = time.perf_counter()
        for text in single:
            embedder.embed([text])
        results[f"{threads} thread(s), one text per call"] = round(len(single) / (time.perf_counter() - wall), 1)
        for batch in (64, 512):
            chunk = texts[:1024]
            wall = time.perf_counter()
            for start in range(0, len(chunk), batch):
                embedder.embed(chunk[start : start + batch])
            seconds = time.perf_counter() - wall
            results[f"{threads} thread(s), {batch} texts per call"] = round(len(chunk) / seconds, 1)
    torch.set_num_threads(1)
    return {"texts_per_s": results, "text_chars": "100-300 (corpus.Corpus)"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--import-size", type=int, default=2000)
    parser.add_argument("--skip-minilm", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/write_costs.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-write-costs-"))
    harness.setup(workdir / "costs.db", embedder="hash")
    from corpus import Corpus
    from django.utils import timezone
    from history import make_history

    corpus = Corpus(args.seed)
    now = timezone.now()
    texts = [corpus.text() for _ in range(20_000)]
    output = {
        "benchmark": "write_costs",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "load_average_at_start": os.getloadavg(),
    }
    print("sqlite", flush=True)
    output["sqlite"] = sqlite_costs(texts)
    memories = make_history(corpus, args.memories, now=now, namespace="bench")
    from search import vectors

    chosen = vectors.VEC0_CHUNK_SIZE
    print("store", flush=True)
    output["store"] = [store_costs(memories, chosen)]
    # The same again in a second fresh store, with vec0's default chunk size.
    from django.core.management import call_command
    from django.db import connections

    connections.close_all()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{workdir / 'costs.db'}{suffix}").unlink(missing_ok=True)
    call_command("migrate", verbosity=0, interactive=False)
    output["store"].append(store_costs(memories, 1024))
    vectors.VEC0_CHUNK_SIZE = chosen
    print("remember and import", flush=True)
    output["remember"] = remember_costs(corpus, args.writes)
    output["import"] = import_costs(corpus, args.import_size, now)
    if not args.skip_minilm:
        print("minilm", flush=True)
        output["minilm"] = minilm_costs(texts)
    output["load_average_at_end"] = os.getloadavg()
    path = harness.save(output, args.output)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
