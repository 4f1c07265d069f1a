"""Conflicts: found among visible facts of a namespace, point in time, per-namespace predicates, resolved by
appending."""

import datetime as dt

import pytest
from django.utils import timezone

from knowledge.contradictions import SINGLE_VALUED
from knowledge.models import PredicateSetting
from memories import selectors, services
from memories.models import AuditEvent, Revision
from memories.selectors.conflicts import memory_conflicts
from memoryproject.exceptions import Conflict, InvalidInput
from memoryproject.timeparse import format_instant

ACTOR = {"actor": "tester", "interface": "cli"}


def _fact(remember, subject, predicate, object_, namespace="acme", **fields):
    content = fields.pop("content", f"{subject} {predicate} {object_}.")
    return remember(content, namespace=namespace, subject=subject, predicate=predicate, object=object_, **fields).memory


def _ids(**arguments) -> list[str]:
    return [conflict.id for conflict in memory_conflicts(**arguments).conflicts]


@pytest.fixture
def hosts(remember):
    """Two memories that put the Payments API on two hosts, spelled differently."""
    first = _fact(remember, "Payments API", "runs on", "host-7", source="wiki")
    second = _fact(remember, "the payments  api", "Runs_On", "host-9", source="deploy log")
    return first, second


# --- detection ------------------------------------------------------------------------------------------------


def test_two_facts_with_one_subject_in_normal_form_and_a_single_valued_predicate_conflict(hosts):
    first, second = hosts

    found = memory_conflicts(namespace="acme")

    assert found.total == 1
    conflict = found.conflicts[0]
    assert (conflict.id, conflict.namespace, conflict.subject, conflict.predicate) == (
        f"{first.id}-{second.id}",
        "acme",
        "payments api",
        "runs on",
    )
    assert (conflict.left.memory_id, conflict.left.object, conflict.left.provenance.source) == (
        first.id,
        "host-7",
        "wiki",
    )
    assert (
        conflict.right.memory_id,
        conflict.right.object,
        conflict.right.provenance.author,
        conflict.right.provenance.interface,
    ) == (second.id, "host-9", "tester", "cli")


def test_a_multi_valued_predicate_the_same_object_or_another_subject_is_no_conflict(remember):
    assert "uses" not in SINGLE_VALUED
    _fact(remember, "Payments API", "uses", "Postgres")
    _fact(remember, "Payments API", "uses", "Redis")
    _fact(remember, "Search API", "runs on", "host-1")
    _fact(remember, "Billing", "runs on", "host-2")
    _fact(remember, "billing", "runs on", "Host-2", content="Billing is on host-2, says the wiki.")
    remember("A note without a triple about Billing on host-3.")

    assert _ids(namespace="acme") == []


def test_facts_in_two_namespaces_do_not_conflict_and_each_namespace_is_asked_alone(remember):
    _fact(remember, "Payments API", "runs on", "host-7", namespace="acme")
    _fact(remember, "Payments API", "runs on", "host-9", namespace="other")
    third = _fact(remember, "Payments API", "runs on", "host-1", namespace="other")

    assert _ids(namespace="acme") == []
    assert len(_ids(namespace="other")) == 1 and _ids(namespace="other")[0].endswith(f"-{third.id}")
    assert _ids() == _ids(namespace=["acme", "other"]) == _ids(namespace="other")


def test_a_namespaces_conflicts_read_the_fact_rows_of_its_own_visible_revisions_only(remember):
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    acme = [_fact(remember, "Payments API", "runs on", f"host-{n}").revision_id for n in (1, 2)]
    other = [_fact(remember, f"Service {n}", "runs on", "host-1", namespace="other").revision_id for n in range(20)]

    with CaptureQueriesContext(connection) as queries:
        assert len(_ids(namespace="acme")) == 1
    read = [query["sql"] for query in queries.captured_queries if "knowledge_fact" in query["sql"]]
    assert len(read) == 1
    asked = {int(number) for number in re.findall(r"\d+", read[0].split(" IN ", 1)[1])}
    assert set(acme) <= asked and not asked & set(other)


