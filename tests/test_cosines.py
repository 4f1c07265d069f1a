"""The int8 scan: its bounds hold, and answers taken through them are the full float32 scan's."""

import json
import random

import numpy as np
import pytest
import torch

from memories import services
from search import cosines
from search.duplicates import find_near_twin
from search.engine import recall

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


def test_the_split_int8_product_is_exact():
    rng = np.random.default_rng(1)
    codes = rng.integers(-127, 128, (cosines._SPLIT_MIN_ROWS + 1001, 384), dtype=np.int8)
    query = rng.integers(-127, 128, 384, dtype=np.int8)
    assert np.array_equal(cosines._integer_dots(codes, query), codes.astype(np.int64) @ query.astype(np.int64))


@pytest.fixture
def store(db):
    """450 memories of random words in two namespaces, three kinds, some tagged."""
    rng = random.Random(7)
    items = []
    for number in range(450):
        content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + f" item{number}"
        items.append({"namespace": "alpha" if number % 3 else "beta", "key": f"m{number}",
                      "kind": ("note", "fact", "decision")[number % 3], "tags": ["blue"] if number % 4 == 0 else [],
                      "revisions": [{"content": content}]})
    document = {"format": "memory-export", "version": 1, "memories": items}
    services.memories_import(document=json.dumps(document), trusted=False, actor="tester", interface="cli")
    return items


def answers(**query):
    result = recall(explain=True, **query)
    return [(hit.memory.id, hit.score, hit.explain["cosine"]) for hit in result.hits]


def test_semantic_recall_through_the_bounds_equals_the_full_scan(store, monkeypatch):
    spent = []
    real_bounds = cosines.bounds
    monkeypatch.setattr(cosines, "bounds", lambda *args: spent.append(1) or real_bounds(*args))
    queries = [{"query": "deploy friday release", "mode": "semantic", "limit": 100},
               {"query": "coffee garden", "mode": "semantic", "limit": 10, "namespace": "alpha"},
               {"query": "budget invoice vendor", "mode": "semantic", "limit": 50, "kinds": ["fact", "note"]},
               {"query": "incident outage latency", "mode": "semantic", "limit": 20, "tags": ["blue"]},
               {"query": "schema migration", "mode": "semantic", "limit": 30, "as_of": "2020-01-01T00:00:00Z"},
               {"query": "holiday flight hotel", "mode": "hybrid", "limit": 20},
               {"query": "recipe tomato", "mode": "hybrid", "limit": 5, "namespace": ["alpha", "beta"]}]
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 10**9)
    full = [answers(**query) for query in queries]
    assert not spent
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 1)
    bounded = [answers(**query) for query in queries]
    # Hybrid recall scores every row, so it takes the full scan; as of 2020 nothing is visible,
    # and the ~110 rows tagged blue are fewer than the channel's 200, so all are computed.
    assert len(spent) == 3
    assert sum(len(hits) for hits in full) > 150
    for got, want in zip(bounded, full):
        assert [hit[0] for hit in got] == [hit[0] for hit in want]
        # One float32 dot product may differ in its last bit with the rows around it (BLAS blocking).
        assert np.allclose([hit[1:] for hit in got], [hit[1:] for hit in want], rtol=1e-6, atol=0)


def test_near_twins_through_the_bounds_equal_the_full_scan(store, monkeypatch):
    texts = [item["revisions"][0]["content"] for item in store[:40]]
    found = {}
    for least in (1, 10**9):
        monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", least)
        found[least] = [find_near_twin(text + " extra", namespace=namespace, threshold=threshold)
                        for text in texts for namespace in ("alpha", "beta") for threshold in (0.5, 0.8)]
    assert [twin and twin.memory_id for twin in found[1]] == [twin and twin.memory_id for twin in found[10**9]]
    assert sum(twin is not None for twin in found[1]) > 20


def test_without_the_int8_product_answers_come_from_the_full_scan(store, monkeypatch):
    monkeypatch.setattr(cosines, "QUANTIZED_MIN_ROWS", 1)
    want = answers(query="deploy friday release", mode="semantic", limit=10)
    monkeypatch.setattr(torch, "_int_mm", lambda *args: (_ for _ in ()).throw(RuntimeError("no int8 kernel")))
    monkeypatch.setattr(cosines, "_int8_scan_failed", None)
    got = answers(query="deploy friday release", mode="semantic", limit=10)
    assert [hit[0] for hit in got] == [hit[0] for hit in want]
    assert np.allclose([hit[1:] for hit in got], [hit[1:] for hit in want], rtol=1e-6, atol=0)
    assert cosines._int8_scan_failed == "RuntimeError: no int8 kernel"
