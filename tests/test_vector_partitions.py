"""Each process keeps the stored vectors per namespace: a recall reads only the namespaces it searches, moves and
erasure keep the partitions exact, and the budget drops the namespaces used least recently."""

import datetime as dt

import numpy as np
import pytest

from memories import selectors, services
from memories.selectors import memory_recall
from memoryproject import dialect, metrics
from search import cosines, engine, snapshot, vectors
from tests.helpers import copies_as_in_a_server

ACTOR = {"actor": "tester", "interface": "cli"}


@pytest.fixture
def store(db, monkeypatch):
    """Three namespaces of notes; the per-process copies see through the test's transaction, as in a server."""
    copies_as_in_a_server(monkeypatch)
    ids = {}
    for namespace, count in (("alpha", 12), ("beta", 30), ("gamma", 5)):
        for number in range(count):
            ids[(namespace, number)] = services.memory_remember(
                namespace=namespace, content=f"{namespace} note {number} about the harbour crane rota.", **ACTOR
            ).memory.id
    cosines._copies.clear()  # each write looked for near twins in its namespace: start from nothing held
    return ids


def copy() -> cosines.VectorCopy:
    return cosines._copies[dialect.database_key()]


def revisions_of(namespace: str) -> list[int]:
    from memories.models import Revision

    return sorted(Revision.objects.filter(memory__namespace=namespace, tombstone=False).values_list("id", flat=True))


def held(namespace: str) -> list[int]:
    return sorted(copy().partitions[namespace].stored.ids.tolist())


def semantic(query: str, namespace: str, **extra) -> list[int]:
    return [hit.memory.id for hit in memory_recall(query=query, namespace=namespace, mode="semantic", **extra).hits]


def test_a_recall_loads_the_vectors_of_the_namespace_it_searches_and_no_other(store):
    semantic("crane rota", "alpha")
    assert list(copy().partitions) == ["alpha"]
    assert held("alpha") == revisions_of("alpha")
    semantic("crane rota", "gamma")
    assert list(copy().partitions) == ["alpha", "gamma"] and held("gamma") == revisions_of("gamma")


def test_a_rows_cosine_is_the_same_to_the_bit_as_in_a_scan_of_every_stored_vector(store):
    query = engine.cosines.embed(lambda embedder: embedder.embed_query("harbour crane"))
    ids, matrix = vectors.load_matrix()
    everything = dict(zip(ids.tolist(), cosines.dots(matrix, query).tolist()))
    view = snapshot.current()
    found = cosines.Cosines(view, cosines.namespace_vectors(view, ["beta"]), query)
    assert [load.namespace for load in found.loads] == ["beta"]
    rows = np.flatnonzero(found.has_vector)
    assert sorted(view.columns.revision[rows].tolist()) == revisions_of("beta")
    assert {int(view.columns.revision[row]): float(found.values[row]) for row in rows} == {
        revision: everything[revision] for revision in revisions_of("beta")
    }


def test_new_writes_reach_the_partitions_of_their_namespace_without_a_reload(store):
    semantic("crane rota", "alpha")
    semantic("crane rota", "beta")
    loads = metrics.VECTOR_PARTITION_LOADS._value.get()
    fresh = services.memory_remember(namespace="alpha", content="The tide table moved to the noticeboard.", **ACTOR)
    assert semantic("tide table noticeboard", "alpha")[0] == fresh.memory.id
    assert held("alpha") == revisions_of("alpha") and held("beta") == revisions_of("beta")
    assert metrics.VECTOR_PARTITION_LOADS._value.get() == loads


@pytest.mark.parametrize("warm", [True, False], ids=["loaded before the move", "loaded after it"])
def test_a_moved_memory_is_found_by_meaning_where_it_is_and_where_it_was_before(store, warm):
    moved = store[("alpha", 3)]
    if warm:
        semantic("crane rota", "alpha")
        semantic("crane rota", "gamma")
    before = selectors.memory_get(memory_id=moved).known_at + dt.timedelta(microseconds=1)
    services.memory_move(memory_id=moved, namespace="gamma", **ACTOR)
    assert moved in semantic("alpha note 3 about the harbour crane rota", "gamma", limit=3)
    assert moved not in semantic("alpha note 3 about the harbour crane rota", "alpha", limit=20)
    assert moved in semantic("alpha note 3 about the harbour crane rota", "alpha", limit=3, as_of=before.isoformat())


