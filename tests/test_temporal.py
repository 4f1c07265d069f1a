"""The visibility rule: what was known at as_of, about valid time valid_at."""

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memories import selectors, services
from memories.models import Revision
from memoryproject.exceptions import Conflict, NotFound
from memoryproject.timeparse import parse_instant

ACTOR = {"actor": "tester", "interface": "cli"}
MICRO = dt.timedelta(microseconds=1)


def t(text):
    return parse_instant(text, field="t")


def content_at(memory_id, as_of=None, valid_at=None):
    try:
        return selectors.memory_get(memory_id=memory_id, as_of=as_of, valid_at=valid_at).content
    except NotFound:
        return None


def test_a_revision_replaces_the_old_text_from_its_known_at_on(remember):
    first = remember("The office is in Berlin").memory
    second = services.memory_revise(memory_id=first.id, content="The office is in Munich", **ACTOR).memory
    assert content_at(first.id) == "The office is in Munich"
    assert content_at(first.id, as_of=first.known_at) == "The office is in Berlin"
    assert content_at(first.id, as_of=second.known_at - MICRO) == "The office is in Berlin"
    assert content_at(first.id, as_of=second.known_at) == "The office is in Munich"
    assert content_at(first.id, as_of=first.known_at - MICRO) is None


def test_valid_at_defaults_to_as_of_so_old_truths_stay_answerable(remember):
    first = remember("Alice leads the platform team").memory
    second = services.memory_revise(memory_id=first.id, content="Bob leads the platform team", **ACTOR).memory
    # Known now, about a moment before the change: the old assertion held then.
    assert content_at(first.id, valid_at=second.known_at - MICRO) == "Alice leads the platform team"
    assert content_at(first.id, valid_at=second.known_at) == "Bob leads the platform team"


def test_a_bounded_correction_overrides_only_inside_its_interval(remember):
    memory = remember("Prices are in EUR", valid_from="2020-01-01").memory
    correction = services.memory_revise(
        memory_id=memory.id, content="Prices were in USD", valid_from="2021-01-01", valid_to="2022-01-01", **ACTOR
    )
    assert correction.changed
    assert content_at(memory.id, valid_at="2020-06-01") == "Prices are in EUR"
    assert content_at(memory.id, valid_at="2021-01-01") == "Prices were in USD"  # start is inclusive
    assert content_at(memory.id, valid_at=t("2022-01-01") - MICRO) == "Prices were in USD"
    assert content_at(memory.id, valid_at="2022-01-01") == "Prices are in EUR"  # end is exclusive
    assert content_at(memory.id, valid_at="2030-01-01") == "Prices are in EUR"
    # Before the correction was known, the past read differently.
    assert correction.memory.content == "Prices are in EUR"  # what shows now, outside the interval
    known = selectors.memory_history(memory_id=memory.id)[-1].known_at
    assert content_at(memory.id, as_of=known - MICRO, valid_at="2021-06-01") == "Prices are in EUR"


def test_validity_boundaries_are_half_open(remember):
    memory = remember("The sale runs", valid_from="2030-01-01", valid_to="2030-02-01").memory
    assert content_at(memory.id) is None  # not valid yet
    assert content_at(memory.id, valid_at=t("2030-01-01") - MICRO) is None
    assert content_at(memory.id, valid_at="2030-01-01") == "The sale runs"
    assert content_at(memory.id, valid_at=t("2030-02-01") - MICRO) == "The sale runs"
    assert content_at(memory.id, valid_at="2030-02-01") is None


