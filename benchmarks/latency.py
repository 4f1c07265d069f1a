"""Latency of recall, remember and bulk import at 1k / 10k / 100k memories, beside the raw floors.

    .venv/bin/python benchmarks/latency.py --sizes 1000,10000,100000 --embedder minilm \
        --output benchmarks/results/latency-minilm.json

    .venv/bin/python benchmarks/latency.py --sizes 100000 --embedder minilm \
        --database sqlite --database postgresql --output benchmarks/results/latency-engines.json

Per size (and per ``--database``, each in a process of its own, one after the other), in
one fresh database with one namespace: a SQLite file, or on PostgreSQL a database of its
own (``postgresql``: on a throwaway cluster this script starts with PostgreSQL's default
durability; a ``postgresql://`` URL: on that server, which must let the URL's user create
databases; ``memory_latency_<size>`` is dropped first and at the end). Given both, the
saved result adds each size's PostgreSQL-over-SQLite ratios and the goals they are held to.

1. a seeded two-year history (``history.make_history``: later revisions, bounded
   corrections, tombstones, TTLs; natural-looking Zipfian text, 100-300 characters) is
   written by ``history.bulk_load`` (plain INSERTs, then ``search.indexing.index_revisions``
   per batch of 5,000 memories). Stored vectors come from the hash embedder, or with
   ``--embedder minilm`` from MiniLM itself up to ``--real-embed-max`` memories. Above
   that, loading 100k with MiniLM would take ~20 minutes of embedding, so the hash
   vectors are stored and the embedding space is relabelled as MiniLM's: queries and
   writes then embed with the real model through the engine's own code, and every
   timing is real, but cosines between a MiniLM query and hash vectors mean nothing
   (only the timings of such a run are meaningful). The JSON records which was done.
2. recall is timed for each query in keyword, semantic and hybrid mode, now and as of a
   year back, beside the floors measured on the same data in the same loop: a bare read
   of the posting rows of the query's words (``floor_postings_read``, on either engine),
   and on SQLite a bare FTS5
   ``MATCH ... ORDER BY rank LIMIT 10`` on ``search_fts_words`` (the query's words
   quoted and joined by OR, and by AND), a bare sqlite-vec KNN
   (``search.vectors.vec0_knn``, k=10, query vector precomputed), numpy's scan of the
   float32 matrix (PostgreSQL has neither FTS5 nor vec0). Hybrid is also timed
   with the query vector precomputed, and the query embedding alone, so its share shows.
   In that loop every recall follows a scan of every vector, which leaves the CPU caches
   cold; keyword recall is timed once more query after query (``keyword_now_back_to_back``),
   so what the interleaving costs shows. numpy's float32 scan is timed last, in a pass of
   its own.
3. remember: single writes through ``memory_remember`` with the configured embedder,
   each followed by a keyword and a hybrid recall (the read-after-write case, which pays
   for refreshing the per-process caches).
4. bulk import: ``memories_import`` (trusted, the path ``manage.py import_memories``
   takes) of ``--import-size`` new memories, in memories per second.

5. concurrent: ``--writers`` threads remembering and ``--readers`` threads recalling
   (hybrid) at once, each with its own connection, as a server's request threads are:
   calls per second, latency, and how often a per-process cache was rebuilt from
   scratch (never, with nothing erased).
6. over HTTP: the server as ``make run`` starts it (uvicorn, one worker) on the same file,
   with an admin-scope API key and throttling off; one keep-alive connection from this
   process. Keyword and hybrid recall (``POST /api/v1/recall/``) and remember
   (``POST /api/v1/memories/``) are timed, each beside the same call in-process in the
   same loop (alternating), and the difference of the p50s is the HTTP cost (target:
   at most 5 ms). Client and server share the two cores.
"""

import argparse
import datetime as dt
import gc
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