def test_three_values_make_three_conflicts_in_a_stable_order(remember):
    ids = [_fact(remember, "Payments API", "owned by", owner).id for owner in ("alice", "bob", "carol")]

    assert _ids(namespace="acme") == [f"{ids[0]}-{ids[1]}", f"{ids[0]}-{ids[2]}", f"{ids[1]}-{ids[2]}"]
    assert _ids(namespace="acme", limit=2) == [f"{ids[0]}-{ids[1]}", f"{ids[0]}-{ids[2]}"]
    assert memory_conflicts(namespace="acme", limit=2).total == 3


def test_a_namespace_setting_overrides_the_default_list_either_way(remember):
    _fact(remember, "Payments API", "runs on", "host-7")
    _fact(remember, "Payments API", "runs on", "host-9")
    _fact(remember, "Payments API", "uses", "Postgres")
    _fact(remember, "Payments API", "uses", "Redis")
    _fact(remember, "Payments API", "uses", "Kafka", namespace="other")
    _fact(remember, "Payments API", "uses", "Redis", namespace="other")

    PredicateSetting.objects.create(namespace="acme", predicate="runs on", single_valued=False)
    PredicateSetting.objects.create(namespace="acme", predicate="uses", single_valued=True)

    assert [conflict.predicate for conflict in memory_conflicts(namespace="acme").conflicts] == ["uses"]
    assert _ids(namespace="other") == []


def test_bad_arguments_are_refused_naming_the_field(db):
    with pytest.raises(InvalidInput) as error:
        memory_conflicts(as_of="yesterday")
    assert error.value.field == "as_of"
    with pytest.raises(InvalidInput) as error:
        memory_conflicts(namespace="Not A Namespace")
    assert error.value.field == "namespace"


# --- point in time --------------------------------------------------------------------------------------------


def test_a_conflict_that_appears_after_t_is_absent_as_of_t(remember):
    first = _fact(remember, "Payments API", "runs on", "host-7")
    before = timezone.now()
    second = _fact(remember, "Payments API", "runs on", "host-9")

    assert _ids(namespace="acme", as_of=format_instant(before)) == []
    assert _ids(namespace="acme") == [f"{first.id}-{second.id}"]


def test_a_memory_moved_to_another_namespace_leaves_its_conflict_there_only_as_of_before(remember):
    first = _fact(remember, "Payments API", "runs on", "host-7")
    second = _fact(remember, "Payments API", "runs on", "host-9")
    before = format_instant(timezone.now())

    services.memory_move(memory_id=second.id, namespace="other", **ACTOR)

    assert _ids(namespace="acme") == [] and _ids(namespace="other") == []
    assert _ids(namespace="acme", as_of=before) == [f"{first.id}-{second.id}"]
    assert _ids(as_of=before) == [f"{first.id}-{second.id}"]
    assert selectors.memory_get(memory_id=first.id, as_of=before).conflicts[0].memory_id == second.id
    assert selectors.memory_get(memory_id=first.id).conflicts is None


def test_facts_that_hold_at_different_valid_times_conflict_only_where_both_hold(remember):
    _fact(remember, "Payments API", "runs on", "host-7", valid_from="2024-01-01", valid_to="2024-06-01")
    _fact(remember, "Payments API", "runs on", "host-9", valid_from="2024-05-01")

    assert _ids(namespace="acme", valid_at="2024-03-01") == []
    assert len(_ids(namespace="acme", valid_at="2024-05-15")) == 1
    assert _ids(namespace="acme", valid_at="2024-07-01") == []


# --- surfacing: recall and get ----------------------------------------------------------------------------------


def test_recall_hits_and_get_carry_the_other_memory_with_both_provenances(hosts):
    first, second = hosts

    hits = {
        hit.memory.id: hit.memory
        for hit in selectors.memory_recall(query="payments", namespace="acme", mode="keyword").hits
    }
    got = selectors.memory_get(memory_id=first.id)

    for record in (hits[first.id], got):
        (conflict,) = record.conflicts
        assert (conflict.conflict_id, conflict.memory_id, conflict.revision_id, conflict.object) == (
            f"{first.id}-{second.id}",
            second.id,
            second.revision_id,
            "host-9",
        )
        assert (conflict.provenance.source, conflict.own_provenance.source) == ("deploy log", "wiki")
        assert conflict.provenance.known_at == second.known_at and conflict.own_provenance.known_at == first.known_at
    assert hits[second.id].conflicts[0].memory_id == first.id
    assert (
        "conflicts" in got.model_dump()
        and "conflicts" not in selectors.memory_get(memory_id=first.id, as_of=format_instant(first.known_at)).as_dict()
    )


