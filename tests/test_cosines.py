"""The int8 scan: its bounds hold, and answers taken through them are the full float32 scan's."""

import ctypes
import json
import os
import random
import threading
import types
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from memories import services
from memories.selectors import memory_recall as recall
from search import cosines, engine
from search.duplicates import find_near_twin
from tests.helpers import Committed

WORDS = ("deploy release friday backup database invoice budget design review mobile python kubernetes "
         "cluster coffee garden travel flight hotel meeting agenda roadmap incident outage latency cache "
         "schema migration vendor contract holiday birthday dentist recipe tomato basil report quarterly").split()


def random_rows(rng, count, dim):
    """Unit rows of several shapes: dense Gaussian, one dominant component, sparse, and all-zero."""
    rows = rng.standard_normal((count, dim))
    rows[::7, rng.integers(dim)] += 40.0  # one component carries almost all the mass
    rows[1::7, : dim - 3] = 0.0  # three non-zero components
    rows[2::7] = 0.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


@pytest.mark.parametrize("dim", [8, 384])
def test_the_int8_bounds_hold_every_float32_cosine_and_stay_tight(dim):
    rng = np.random.default_rng(dim)
    matrix = random_rows(rng, 5000, dim)
    stored = cosines.quantize(np.arange(1, 5001), matrix)
    widths = []
    for query in random_rows(rng, 30, dim):
        lower, upper = cosines.bounds(stored, query)
        exact = (matrix @ query).astype(np.float64)
        assert np.all(lower <= exact) and np.all(exact <= upper)
        # The exact path computes on any subset of rows; the bound covers those roundings too.
        some = rng.choice(5000, 50, replace=False)
        assert np.all(lower[some] <= matrix[some] @ query) and np.all(matrix[some] @ query <= upper[some])
        widths.append(np.median(upper - lower))
    # Useful, not merely true: a few hundredths wide for 384-dimensional unit vectors.
    assert np.median(widths) < (0.05 if dim == 384 else 0.1)


@pytest.mark.parametrize("rows", [1000, cosines._SPLIT_MIN_ROWS + 1001], ids=["one-thread", "split-rows"])
def test_the_int8_product_of_head_and_tail_is_exact(rows):
    rng = np.random.default_rng(1)
    codes = rng.integers(-127, 128, (rows, 384), dtype=np.int8)
    query = rng.integers(-127, 128, 384, dtype=np.int8)
    want = codes.astype(np.int64) @ query.astype(np.int64)
    head, tail = np.ascontiguousarray(codes[:, :128]), np.ascontiguousarray(codes[:, 128:])
    assert np.array_equal(cosines._integer_dots([(codes, query)]), want)
    assert np.array_equal(cosines._integer_dots([(head, query[:128]), (tail, query[128:])]), want)
    # torch's product of a single column returns memory it never wrote: such a part is refused.
    assert cosines._integer_dots([(np.ascontiguousarray(codes[:, :1]), query[:1])]) is None
    assert cosines._int8_scan_failed is None


def first_bound_cases(rng, matrix, stored, queries):
    """Yield (query, threshold, exact cosines, full int8 upper bounds, rows the first bound leaves open), having
    checked that those rows hold every row that reaches the threshold. A third of the queries are near twins of a
    stored row (cosines close to 1); the thresholds include rows' own cosines, where a bound that is not one shows
    first."""
    dim = matrix.shape[1]
    for number, query in enumerate(queries):
        if number % 3 == 0:
            query = matrix[number] + rng.standard_normal(dim).astype(np.float32) * 0.05
            query = (query / (np.linalg.norm(query) or 1)).astype(np.float32)
        exact = (matrix @ query).astype(np.float64)
        full_upper = cosines.bounds(stored, query)[1]
        for least in (0.9, *np.sort(exact)[-rng.integers(1, 40, 3)]):
            opened = cosines.head_open(stored, query, float(least), refine_over=10**9)  # the first bound alone
            assert np.all(np.diff(opened) > 0)
            assert set(np.flatnonzero(exact >= least)) <= set(opened.tolist())
            some = rng.choice(len(matrix), 50, replace=False)  # the exact path computes on any subset of rows
            assert set(some[matrix[some] @ query >= least]) <= set(opened.tolist())
            yield query, float(least), exact, full_upper, opened


