"""The knowledge graph: relations, paths and mentions of one namespace, exact at any (as_of, valid_at)."""

import datetime as dt
import random
import re

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from knowledge import graph
from knowledge.facts import rebuild_facts
from memories import selectors, services
from memories.models import Attributes, ErasureGate, Revision
from memoryproject import dialect
from memoryproject.exceptions import Conflict, InvalidInput
from search import snapshot

ACTOR = {"actor": "tester", "interface": "cli"}


def fact(remember, subject, predicate, object_, namespace="acme", **fields):
    """Remember one fact; its text names the triple, so two facts never share a text."""
    return remember(
        f"{subject} {predicate} {object_}.",
        namespace=namespace,
        subject=subject,
        predicate=predicate,
        object=object_,
        **fields,
    ).memory


def relations(entity, namespace="acme", **at) -> list[tuple[str, str, str]]:
    found = selectors.memory_graph(namespace=namespace, entity=entity, **at).entities[0]
    return [(relation.predicate, relation.direction, relation.other.name) for relation in found.relations]


def routes(source, target, namespace="acme", **at) -> list[list[str]]:
    """Each path as its entity names, with the predicate of each hop between them."""
    result = selectors.memory_graph(namespace=namespace, source=source, target=target, **at)
    return [
        [path[0].source.name, *(part for hop in path for part in (hop.predicate, hop.target.name))]
        for path in result.paths
    ]


def later(moment: dt.datetime) -> str:
    return (moment + dt.timedelta(microseconds=1)).isoformat()


def before(moment: dt.datetime) -> str:
    return (moment - dt.timedelta(microseconds=1)).isoformat()


def test_relations_name_the_other_entity_as_written_with_the_supporting_memory(remember):
    runs = fact(remember, "The Payments API", "Runs on", "Host-7")
    owns = fact(remember, "Team Blue", "owns", "payments api")

    found = selectors.memory_graph(namespace="acme", entity="PAYMENTS  API").entities[0]

    assert (found.entity.name, found.entity.display) == ("payments api", "payments api")
    assert [
        (r.predicate, r.direction, r.other.name, r.other.display, r.memory_id, r.revision_id) for r in found.relations
    ] == [
        ("owns", "in", "team blue", "Team Blue", owns.id, owns.revision_id),
        ("runs on", "out", "host-7", "Host-7", runs.id, runs.revision_id),
    ]


def test_an_edge_learned_after_t_is_absent_as_of_t(remember):
    fact(remember, "payments", "runs on", "host-1")
    t = timezone.now()
    fact(remember, "payments", "depends on", "ledger")

    assert relations("payments", as_of=t.isoformat()) == [("runs on", "out", "host-1")]
    assert relations("payments") == [("depends on", "out", "ledger"), ("runs on", "out", "host-1")]
    assert routes("host-1", "ledger", as_of=t.isoformat()) == []
    assert routes("host-1", "ledger") == [["host-1", "runs on", "payments", "depends on", "ledger"]]


def test_a_forgotten_fact_keeps_its_edge_until_the_tombstone_and_loses_it_from_then_on(remember):
    memory = fact(remember, "payments", "runs on", "host-1")
    services.memory_forget(memory_id=memory.id, reason="decommissioned", **ACTOR)
    forgotten_at = Revision.objects.get(memory_id=memory.id, tombstone=True).known_at

    assert relations("payments", as_of=before(forgotten_at)) == [("runs on", "out", "host-1")]
    assert relations("payments", as_of=forgotten_at.isoformat()) == []
    assert relations("payments") == []
    assert routes("payments", "host-1", as_of=before(forgotten_at)) == [["payments", "runs on", "host-1"]]
    assert routes("payments", "host-1") == []


def test_a_revised_fact_moves_its_edge_from_the_revision_on(remember):
    memory = fact(remember, "payments", "runs on", "host-1")
    services.memory_revise(
        memory_id=memory.id,
        content="payments runs on host-2.",
        subject="payments",
        predicate="runs on",
        object="host-2",
        **ACTOR,
    )
    revised_at = Revision.objects.filter(memory_id=memory.id).latest_known().first().known_at

    assert relations("payments", as_of=before(revised_at)) == [("runs on", "out", "host-1")]
    assert relations("payments", as_of=revised_at.isoformat()) == [("runs on", "out", "host-2")]
    assert relations("host-1") == []