def test_a_hit_without_a_triple_or_with_a_multi_valued_predicate_costs_no_fact_lookup(
    remember, django_assert_num_queries
):
    remember("Payments deploys on Tuesdays.")
    _fact(remember, "Payments API", "uses", "Postgres", content="Payments uses Postgres.")
    _fact(remember, "Payments API", "uses", "Redis", content="Payments uses Redis.")
    plain = selectors.memory_recall(query="payments", namespace="acme", mode="keyword")
    assert len(plain.hits) == 3 and all(hit.memory.conflicts is None for hit in plain.hits)

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        selectors.memory_recall(query="payments", namespace="acme", mode="keyword")
    facts = [query["sql"] for query in queries.captured_queries if "knowledge_fact" in query["sql"]]
    # A conflict lookup asks for other objects; the one lookup per fact hit left is confidence's corroboration.
    looked_up = [sql for sql in facts if 'NOT ("knowledge_fact"."object"' in sql]
    settings_read = [query["sql"] for query in queries.captured_queries if "knowledge_predicatesetting" in query["sql"]]
    assert looked_up == [] and len(facts) == 2 and len(settings_read) == 1


# --- resolution -------------------------------------------------------------------------------------------------


def _revisions(memory_id) -> list[tuple]:
    return list(Revision.objects.filter(memory_id=memory_id).order_by("pk").values_list("pk", "tombstone"))


def test_keep_forgets_the_other_appends_only_and_is_audited(hosts):
    first, second = hosts
    name = f"{first.id}-{second.id}"
    before = timezone.now()

    result = services.conflict_resolve(
        conflict_id=name, resolution="keep", keep=first.id, reason="the deploy log is stale", **ACTOR
    )

    assert [memory.state for memory in result.memories] == ["active", "forgotten"]
    assert [tombstone for _, tombstone in _revisions(second.id)] == [False, True]
    assert Revision.objects.get(pk=result.revision_ids[0]).reason == "the deploy log is stale"
    assert _ids(namespace="acme") == []
    assert _ids(namespace="acme", as_of=format_instant(before)) == [name]
    events = AuditEvent.objects.filter(action="resolve_conflict").order_by("memory_id")
    assert [event.memory_id for event in events] == [first.id, second.id]
    assert events[0].actor == "tester" and events[0].detail["reason"] == "the deploy log is stale"
    assert events[0].detail["kept"] == first.id and events[0].detail["revision_ids"] == result.revision_ids
    assert selectors.memory_get(memory_id=first.id).conflicts is None


def test_merge_revises_the_kept_memory_with_the_text_and_forgets_the_other(hosts):
    first, second = hosts

    result = services.conflict_resolve(
        conflict_id=f"{first.id}-{second.id}",
        resolution="merge",
        keep=second.id,
        content="Payments API moved from host-7 to host-9 in May.",
        **ACTOR,
    )

    assert selectors.memory_get(memory_id=second.id).content == "Payments API moved from host-7 to host-9 in May."
    assert [tombstone for _, tombstone in _revisions(first.id)] == [False, True]
    assert [tombstone for _, tombstone in _revisions(second.id)] == [False, False]
    assert len(result.revision_ids) == 2
    assert _ids(namespace="acme") == []
    assert Revision.objects.filter(pk__in=[first.revision_id, second.revision_id]).count() == 2


