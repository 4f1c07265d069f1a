"""Before/after timings of each storage-side shortcut, on arrays the size of a 100k-memory store.

    .venv/bin/python benchmarks/storage_micro.py --output benchmarks/results/storage_micro.json

Each pair runs the old way (as of git 130ba25) and the new way on the same synthetic
data, and checks they give the same answer; times are medians of repeated runs, in ms of
process CPU time (the machine is shared, so wall time says more about the neighbours).

- postings to rows: ``np.unique`` over a common term's matches vs. summing into a dense array;
- a channel's top 200: ``np.lexsort`` of every match vs. partition-then-sort (engine._top_order);
- the snapshot after a write: concatenate and re-sort every column vs. insert the new rows;
- visibility: the rule over every row vs. the per-view cache keyed by where the point falls;
- the vector copy after a write: concatenate the matrix vs. append into its spare room;
- snippets: tokenizing every word of a hit vs. a word -> stem cache;
- the duplicate check on write (ORM): the visibility query for every write vs. first asking
  whether any row of the namespace has the hash (in a store of 2,000 memories).
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

ROWS = 135_000  # revisions in the 100k-memory store of latency.py
MATCHES = 100_000  # a common term's postings there (p95 of a query's reads: ~73k)


def cpu_ms(function, repeat=15):
    samples = []
    for _ in range(repeat):
        started = time.process_time()
        function()
        samples.append(time.process_time() - started)
    return round(statistics.median(samples) * 1000, 3)


def pair(before, after, repeat=15):
    return {"before_ms": cpu_ms(before, repeat), "after_ms": cpu_ms(after, repeat)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="benchmarks/results/storage_micro.json")
    args = parser.parse_args()
    import tempfile

    harness.setup(Path(tempfile.mkdtemp(prefix="memory-micro-")) / "micro.db", embedder="hash")
    from search import cosines, engine, snapshot, snippets, text

    rng = np.random.default_rng(0)
    results = {}

    # Postings -> rows of the view, counts summed per row.
    rows = rng.permutation(ROWS)[:MATCHES]
    tfs = rng.integers(1, 4, MATCHES).astype(np.float64)

    def unique_way():
        unique, inverse = np.unique(rows, return_inverse=True)
        return unique, tfs[np.argsort(rows, kind="stable")]

    def dense_way():
        dense = np.bincount(rows, weights=tfs, minlength=ROWS)
        unique = np.flatnonzero(dense)
        return unique, dense[unique]

    assert np.array_equal(unique_way()[0], dense_way()[0]) and np.array_equal(unique_way()[1], dense_way()[1])
    results["postings_to_rows (100k matches)"] = pair(unique_way, dense_way)

    # Top 200 of an "any" query: matched-term count, BM25, recency, then memory id.
    keys = (rng.permutation(MATCHES), -rng.random(MATCHES), -rng.random(MATCHES),
            -rng.integers(1, 4, MATCHES).astype(np.float64))
    assert np.array_equal(np.lexsort(keys)[:200], engine._top_order(keys, 200))
    results["channel_top_200 (100k matches, 4 keys)"] = pair(lambda: np.lexsort(keys)[:200],
                                                            lambda: engine._top_order(keys, 200))

    # The snapshot after one write: 135k sorted rows plus one.
    memory = np.sort(rng.integers(1, 100_000, ROWS))
    known = rng.integers(0, 10**15, ROWS)
    order = np.lexsort((np.arange(ROWS), known, memory))
    fields = {name: rng.integers(0, 10**15, ROWS) for name in snapshot._COLUMNS}
    fields.update(memory=memory[order], known=known[order], revision=np.arange(1, ROWS + 1)[order],
                  valid_from=known[order], valid_to=np.full(ROWS, snapshot.OPEN),
                  expires=np.where(rng.random(ROWS) < 0.08, known[order] + 10**13, snapshot.OPEN),
                  tombstone=rng.random(ROWS) < 0.02, namespace=np.zeros(ROWS, dtype=np.int32),
                  kind=np.zeros(ROWS, dtype=np.int32))
    old = snapshot.Columns(**fields)
    new = snapshot.Columns(**{name: np.array([10**15 + 1 if name in ("known", "valid_from") else 100_001
                                              if name == "memory" else ROWS + 1]) for name in snapshot._COLUMNS})
    new.tombstone = np.array([False])
    new.namespace = new.kind = np.zeros(1, dtype=np.int32)

    def resort():
        both = snapshot.Columns(*(np.concatenate([getattr(old, n), getattr(new, n)]) for n in snapshot._COLUMNS))
        order = np.lexsort((both.revision, both.known, both.memory))
        return snapshot.Columns(*(getattr(both, n)[order] for n in snapshot._COLUMNS))

    assert all(np.array_equal(getattr(resort(), n), getattr(snapshot._merged(old, new), n)) for n in snapshot._COLUMNS)
    results["snapshot_after_one_write (135k rows, 11 columns)"] = pair(resort, lambda: snapshot._merged(old, new))

    # Visibility at one point: the rule over every row, and the cached answer.
    view = snapshot.View(columns=old, position=np.zeros(1), namespaces=("bench",), kinds=("note",), max_id=ROWS,
                         anchor=None)
    point = int(np.median(old.known))
    view.visible_rows(as_of=point, valid_at=point)
    results["visible_rows (135k rows)"] = pair(lambda: view._visible_rows(as_of=point, valid_at=point,
                                                                         namespaces=None, kinds=None),
                                               lambda: view.visible_rows(as_of=point, valid_at=point))

    # The vector copy after one write: 131k x 384 float32 plus one row.
    matrix = rng.random((131_000, 384), dtype=np.float32)
    ids = np.arange(131_000)
    copy = cosines._VectorCopy()
    copy.stored = copy.room = cosines.quantize(ids, matrix)
    copy.stored = copy._append(cosines.quantize(np.array([131_000]), matrix[:1]))  # grows the room once
    row = matrix[:1]

    def append():
        copy.stored = copy._append(cosines.quantize(np.array([len(copy.stored.ids)]), row))

    results["vector_copy_after_one_write (131k x 384)"] = pair(
        lambda: (np.concatenate([ids, [0]]), np.concatenate([matrix, row])), append, repeat=7)

    # Snippets: ten hits of ~230 characters, their words seen before (the cache warm).
    from corpus import Corpus

    corpus = Corpus(1)
    hits = [corpus.text() for _ in range(10)]
    terms = text.clean_query("database cluster migrate").terms

    def uncached():
        snippets._stems.clear()
        for content in hits:
            snippets.highlight(content, terms)

    def cached():
        for content in hits:
            snippets.highlight(content, terms)

    cached()
    results["snippets_for_10_hits"] = pair(uncached, cached)

    # The duplicate check a write makes, before and after the exists() shortcut.
    from django.utils import timezone
    from history import bulk_load, make_history

    from memories import selectors, validation
    from memories.models import Memory, Revision

    stored = make_history(corpus, 2000, now=timezone.now(), namespace="bench")
    bulk_load(stored)

    def old_check(content_hash):
        revisions = Revision.objects.filter(memory__namespace="bench", content_hash=content_hash)
        shown = revisions.visible(as_of=timezone.now()).values("memory_id")
        return Memory.objects.filter(pk__in=shown).order_by("pk").first()

    new_hashes = [validation.content_hash(corpus.text()) for _ in range(50)]
    old_hashes = [validation.content_hash(memory.revisions[-1].content) for memory in stored[:50]
                  if not memory.revisions[-1].tombstone]
    for hashes, label in ((new_hashes, "new text"), (old_hashes, "text already stored")):
        assert [old_check(h) for h in hashes] == [selectors.visible_duplicate(namespace="bench", content_hash=h)
                                                 for h in hashes]
        timing = pair(lambda: [old_check(h) for h in hashes],
                      lambda: [selectors.visible_duplicate(namespace="bench", content_hash=h) for h in hashes],
                      repeat=5)
        results[f"duplicate_check_per_write ({label})"] = {name: round(value / len(hashes), 3)
                                                           for name, value in timing.items()}

    output = {"benchmark": "storage_micro", "command": " ".join(sys.argv), "environment": harness.environment(),
              "load_average": os.getloadavg(), "unit": "ms of process CPU time, median", "results": results}
    path = harness.save(output, args.output)
    for name, value in results.items():
        print(f"{name:50s} before {value['before_ms']:8.3f}  after {value['after_ms']:8.3f}")
    print(f"saved {path}")


if __name__ == "__main__":
    main()