def test_forget_hides_the_memory_at_every_valid_time_and_keeps_history_before(remember):
    memory = remember("The wifi password is hunter2", valid_from="2000-01-01").memory
    forgotten = services.memory_forget(memory_id=memory.id, reason="rotated", **ACTOR)
    assert forgotten.changed and forgotten.memory.state == "forgotten"
    assert content_at(memory.id) is None
    assert content_at(memory.id, valid_at="2001-01-01") is None
    assert content_at(memory.id, as_of=memory.known_at) == "The wifi password is hunter2"
    history = selectors.memory_history(memory_id=memory.id)
    assert [entry.tombstone for entry in history] == [False, True]
    assert history[1].hides == history[0].id and history[1].reason == "rotated"
    assert selectors.memory_history(memory_id=memory.id, as_of=memory.known_at)[-1].tombstone is False


def test_forgetting_twice_is_a_no_op_and_restore_brings_the_text_back(remember):
    memory = remember("Use tabs").memory
    services.memory_forget(memory_id=memory.id, **ACTOR)
    again = services.memory_forget(memory_id=memory.id, **ACTOR)
    assert not again.changed
    assert Revision.objects.filter(memory_id=memory.id, tombstone=True).count() == 1
    restored = services.memory_restore(memory_id=memory.id, **ACTOR)
    assert restored.changed and restored.memory.content == "Use tabs" and restored.memory.state == "active"
    assert content_at(memory.id) == "Use tabs"
    assert not services.memory_restore(memory_id=memory.id, **ACTOR).changed


def test_ttl_ends_visibility_at_the_instant_and_history_before_stays(remember):
    learned = timezone.now() - dt.timedelta(days=3)
    memory = remember("Build 42 is broken", ttl_days=1, known_at=learned).memory
    expires = memory.expires_at
    assert expires == learned + dt.timedelta(days=1)
    assert content_at(memory.id, as_of=expires - MICRO) == "Build 42 is broken"
    assert content_at(memory.id, as_of=expires) is None
    assert content_at(memory.id) is None
    listed = selectors.memory_list(state="hidden")
    assert [item.id for item in listed.items] == [memory.id]
    assert selectors.memory_list(state="active").items == []
    with pytest.raises(Conflict, match="not visible now"):
        services.memory_forget(memory_id=memory.id, **ACTOR)


def test_revise_keeps_removes_or_sets_the_ttl(remember):
    memory = remember("Temporary note", ttl_days=5).memory
    kept = services.memory_revise(memory_id=memory.id, content="Temporary note, edited", **ACTOR).memory
    assert kept.expires_at == memory.expires_at
    removed = services.memory_revise(memory_id=memory.id, ttl_days=0, **ACTOR).memory
    assert removed.expires_at is None
    renewed = services.memory_revise(memory_id=memory.id, ttl_days=2, **ACTOR).memory
    assert renewed.expires_at == renewed.known_at + dt.timedelta(days=2)


def test_namespaces_are_isolated(remember):
    a = remember("Standup is at 9", namespace="team-a", key="standup").memory
    b = remember("Standup is at 9", namespace="team-b", key="standup").memory
    assert a.id != b.id  # the same text in another namespace is not a duplicate
    assert selectors.memory_get(namespace="team-b", key="standup").id == b.id
    services.memory_forget(memory_id=a.id, **ACTOR)
    assert content_at(b.id) == "Standup is at 9"
    assert [item.id for item in selectors.memory_list(namespace="team-a").items] == []
    assert [item.id for item in selectors.memory_list(namespace="team-b").items] == [b.id]


def test_revisions_cannot_be_updated_or_deleted_in_the_database(remember):
    memory = remember("Immutable").memory
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Revision.objects.filter(memory_id=memory.id).update(content="changed")
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memories_revision WHERE memory_id = %s", [memory.id])
    assert content_at(memory.id) == "Immutable"


def test_get_by_namespace_and_key_and_history_of_unknown_memory(remember):
    memory = remember("Deploy on Tuesdays", key="deploy-day").memory
    assert selectors.memory_get(namespace="acme", key="deploy-day").id == memory.id
    with pytest.raises(NotFound, match="List or recall memories"):
        selectors.memory_get(memory_id=memory.id + 1000)
    with pytest.raises(NotFound):
        selectors.memory_history(memory_id=memory.id + 1000)
