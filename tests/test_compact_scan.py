"""The compact scan (``search.compact``): no row's exact cosine lies above the bound it reports, and a hybrid recall
that scans packed partitions answers to the bit as the float32 scan does, at every point in time."""

import copy
import itertools

import numpy as np
import pytest
import torch
from django.utils import timezone

from memories import services
from memories.selectors import memory_recall
from memoryproject import dialect
from search import bounded, channels, compact, cosines, fusion, relevance
from tests.helpers import copies_as_in_a_server

ACTOR = {"actor": "tester", "interface": "cli"}
WORDS = (
    "harbour crane rota tide table pilot ladder night shift handover cargo manifest berth schedule customs "
    "forklift reefer container vessel draft anchor quay gantry lashing ballast bunker tug mooring"
).split()


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_no_rows_exact_cosine_lies_above_the_bound_the_scan_reports(monkeypatch):
    monkeypatch.setattr(compact, "BLOCK_ROWS", 700)
    matrix = unit_rows(3000, 384, seed=1)
    matrix[5] = 0.0  # a row without direction packs exactly
    matrix[6] = 0.0
    matrix[6, 0] = 1.0  # one large element: the widest rounding step
    blocks = compact.pack(matrix)
    assert [block.rows for block in blocks] == [700] * 4  # the last 200 rows stay float32 only
    rng = np.random.default_rng(2)
    spike = np.zeros(384, dtype=np.float32)
    spike[3] = 1.0
    queries = [matrix[10], -matrix[11], spike, np.full(384, 384**-0.5, dtype=np.float32)]
    queries += [unit_rows(1, 384, seed=seed)[0] for seed in range(3, 13)]
    queries += [(matrix[12] + 0.05 * rng.standard_normal(384)).astype(np.float32) for _ in range(5)]
    for query in queries:
        upper = np.empty(2800, dtype=np.float32)
        compact.upper(blocks, query, out=upper)
        exact = np.einsum("ij,j->i", matrix[:2800].astype(np.float64), query.astype(np.float64))
        assert np.all(exact <= upper)
        assert np.median(upper - exact) < 0.05  # tight enough to rule most rows out


def test_the_kernel_rounds_the_query_as_the_bound_assumes(monkeypatch):
    monkeypatch.setattr(compact, "BLOCK_ROWS", 500)
    matrix = unit_rows(500, 384, seed=4)
    (block,) = compact.pack(matrix)
    for seed in range(5):
        query = torch.from_numpy(unit_rows(1, 384, seed=10 + seed))
        scale, zero_point = torch._choose_qparams_per_tensor(query, True)
        rounded = torch.quantize_per_tensor(query, scale, zero_point, torch.quint8).dequantize().numpy()[0]
        weights = block.packed.unpack()[0].dequantize().numpy()
        kernel = torch.ops.quantized.linear_dynamic(query, block.packed, True).numpy()[0]
        assert np.allclose(kernel, weights.astype(np.float64) @ rounded.astype(np.float64), rtol=1e-5, atol=1e-6)


@pytest.fixture
def history(db, monkeypatch, settings):
    """A namespace of a few hundred memories beside a small one, revised, moved and forgotten step by step."""
    copies_as_in_a_server(monkeypatch)
    settings.MEMORY_COMPACT_MIN_ROWS = 100  # the big namespace is packed, the small one not
    monkeypatch.setattr(compact, "BLOCK_ROWS", 48)
    rng = np.random.default_rng(7)
    ids = []
    for number in range(330):
        words = " ".join(rng.choice(WORDS, size=5, replace=False))
        namespace = "small" if number % 11 == 0 else "big"
        ids.append(services.memory_remember(namespace=namespace, content=f"{words} {number}.", **ACTOR).memory.id)
    moments = [timezone.now()]
    for number in range(0, 60, 6):
        services.memory_revise(memory_id=ids[number], content=f"Revised: crane rota and tide {number}.", **ACTOR)
    services.memory_move(memory_id=ids[1], namespace="small", **ACTOR)
    moments.append(timezone.now())
    services.memory_forget(memory_id=ids[2], **ACTOR)
    services.memory_archive(memory_id=ids[3], **ACTOR)
    services.memory_move(memory_id=ids[1], namespace="big", **ACTOR)
    moments.append(timezone.now())
    return moments