def test_an_erased_memorys_vectors_leave_the_process(store):
    erased = store[("beta", 7)]
    semantic("crane rota", "beta")
    services.memory_erase(memory_id=erased, **ACTOR)
    semantic("crane rota", "beta")
    assert held("beta") == revisions_of("beta")
    assert all(erased not in partition.members for partition in copy().partitions.values())


def test_past_the_budget_the_namespace_used_least_recently_is_dropped_and_read_again_when_asked(store, settings):
    settings.MEMORY_VECTOR_MEMORY_MB = 0  # nothing fits: only the namespaces a call uses stay
    semantic("crane rota", "alpha")
    semantic("crane rota", "beta")
    assert list(copy().partitions) == ["beta"]
    loads = metrics.VECTOR_PARTITION_LOADS._value.get()
    assert semantic("alpha note 5 about the harbour crane rota", "alpha", limit=1) == [store[("alpha", 5)]]
    assert metrics.VECTOR_PARTITION_LOADS._value.get() == loads + 1
    assert list(copy().partitions) == ["alpha"]


def test_room_is_made_before_a_namespace_is_read_so_the_process_holds_its_budget_while_reading(
    store, settings, monkeypatch
):
    semantic("crane rota", "alpha")
    semantic("crane rota", "gamma")
    # What reading beta will take (the revisions of its cut view), beside gamma alone.
    reading = cosines.held_bytes(
        len(snapshot.current().narrowed(["beta"]).columns.revision), vectors.current_space().dim
    )
    settings.MEMORY_VECTOR_MEMORY_MB = (copy().partitions["gamma"].nbytes + reading + 1000) / 2**20
    seen, read = [], vectors.namespace_vectors
    monkeypatch.setattr(
        vectors, "namespace_vectors", lambda name, **kwargs: seen.append(set(copy().partitions)) or read(name, **kwargs)
    )
    semantic("crane rota", "beta")
    assert seen == [{"gamma"}]  # alpha, used least recently, went before beta was read


def test_a_recall_over_several_namespaces_scores_them_all(store):
    found = memory_recall(
        query="gamma note 2 about the harbour crane rota", namespace=["alpha", "gamma"], mode="semantic"
    )
    assert found.hits[0].memory.id == store[("gamma", 2)]
    assert set(copy().partitions) == {"alpha", "gamma"}


def test_a_near_twin_is_looked_for_in_its_own_namespace_only(store):
    semantic("crane rota", "beta")
    twin = services.memory_remember(namespace="gamma", content="gamma note 1 about the harbour crane rota!", **ACTOR)
    assert twin.near_twin is not None and twin.near_twin.memory_id == store[("gamma", 1)]
    assert "alpha" not in copy().partitions


def test_explain_says_what_reading_a_namespaces_vectors_cost(store):
    first = memory_recall(query="crane rota", namespace="gamma", mode="hybrid", explain=True)
    assert "The vectors of gamma (5 revisions) were read from the database first" in first.note
    again = memory_recall(query="crane rota", namespace="gamma", mode="hybrid", explain=True)
    assert "were read from the database" not in (again.note or "")
    quiet = memory_recall(query="crane rota", namespace="alpha", mode="hybrid")
    assert "were read from the database" not in (quiet.note or "")


@pytest.mark.parametrize("expected", [0, 3, 5, 9])
def test_a_read_fills_one_matrix_and_keeps_every_row_whatever_the_count_said(expected):
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((5, 4)).astype(np.float32)
    rows = [(10 + index, 100 + index, matrix[index].tobytes()) for index in range(5)]
    found, _ = vectors._rows([rows[:2], rows[2:]], 4, expected=expected)  # a count can miss rows written after it
    assert found.ids.tolist() == [10, 11, 12, 13, 14] and found.memories.tolist() == [100, 101, 102, 103, 104]
    assert found.matrix.tobytes() == matrix.tobytes() and found.matrix.flags.writeable