# Issue 31: PostgreSQL beside SQLite at 100k, p50 over p50.
POSTGRESQL_GOALS = {"keyword_now": 1.5, "hybrid_now": 1.5, "remember": 2.0}
TARGETS_100K = {
    "hybrid_now_incl_embedding_p50_ms": 20.0,
    "hybrid_now_incl_embedding_p95_ms": 35.0,
    "keyword_now_p95_ms": 5.0,
    "hybrid_historical_p95_ms": 50.0,
    "remember_with_embedding_p50_ms": 20.0,
    "bulk_import_minilm_per_s": 300.0,
    "bulk_import_hash_per_s": 3000.0,
    "http_minus_in_process_p50_ms": 5.0,
}
MINILM_NAME = "all-MiniLM-L6-v2"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    parser.add_argument("--queries", type=int, default=200, help="queries per size")
    parser.add_argument("--writes", type=int, default=100, help="single remembers per size")
    parser.add_argument("--writers", type=int, default=4, help="writer threads in the concurrent section")
    parser.add_argument("--readers", type=int, default=2, help="hybrid-recall threads in the concurrent section")
    parser.add_argument("--import-size", type=int, default=2000, help="memories per bulk import")
    parser.add_argument("--http-queries", type=int, default=100, help="queries (and writes, at most) over HTTP")
    parser.add_argument(
        "--real-embed-max",
        type=int,
        default=10_000,
        help="with --embedder minilm, sizes up to this store real MiniLM vectors",
    )
    parser.add_argument("--load-batch", type=int, default=5000, help="memories per bulk-load transaction")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--database",
        action="append",
        default=None,
        help="sqlite (the default), postgresql (a throwaway cluster), or a postgresql:// URL whose "
        "user may create databases; give it twice to run each size on both",
    )
    parser.add_argument("--db-dir", default=None, help="where the benchmark databases go (default: a temp dir)")
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="set OPENBLAS_NUM_THREADS for the measuring process (default: leave numpy's default)",
    )
    parser.add_argument("--label", default=None, help="what code was measured, saved with the results")
    parser.add_argument("--output", default=None)
    return parser.parse_args()


def make_queries(corpus, memories, count, rng):
    """Queries as an agent asks them: 2-4 words from a stored memory's text (70%) or from the vocabulary (30%)."""
    from search.text import _filler_words

    filler = _filler_words()
    texts = [revision.content for memory in memories for revision in memory.revisions if not revision.tombstone]
    queries = []
    while len(queries) < count:
        size = rng.randint(2, 4)
        if rng.random() < 0.7:
            words = [word for word in corpus.query_words(rng.choice(texts), size + 3) if word not in filler][:size]
        else:
            words = []
            while len(words) < size:
                word = corpus.word().lower()
                if word not in filler and word not in words:
                    words.append(word)
        if len(words) >= 2:
            queries.append(" ".join(words))
    return queries


def postings_floor(cursor, terms):
    """The bare read of ``terms``' posting rows, packed and tail (two statements, as search reads them): no decoding."""
    marks = ", ".join(["%s"] * len(terms))
    cursor.execute(f"SELECT revision_ids, tfs FROM search_posting WHERE term IN ({marks})", terms)
    packed = cursor.fetchall()
    cursor.execute(f"SELECT revision_id, tf FROM search_posting_tail WHERE term IN ({marks})", terms)
    return packed, cursor.fetchall()


def fts5_floor(cursor, words, joiner):
    from search.text import fts5_quote

    query = joiner.join(fts5_quote(word) for word in words)
    # The bare floor: FTS5's own ranking over every row it holds, no visibility, no fusion.
    cursor.execute("SELECT rowid FROM search_fts_words WHERE search_fts_words MATCH %s ORDER BY rank LIMIT 10", [query])
    return cursor.fetchall()


def ratio(value, floor):
    return round(value / floor, 2) if floor else None