# Words, joined words that only the vectors find (the hash embedder shares their trigrams), and words found nowhere.
QUERIES = ["crane rota", "tide table pilot", "quay bunker tug mooring", "tidetables", "quayside gantrycranes", "okapi"]


def answers(moments, monkeypatch) -> list:
    """Each recall's hits with their explanations, and the relevance evidence of each hybrid recall."""
    found, evidence = [], []
    relevant = relevance.relevant
    monkeypatch.setattr(
        relevance, "relevant", lambda found: evidence.append(relevance.evidence(found)) or relevant(found)
    )
    for as_of in [*moments, None]:
        for namespaces in (["big"], ["big", "small"]):
            for mode in ("hybrid", "semantic"):
                for query in QUERIES:
                    result = memory_recall(
                        query=query, namespace=namespaces, mode=mode, as_of=as_of, explain=True, min_score=0
                    )
                    hits = [(hit.memory.id, hit.score, hit.explain) for hit in result.hits]
                    found.append((hits, result.note))
            for query in QUERIES:  # without min_score: held back when nothing is relevant
                result = memory_recall(query=query, namespace=namespaces, as_of=as_of, explain=True)
                found.append(([(hit.memory.id, hit.score, hit.relevant) for hit in result.hits], result.note))
    monkeypatch.setattr(relevance, "relevant", relevant)
    return found, evidence


@pytest.mark.parametrize("floor, method", [(0.2, "weighted"), (0.6, "weighted"), (-0.1, "weighted"), (0.2, "rrf")])
def test_a_recall_over_packed_partitions_equals_the_float32_scan_to_the_bit(
    history, monkeypatch, settings, floor, method
):
    settings.MEMORY_COSINE_FLOOR, settings.MEMORY_FUSION = floor, method
    monkeypatch.setattr(fusion, "CHANNEL_DEPTH", 12)  # RRF's ranks: a hit can come from one channel's alone
    monkeypatch.setattr(cosines, "WHOLE_SCAN_SHARE", 1.0)  # a speed choice: off, so the bounds alone decide
    scanned = []  # the cosines of each recall that scanned packed rows
    bounded_vector = bounded.vector

    def keeping(scope, found_cosines, **arguments):
        scanned.append(found_cosines)
        return bounded_vector(scope, found_cosines, **arguments)

    monkeypatch.setattr(bounded, "vector", keeping)
    packed, evidence = answers(history, monkeypatch)
    assert any(hits for hits, _ in packed) and any(hits for hits, _ in packed[-len(QUERIES) :])
    assert len(scanned) == (len(history) + 1) * 2 * 2 * len(QUERIES)  # every hybrid recall scanned packed rows
    # Rows with a vector whose exact cosine the recall never needed: most, where the floor is above zero.
    left = [int(np.count_nonzero(np.isnan(each.values[each.has_vector]))) for each in scanned]
    assert max(left) > (200 if floor > 0 else -1)
    settings.MEMORY_COMPACT_MIN_ROWS = 0
    cosines._copies.clear()
    memory_recall(query="warm", namespace=["big", "small"])  # read the partitions again, without packing them
    assert answers(history, monkeypatch) == (packed, evidence)