@pytest.mark.parametrize("dim", [8, 48, 384])
def test_the_head_bound_keeps_every_row_that_reaches_the_threshold_and_rules_out_most(dim, monkeypatch):
    rng = np.random.default_rng(dim + 1)
    matrix = random_rows(rng, 5000, dim)
    stored = cosines.quantize(np.arange(1, 5001), matrix)
    assert stored.head.shape[1] + stored.tail.shape[1] == dim
    open_share = []
    for query, least, exact, full_upper, opened in first_bound_cases(rng, matrix, stored, random_rows(rng, 30, dim)):
        assert set(np.flatnonzero(full_upper >= least)) <= set(opened.tolist())  # never tighter than full bounds
        # Refined by the tails of the rows left open, it is the full bounds' set exactly.
        for share in (1, 10**9):  # the open rows' tails gathered, or every row's multiplied
            monkeypatch.setattr(cosines, "_GATHER_SHARE", share)
            refined = cosines.head_open(stored, query, least, refine_over=0)
            assert refined.tolist() == np.flatnonzero(full_upper >= least).tolist()
        if least == 0.9:
            open_share.append(len(opened) / 5000)
    if dim == 384:  # useful, not merely true: random directions rarely come near 0.9 on a third of the components
        assert np.median(open_share) < 0.2


def low_rank_rows(rng, count, dim, rank=12):
    """Unit rows that mostly lie along a few directions, as sentence embeddings do, plus the odd shapes."""
    rows = rng.standard_normal((count, rank)) @ rng.standard_normal((rank, dim)) + 0.35 * rng.standard_normal(
        (count, dim))
    rows[::9] = random_rows(rng, len(rows[::9]), dim)  # some rows far from those directions, one all-zero
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)


@pytest.mark.parametrize("dim", [256, 384])
def test_the_sketch_bound_keeps_every_row_that_reaches_the_threshold_and_rules_out_most(dim, monkeypatch):
    rng = np.random.default_rng(dim + 2)
    matrix = low_rank_rows(rng, 5000, dim)
    basis = cosines.sketch_basis(matrix)
    assert basis.shape == (cosines.sketch_width(dim), dim)
    assert np.allclose(basis @ basis.T, np.eye(len(basis)), atol=1e-12)
    stored = cosines.quantize(np.arange(1, 5001), matrix, basis)
    assert stored.sketch.shape == (5000, len(basis)) and stored.sketch.dtype == np.int8
    open_share = []
    queries = np.concatenate([low_rank_rows(rng, 24, dim), random_rows(rng, 6, dim)])
    for query, least, exact, full_upper, opened in first_bound_cases(rng, matrix, stored, queries):
        # Refined, a row stays open only where the full int8 bound reaches the threshold too.
        for share in (1, 10**9):  # the open rows' codes gathered, or every row's multiplied
            monkeypatch.setattr(cosines, "_GATHER_SHARE", share)
            refined = cosines.head_open(stored, query, least, refine_over=0)
            assert refined.tolist() == sorted(set(opened.tolist()) & set(np.flatnonzero(full_upper >= least)))
            assert set(np.flatnonzero(exact >= least)) <= set(refined.tolist())
        if least == 0.9:
            open_share.append(len(opened) / 5000)
    # Useful, not merely true: few rows left open at a near-duplicate threshold.
    assert np.median(open_share) < 0.01


def test_no_sketch_where_its_directions_would_hold_too_little():
    rng = np.random.default_rng(5)
    assert cosines.sketch_basis(random_rows(rng, 4000, 384)) is None  # no direction stands out
    assert cosines.sketch_basis(low_rank_rows(rng, 4000, 128)) is None  # too few components to sketch
    assert cosines.sketch_basis(low_rank_rows(rng, cosines._SKETCH_SAMPLE_MIN - 1, 384)) is None  # too few rows
    stored = cosines.quantize(np.arange(1, 11), low_rank_rows(rng, 10, 384))
    assert stored.basis is None and stored.sketch.shape == (10, 0)


