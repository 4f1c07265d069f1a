"""The proof that a word occurs in no text, which lets keyword recall skip its trigram search (search/substrings.py).

    .venv/bin/python benchmarks/substring_filter.py --db /tmp/latency/latency-100000.db \
        --output benchmarks/results/substring_filter.json

On a store written by ``latency.py --keep-db`` (``--db``), or else one of ``--size``
memories loaded here with the hash embedder (the table reads only text):

- the table: the time to build it from every revision's text (median of three), its
  size and the share of its bits set;
- words: ``--words`` made up by the corpus of another seed, and as many cut from stored
  texts (3-12 characters from anywhere in a text). For each, FTS5's trigram MATCH
  (as recall runs it; median of three) and the table's check. Every word the MATCH finds
  is checked to be one the table cannot prove absent; reported: how many of the words
  the MATCH does not find the table proves absent, and the time of each;
- keyword recall over ``--queries`` queries made as latency.py makes them, with the
  proof and without it (``substrings.absent`` answering nothing) in turn for each query,
  each after a pass over 64 MB (as latency.py's loop leaves the CPU caches after the
  int8 scan): p50 / p95, and the same answers both ways.
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=None, help="a latency.py store (else one of --size memories is loaded)")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/substring_filter.json")
    args = parser.parse_args()

    if args.db:
        harness.setup(Path(args.db), fresh=False)
    else:
        harness.setup(Path(tempfile.mkdtemp(prefix="memory-substrings-")) / "store.db")
    from django.db import connection
    from django.utils import timezone

    from corpus import Corpus
    from history import bulk_load, make_history
    from latency import make_queries
    from search import engine, snapshot, substrings, text

    if not args.db:
        started = time.perf_counter()
        bulk_load(make_history(Corpus(args.seed), args.size, now=timezone.now(), namespace="bench"), batch=5000)
        print(f"loaded {args.size:,} memories in {time.perf_counter() - started:.0f} s", flush=True)
    view = snapshot.current()
    with connection.cursor() as cursor:
        cursor.execute("SELECT content FROM memories_revision WHERE tombstone = 0")
        texts = [row[0] for row in cursor.fetchall()]

    hint = substrings._BYTES_PER_TOKEN * int(view.columns.ntok.sum())
    builds = []
    for _ in range(3):
        started = time.perf_counter()
        table = substrings._built(substrings._texts(0, view.max_id), hint)
        builds.append((time.perf_counter() - started) * 1000)
    result = {
        "revisions": len(view.columns.revision), "texts": len(texts),
        "table": {"build_ms_median": round(statistics.median(builds), 1), "text_mb": round(table.seen / 2**20, 1),
                  "bits": table.bits, "mb": round(table.packed.nbytes / 2**20, 1),
                  "share_of_bits_set": round(float(np.unpackbits(table.packed).mean()), 4)},
    }
    print(result["table"], flush=True)

    rng = random.Random(args.seed + 1)
    corpus = Corpus(args.seed + 1)
    made_up = sorted({corpus.word().lower() for _ in range(args.words * 4)})[:args.words]
    cut = []
    while len(cut) < args.words:
        body = rng.choice(texts)
        start, size = rng.randrange(len(body)), rng.randint(3, 12)
        word = body[start:start + size].lower()
        if len(word) >= 3 and word.isascii():
            cut.append(word)
    found, match_ms, check_ms = {}, {}, {}
    with connection.cursor() as cursor:
        for word in dict.fromkeys(made_up + cut):
            times = []
            for _ in range(3):
                started = time.perf_counter()
                cursor.execute("SELECT rowid FROM search_fts_trigram WHERE search_fts_trigram MATCH %s",
                               [text.fts5_quote(word)])
                rows = cursor.fetchall()
                times.append((time.perf_counter() - started) * 1000)
            found[word], match_ms[word] = len(rows), statistics.median(times)
            started = time.perf_counter()
            proven = not table.holds(word.encode())
            check_ms[word] = (time.perf_counter() - started) * 1000
            assert not (proven and found[word]), f"{word!r} was proven absent, but the MATCH found it"

    def share(words):
        absent = [word for word in words if not found[word]]
        proven = [word for word in absent if not table.holds(word.encode())]
        return {"words": len(words), "found_by_the_match": len(words) - len(absent), "absent": len(absent),
                "proven_absent": len(proven),
                "match_ms_p50_absent": round(statistics.median([match_ms[word] for word in absent]), 3)
                if absent else None,
                "match_ms_p95_absent": round(harness.percentile([match_ms[word] for word in absent], 0.95), 3)
                if absent else None}

    result["words"] = {"made_up": share(made_up), "cut_from_texts": share(cut),
                       "check_ms_p50": round(statistics.median(check_ms.values()), 4),
                       "check_ms_max": round(max(check_ms.values()), 4)}
    print(result["words"], flush=True)

    memories = [SimpleNamespace(revisions=[SimpleNamespace(content=body, tombstone=False)]) for body in texts]
    queries = make_queries(corpus, memories, args.queries, random.Random(args.seed + 2))
    real = substrings.absent
    flush = np.ones(64 * 2**20, dtype=np.uint8)

    def recall(query, use_proof):
        substrings.absent = real if use_proof else (lambda view, words: set())
        try:
            flush.sum()
            started = time.perf_counter()
            answer = engine.recall(query=query, mode="keyword", limit=10)
            return (time.perf_counter() - started) * 1000, [(hit.memory.id, hit.score) for hit in answer.hits]
        finally:
            substrings.absent = real

    for query in queries[:20]:
        recall(query, True)
        recall(query, False)
    searched = []  # queries with words the keyword channel found nowhere (the trigram channel's)
    trigram = engine._Search._trigram
    engine._Search._trigram = lambda search, words: searched.append(search) or trigram(search, words)
    samples = {True: [], False: []}
    for number, query in enumerate(queries):
        answers = {}
        for use_proof in ((True, False) if number % 2 else (False, True)):
            elapsed, answers[use_proof] = recall(query, use_proof)
            samples[use_proof].append(elapsed)
        assert answers[True] == answers[False], query
    engine._Search._trigram = trigram
    result["keyword_recall"] = {
        "queries": len(queries),
        "with_words_the_keyword_channel_lacks": len(searched) // 2,
        **{f"{'with' if use_proof else 'without'}_the_proof_ms": {
            "p50": round(statistics.median(values), 2), "p95": round(harness.percentile(values, 0.95), 2)}
           for use_proof, values in samples.items()},
    }
    print(result["keyword_recall"], flush=True)
    path = harness.save({"benchmark": "substring_filter", "command": " ".join(["benchmarks/substring_filter.py"]
                                                                              + sys.argv[1:]), **result},
                        Path(args.output))
    print(f"saved {path}")


if __name__ == "__main__":
    main()