@pytest.mark.parametrize("floor", [0.2, 0.5])
def test_the_bounded_vector_channel_ranks_and_reports_evidence_as_the_full_one(history, monkeypatch, settings, floor):
    settings.MEMORY_COSINE_FLOOR = floor  # 0.5: the best cosine is held only where a word found it
    monkeypatch.setattr(cosines, "WHOLE_SCAN_SHARE", 1.0)
    monkeypatch.setattr(fusion, "CHANNEL_DEPTH", 12)  # RRF's ranks: a hit can come from one channel's alone
    caught = []
    bounded_vector = bounded.vector
    monkeypatch.setattr(bounded, "vector", lambda scope, found, **rest: caught.append((scope, found)))
    memory_recall(query="gantry", namespace=["big"], min_score=0)  # rows reach the floor
    memory_recall(query="okapi", namespace=["big"], min_score=0)  # none do
    rng = np.random.default_rng(3)
    for (scope, scanned), share in itertools.product(caught, (0.02, 0.2, 0.6)):
        memory = scope.view.columns.memory
        for _ in range(8):
            found_by_words = scope.eligible & (rng.random(len(memory)) < share)
            others = np.flatnonzero(found_by_words & (rng.random(len(memory)) < 0.1))
            full = copy.copy(scanned)
            full.values = scanned.values.copy()
            full.exact(np.arange(len(memory)))
            full.packed, full.upper = [], None
            keyword = np.isin(np.arange(len(memory)), others)
            words = {"keyword": channels.Found(keyword, None, np.where(keyword, rng.random(len(memory)) / 3, 0.0), ())}
            expected = channels.vector(scope, full, found_by_words=found_by_words, query_share=0.8)
            boost = 1.0 + rng.random(len(memory)) * (rng.random(len(memory)) < 0.05)  # injection-aware ranking
            ways = {"fusion": ("weighted", None), "boosted": ("weighted", boost), "rrf": ("rrf", None)}
            for question in (*ways, "ranking"):  # each on bounds fresh from the scan
                partial = copy.copy(scanned)
                partial.values = scanned.values.copy()
                got = bounded_vector(scope, partial, found_by_words=found_by_words, query_share=0.8)
                if question in ways:
                    settings.MEMORY_FUSION, boosts = ways[question]
                    fused = [
                        fusion.fuse({**words, "vector": vector}, scope=scope, limit=5, hybrid=True, boost=boosts)
                        for vector in (expected, got)
                    ]
                    assert [part.tolist() for part in fused[0]] == [part.tolist() for part in fused[1]]
                    hit = fused[0][0]  # what each hit says of itself: relevant alone, its judged cosine
                    assert np.array_equal(got.raw[hit], expected.raw[hit], equal_nan=True)
                    assert np.array_equal(
                        relevance.relevant_rows({"vector": got}, hit),
                        relevance.relevant_rows({"vector": expected}, hit),
                    )
                    settings.MEMORY_FUSION = "weighted"
                else:
                    assert relevance.evidence({"vector": got}) == relevance.evidence({"vector": expected})
                    assert got.held.tolist() == expected.held.tolist()
                    assert fusion.ranked(got, memory, 20).tolist() == fusion.ranked(expected, memory, 20).tolist()
            assert np.count_nonzero(np.isnan(partial.values[partial.has_vector])) > 0  # some were never needed


def test_writes_that_complete_a_block_are_packed_and_recalled_as_the_float32_scan_would(history, settings):
    def recalled():
        return [
            [(hit.memory.id, hit.score, hit.explain) for hit in result.hits]
            for query in QUERIES
            for result in [memory_recall(query=query, namespace=["big"], explain=True, min_score=0)]
        ]

    recalled()
    partition = cosines._copies[dialect.database_key()].partitions["big"]
    blocks = len(partition.blocks)
    for number in range(60):
        words = " ".join(WORDS[(number * 7 + step) % len(WORDS)] for step in range(5))
        services.memory_remember(namespace="big", content=f"Later: {words} {number}.", **ACTOR)
    packed = recalled()
    assert len(partition.blocks) > blocks and partition.stored.packed == len(partition.blocks) * compact.BLOCK_ROWS
    settings.MEMORY_COMPACT_MIN_ROWS = 0
    cosines._copies.clear()
    assert recalled() == packed