def test_a_moved_memory_takes_its_edge_to_its_new_namespace_from_the_move_on(remember):
    memory = fact(remember, "payments", "runs on", "host-1")
    services.memory_move(memory_id=memory.id, namespace="finance", **ACTOR)
    moved_at = Attributes.objects.filter(memory_id=memory.id).order_by("-known_at").first().known_at

    assert relations("payments", as_of=before(moved_at)) == [("runs on", "out", "host-1")]
    assert relations("payments", namespace="finance", as_of=before(moved_at)) == []
    assert relations("payments") == []
    assert relations("payments", namespace="finance") == [("runs on", "out", "host-1")]


def test_an_edge_holds_at_the_valid_times_of_its_fact(remember):
    fact(remember, "payments", "runs on", "host-1", valid_from="2024-01-01", valid_to="2025-01-01")

    assert relations("payments", valid_at="2024-06-01") == [("runs on", "out", "host-1")]
    assert relations("payments", valid_at="2025-01-01") == []
    assert relations("payments") == []


def test_other_namespaces_facts_are_not_edges(remember):
    fact(remember, "payments", "runs on", "host-1")
    fact(remember, "payments", "runs on", "host-9", namespace="other")

    assert relations("payments") == [("runs on", "out", "host-1")]
    assert routes("payments", "host-9") == []


def test_aliases_merge_names_into_one_entity_while_the_alias_fact_is_visible(remember):
    fact(remember, "Payments API", "runs on", "host-1")
    fact(remember, "Team Blue", "owns", "payments-svc")
    alias = fact(remember, "payments-svc", "also known as", "the Payments API")
    fact(remember, "pay", "aka", "payments-svc")
    t = timezone.now()

    found = selectors.memory_graph(namespace="acme", entity="pay").entities[0]
    assert found.aliases == ["payments api", "payments-svc"]
    assert [(r.predicate, r.other.name) for r in found.relations] == [("owns", "team blue"), ("runs on", "host-1")]
    assert routes("team blue", "host-1") == [["team blue", "owns", "payments-svc", "runs on", "host-1"]]
    # From a name that states none of the relations itself: its entity's relations start the path.
    assert routes("pay", "host-1") == [["payments api", "runs on", "host-1"]]

    services.memory_forget(memory_id=alias.id, **ACTOR)

    assert relations("payments api") == [("runs on", "out", "host-1")]
    assert routes("team blue", "host-1") == []
    assert len(routes("team blue", "host-1", as_of=t.isoformat())) == 1


def test_a_path_leaves_from_any_name_of_the_source_even_one_the_search_reaches_no_other_way(remember, monkeypatch):
    monkeypatch.setattr(graph, "FANOUT", 2)
    fact(remember, "pay", "aka", "payments api")
    fact(remember, "payments api", "runs on", "host-1")
    # host-1 follows its first two relations only, so it never leads back to "payments api".
    fact(remember, "host-1", "backs up", "host-2")
    fact(remember, "host-1", "is in", "rack-1")
    fact(remember, "rack-1", "is in", "dc-1")

    assert routes("pay", "dc-1") == [["payments api", "runs on", "host-1", "is in", "rack-1", "is in", "dc-1"]]


def test_paths_are_shortest_first_and_at_most_four_hops(remember):
    chain = [f"node-{n}" for n in range(6)]
    for here, there in zip(chain, chain[1:]):
        fact(remember, here, "links to", there)
    fact(remember, "node-0", "shortcut to", "node-2")

    assert routes("node-0", "node-4") == [
        ["node-0", "shortcut to", "node-2", "links to", "node-3", "links to", "node-4"],
        ["node-0", "links to", "node-1", "links to", "node-2", "links to", "node-3", "links to", "node-4"],
    ]
    assert routes("node-1", "node-5") == [
        ["node-1", "links to", "node-2", "links to", "node-3", "links to", "node-4", "links to", "node-5"]
    ]
    assert routes("node-0", "node-5") == [
        ["node-0", "shortcut to", "node-2", "links to", "node-3", "links to", "node-4", "links to", "node-5"]
    ]
    # Five hops: beyond the bound.
    fact(remember, "node-5", "links to", "node-6")
    assert routes("node-1", "node-6") == []