def test_the_vector_copy_sketches_again_when_its_rows_double_without_changing_what_it_handed_out(monkeypatch):
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 2000)
    rng = np.random.default_rng(8)
    matrix = low_rank_rows(rng, 6000, 384)
    copy = cosines._VectorCopy()
    copy.stored = copy.room = cosines.quantize(np.arange(1, 1001), matrix[:1000])  # below: no sketch yet
    handed_out = []
    for start in range(1000, 6000, 500):
        stored = copy._append(cosines.quantize(np.arange(start + 1, start + 501), matrix[start:start + 500],
                                               copy.stored.basis))
        if len(stored.ids) >= max(cosines.QUANTIZED_MIN_ROWS, 2 * copy.sketched_rows):
            stored = copy._sketch_again(stored)
        copy.stored = stored
        handed_out.append((stored, [column.copy() for column in stored.rows()], stored.basis))
        # The same as quantizing every row at once along the copy's basis.
        want = cosines.quantize(np.arange(1, start + 501), matrix[:start + 500], stored.basis)
        assert all(np.array_equal(got, wanted) for got, wanted in zip(stored.rows(), want.rows()))
    # A basis at 2,000 rows and again at 4,000; none before.
    assert [basis is not None for _, _, basis in handed_out] == [False] + [True] * 9
    assert handed_out[1][2] is handed_out[4][2] and handed_out[4][2] is not handed_out[5][2]
    assert all(np.array_equal(column, kept) for stored, columns, basis in handed_out
               for column, kept in zip(stored.rows(), columns))
    assert all(stored.basis is basis for stored, _, basis in handed_out)


def test_the_int8_product_runs_each_thread_on_the_configured_torch_threads(monkeypatch, settings):
    """OpenMP's thread count is per thread; torch leaves a new thread's at every core unless told."""
    library = Path(torch.__file__).parent / "lib" / "libgomp.so.1"
    if not library.exists():
        pytest.skip("this torch build does not ship libgomp")
    max_threads = ctypes.CDLL(str(library)).omp_get_max_threads
    settings.MEMORY_TORCH_THREADS = 1
    fresh = ThreadPoolExecutor(max_workers=1)  # the split's helper, as a server's first recall finds it
    monkeypatch.setattr(cosines, "_scan_helper", fresh)
    try:
        codes = np.ones((cosines._SPLIT_MIN_ROWS + 1, 128), dtype=np.int8)  # enough codes to be split
        assert cosines._integer_dots([(codes, np.ones(128, dtype=np.int8))]).tolist() == [128] * len(codes)
        assert fresh.submit(max_threads).result() == 1
    finally:
        fresh.shutdown()


def test_work_chained_to_a_pending_vector_runs_on_a_helper_once_the_vector_is_ready():
    def pending(vector_future):
        chained = object.__new__(cosines.PendingVector)  # as started for an embedder that embeds beside
        chained._vector_of, chained._vector, chained._space = None, vector_future, None
        return chained

    caller = threading.get_ident()
    embedding = futures.Future()
    later = pending(embedding).then(lambda: (threading.get_ident(), embedding.result() * 2))
    assert not later.done()
    setter = threading.Thread(target=embedding.set_result, args=(21,))
    setter.start()
    setter.join()
    assert later.result(timeout=10) == (setter.ident, 42)  # run by the thread that finished the embedding
    ready = futures.Future()
    ready.set_result(5)
    ran_on, value = pending(ready).then(lambda: (threading.get_ident(), ready.result())).result(timeout=10)
    assert value == 5 and ran_on != caller  # ready already: another helper, never the caller
    failing = futures.Future()
    chained = pending(failing).then(lambda: 1 / 0)
    failing.set_result(None)
    with pytest.raises(ZeroDivisionError):
        chained.result(timeout=10)
    assert pending(None).then(lambda: 1) is None  # no helper started: nothing to chain to