def test_split_bounds_both_facts_at_the_boundary_and_keeps_history(remember):
    first = _fact(remember, "Payments API", "runs on", "host-7", valid_from="2024-01-01")
    second = _fact(remember, "Payments API", "runs on", "host-9", valid_from="2024-03-01")
    name = f"{first.id}-{second.id}"
    before = timezone.now()

    result = services.conflict_resolve(conflict_id=name, resolution="split", boundary="2024-05-01", **ACTOR)

    assert [memory.state for memory in result.memories] == ["active", "active"]
    assert len(result.revision_ids) == 4  # a tombstone and a re-assertion each
    for valid_at in ("2024-02-01", "2024-04-01", "2024-06-01", None):
        assert _ids(namespace="acme", valid_at=valid_at) == []
    assert _ids(namespace="acme", as_of=format_instant(before), valid_at="2024-04-01") == [name]
    assert selectors.memory_get(memory_id=first.id, valid_at="2024-04-30").object == "host-7"
    assert selectors.memory_get(memory_id=second.id, valid_at="2024-05-01").object == "host-9"
    with pytest.raises(Exception):
        selectors.memory_get(memory_id=first.id)  # host-7 no longer holds now
    with pytest.raises(Exception):
        selectors.memory_get(memory_id=second.id, valid_at="2024-04-30")
    assert Revision.objects.filter(pk__in=[first.revision_id, second.revision_id]).count() == 2
    assert AuditEvent.objects.get(action="resolve_conflict", memory_id=first.id).detail["boundary"] == (
        "2024-05-01T00:00:00.000000Z"
    )


def test_split_takes_the_earlier_memory_from_the_caller(remember):
    first = _fact(remember, "Payments API", "runs on", "host-7")
    second = _fact(remember, "Payments API", "runs on", "host-9")
    boundary = timezone.now() + dt.timedelta(days=1)

    services.conflict_resolve(
        conflict_id=f"{first.id}-{second.id}", resolution="split", earlier=second.id, boundary=boundary, **ACTOR
    )

    assert selectors.memory_get(memory_id=second.id).object == "host-9"
    assert selectors.memory_get(memory_id=first.id, valid_at=format_instant(boundary)).object == "host-7"


def test_a_conflict_that_no_longer_exists_is_refused_and_nothing_is_written(hosts):
    first, second = hosts
    name = f"{first.id}-{second.id}"
    services.conflict_resolve(conflict_id=name, resolution="keep", keep=first.id, **ACTOR)
    count = Revision.objects.count()

    with pytest.raises(Conflict) as error:
        services.conflict_resolve(conflict_id=name, resolution="keep", keep=second.id, **ACTOR)

    assert "no longer exists" in error.value.message and error.value.field == "id"
    assert Revision.objects.count() == count


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"conflict_id": "7-3", "resolution": "keep", "keep": 3}, "id"),
        ({"conflict_id": "3", "resolution": "keep", "keep": 3}, "id"),
        ({"conflict_id": "x-y", "resolution": "keep", "keep": 3}, "id"),
        ({"conflict_id": "3-9999999999999999999", "resolution": "keep", "keep": 3}, "id"),
        ({"conflict_id": "3-7", "resolution": "drop", "keep": 3}, "resolution"),
        ({"conflict_id": "3-7", "resolution": "keep"}, "keep"),
        ({"conflict_id": "3-7", "resolution": "keep", "keep": 5}, "keep"),
        ({"conflict_id": "1-7", "resolution": "keep", "keep": True}, "keep"),
        ({"conflict_id": "3-7", "resolution": "keep", "keep": 3, "boundary": "2024-01-01"}, "boundary"),
        ({"conflict_id": "3-7", "resolution": "split"}, "boundary"),
        ({"conflict_id": "3-7", "resolution": "split", "boundary": "May"}, "boundary"),
        ({"conflict_id": "3-7", "resolution": "split", "boundary": "2024-01-01", "earlier": 4}, "earlier"),
        ({"conflict_id": "3-7", "resolution": "merge", "keep": 3}, "content"),
        ({"conflict_id": "3-7", "resolution": "merge", "keep": 3, "content": "  "}, "content"),
    ],
)
def test_bad_input_is_refused_naming_the_field(db, arguments, field):
    with pytest.raises(InvalidInput) as error:
        services.conflict_resolve(**arguments, **ACTOR)
    assert error.value.field == field


def test_a_split_boundary_before_the_earlier_fact_starts_is_refused(remember):
    first = _fact(remember, "Payments API", "runs on", "host-7", valid_from="2024-01-01")
    second = _fact(remember, "Payments API", "runs on", "host-9", valid_from="2024-03-01")
    count = Revision.objects.count()

    with pytest.raises(InvalidInput) as error:
        services.conflict_resolve(
            conflict_id=f"{first.id}-{second.id}", resolution="split", boundary="2023-12-01", **ACTOR
        )

    assert error.value.field == "boundary" and Revision.objects.count() == count
