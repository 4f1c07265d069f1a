"""A recall in a few namespaces works on a view of their memories alone (``View.narrowed``): the same hits, scores
and explanations, to the bit, as on the view of the whole store, at every point in time, across moves, revisions,
forgetting and lifecycle changes."""

import pytest
from django.utils import timezone

from memories import services
from memories.selectors import memory_recall
from search import snapshot, visibility
from tests.helpers import copies_as_in_a_server

ACTOR = {"actor": "tester", "interface": "cli"}
QUERIES = ["harbour crane rota", "tide table", "crane", "night shift handover notes", "zebra"]
ASKED = [["small"], ["other"], ["small", "other"], ["big"]]


@pytest.fixture
def history(db, monkeypatch):
    """A big namespace beside two small ones, changed step by step; the moments between the steps."""
    copies_as_in_a_server(monkeypatch)
    topics = ["harbour crane rota", "tide table", "night shift handover", "pilot boarding ladder", "crane oil"]
    ids = {}
    for namespace, count in (("big", 40), ("small", 8), ("other", 6)):
        for number in range(count):
            ids[(namespace, number)] = services.memory_remember(
                namespace=namespace, content=f"{namespace} {number}: {topics[number % 5]} notes {number * 7}.", **ACTOR
            ).memory.id
    moments = [timezone.now()]
    services.memory_revise(memory_id=ids[("small", 0)], content="The harbour crane rota moved to Mondays.", **ACTOR)
    services.memory_move(memory_id=ids[("big", 1)], namespace="small", **ACTOR)
    services.memory_move(memory_id=ids[("small", 2)], namespace="other", **ACTOR)
    moments.append(timezone.now())
    services.memory_forget(memory_id=ids[("small", 3)], **ACTOR)
    services.memory_archive(memory_id=ids[("small", 4)], **ACTOR)
    services.memory_move(memory_id=ids[("big", 1)], namespace="big", **ACTOR)
    services.memory_revise(memory_id=ids[("other", 1)], content="Tide table pinned by the crane cabin.", **ACTOR)
    moments.append(timezone.now())
    return moments, ids


def answers(moments) -> list:
    found = []
    for as_of in [*moments, None]:
        for namespaces in ASKED:
            for mode in ("hybrid", "keyword", "semantic"):
                for query in QUERIES:
                    result = memory_recall(
                        query=query, namespace=namespaces, mode=mode, as_of=as_of, explain=True, min_score=0
                    )
                    hits = [(hit.memory.id, hit.memory.content, hit.score, hit.explain) for hit in result.hits]
                    found.append((hits, result.note))
    return found


def test_a_narrowed_view_holds_the_memories_ever_in_its_namespaces_with_all_their_rows(history):
    view = snapshot.current()
    small = view.narrowed(["small"])
    assert len(small.columns.revision) < len(view.columns.revision) / 2
    memories = set(small.columns.memory.tolist())
    everything = {(int(m), int(r)) for m, r in zip(view.columns.memory, view.columns.revision) if m in memories}
    assert set(zip(small.columns.memory.tolist(), small.columns.revision.tolist())) == everything
    _, ids = history
    assert ids[("big", 1)] in memories  # it was in small for a while: an earlier recall there finds it
    assert ids[("small", 2)] in memories and ids[("big", 2)] not in memories
    assert view.narrowed(["small"]) is small  # kept with the view
    assert view.narrowed(["big", "small", "other"]) is view  # most of the store: the whole view


def test_recall_on_a_narrowed_view_equals_recall_on_the_whole_view_to_the_bit(history, monkeypatch):
    moments, _ = history
    narrowed = answers(moments)
    assert any(hits for hits, _ in narrowed)
    monkeypatch.setattr(visibility.View, "narrowed", lambda view, namespaces: view)
    assert answers(moments) == narrowed