def test_a_forked_child_gets_helper_threads_that_run_its_work():
    assert cosines._scan_helper.submit(int).result() == 0  # the parent's pools have their threads
    assert cosines._vector_helpers.submit(int).result() == 0
    child = os.fork()
    if child == 0:  # the child reports through its exit status only
        try:
            ran = (cosines._scan_helper.submit(lambda: 7).result(timeout=10) == 7
                   and cosines._vector_helpers.submit(lambda: 8).result(timeout=10) == 8)
        except BaseException:
            ran = False
        os._exit(0 if ran else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.fixture(params=["varied", "crowded"])
def store(db, request):
    """450 memories in two namespaces, three kinds, some tagged: random words, or (crowded) one sentence
    with a word or two changed, so that many cosines lie closer together than the int8 bounds are wide."""
    rng = random.Random(7)
    items = []
    for number in range(450):
        if request.param == "varied":
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        else:
            words = "the deploy of the release runs every friday after the backup".split()
            for _ in range(rng.randint(1, 2)):
                words[rng.randrange(len(words))] = rng.choice(WORDS)
        content = " ".join(words) + f" item{number}"
        items.append({"namespace": "alpha" if number % 3 else "beta", "key": f"m{number}",
                      "kind": ("note", "fact", "decision")[number % 3], "tags": ["blue"] if number % 4 == 0 else [],
                      "revisions": [{"content": content}]})
    document = {"format": "memory-export", "version": 1, "memories": items}
    services.memories_import(document=json.dumps(document), trusted=False, actor="tester", interface="cli")
    return items


def answers(explain=False, **query):
    result = recall(explain=explain, **query)
    return [(hit.memory.id, hit.score, hit.explain["cosine"] if explain else 0.0) for hit in result.hits]


def random_queries(count, seed):
    rng = random.Random(seed)
    queries = []
    for number in range(count):
        words = rng.sample(WORDS, rng.randint(1, 3)) if number % 3 else ["deploy", "release", rng.choice(WORDS)]
        query = {"query": " ".join(words), "mode": ("semantic", "hybrid")[number % 2],
                 "match": rng.choice(["auto", "all", "any"]), "limit": rng.choice([1, 5, 20, 100])}
        narrowing = rng.choice([{}, {}, {"namespace": "alpha"}, {"kinds": ["fact", "note"]}, {"tags": ["blue"]}])
        queries.append({**query, **narrowing})
    return queries


def loose_bounds(stored, query):
    """Bounds that hold but are wide and uneven (up to 0.3 either side): the recall must still be exact."""
    exact = cosines.float32_dots(stored.matrix, query).astype(np.float64)
    rng = np.random.default_rng(int(abs(exact.sum()) * 1e6))
    return exact - rng.uniform(0, 0.3, len(exact)), exact + rng.uniform(0, 0.3, len(exact))


@pytest.mark.parametrize("context", [0.5, 0.0])
@pytest.mark.parametrize("gather_share", [1, 8], ids=["never-full-scan", "full-scan-when-many"])
@pytest.mark.parametrize("vector_weight", [None, 3.0], ids=["default-weights", "vectors-decide"])
@pytest.mark.parametrize("bounds", ["int8", "loose"])
def test_recall_through_the_bounds_equals_the_full_scan(store, monkeypatch, settings, gather_share, context,
                                                        vector_weight, bounds):
    if bounds == "loose":
        monkeypatch.setattr(cosines, "bounds", loose_bounds)
    settings.MEMORY_FUSION_CONTEXT = context
    if vector_weight:  # close cosines then decide the ranks, where the bounds are widest
        settings.MEMORY_FUSION_WEIGHTS = {**settings.MEMORY_FUSION_WEIGHTS, "vector": vector_weight}
    monkeypatch.setattr(cosines, "_GATHER_SHARE", gather_share)
    scans = []
    real_dense = cosines.Cosines.dense
    monkeypatch.setattr(cosines.Cosines, "dense", lambda self: scans.append(1) or real_dense(self))
    queries = random_queries(40, seed=int(context * 10)) + [
        {"query": "schema migration", "mode": "semantic", "limit": 30, "as_of": "2020-01-01T00:00:00Z"},
        {"query": "recipe tomato", "mode": "hybrid", "limit": 5, "namespace": ["alpha", "beta"]}]
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 10**9)
    full = [answers(**query) for query in queries] + [answers(explain=True, **query) for query in queries]
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 1)
    scans.clear()
    bounded = [answers(**query) for query in queries]
    if gather_share == 1:
        assert not scans  # every cosine used came through the bounds
    # Explain shows the vector channel's ranks, which hybrid recall works out from a full scan.
    bounded += [answers(explain=True, **query) for query in queries]
    assert sum(len(hits) for hits in full) > 1000
    # The same memories in the same order with the same scores, to the last bit.
    assert bounded == full


@pytest.mark.parametrize("vector_weight, floor", [(None, None), (3.0, 0.6)],
                         ids=["defaults", "heavy-vectors-high-floor"])