def test_a_path_search_follows_at_most_fanout_relations_of_an_entity_and_says_so(remember, monkeypatch):
    monkeypatch.setattr(graph, "FANOUT", 3)
    for n in range(5):
        fact(remember, "hub", "serves", f"client-{n}")
    # Four hops from the hub, through the relation its fan-out leaves out and two beyond either end's reach.
    for here, there in (("client-4", "a"), ("a", "b"), ("b", "host-1")):
        fact(remember, here, "runs on", there)

    result = selectors.memory_graph(namespace="acme", source="hub", target="host-1")
    assert result.paths == [] and result.truncated
    result = selectors.memory_graph(namespace="acme", source="hub", target="client-1")
    assert len(result.paths) == 1 and result.truncated


def test_at_most_paths_max_paths_come_back_and_the_cut_is_said(remember, monkeypatch):
    monkeypatch.setattr(graph, "PATHS_MAX", 2)
    for n in range(3):
        fact(remember, "a", "uses", f"middle-{n}")
        fact(remember, f"middle-{n}", "uses", "b")

    result = selectors.memory_graph(namespace="acme", source="a", target="b")

    assert [[hop.target.name for hop in path] for path in result.paths] == [["middle-0", "b"], ["middle-1", "b"]]
    assert result.truncated


def test_relations_beyond_the_limit_are_cut_and_said(remember):
    for n in range(3):
        fact(remember, "hub", "serves", f"client-{n}")

    found = selectors.memory_graph(namespace="acme", entity="hub", limit=2).entities[0]

    assert [r.other.name for r in found.relations] == ["client-0", "client-1"] and found.truncated


def test_a_query_finds_the_entities_it_names_longest_first_with_their_relations(remember):
    fact(remember, "Payments API", "runs on", "host-7")
    fact(remember, "payments", "owned by", "team blue")
    fact(remember, "api", "is", "a word")

    found = selectors.memory_graph(namespace="acme", query="Where does the Payments API run? Is it host-7?")

    assert [(entity.entity.name, [r.other.name for r in entity.relations]) for entity in found.entities] == [
        ("payments api", ["host-7"]),
        ("host-7", ["payments api"]),
    ]
    assert selectors.memory_graph(namespace="acme", query="nothing known here").entities == []


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "Nothing to ask. Give entity"),
        ({"source": "a"}, "target: missing; paths need both source and target."),
        ({"target": "a"}, "source: missing; paths need both source and target."),
        ({"entity": "a", "query": "b"}, "entity and query ask different questions"),
        ({"entity": "a", "source": "b", "target": "c"}, "entity and source and target ask different questions"),
        ({"entity": '"..."'}, "entity: '\"...\"' names no entity"),
        ({"source": "a", "target": "A"}, "source and target name one entity ('a')"),
    ],
)
def test_a_wrong_combination_is_refused_naming_the_problem(db, arguments, message):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        selectors.memory_graph(namespace="acme", **arguments)


@pytest.mark.sqlite_only(
    "reads SQLite's query plan; PostgreSQL's planner scans a table this small whatever its indexes"
)
def test_the_graph_reads_facts_by_index_and_as_often_whatever_other_namespaces_hold(remember):
    fact(remember, "payments", "runs on", "host-1")
    fact(remember, "host-1", "is in", "rack-1")

    def work():
        snapshot.current()  # the snapshot's own loading is not the graph's work
        with CaptureQueriesContext(connection) as queries:
            selectors.memory_graph(namespace="acme", entity="payments")
            selectors.memory_graph(namespace="acme", source="payments", target="rack-1")
            selectors.memory_graph(namespace="acme", query="payments")
        return [query["sql"] for query in queries.captured_queries]

    alone = work()
    for n in range(40):
        fact(remember, "payments", "runs on", f"host-{n + 100}", namespace="other")
        fact(remember, f"service-{n}", "runs on", "host-1", namespace="other")
    crowded = work()

    assert len(crowded) == len(alone)
    with connection.cursor() as cursor:
        for sql in crowded:
            if "knowledge_fact" in sql:
                cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
                plan = " ".join(str(row[-1]) for row in cursor.fetchall())
                assert "SCAN knowledge_fact" not in plan, plan


# Point-in-time equivalence -------------------------------------------------------------------------------------