def fresh_database(server_url: str, name: str, *, drop_only: bool = False) -> str:
    """The URL of database ``name`` on the server at ``server_url``, dropped and made anew (or only dropped)."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:  # CREATE DATABASE runs outside a transaction
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            admin.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


def run_size(size, args, corpus_seed, database="sqlite"):
    from corpus import Corpus
    from history import bulk_load, import_document, make_history

    db_dir = Path(args.db_dir) if args.db_dir else Path(tempfile.mkdtemp(prefix="memory-latency-"))
    db_path = db_dir / f"latency-{size}.db"
    real_vectors = args.embedder == "minilm" and size <= args.real_embed_max
    load_embedder = "minilm" if real_vectors else "hash"
    database_url = None if database == "sqlite" else fresh_database(database, f"memory_latency_{size}")
    harness.setup(db_path, embedder=load_embedder, database_url=database_url)

    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from memories.selectors import memory_recall
    from memories.services import memories_import, memory_remember
    from memoryproject import dialect
    from search import cosines, postings, snapshot, text, vectors
    from search.embeddings import get_embedder, warm_up

    result = {"size": size, "engine": dialect.engine(), "load_average_at_start": os.getloadavg()}
    rng = random.Random(args.seed * 1000 + size)
    corpus = Corpus(corpus_seed)
    now = timezone.now()
    memories = make_history(corpus, size, now=now, namespace="bench")
    revision_count = sum(len(memory.revisions) for memory in memories)

    start = time.perf_counter()
    bulk_load(
        memories,
        batch=args.load_batch,
        progress=lambda done, total: print(
            f"  loaded {done}/{total} memories ({time.perf_counter() - start:.0f} s)", flush=True
        ),
    )
    load_seconds = time.perf_counter() - start
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_posting_tail")
        tail_rows = cursor.fetchone()[0]
        cursor.execute("SELECT count(DISTINCT term), sum(length(revision_ids)) FROM search_posting")
        terms, posting_bytes = cursor.fetchone()
    result["corpus"] = {
        "memories": size,
        "revisions": revision_count,
        "tombstones": sum(revision.tombstone for memory in memories for revision in memory.revisions),
        "with_ttl": sum(memory.revisions[0].expires_at is not None for memory in memories),
        "bounded_corrections": sum(
            revision.valid_to is not None for memory in memories for revision in memory.revisions
        ),
        "namespaces": 1,
        "terms": terms,
        "packed_posting_ids": (posting_bytes or 0) // 4,
        "tail_rows": tail_rows,
        "database_mb": round(dialect.size_bytes() / 2**20, 1),
    }
    result["load"] = {
        "how": f"history.bulk_load: plain INSERTs + search.indexing.index_revisions per {args.load_batch:,} "
        "memories (not the import service; see bulk_import for that)",
        "stored_vectors": "MiniLM (real)" if real_vectors else "hash embedder (hash-v1)",
        "seconds": round(load_seconds, 1),
        "revisions_per_s": round(revision_count / load_seconds, 1),
    }
    if args.embedder == "minilm" and not real_vectors:
        with connection.cursor() as cursor:
            # Relabel: the engine then embeds queries and writes with the real model (see the module docstring).
            cursor.execute("UPDATE search_embedding_space SET embedder = %s WHERE id = 1", [MINILM_NAME])
        result["load"]["relabelled_as"] = MINILM_NAME
        result["load"]["note"] = (
            "stored vectors are hash-embedder vectors relabelled as MiniLM's; queries and "
            "writes embed with real MiniLM, so timings are real but cosines are meaningless"
        )
    settings.MEMORY_EMBEDDER = args.embedder
    embedder = get_embedder()
    warm_up()  # as the servers do at start: loads the model, builds and times its one-text pipelines

    # Cold start: the first recall loads the snapshot, the vector matrix, and the snapshot's sorted times.
    rss_before = harness.current_rss_mb()
    _, snapshot_seconds = harness.timed(snapshot.current)
    _, first_seconds = harness.timed(memory_recall, query="warm up", mode="semantic")
    held = cosines._copies[dialect.database_key()].partitions.values()
    stored = cosines.namespace_vectors(snapshot.current(), ["bench"]).parts[0]  # the one namespace: every vector
    # A word no text holds: the keyword channel finds nothing, the trigram channel searches for it.
    _, absent_seconds = harness.timed(memory_recall, query="qzxwvkjplmbq", mode="keyword")
    result["cold"] = {
        "snapshot_load_ms": round(snapshot_seconds * 1000, 1),
        "first_semantic_recall_ms (loads the vector matrix)": round(first_seconds * 1000, 1),
        "first_keyword_recall_with_a_word_no_text_holds_ms": round(absent_seconds * 1000, 1),
        "rss_growth_mb": round(harness.current_rss_mb() - rss_before, 1),
        "vector_matrix_mb": round(sum(partition.stored.matrix.nbytes for partition in held) / 2**20, 1),
        "snapshot_columns_mb": round(
            sum(getattr(snapshot.current().columns, name).nbytes for name in snapshot._COLUMNS) / 2**20, 1
        ),
    }

    queries = make_queries(corpus, memories, args.queries, rng)
    historical = now - dt.timedelta(days=365)
    sqlite = not dialect.is_postgresql()
    names = (
        "floor_postings_read",
        *(("floor_fts5_or", "floor_fts5_and", "floor_vec0_knn") if sqlite else ()),
        "floor_numpy_matrix_scan",
        "query_embedding",
        "keyword_now",
        "semantic_now",
        "hybrid_now",
        "hybrid_now_excl_embedding",
        "keyword_historical",
        "semantic_historical",
        "hybrid_historical",
        "hybrid_historical_excl_embedding",
    )
    samples = {name: [] for name in names}
    hits = {"keyword_now": 0, "hybrid_now": 0, "keyword_historical": 0}
    postings_per_query = []
    embedded = {}  # query -> its vector, for the float32 floor timed after the loop
    for query in queries:  # warm-up pass, not recorded; counts the postings each query reads
        memory_recall(query=query, mode="hybrid", limit=10)
        terms_ranges = [
            postings.term_ranges("bench", token.stem, token.prefix) for token in text.clean_query(query).terms
        ]
        read = postings.read_terms(terms_ranges, max_id=snapshot.current().max_id)
        postings_per_query.append(sum(len(ids) for ids, _ in read))
    gc.collect()
    with connection.cursor() as cursor:
        for query in queries:
            words = query.split()
            terms = [postings.key("bench", token.stem) for token in text.clean_query(query).terms]
            samples["floor_postings_read"].append(harness.measured(postings_floor, cursor, terms)[1:])
            if sqlite:
                samples["floor_fts5_or"].append(harness.measured(fts5_floor, cursor, words, " OR ")[1:])
                samples["floor_fts5_and"].append(harness.measured(fts5_floor, cursor, words, " ")[1:])
            vector, *times = harness.measured(embedder.embed_query, query)
            samples["query_embedding"].append(times)
            embedded[query] = vector
            if sqlite:
                samples["floor_vec0_knn"].append(harness.measured(vectors.vec0_knn, vector, k=10)[1:])
            for label, as_of in (("now", None), ("historical", historical)):
                for mode in ("keyword", "semantic", "hybrid"):
                    answer, *times = harness.measured(memory_recall, query=query, mode=mode, limit=10, as_of=as_of)
                    samples[f"{mode}_{label}"].append(times)
                    if f"{mode}_{label}" in hits and answer.hits:
                        hits[f"{mode}_{label}"] += 1
                # The same hybrid recall with the query vector precomputed (a cache the engine does not have).
                embedder.embed_query = lambda text, vector=vector: vector
                try:
                    samples[f"hybrid_{label}_excl_embedding"].append(
                        harness.measured(memory_recall, query=query, mode="hybrid", limit=10, as_of=as_of)[1:]
                    )
                finally:
                    del embedder.embed_query
    # Keyword recall again, query after query with nothing between: above, each one follows a
    # scan of every vector, which leaves the CPU caches cold.
    samples["keyword_now_back_to_back"] = [
        harness.measured(memory_recall, query=query, mode="keyword", limit=10)[1:] for query in queries
    ]
    # numpy's float32 scan (BLAS) last, in a pass of its own.
    samples["floor_numpy_matrix_scan"] = [
        harness.measured(stored.matrix.__matmul__, embedded[query])[1:] for query in queries
    ]
    recall = {name: harness.summary(values) for name, values in samples.items()}
    floor_postings = recall["floor_postings_read"]["p50_ms"]
    floor_or, floor_and, floor_knn = (
        recall[name]["p50_ms"] if name in recall else None
        for name in ("floor_fts5_or", "floor_fts5_and", "floor_vec0_knn")
    )
    for name, stats in recall.items():
        if name.startswith(("keyword", "hybrid")):
            stats["p50_over_postings_read_floor"] = ratio(stats["p50_ms"], floor_postings)
        if sqlite and name.startswith(("keyword", "hybrid")):
            stats["p50_over_fts5_or_floor"] = ratio(stats["p50_ms"], floor_or)
            stats["p50_over_fts5_and_floor"] = ratio(stats["p50_ms"], floor_and)
        if sqlite and name.startswith(("semantic", "hybrid")):
            stats["p50_over_vec0_floor"] = ratio(stats["p50_ms"], floor_knn)
            stats["p50_over_vec0_plus_embedding"] = ratio(
                stats["p50_ms"], floor_knn + recall["query_embedding"]["p50_ms"]
            )
    result["recall"] = recall
    ordered = sorted(postings_per_query)
    result["queries"] = {
        "count": len(queries),
        "examples": queries[:8],
        "limit": 10,
        "match": "auto",
        "historical_as_of": "now - 365 days",
        "postings_read_per_query": {"p50": ordered[len(ordered) // 2], "p95": ordered[int(len(ordered) * 0.95)]},
        "share_with_hits": {name: round(count / len(queries), 3) for name, count in hits.items()},
    }
    result["stages_cpu_ms_per_recall"] = {mode: stage_costs(queries[:50], mode=mode) for mode in ("keyword", "hybrid")}

    # Single writes, each followed by recalls that must see it (the per-process caches refresh).
    write_samples = {"remember": [], "keyword_after_write": [], "hybrid_after_write": []}
    for number in range(args.writes):
        content = corpus.text()
        write_samples["remember"].append(
            harness.measured(
                memory_remember, namespace="bench", content=content, key=f"w{number}", actor="bench", interface="cli"
            )[1:]
        )
        query = " ".join(corpus.query_words(content, 3))
        write_samples["keyword_after_write"].append(
            harness.measured(memory_recall, query=query, mode="keyword", limit=10)[1:]
        )
        memory_remember(namespace="bench", content=corpus.text(), key=f"v{number}", actor="bench", interface="cli")
        write_samples["hybrid_after_write"].append(
            harness.measured(memory_recall, query=query, mode="hybrid", limit=10)[1:]
        )
    # The same single writes without the near-duplicate check (a scan of the namespace's vectors).
    write_samples["remember_without_near_duplicate_check"] = []
    threshold = settings.MEMORY_NEAR_DUPLICATE_COSINE
    settings.MEMORY_NEAR_DUPLICATE_COSINE = 1.01  # above 1: off
    try:
        for number in range(args.writes):
            write_samples["remember_without_near_duplicate_check"].append(
                harness.measured(
                    memory_remember,
                    namespace="bench",
                    content=corpus.text(),
                    key=f"n{number}",
                    actor="bench",
                    interface="cli",
                )[1:]
            )
    finally:
        settings.MEMORY_NEAR_DUPLICATE_COSINE = threshold
    result["writes"] = {name: harness.summary(values) for name, values in write_samples.items()}
    result["writes"]["embedder"] = embedder.name
    # What folding the postings tail costs here (a write triggers it every COMPACT_AFTER tail rows).
    from django.db import transaction

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_posting_tail")
        tail_rows = cursor.fetchone()[0]
    with transaction.atomic():
        terms_rewritten, wall, cpu = harness.measured(postings.compact)
    result["writes"]["compaction"] = {
        "tail_rows": tail_rows,
        "terms_rewritten": terms_rewritten,
        "ms": round(wall * 1000, 1),
        "cpu_ms": round(cpu * 1000, 1),
        "compact_after_rows": postings.COMPACT_AFTER,
    }

    result["concurrent"] = concurrent_latency(args, corpus, queries)
    result["http"] = http_latency(db_path, database_url, args, queries[: args.http_queries], corpus)

    # Bulk import through the service (trusted: recorded times, revisions and tombstones replayed).
    extra = make_history(corpus, args.import_size, now=now, namespace="bench", key_prefix="import-")
    document = import_document(extra)
    extra_revisions = sum(len(memory.revisions) for memory in extra)
    report, wall, cpu = harness.measured(
        memories_import, document=document, actor="bench", interface="cli", trusted=True
    )
    result["bulk_import"] = {
        "path": "memories.services.memories_import(trusted=True)",
        "embedder": embedder.name,
        "memories": args.import_size,
        "revisions": extra_revisions,
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "memories_per_s": round(args.import_size / wall, 1),
        "revisions_per_s": round(extra_revisions / wall, 1),
        "report": report.as_dict(),
    }
    result["load_average_at_end"] = os.getloadavg()
    result["process"] = {"peak_rss_mb": harness.peak_rss_mb(), "rss_mb": harness.current_rss_mb()}
    from django.db import connections

    connections.close_all()
    if not args.keep_db:
        if database_url:
            fresh_database(database, f"memory_latency_{size}", drop_only=True)
        for path in db_dir.glob(f"{db_path.name}*"):
            path.unlink()
    return result


def concurrent_latency(args, corpus, queries: list[str]) -> dict:
    """Writers and readers at once in one process, as a server's threads are: throughput, latency, reloads.

    ``--writers`` threads each remember ``--writes`` / 4 new memories (near-duplicate
    check on) while ``--readers`` threads each run that many hybrid recalls, all
    released together. Every thread has its own database connection. Counted: how
    often a per-process cache was rebuilt from scratch (the snapshot from row 0, the
    vector copy from vector 0): with nothing erased, never should be.
    """
    import threading

    from django.db import connection

    from memories.selectors import memory_recall
    from memories.services import memory_remember
    from search import snapshot, vectors

    per_thread = max(1, args.writes // 4)
    reloads = {"snapshot_from_row_0": 0, "vector_copy_from_vector_0": 0}
    real_extend, real_start_over = snapshot._extend, vectors.vector_state

    def extend(view, *, after, shared=False):
        reloads["snapshot_from_row_0"] += after == 0
        return real_extend(view, after=after, shared=shared)

    def start_over():
        reloads["vector_copy_from_vector_0"] += 1
        return real_start_over()

    texts = [[corpus.text() for _ in range(per_thread)] for _ in range(args.writers)]
    times = {"remember": [], "hybrid_recall": []}
    failures = []
    start = threading.Barrier(args.writers + args.readers)

    def run(kind, calls):
        try:
            start.wait()
            for call in calls:
                times[kind].append(harness.timed(call)[1])
        except Exception as error:  # reported, not raised: the other threads still finish
            failures.append(f"{kind}: {type(error).__name__}: {error}")
        finally:
            connection.close()

    threads = [
        threading.Thread(
            target=run,
            args=(
                "remember",
                [
                    lambda text=text: memory_remember(namespace="bench", content=text, actor="bench", interface="cli")
                    for text in batch
                ],
            ),
        )
        for batch in texts
    ]
    threads += [
        threading.Thread(
            target=run,
            args=(
                "hybrid_recall",
                [
                    lambda query=query: memory_recall(query=query, mode="hybrid", limit=10)
                    for query in queries[reader :: args.readers][:per_thread]
                ],
            ),
        )
        for reader in range(args.readers)
    ]
    snapshot._extend, vectors.vector_state = extend, start_over
    try:
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
    finally:
        snapshot._extend, vectors.vector_state = real_extend, real_start_over
    return {
        "writers": args.writers,
        "readers": args.readers,
        "calls_per_thread": per_thread,
        "seconds": round(wall, 2),
        "remembers_per_s": round(len(times["remember"]) / wall, 1),
        "recalls_per_s": round(len(times["hybrid_recall"]) / wall, 1),
        **{name: harness.summary_ms(values) for name, values in times.items()},
        "full_reloads": reloads,
        "failures": failures,
    }


def http_latency(db_path: Path, database_url: str | None, args, queries: list[str], corpus) -> dict:
    """Recall and remember over the REST API beside the same calls in-process (see the module docstring)."""
    import http.client
    import json
    import socket
    from urllib.parse import urlsplit

    from django.db import connection

    from memories.selectors import memory_recall
    from memories.services import memory_remember
    from memories.services.keys import api_key_create
    from tests.subprocesses import serve

    _, key = api_key_create(name="latency benchmark", scopes=["read", "write", "admin"], actor="bench", interface="cli")
    connection.close()  # the server process writes too; this one reopens on its next query
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMORY_")}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        MEMORY_DATA_DIR=str(db_path.parent),
        MEMORY_DB_PATH=str(db_path),
        MEMORY_EMBEDDER=args.embedder,
        MEMORY_API_READS_PER_MINUTE="0",
        MEMORY_API_WRITES_PER_MINUTE="0",
        MEMORY_LOG_LEVEL="ERROR",
        **({"MEMORY_DATABASE_URL": database_url} if database_url else {}),
    )
    samples = {
        name: []
        for name in (
            "keyword_in_process",
            "keyword_http",
            "hybrid_in_process",
            "hybrid_http",
            "remember_in_process",
            "remember_http",
        )
    }
    with serve(env, timeout=300) as base:
        url = urlsplit(base)
        client = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        client.connect()
        # As urllib3 and httpx do: http.client sends headers and body in two writes, and Nagle's
        # algorithm would hold the second until the server's delayed ACK (40 ms on Linux).
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

        def post(path: str, body: dict) -> dict:
            client.request("POST", path, body=json.dumps(body), headers=headers)
            response = client.getresponse()
            payload = json.loads(response.read())
            if response.status >= 300:
                raise RuntimeError(f"{path} answered {response.status}: {payload}")
            return payload

        for query in queries:  # warm-up: the server loads its snapshot and vector matrix
            post("/api/v1/recall/", {"query": query, "mode": "hybrid", "limit": 10})
        for query in queries:
            for mode in ("keyword", "hybrid"):
                samples[f"{mode}_in_process"].append(
                    harness.measured(memory_recall, query=query, mode=mode, limit=10)[1:]
                )
                samples[f"{mode}_http"].append(
                    harness.measured(post, "/api/v1/recall/", {"query": query, "mode": mode, "limit": 10})[1:]
                )
        for number in range(min(args.writes, len(queries))):
            samples["remember_in_process"].append(
                harness.measured(
                    memory_remember,
                    namespace="bench",
                    content=corpus.text(),
                    key=f"hp{number}",
                    actor="bench",
                    interface="cli",
                )[1:]
            )
            samples["remember_http"].append(
                harness.measured(
                    post, "/api/v1/memories/", {"namespace": "bench", "content": corpus.text(), "key": f"hh{number}"}
                )[1:]
            )
        client.close()
    result = {
        "how": "uvicorn memoryproject.asgi:application (one worker) on the same database; one keep-alive "
        "connection; each HTTP call alternates with the same call in-process",
        **{name: harness.summary(values) for name, values in samples.items()},
    }
    for name in ("keyword", "hybrid", "remember"):
        # Wall time only: the server's CPU is spent in another process.
        result[f"{name}_http_minus_in_process_p50_ms"] = round(
            result[f"{name}_http"]["p50_ms"] - result[f"{name}_in_process"]["p50_ms"], 3
        )
    return result


def stage_costs(queries, *, mode):
    """CPU ms per recall spent in each stage of search, over ``queries`` (wrapped, so a separate pass).

    Process CPU: a stage counts what helper threads spend while it runs. In hybrid mode
    the query is embedded on a helper thread beside the word channels, so those count part
    of the embedding, and the cosine stage the wait for the vector.
    """
    from memories.selectors import memory_recall
    from search import channels, engine, fusion, hits, snapshot, text

    spent, originals = {}, []

    def wrap(owner, name, label):
        function = getattr(owner, name)

        def timed_stage(*args, **kwargs):
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - started

        originals.append((owner, name, function))
        setattr(owner, name, timed_stage)

    for owner, name, label in (
        (engine, "rank", "total"),
        (text, "clean_query", "query cleanup"),
        (snapshot, "current", "snapshot refresh"),
        (snapshot.View, "visible_rows", "visibility"),
        (channels, "words", "word channels (BM25 over postings)"),
        (engine, "_cosines", "query vector and cosine scan"),
        (channels, "vector", "vector channel"),
        (fusion, "fuse", "fusion"),
        (hits, "hits", "hits (rows, snippets)"),
    ):
        wrap(owner, name, label)
    try:
        for query in queries:
            memory_recall(query=query, mode=mode, limit=10)
    finally:
        for owner, name, function in originals:
            setattr(owner, name, function)
    return {label: round(seconds * 1000 / len(queries), 3) for label, seconds in spent.items()}


def main():
    args = parse_args()
    if args.blas_threads is not None:
        # Read by OpenBLAS when numpy is first imported, which happens after this.
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    sizes = [int(size) for size in args.sizes.split(",")]
    databases = args.database or ["sqlite"]
    for database in databases:
        if database not in ("sqlite", "postgresql") and not database.startswith(("postgresql://", "postgres://")):
            sys.exit(f"--database {database!r}: give sqlite, postgresql, or a postgresql:// URL")
    cluster = None
    if "postgresql" in databases:
        from tests.postgres import Cluster, missing

        if missing():
            sys.exit(f"--database postgresql: {missing()}; install Debian's postgresql package")
        cluster = Cluster(durable=True)
        databases = [cluster.url() if database == "postgresql" else database for database in databases]
    try:
        if len(sizes) * len(databases) > 1:
            # One process per size and engine, so no cache or model state leaks between runs (and Django is set
            # up once each), one after the other so they never share the CPUs.
            results = [run_apart(size, database, args) for size in sizes for database in databases]
        else:
            print(f"size {sizes[0]} on {databases[0].split('@')[-1]}", flush=True)
            results = [run_size(sizes[0], args, corpus_seed=args.seed, database=databases[0])]
    finally:
        if cluster is not None:
            cluster.stop()
    output = combine(results, args)
    path = harness.save(output, args.output or f"benchmarks/results/latency-{args.embedder}.json")
    print(f"saved {path}")


def run_apart(size, database, args) -> dict:
    """``run_size`` in a child process of its own; its result."""
    import json
    import subprocess

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        part = handle.name
    command = [
        sys.executable,
        __file__,
        "--sizes",
        str(size),
        "--database",
        database,
        "--output",
        part,
        *[
            item
            for name in (
                "embedder",
                "queries",
                "writes",
                "writers",
                "readers",
                "import_size",
                "http_queries",
                "real_embed_max",
                "seed",
                "db_dir",
            )
            if getattr(args, name) is not None
            for item in (f"--{name.replace('_', '-')}", str(getattr(args, name)))
        ],
        *(["--keep-db"] if args.keep_db else []),
    ]
    subprocess.run(command, check=True)
    result = json.loads(Path(part).read_text())
    Path(part).unlink()
    return result


def combine(sizes, args):
    from harness import environment

    runs = [size for part in sizes for size in (part.get("sizes") or [part])]
    ratios = engine_ratios(runs)
    return {
        "benchmark": "latency",
        "command": " ".join(sys.argv),
        "label": args.label,
        "embedder": args.embedder,
        "seed": args.seed,
        "environment": environment(),
        "blas_threads": args.blas_threads or "numpy default (OpenBLAS: one per core)",
        "targets_at_100k": TARGETS_100K,
        "sizes": runs,
        **({"postgresql_over_sqlite": ratios} if ratios else {}),
    }


def engine_ratios(runs: list[dict]) -> list[dict]:
    """Per size run on both engines: PostgreSQL's p50 over SQLite's, held to POSTGRESQL_GOALS (import: SQLite's rate
    over PostgreSQL's, so above 1 is slower there too)."""
    by_size = {}
    for run in runs:
        by_size.setdefault(run["size"], {})[run.get("engine", "sqlite").split()[0]] = run
    ratios = []
    for size, engines in sorted(by_size.items()):
        if not {"sqlite", "postgresql"} <= engines.keys():
            continue
        lite, pg = engines["sqlite"], engines["postgresql"]
        measured = {
            name: round(pg["recall"][name]["p50_ms"] / lite["recall"][name]["p50_ms"], 2)
            for name in ("keyword_now", "semantic_now", "hybrid_now", "hybrid_historical", "floor_postings_read")
        }
        measured["remember"] = round(pg["writes"]["remember"]["p50_ms"] / lite["writes"]["remember"]["p50_ms"], 2)
        measured["hybrid_http"] = round(pg["http"]["hybrid_http"]["p50_ms"] / lite["http"]["hybrid_http"]["p50_ms"], 2)
        measured["remember_http"] = round(
            pg["http"]["remember_http"]["p50_ms"] / lite["http"]["remember_http"]["p50_ms"], 2
        )
        measured["bulk_import_time"] = round(
            lite["bulk_import"]["memories_per_s"] / pg["bulk_import"]["memories_per_s"], 2
        )
        ratios.append(
            {
                "size": size,
                "p50_ratios": measured,
                "goals": {
                    name: {"at_most": limit, "met": measured[name] <= limit} for name, limit in POSTGRESQL_GOALS.items()
                },
            }
        )
    return ratios


if __name__ == "__main__":
    main()