@pytest.mark.parametrize("quantized_from", [1, 10**9], ids=["int8-bounds", "full-scan"])
def test_hybrid_recall_that_skips_rows_unable_to_reach_the_top_equals_scoring_every_candidate(
        store, monkeypatch, settings, vector_weight, floor, quantized_from):
    if vector_weight:  # rows below the floor, which no list holds, may then lend more than the limit-th row scores
        settings.MEMORY_FUSION_WEIGHTS = {**settings.MEMORY_FUSION_WEIGHTS, "vector": vector_weight}
        settings.MEMORY_COSINE_FLOOR = floor
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", quantized_from)
    queries = [query for query in random_queries(60, seed=5) if query["mode"] == "hybrid"]
    kept, skipped = [], []
    real_may_reach = engine._may_reach

    def counted(rows, *args, **kwargs):
        keep = real_may_reach(rows, *args, **kwargs)
        kept.append(len(rows)), skipped.append(int((~keep).sum()))
        return keep

    monkeypatch.setattr(engine, "_may_reach", counted)
    pruned = [answers(explain=True, **query) for query in queries]
    monkeypatch.setattr(engine, "_may_reach", lambda rows, *args, **kwargs: np.ones(len(rows), dtype=bool))
    every = [answers(explain=True, **query) for query in queries]
    assert pruned == every
    assert sum(skipped) > sum(kept) // 10  # the skipping was put to the test


