"""The visibility rule: what was known at as_of, about valid time valid_at."""

import datetime as dt
import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memories import selectors, services
from memories.models import AuditEvent, Revision
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


# Namespace, kind and tags answer as of a time, like the text -------------------------------------------------------


@pytest.fixture
def changed(remember):
    """A memory retagged, re-kinded and moved, one change after another; returns it and the instant of each change."""
    memory = remember("The deploy runs on Fridays", namespace="ops", kind="note", tags=["Deploy"]).memory
    services.memory_retag(memory_id=memory.id, add=["Urgent"], remove=["deploy"], **ACTOR)
    services.memory_revise(memory_id=memory.id, kind="decision", **ACTOR)
    services.memory_move(memory_id=memory.id, namespace="platform", **ACTOR)
    changes = AuditEvent.objects.filter(memory_id=memory.id, action__in=["retag", "rekind", "move"]).order_by("at")
    return memory, tuple(changes.values_list("at", flat=True))


def _fields(record):
    return record.namespace, record.kind, record.tags


def test_get_shows_the_namespace_kind_and_tags_the_memory_had_at_as_of(changed):
    memory, (retagged, rekinded, moved) = changed
    assert _fields(selectors.memory_get(memory_id=memory.id, as_of=retagged - MICRO)) == ("ops", "note", ["Deploy"])
    assert _fields(selectors.memory_get(memory_id=memory.id, as_of=retagged)) == ("ops", "note", ["Urgent"])
    assert _fields(selectors.memory_get(memory_id=memory.id, as_of=rekinded)) == ("ops", "decision", ["Urgent"])
    assert _fields(selectors.memory_get(memory_id=memory.id, as_of=moved)) == ("platform", "decision", ["Urgent"])
    assert _fields(selectors.memory_get(memory_id=memory.id)) == ("platform", "decision", ["Urgent"])
    # By namespace and key: where it was then.
    assert selectors.memory_get(namespace="ops", key=memory.key, as_of=moved - MICRO).id == memory.id
    with pytest.raises(NotFound):
        selectors.memory_get(namespace="platform", key=memory.key, as_of=moved - MICRO)
    with pytest.raises(NotFound):
        selectors.memory_get(namespace="ops", key=memory.key)


def test_history_lists_each_change_of_namespace_kind_and_tags_known_by_as_of(changed):
    memory, (retagged, rekinded, moved) = changed
    history = selectors.attribute_history(memory_id=memory.id)
    # Each row has the instant of the write that appended it (a new memory's, its first revision's).
    assert [row.known_at for row in history] == [memory.known_at, retagged, rekinded, moved]
    assert [_fields(row) for row in history] == [
        ("ops", "note", ["Deploy"]),
        ("ops", "note", ["Urgent"]),
        ("ops", "decision", ["Urgent"]),
        ("platform", "decision", ["Urgent"]),
    ]
    assert [_fields(row) for row in selectors.attribute_history(memory_id=memory.id, as_of=rekinded - MICRO)] == [
        ("ops", "note", ["Deploy"]),
        ("ops", "note", ["Urgent"]),
    ]


def _listed(**filters):
    return [(item.id, item.state, *_fields(item)) for item in selectors.memory_list(state="all", **filters).items]


def test_list_as_of_filters_by_the_namespace_kind_and_tags_each_memory_carried_then(changed):
    memory, (retagged, rekinded, moved) = changed
    before = moved - MICRO
    assert _listed(namespace="ops", as_of=before) == [(memory.id, "active", "ops", "decision", ["Urgent"])]
    assert _listed(namespace="platform", as_of=before) == []
    assert _listed(namespace="platform") == [(memory.id, "active", "platform", "decision", ["Urgent"])]
    assert _listed(tags=["deploy"], as_of=retagged - MICRO) == [(memory.id, "active", "ops", "note", ["Deploy"])]
    assert _listed(tags=["deploy"], as_of=retagged) == []
    assert _listed(kind="note", as_of=rekinded - MICRO) == [(memory.id, "active", "ops", "note", ["Urgent"])]
    assert _listed(kind="note", as_of=rekinded) == []
    # Before the memory was written it is not there in any state.
    assert _listed(as_of=memory.known_at - MICRO) == []