NAMES = ["payments", "ledger", "host-1", "host-2", "team blue", "team red", "search", "pay"]
PREDICATES = ["runs on", "depends on", "owned by", "aka"]


def _shape(namespace: str, at: dict) -> dict:
    """The graph at one point, by names only: what a store holding other ids but the same facts also answers."""
    shape = {}
    for name in NAMES:
        found = selectors.memory_graph(namespace=namespace, entity=name, limit=200, **at).entities[0]
        shape[name] = (found.aliases, [(r.predicate, r.direction, r.other.name) for r in found.relations])
    for source in NAMES[:4]:
        for target in NAMES[4:]:
            try:
                shape[(source, target)] = routes(source, target, namespace=namespace, **at)
            except InvalidInput:  # aliases of each other at this point
                shape[(source, target)] = "one entity"
    mentions = selectors.memory_graph(namespace=namespace, query="does payments run on host-1 for team blue?", **at)
    shape["query"] = [(entity.entity.name, entity.aliases, len(entity.relations)) for entity in mentions.entities]
    return shape


def _visible_facts(namespace: str, as_of: dt.datetime, valid_at: dt.datetime) -> list[tuple[str, str, str]]:
    """The triples visible at the point, by the SQL form of the rule (memories.models), not the snapshot's."""
    there = Attributes.objects.as_of(as_of).filter(namespace=namespace).values("memory_id")
    return sorted(
        Revision.objects.visible(as_of=as_of, valid_at=valid_at)
        .filter(memory_id__in=there)
        .exclude(subject="")
        .values_list("subject", "predicate", "object")
    )


def test_the_graph_at_a_point_is_the_graph_of_a_store_holding_only_what_was_visible_then(remember):
    chooser = random.Random(27)
    memories, points = [], []
    for step in range(40):
        action = chooser.random()
        live = [memory for memory in memories if memory[1]]
        if action < 0.45 or not live:
            subject, object_ = chooser.sample(NAMES, 2)
            fields = {}
            if chooser.random() < 0.2:
                fields = {"valid_from": "2020-01-01", "valid_to": chooser.choice(["2021-01-01", "2030-01-01"])}
            memory = fact(
                remember, subject, chooser.choice(PREDICATES), f"{object_}", namespace="hist", key=f"m{step}", **fields
            )
            memories.append([memory.id, True])
        elif action < 0.7:
            memory_id = chooser.choice(live)[0]
            subject, object_ = chooser.sample(NAMES, 2)
            services.memory_revise(
                memory_id=memory_id,
                content=f"revised at step {step}",
                subject=subject,
                predicate=chooser.choice(PREDICATES),
                object=object_,
                **ACTOR,
            )
        elif action < 0.85:
            chosen = chooser.choice(live)
            try:
                services.memory_forget(memory_id=chosen[0], **ACTOR)
                chosen[1] = False
            except Conflict:  # outside its validity now: nothing to forget
                pass
        else:
            chosen = chooser.choice(live)
            services.memory_move(memory_id=chosen[0], namespace=chooser.choice(["hist", "elsewhere"]), **ACTOR)
        if step % 8 == 7:
            points.append(timezone.now())

    for number, as_of in enumerate(points):
        for valid_at in (as_of, dt.datetime(2020, 6, 1, tzinfo=dt.timezone.utc)):
            triples = _visible_facts("hist", as_of, valid_at)
            fresh = f"fresh-{number}-{valid_at.year}"
            for index, triple in enumerate(triples):
                remember(f"fact {index}", namespace=fresh, subject=triple[0], predicate=triple[1], object=triple[2])
            assert _shape("hist", {"as_of": as_of.isoformat(), "valid_at": valid_at.isoformat()}) == _shape(
                fresh, {}
            ), f"at as_of {as_of}, valid_at {valid_at}"