def test_a_row_is_skipped_only_when_no_neighbour_can_lift_it_to_the_bound():
    """``_may_reach`` against the most each row could score: its own score plus the best its neighbours lend."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        size, weight = int(rng.integers(5, 60)), float(rng.choice([0.25, 0.5, 1.0]))
        eligible = rng.random(size) < 0.9
        view = types.SimpleNamespace(columns=types.SimpleNamespace(namespace=rng.integers(0, 2, size)))
        neighbours = engine._Neighbours(view, eligible)
        rows = np.flatnonzero(eligible & (rng.random(size) < 0.6))  # the candidates
        scores = rng.random(len(rows))
        bound, outside = float(rng.random()), float(rng.random() * 1.5)  # outside may pass the bound
        keep = engine._may_reach(rows, scores, bound, outside=outside, weight=weight, neighbours=neighbours,
                                 size=size)
        score_of = dict(zip(rows.tolist(), scores.tolist()))
        lent = np.zeros(len(rows))
        for found in neighbours.around(rows):
            lent = np.maximum(lent, [0.0 if other < 0 else score_of.get(other, outside) for other in found.tolist()])
        assert not np.any(~keep & (scores + weight * lent >= bound)), trial


@pytest.mark.parametrize("refine_min, gather_share", [(10**9, 8), (0, 1), (0, 10**9)],
                         ids=["head-only", "tails-gathered", "tails-of-every-row"])
def test_near_twins_through_the_bounds_equal_the_full_scan(store, monkeypatch, refine_min, gather_share):
    texts = [item["revisions"][0]["content"] for item in store[:40]]
    monkeypatch.setattr(cosines, "_REFINE_MIN_ROWS", refine_min)
    monkeypatch.setattr(cosines, "_GATHER_SHARE", gather_share)
    heads, products = [], []
    real_head_open, real_dots = cosines.head_open, cosines._integer_dots
    monkeypatch.setattr(cosines, "head_open", lambda *args: heads.append(1) or real_head_open(*args))
    monkeypatch.setattr(cosines, "_integer_dots", lambda parts: products.append(len(parts[0][0])) or real_dots(parts))
    found = {}
    for least in (1, 10**9):
        monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", least)
        found[least] = [find_near_twin(text + " extra", namespace=namespace, threshold=threshold)
                        for text in texts for namespace in ("alpha", "beta") for threshold in (0.5, 0.8, 0.9, 0.95)]
    assert found[1] == found[10**9]
    assert sum(twin is not None and twin.cosine >= 0.9 for twin in found[1]) > 10
    assert sum(twin is not None and twin.cosine < 0.9 for twin in found[1]) > 10
    # Each check multiplied every row's head codes; the tails followed only where asked to:
    # the open rows' (fewer rows than the head's product), or every row's.
    assert len(heads) == len(found[1])
    if refine_min:
        assert len(products) == len(heads)
    elif gather_share == 1:
        assert len(products) > len(heads) and min(products) < max(products)
    else:
        assert len(products) > len(heads) and min(products) == max(products)


@pytest.mark.parametrize("refine_min, gather_share", [(10**9, 8), (0, 1), (0, 10**9)],
                         ids=["sketch-only", "codes-gathered", "codes-of-every-row"])
def test_near_twins_through_the_sketch_equal_the_full_scan(store, monkeypatch, refine_min, gather_share):
    texts = [item["revisions"][0]["content"] for item in store[:40]]
    monkeypatch.setattr(cosines, "_REFINE_MIN_ROWS", refine_min)
    monkeypatch.setattr(cosines, "_GATHER_SHARE", gather_share)
    monkeypatch.setattr(cosines, "_SKETCH_SAMPLE_MIN", 16)  # a sketch for these 450 rows
    monkeypatch.setattr(cosines, "SKETCH_MIN_ENERGY", 0.0)
    sketches = []
    real_sketch_open = cosines._sketch_open
    monkeypatch.setattr(cosines, "_sketch_open", lambda *args: sketches.append(1) or real_sketch_open(*args))
    found = {}
    for least in (1, 10**9):
        monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", least)
        monkeypatch.setattr(cosines, "_vector_copies", {})  # loaded afresh, sketched when over QUANTIZED_MIN_ROWS
        found[least] = [find_near_twin(text + " extra", namespace=namespace, threshold=threshold)
                        for text in texts for namespace in ("alpha", "beta") for threshold in (0.5, 0.8, 0.9, 0.95)]
    assert found[1] == found[10**9]
    assert len(sketches) == len(found[1])
    assert sum(twin is not None and twin.cosine >= 0.9 for twin in found[1]) > 10
    assert sum(twin is not None and twin.cosine < 0.9 for twin in found[1]) > 10


def test_without_the_int8_product_answers_come_from_the_full_scan(store, monkeypatch):
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 1)
    want = answers(query="deploy friday release", mode="semantic", limit=10)
    monkeypatch.setattr(torch, "_int_mm", lambda *args: (_ for _ in ()).throw(RuntimeError("no int8 kernel")))
    monkeypatch.setattr(cosines, "_int8_scan_failed", None)
    assert answers(query="deploy friday release", mode="semantic", limit=10) == want
    assert cosines._int8_scan_failed == "RuntimeError: no int8 kernel"


def test_a_growing_store_gets_its_sketch_from_the_writes_that_reach_the_threshold_and_again_when_doubled(
        db, monkeypatch):
    monkeypatch.setattr(cosines, "connection", Committed())
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 40)
    monkeypatch.setattr(cosines, "_SKETCH_SAMPLE_MIN", 16)
    monkeypatch.setattr(cosines, "SKETCH_MIN_ENERGY", 0.0)
    monkeypatch.setattr(cosines, "_vector_copies", {})  # this test's copy, gone with the test's rows
    rng = random.Random(3)

    def write(number):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
        services.memory_remember(namespace="alpha", content=f"{words} note{number}", actor="tester",
                                 interface="cli")

    def copy():
        return next(iter(cosines._vector_copies.values()))

    bases = []
    for number in range(90):
        write(number)  # each write's near-duplicate check brings this process's copy up to date
        if cosines._vector_copies:
            bases.append(copy().stored.basis)
    find_near_twin("deploy friday", namespace="alpha")  # brings the copy up to the last write
    # None until 40 vectors, one basis from 40 to 79, another from 80.
    first = next(index for index, basis in enumerate(bases) if basis is not None)
    assert all(basis is None for basis in bases[:first])
    assert len(copy().stored.ids) == 90 and copy().sketched_rows == 80
    distinct = list({id(basis): basis for basis in bases if basis is not None}.values())
    assert len(distinct) == 2
    texts = [f"{' '.join(rng.choice(WORDS) for _ in range(5))}" for _ in range(30)]
    found = {}
    for least in (1, 10**9):
        monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", least)
        found[least] = [find_near_twin(text, namespace="alpha", threshold=threshold)
                        for text in texts for threshold in (0.3, 0.5, 0.7)]
    assert found[1] == found[10**9]
    assert sum(twin is not None for twin in found[1]) > 5