def test_list_as_of_reads_states_at_that_time(remember):
    kept = remember("The deploy runs on Fridays", namespace="ops").memory
    dropped = remember("The standup is at nine", namespace="ops").memory
    services.memory_forget(memory_id=dropped.id, reason="moved to ten", **ACTOR)
    forgotten_at = Revision.objects.filter(memory_id=dropped.id, tombstone=True).get().known_at
    then = selectors.memory_list(namespace="ops", as_of=forgotten_at - MICRO)
    assert [item.id for item in then.items] == [dropped.id, kept.id]
    now = selectors.memory_list(namespace="ops", state="forgotten", as_of=forgotten_at)
    assert [(item.id, item.state, item.content) for item in now.items] == [
        (dropped.id, "forgotten", "The standup is at nine")
    ]
    assert [item.id for item in selectors.memory_list(namespace="ops", state="active", as_of=forgotten_at).items] == [
        kept.id
    ]
    # Valid time: a memory that holds only from tomorrow is hidden today and listed as valid tomorrow.
    later = remember("The office moves to Lyon", namespace="ops", valid_from="2099-01-01").memory
    assert later.id in [
        item.id
        for item in selectors.memory_list(namespace="ops", state="hidden", valid_at="2026-06-01T00:00:00Z").items
    ]
    assert later.id in [item.id for item in selectors.memory_list(namespace="ops", valid_at="2099-06-01").items]


def test_an_update_of_text_kind_and_tags_is_one_instant_so_no_time_shows_half_of_it(remember):
    memory = remember("The deploy runs on Fridays", namespace="ops", kind="note", tags=["deploy"]).memory
    services.memory_update(
        memory_id=memory.id, content="The deploy runs on Mondays", kind="decision", add_tags=["urgent"], **ACTOR
    )
    revision = Revision.objects.filter(memory_id=memory.id).latest("id")
    history = selectors.attribute_history(memory_id=memory.id)
    # The revision and every attribute set the update appended share its instant.
    assert {row.known_at for row in history[1:]} == {revision.known_at}
    before = selectors.memory_get(memory_id=memory.id, as_of=revision.known_at - MICRO)
    after = selectors.memory_get(memory_id=memory.id, as_of=revision.known_at)
    assert (before.content, before.kind, before.tags) == ("The deploy runs on Fridays", "note", ["deploy"])
    assert (after.content, after.kind, after.tags) == ("The deploy runs on Mondays", "decision", ["deploy", "urgent"])


def test_recall_filters_and_hits_use_the_namespace_kind_and_tags_of_as_of(changed, remember):
    memory, (retagged, rekinded, moved) = changed
    remember("Fridays are for reviews", namespace="platform", kind="decision", tags=["urgent"])

    def found(as_of, **filters):
        hits = selectors.memory_recall(query="deploy Fridays", mode="keyword", match="all", as_of=as_of, **filters).hits
        return [hit.memory.id for hit in hits]

    before = retagged - MICRO
    assert found(before, tags=["deploy"]) == [memory.id] and found(before, tags=["urgent"]) == []
    assert found(before, kinds=["note"]) == [memory.id] and found(before, kinds=["decision"]) == []
    assert found(before, namespace="ops") == [memory.id] and found(before, namespace="platform") == []
    hit = selectors.memory_recall(query="deploy Fridays", mode="keyword", as_of=before).hits[0].memory
    assert _fields(hit) == ("ops", "note", ["Deploy"])
    assert found(rekinded, kinds=["decision"], namespace="ops", tags=["urgent"]) == [memory.id]
    now = timezone.now()
    assert found(now, tags=["urgent"]) == [memory.id] and found(now, tags=["deploy"]) == []
    assert found(now, kinds=["decision"]) == [memory.id] and found(now, kinds=["note"]) == []
    assert found(now, namespace="platform") == [memory.id] and found(now, namespace="ops") == []


def test_export_as_of_gives_the_namespace_kind_and_tags_of_the_cutoff(changed):
    memory, (retagged, rekinded, moved) = changed
    document = json.loads("".join(services.memories_export(namespace="ops", as_of=moved - MICRO)))
    [entry] = document["memories"]
    assert (entry["namespace"], entry["kind"], entry["tags"]) == ("ops", "decision", ["Urgent"])
    assert json.loads("".join(services.memories_export(namespace="ops")))["memories"] == []


def test_attribute_rows_cannot_be_updated_or_deleted_in_the_database(changed):
    memory, _ = changed
    for statement in (
        "UPDATE memories_attributes SET kind = 'fact'",
        "DELETE FROM memories_attributes",
        "DELETE FROM memories_attributes_tags",
    ):
        with pytest.raises(IntegrityError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)


def test_erasing_a_moved_memory_removes_its_postings_and_history_under_every_namespace(changed):
    memory, _ = changed

    def keyed():
        """Postings (packed and tail) under each namespace: only this memory's revisions are stored."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT term FROM search_posting UNION ALL SELECT term FROM search_posting_tail")
            return {term.partition("\x1f")[0] for (term,) in cursor.fetchall()}

    assert keyed() == {"ops", "platform"}  # the move added keys and kept the old ones
    services.memory_erase(memory_id=memory.id, **ACTOR)
    assert keyed() == set()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_attributes")
        assert cursor.fetchone()[0] == 0
    assert selectors.memory_recall(query="deploy", mode="keyword", as_of=memory.known_at).hits == []
