"""Near-duplicate detection on write: the write goes ahead and reports the namespace's closest memory."""

import json

import numpy as np
import pytest

from memories import services
from memories.models import AuditEvent, Memory
from search import cosines, vectors
from search.duplicates import find_near_twin
from search.embeddings import get_embedder, revision_text

ACTOR = {"actor": "tester", "interface": "cli"}
DEPLOY = "The deploy runs every Friday at noon from the release branch."
REWORDED = "Remember that the deploy runs every Friday at noon from the release branch."


def test_a_near_duplicate_is_written_and_names_its_twin(remember):
    first = remember(DEPLOY).memory
    second = remember(REWORDED)
    assert second.created and not second.deduplicated
    assert second.near_twin.memory_id == first.id
    assert second.near_twin.revision_id == first.revision_id
    assert 0.9 <= second.near_twin.cosine < 1.0
    assert second.as_dict()["near_twin"] == {
        "memory_id": first.id,
        "revision_id": first.revision_id,
        "cosine": round(second.near_twin.cosine, 4),
    }


def test_the_text_is_embedded_once_for_both_the_check_and_the_write(remember, monkeypatch):
    first = remember(DEPLOY).memory
    embedder = get_embedder()
    embed, calls = embedder.embed, []
    monkeypatch.setattr(embedder, "embed", lambda texts: calls.append(list(texts)) or embed(texts))
    second = remember(REWORDED)
    assert second.near_twin.memory_id == first.id
    assert calls == [[revision_text(None, REWORDED)]]
    ids, matrix = vectors.load_matrix()
    stored = matrix[list(ids).index(second.memory.revision_id)]
    np.testing.assert_array_equal(stored, embed([revision_text(None, REWORDED)])[0])


def test_the_audit_names_the_twin(remember):
    first = remember(DEPLOY).memory
    second = remember(REWORDED)
    assert second.near_twin.memory_id == first.id
    event = AuditEvent.objects.get(action="remember", memory_id=second.memory.id)
    assert event.detail["near_twin"] == second.near_twin.as_dict()
    # Asked directly, the same check on the caller's thread finds the same twin.
    assert find_near_twin(REWORDED, namespace="acme", exclude_memory_id=second.memory.id).as_dict() == (
        second.near_twin.as_dict()
    )


def test_the_scan_runs_before_the_write_lock(remember, monkeypatch):
    first = remember(DEPLOY).memory
    scan, seen = cosines.dots, []

    def watched(*args):
        seen.append(Memory.objects.count())
        return scan(*args)

    monkeypatch.setattr(cosines, "dots", watched)
    second = remember(REWORDED)
    assert second.near_twin.memory_id == first.id
    assert seen == [1]  # before the new memory's insert


def test_unrelated_text_has_no_twin(remember):
    remember(DEPLOY)
    result = remember("Alice prefers dark mode in every editor she uses.")
    assert result.created and result.near_twin is None
    assert "near_twin" not in result.as_dict()


def test_an_exact_duplicate_is_deduplicated_not_reported_as_a_twin(remember):
    first = remember(DEPLOY).memory
    again = remember(DEPLOY)
    assert again.deduplicated and again.memory.id == first.id and again.near_twin is None


def test_twins_are_looked_for_in_the_writes_namespace_only(remember):
    remember(DEPLOY, namespace="team-a")
    assert remember(REWORDED, namespace="team-b").near_twin is None


def test_a_forgotten_memory_is_no_twin(remember):
    first = remember(DEPLOY).memory
    services.memory_forget(memory_id=first.id, **ACTOR)
    assert remember(REWORDED).near_twin is None


def test_the_twin_is_the_closest_visible_memory(remember):
    remember("The deploy runs every Friday from the release branch, usually at noon or a little later.")
    closest = remember(DEPLOY).memory
    assert remember(REWORDED).near_twin.memory_id == closest.id


def test_a_keyed_revision_never_names_its_own_memory(remember):
    twin = remember(DEPLOY, key="deploy").memory
    mine = remember("Lunch is at noon in the big room.", key="lunch").memory
    revised = remember(REWORDED, key="lunch")
    assert revised.revised and revised.memory.id == mine.id
    assert revised.near_twin.memory_id == twin.id


def test_rewording_a_memory_under_its_key_is_no_near_duplicate_of_itself(remember):
    remember(DEPLOY, key="deploy")
    again = remember(REWORDED, key="deploy")
    assert again.revised and again.near_twin is None


def test_the_threshold_setting_decides_and_above_one_turns_detection_off(remember, settings):
    remember(DEPLOY)
    settings.MEMORY_NEAR_DUPLICATE_COSINE = 1.01
    assert remember(REWORDED).near_twin is None
    settings.MEMORY_NEAR_DUPLICATE_COSINE = 0.0
    assert remember("Alice prefers dark mode in every editor she uses.").near_twin is not None


def test_find_near_twin_with_nothing_stored(db):
    assert find_near_twin(DEPLOY, namespace="acme") is None


def test_imports_skip_the_check(remember):
    remember(DEPLOY)
    document = {
        "format": "memory-export",
        "version": 1,
        "memories": [
            {"namespace": "acme", "key": "reworded", "kind": "note", "tags": [], "revisions": [{"content": REWORDED}]}
        ],
    }
    report = services.memories_import(document=json.dumps(document), trusted=False, **ACTOR)
    assert report.as_dict()["created"] == 1


@pytest.mark.django_db
def test_the_real_model_finds_a_paraphrase_and_not_a_neighbour(minilm, remember):
    coffee = remember("Alex takes his coffee black with no sugar.").memory
    remember("Nadia is vegetarian and does not eat fish.")
    paraphrase = remember("Alex drinks his coffee black, without any sugar.")
    assert paraphrase.near_twin.memory_id == coffee.id and paraphrase.near_twin.cosine >= 0.9
    assert remember("Oskar is learning Japanese on Tuesday evenings.").near_twin is None
