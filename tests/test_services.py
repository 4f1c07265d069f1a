"""The service layer's rules: dedup, refusal, limits, tags, keys, the audit trail."""

import pytest
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from memories import selectors, services
from memories.models import AuditEvent, Memory, Revision, Tag
from memories.records import MemoryRecord
from memories.services.remember import new_memory
from memoryproject.exceptions import Conflict, DuplicateContent, InvalidInput, NotFound, TooLarge

ACTOR = {"actor": "tester", "interface": "cli"}


def test_exact_duplicate_returns_the_existing_memory_with_tags_merged(remember):
    first = remember("Our CI runs on Buildkite", tags=["ci"]).memory
    again = remember("  Our CI runs on Buildkite\r\n", tags=["CI", "infra"])
    assert again.deduplicated and not again.created
    assert again.memory.id == first.id
    assert again.memory.tags == ["ci", "infra"]
    assert Revision.objects.count() == 1


def test_a_forgotten_memory_is_not_a_duplicate(remember):
    first = remember("Lunch is at noon").memory
    services.memory_forget(memory_id=first.id, **ACTOR)
    second = remember("Lunch is at noon")
    assert second.created and second.memory.id != first.id


def test_revise_refuses_to_duplicate_another_visible_memory_and_names_it(remember):
    a = remember("Releases are cut on Mondays").memory
    b = remember("Releases are cut on Fridays").memory
    with pytest.raises(DuplicateContent) as caught:
        services.memory_revise(memory_id=b.id, content="Releases are cut on Mondays", **ACTOR)
    assert caught.value.memory_id == a.id
    assert f"Memory {a.id}" in caught.value.message
    assert Revision.objects.filter(memory_id=b.id).count() == 1


def test_remember_with_an_existing_key_appends_a_revision_or_does_nothing(remember):
    first = remember("v1 of the runbook", key="runbook")
    same = remember("v1 of the runbook", key="runbook")
    assert same.deduplicated and same.memory.revision_id == first.memory.revision_id
    changed = remember("v2 of the runbook", key="runbook")
    assert changed.revised and changed.memory.id == first.memory.id
    assert [entry.content for entry in selectors.memory_history(memory_id=first.memory.id)] == [
        "v1 of the runbook",
        "v2 of the runbook",
    ]


def test_remember_under_a_forgotten_key_brings_the_memory_back(remember):
    first = remember("Old text", key="k").memory
    services.memory_forget(memory_id=first.id, **ACTOR)
    back = remember("Old text", key="k")
    assert back.revised and back.memory.state == "active"
    assert selectors.memory_get(memory_id=first.id).content == "Old text"


def test_revise_with_nothing_changed_writes_nothing(remember):
    memory = remember("Stable", title="T").memory
    result = services.memory_revise(memory_id=memory.id, content="Stable", title="T", **ACTOR)
    assert not result.changed
    assert Revision.objects.filter(memory_id=memory.id).count() == 1


def test_revise_carries_unchanged_fields_forward(remember):
    memory = remember(
        "Alice owns billing", title="Owner", source="wiki", subject="Alice", predicate="owns", object="billing"
    ).memory
    revised = services.memory_revise(memory_id=memory.id, title="Billing owner", **ACTOR).memory
    assert (revised.content, revised.title, revised.source) == ("Alice owns billing", "Billing owner", "wiki")
    assert (revised.subject, revised.predicate, revised.object) == ("Alice", "owns", "billing")


def test_a_memory_with_a_triple_and_no_kind_is_a_fact_and_a_given_kind_wins(remember):
    triple = {"subject": "billing API", "predicate": "runs on", "object": "Kubernetes"}
    assert remember("The billing API runs on Kubernetes.", **triple).memory.kind == "fact"
    assert remember("The ledger runs on Oracle.", kind="decision", **triple).memory.kind == "decision"
    assert remember("Standup is at 09:30.").memory.kind == "note"
    checked = new_memory(content="Orion runs on Nomad.", subject="Orion", predicate="runs on", object="Nomad")
    assert checked.kind == "fact"


def test_revising_a_forgotten_memory_says_to_restore_it(remember):
    memory = remember("Gone soon").memory
    services.memory_forget(memory_id=memory.id, **ACTOR)
    with pytest.raises(Conflict, match="Restore it first"):
        services.memory_revise(memory_id=memory.id, content="Changed", **ACTOR)