def test_visible_among_agrees_with_the_visible_rows_of_the_namespace(remember):
    chooser = random.Random(5)
    ids, points = [], []
    for step in range(30):
        if chooser.random() < 0.5 or not ids:
            ids.append(
                remember(
                    f"note {step}",
                    namespace=chooser.choice(["a", "b"]),
                    valid_from=chooser.choice([None, "2020-01-01"]),
                    valid_to=chooser.choice([None, "2030-01-01"]),
                ).memory.id
            )
        else:
            memory_id = chooser.choice(ids)
            change = chooser.choice(["revise", "forget", "move"])
            if change == "revise":
                services.memory_revise(memory_id=memory_id, content=f"revised {step}", **ACTOR)
            elif change == "forget":
                services.memory_forget(memory_id=memory_id, **ACTOR)
                ids.remove(memory_id)
            else:
                services.memory_move(memory_id=memory_id, namespace=chooser.choice(["a", "b"]), **ACTOR)
        points.append(snapshot.to_micros(timezone.now()))
    view = snapshot.current()
    every = view.columns.revision
    for as_of in points:
        for valid_at in (as_of, snapshot.to_micros(dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc))):
            for namespace in ("a", "b"):
                rows = view.visible_rows(as_of=as_of, valid_at=valid_at, namespaces=[namespace])
                assert (
                    view.visible_among(every, as_of=as_of, valid_at=valid_at, namespace=namespace).tolist()
                    == np.sort(every[rows]).tolist()
                )


# The in-memory copy of the fact rows -------------------------------------------------------------------------


class _Rollback(Exception):
    pass


@pytest.fixture
def append_only_rows_cleared():
    """After a test with committed rows (transaction=True): revisions and attribute rows are append-only, so the
    flush that ends the test needs them removed first, under the gate erasure opens."""
    yield
    with transaction.atomic():
        ErasureGate.objects.create(opened_at=timezone.now())
        Attributes.all_objects.all().delete()
        Revision.all_objects.filter(tombstone=True).delete()
        Revision.all_objects.all().delete()
        ErasureGate.objects.all().delete()


@pytest.mark.django_db(transaction=True)
def test_the_copy_of_the_fact_rows_sees_a_write_a_forget_a_move_an_erase_and_a_rebuild_at_the_next_query(
    remember, append_only_rows_cleared
):
    runs = fact(remember, "payments", "runs on", "host-1")
    assert relations("payments") == [("runs on", "out", "host-1")]
    # Committed rows: the copy is the shared one from here on, so each step below goes through keeping it in step.
    assert graph._known_by_database[dialect.database_key()].max_id > 0

    depends = fact(remember, "payments", "depends on", "ledger")
    assert relations("payments") == [("depends on", "out", "ledger"), ("runs on", "out", "host-1")]

    services.memory_forget(memory_id=runs.id, **ACTOR)
    assert relations("payments") == [("depends on", "out", "ledger")]

    services.memory_move(memory_id=depends.id, namespace="finance", **ACTOR)
    assert relations("payments") == []
    assert relations("payments", namespace="finance") == [("depends on", "out", "ledger")]

    fact(remember, "ledger", "runs on", "host-2", namespace="finance")
    assert relations("ledger", namespace="finance") == [("depends on", "in", "payments"), ("runs on", "out", "host-2")]
    services.memory_erase(memory_id=depends.id, reason="test", **ACTOR)
    assert relations("payments", namespace="finance") == []
    assert relations("ledger", namespace="finance") == [("runs on", "out", "host-2")]
    # Erased text stays nowhere, this copy included.
    known = graph._known_by_database[dialect.database_key()]
    assert depends.revision_id not in {fact.revision_id for facts in known.relations.values() for fact in facts}

    rebuild_facts()  # every row deleted and written again under new ids
    assert relations("ledger", namespace="finance") == [("runs on", "out", "host-2")]
    assert routes("ledger", "host-2", namespace="finance") == [["ledger", "runs on", "host-2"]]


@pytest.mark.django_db(transaction=True)
def test_fact_rows_rolled_back_never_stay_in_the_copy_even_when_their_ids_come_again(
    remember, append_only_rows_cleared
):
    fact(remember, "payments", "runs on", "host-1")
    assert relations("payments") == [("runs on", "out", "host-1")]

    with pytest.raises(_Rollback), transaction.atomic():
        fact(remember, "payments", "depends on", "ledger")
        assert relations("payments") == [("depends on", "out", "ledger"), ("runs on", "out", "host-1")]
        raise _Rollback

    fact(remember, "payments", "owned by", "team blue")  # its rows may take the ids the rolled back rows had
    assert relations("payments") == [("owned by", "out", "team blue"), ("runs on", "out", "host-1")]
