"""What hybrid fusion costs per recall at 10k and 100k rows, against the rank fusion it replaced.

    .venv/bin/python benchmarks/fusion_cost.py [--output benchmarks/results/fusion_cost.json]

Times ``search.engine._fuse`` alone (no database, no embedding) on synthetic channel
outputs of the shape ``recall`` hands it: BM25 for the rows some query word matched,
a cosine for every row, one namespace or eight. Two mixes: "broad" (5% of rows match a
word, ~16% have a cosine over the floor, like a query against varied notes) and "chat"
(77% match a word, the speaker's name, and ~70% are over the floor, as measured on
LoCoMo's turns). ``latency.py`` measures whole recalls; this isolates the fusion step,
beside the step it replaced (RRF over each channel's top 200, given those rankings, which
``recall`` builds either way).
"""

import argparse
import os
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MIXES = {"broad": (0.05, 0.10), "chat": (0.77, 0.30)}  # share matching a word, mean cosine (sd 0.1)


def synthetic(size: int, namespaces: int, mix: str, seed: int = 0):
    from search import engine

    matched_share, mean_cosine = MIXES[mix]
    rng = np.random.default_rng(seed)
    terms = 4
    matched = rng.random((terms, size)) < matched_share / 2
    matched[0] |= rng.random(size) < matched_share  # the name every turn of one speaker holds
    idf = np.array([0.1, 2.0, 3.0, 4.0])
    view = types.SimpleNamespace(columns=types.SimpleNamespace(
        namespace=(np.arange(size) * namespaces // size).astype(np.int32), memory=np.arange(size, dtype=np.int64)))
    search = types.SimpleNamespace(
        view=view, eligible=np.ones(size, dtype=bool), matched=matched, bm25=(matched * idf[:, None]).sum(axis=0),
        matched_idf=(matched * idf[:, None]).sum(axis=0), idf_total=float(idf.sum()), keyword_rows=matched.any(axis=0),
        bigram=np.zeros(size), bigram_matched_idf=np.zeros(size), bigram_idf_total=0.0, trigram=np.zeros(size),
        match_counts=matched.sum(axis=0, dtype=np.uint16), _vector_candidates=None,
        ensure_scored=lambda rows=None: None)  # every row's BM25 is given here
    search.found_by_words = lambda: engine._Search.found_by_words(search)
    search.vector_candidates = lambda cosines, floor: engine._Search.vector_candidates(search, cosines, floor=floor)
    cosines = np.clip(rng.normal(mean_cosine, 0.1, size), -1, 1)
    channels = {"keyword": None, "vector": None}  # _fuse reads only the names in hybrid mode
    return channels, search, cosines


def rank_fusion_inputs(search, cosines):
    """Each channel's top 200 rows, best first, as ``recall`` builds them in both versions (not timed)."""
    from django.conf import settings

    depth = 200
    memory = search.view.columns.memory
    rows_kw = np.flatnonzero(search.keyword_rows)
    rows_kw = rows_kw[np.lexsort((memory[rows_kw], -search.bm25[rows_kw]))][:depth]
    rows_vec = np.flatnonzero(search.vector_candidates(cosines, floor=settings.MEMORY_COSINE_FLOOR))
    if len(rows_vec) > depth:
        rows_vec = rows_vec[np.argpartition(-cosines[rows_vec], depth - 1)[:depth]]
    rows_vec = rows_vec[np.lexsort((memory[rows_vec], -cosines[rows_vec]))]
    return rows_kw, rows_vec


def rank_fusion(ranked, memory, limit, k=60):
    """The fusion step this replaced, for comparison: RRF over each channel's top 200."""
    fused = {}
    for rows in ranked:
        for rank, row in enumerate(rows.tolist(), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    rows = np.fromiter(fused, dtype=np.int64, count=len(fused))
    scores = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    return rows[np.lexsort((memory[rows], -scores))[:limit]]


def timed(function, repeats: int) -> dict:
    function()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 3), "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(RESULTS / "fusion_cost.json"))
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    os.environ.setdefault("MEMORY_DATA_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "memory-fusion-cost"))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from search import engine
    from store import fusion_settings, save

    rows = []
    for size in (10_000, 100_000):
        for namespaces in (1, 8):
            for mix in MIXES:
                channels, search, cosines = synthetic(size, namespaces, mix)
                fusion = timed(lambda: engine._fuse(channels, search=search, cosines=cosines, limit=10, hybrid=True),
                               args.repeats)
                # Built by recall's vector channel before either fusion runs (not timed).
                ranked = rank_fusion_inputs(search, cosines)
                rrf = timed(lambda: rank_fusion(ranked, search.view.columns.memory, 10), args.repeats)
                rows.append({"rows": size, "namespaces": namespaces, "mix": mix, "fusion": fusion,
                             "previous_rrf": rrf})
                print(f"{size:>7} rows, {namespaces} namespace(s), {mix:5}: fusion p50 {fusion['p50_ms']:.2f} ms "
                      f"p95 {fusion['p95_ms']:.2f} ms; previous RRF p50 {rrf['p50_ms']:.2f} ms")
    save({"benchmark": "fusion_cost", "settings": fusion_settings(), "mixes": MIXES, "results": rows}, args.output)


if __name__ == "__main__":
    main()