@override_settings(MEMORY_MAX_CONTENT_BYTES=1024)
def test_content_over_the_limit_is_refused_and_nothing_is_written(remember):
    with pytest.raises(TooLarge, match="1025 bytes is over the limit of 1024"):
        remember("x" * 1025)
    with pytest.raises(TooLarge):
        remember("é" * 513)  # the limit counts UTF-8 bytes, not characters
    assert Memory.objects.count() == 0 and Revision.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": "   "}, "content"),
        ({"content": "a\x00b"}, "content"),
        ({"content": 42}, "content"),
        ({"namespace": "Bad Namespace"}, "namespace"),
        ({"namespace": ""}, "namespace"),
        ({"kind": "opinion"}, "kind"),
        ({"tags": ["has space"]}, "tags"),
        ({"tags": "not-a-list"}, "tags"),
        ({"ttl_days": -1}, "ttl_days"),
        ({"ttl_days": "7"}, "ttl_days"),
        ({"valid_from": "2024-13-01"}, "valid_from"),
        ({"valid_from": "2024-02-01", "valid_to": "2024-01-01"}, "valid_to"),
        ({"subject": "Alice", "predicate": "owns"}, "object"),
        ({"key": "x" * 300}, "key"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(db, fields, field):
    arguments = {"namespace": "acme", "content": "Valid content", **fields}
    with pytest.raises(InvalidInput) as caught:
        services.memory_remember(**arguments, **ACTOR)
    assert caught.value.field == field
    assert Memory.objects.count() == 0 and AuditEvent.objects.count() == 0


def test_a_new_memorys_record_shows_its_tags_as_stored_and_ordered_like_a_read(remember):
    remember("Tagged first", tags=["Backend"])
    memory = remember("Tagged second", tags=["zeta", "BACKEND", "Alpha"]).memory
    assert memory.tags == ["Alpha", "Backend", "zeta"]
    assert selectors.memory_get(memory_id=memory.id).tags == memory.tags
    assert remember("Untagged").memory.tags == []


def test_tags_are_case_insensitive_and_keep_their_first_spelling(remember):
    memory = remember("Tagged", tags=["Backend", "backend", "API"]).memory
    assert memory.tags == ["API", "Backend"]
    services.memory_retag(memory_id=memory.id, add=["BACKEND", "infra"], remove=["api"], **ACTOR)
    assert selectors.memory_get(memory_id=memory.id).tags == ["Backend", "infra"]
    assert Tag.objects.filter(slug="backend").count() == 1
    assert [item.id for item in selectors.memory_list(tags=["INFRA"]).items] == [memory.id]


def test_every_write_records_the_actor_and_the_interface(db):
    result = services.memory_remember(namespace="acme", content="Audited", actor="key:abc", interface="api")
    services.memory_forget(memory_id=result.memory.id, actor="admin:alice", interface="admin")
    revisions = Revision.objects.filter(memory_id=result.memory.id).order_by("id")
    assert [(r.author, r.interface) for r in revisions] == [("key:abc", "api"), ("admin:alice", "admin")]
    events = AuditEvent.objects.order_by("id")
    assert [(e.action, e.actor, e.interface) for e in events] == [
        ("remember", "key:abc", "api"),
        ("forget", "admin:alice", "admin"),
    ]
    with pytest.raises(InvalidInput, match="interface"):
        services.memory_remember(namespace="acme", content="x", actor="someone", interface="email")


def test_list_pages_newest_first_with_filters(remember):
    ids = [remember(f"Fact number {n}", kind="fact" if n % 2 else "note").memory.id for n in range(7)]
    first = selectors.memory_list(limit=3)
    assert [item.id for item in first.items] == ids[::-1][:3]
    second = selectors.memory_list(limit=3, cursor=first.next_cursor)
    third = selectors.memory_list(limit=3, cursor=second.next_cursor)
    assert [item.id for item in second.items + third.items] == ids[::-1][3:]
    assert third.next_cursor is None
    assert {item.kind for item in selectors.memory_list(kind="fact").items} == {"fact"}
    with pytest.raises(InvalidInput, match="cursor"):
        selectors.memory_list(cursor="garbage!")


def test_stats_count_what_is_visible_per_namespace(remember):
    remember("One", namespace="a", tags=["x"])
    remember("Two", namespace="a", tags=["x", "y"], ttl_days=3)
    gone = remember("Three", namespace="b").memory
    services.memory_forget(memory_id=gone.id, **ACTOR)
    stats = selectors.memory_stats()
    assert (stats["memories"], stats["visible"], stats["forgotten"], stats["revisions"]) == (3, 2, 1, 4)
    assert stats["namespaces"] == {"a": {"memories": 2, "visible": 2}, "b": {"memories": 1, "visible": 0}}
    assert stats["top_tags"][0] == {"tag": "x", "namespace": "a", "count": 2}
    assert stats["with_ttl"] == 1
    newest = max(
        name for app, name in MigrationRecorder.Migration.objects.values_list("app", "name") if app == "memories"
    )
    assert stats["database_bytes"] >= 0 and stats["schema"]["memories"] == newest
    assert selectors.memory_stats(namespace="b")["visible"] == 0


def test_unknown_ids_raise_not_found(db):
    with pytest.raises(NotFound):
        services.memory_forget(memory_id=999, **ACTOR)
    with pytest.raises(InvalidInput):
        services.memory_revise(memory_id="1", content="x", **ACTOR)


def test_text_a_memory_held_in_the_past_is_not_a_duplicate(remember):
    first = remember("Text A.").memory
    services.memory_revise(memory_id=first.id, content="Text B.", **ACTOR)
    again = remember("Text A.")
    assert again.created and again.memory.id != first.id
    assert selectors.memory_get(memory_id=again.memory.id).content == "Text A."


def test_records_read_in_bulk_equal_the_ones_the_orm_builds(remember, actor):
    plain = remember("Plain memory without extras.").memory
    rich = remember(
        "Rich memory with every field.",
        key="rich",
        title="Rich",
        kind="decision",
        tags=["Zeta", "alpha"],
        source="notes.md",
        ttl_days=3,
        valid_from="2024-01-01",
        valid_to="2030-01-01T12:00:00.250000Z",
        subject="team",
        predicate="uses",
        object="Django",
    ).memory
    later = services.memory_revise(memory_id=rich.id, content="Rich memory, revised.", **actor).memory
    revisions = Revision.objects.filter(pk__in=[plain.revision_id, rich.revision_id, later.revision_id])
    expected = {revision.pk: MemoryRecord.from_revision(revision) for revision in revisions}
    assert selectors.records_for_revisions([plain.revision_id, rich.revision_id, later.revision_id, 10**9]) == expected
    assert expected[rich.revision_id].tags == ["alpha", "Zeta"]
    assert expected[rich.revision_id].expires_at is not None
