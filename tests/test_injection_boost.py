"""Injection-aware ranking: off by default; on, a memory's score is multiplied by exactly 1 + a*ln(1 + injections),
counting only the injections whose answer used it, from the time that was known, each memory by its own id."""

import math

import pytest
from django.utils import timezone

from memories.selectors import memory_recall
from telemetry.services import injection_create, injection_used_mark


@pytest.fixture
def three(remember):
    """Three memories about deploys in acme, one in beta with the same text."""
    ids = [
        remember(text).memory
        for text in (
            "Deploys go out on Tuesday mornings.",
            "Deploys need two reviews.",
            "Deploys are frozen in December.",
        )
    ]
    beta = remember("Deploys go out on Tuesday mornings.", namespace="beta").memory
    return {"acme": ids, "beta": beta}


def _inject(memory, times: int, *, used: bool = True) -> None:
    for _ in range(times):
        record = injection_create(
            actor="key:hooks",
            harness="claude-code",
            hook="UserPromptSubmit",
            session="s",
            query="q",
            characters=10,
            items=[(memory.id, memory.revision_id)],
        )
        if used:
            injection_used_mark(injection_id=record.id, memory_ids=[memory.id])


def _scores(namespace="acme", **arguments) -> dict[int, float]:
    return {
        hit.memory.id: hit.score
        for hit in memory_recall(query="deploys", namespace=namespace, limit=10, min_score=0, **arguments).hits
    }


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_scores_move_by_exactly_the_documented_factor(three, settings, mode):
    first, second, third = three["acme"]
    before = _scores(mode=mode)
    _inject(second, 3)
    _inject(third, 1)
    assert _scores(mode=mode) == before  # off by default
    settings.MEMORY_INJECTION_BOOST = 0.5
    after = _scores(mode=mode)
    assert after[first.id] == before[first.id]
    assert after[second.id] == pytest.approx(before[second.id] * (1 + 0.5 * math.log(4)))
    assert after[third.id] == pytest.approx(before[third.id] * (1 + 0.5 * math.log(2)))
    order = [memory_id for memory_id, _ in sorted(after.items(), key=lambda item: (-item[1], item[0]))]
    hits = memory_recall(query="deploys", namespace="acme", limit=10, min_score=0, mode=mode).hits
    assert [hit.memory.id for hit in hits] == order


def test_injections_whose_answer_did_not_use_the_memory_count_for_nothing(three, settings):
    before = _scores()
    settings.MEMORY_INJECTION_BOOST = 1.0
    _inject(three["acme"][1], 20, used=False)
    assert _scores() == before


def test_only_injections_marked_used_by_as_of_count(three, settings):
    settings.MEMORY_INJECTION_BOOST = 0.5
    first, second, _ = three["acme"]
    _inject(second, 1)
    then = timezone.now()
    at_then = _scores(as_of=then.isoformat())
    _inject(first, 20)
    _inject(second, 20)
    assert _scores(as_of=then.isoformat()) == at_then
    assert _scores()[first.id] > at_then[first.id]


def test_injections_of_a_memory_in_another_namespace_move_nothing_here(three, settings):
    before = _scores()
    settings.MEMORY_INJECTION_BOOST = 1.0
    _inject(three["beta"], 50)
    assert _scores() == before
    assert _scores(namespace="beta")[three["beta"].id] > before[three["acme"][0].id]


def test_explain_shows_the_factor_and_null_when_off(three, settings):
    second = three["acme"][1]
    _inject(second, 3)
    explained = {
        hit.memory.id: hit.explain
        for hit in memory_recall(query="deploys", namespace="acme", limit=10, min_score=0, explain=True).hits
    }
    assert explained[second.id]["injection_boost"] is None
    settings.MEMORY_INJECTION_BOOST = 0.5
    explained = {
        hit.memory.id: hit.explain
        for hit in memory_recall(query="deploys", namespace="acme", limit=10, min_score=0, explain=True).hits
    }
    assert explained[second.id]["injection_boost"] == pytest.approx(1 + 0.5 * math.log(4))
    assert explained[three["acme"][0].id]["injection_boost"] == 1.0
