"""The knowledge graph through REST, the CLI command and the MCP tool's text: one vocabulary, clear refusals."""

import json

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_api.rendering import as_text
from memories import selectors, services
from memories.services.keys import api_key_create
from tests.helpers import error_of

GRAPH = "/api/v1/graph/"
ACTOR = {"actor": "tester", "interface": "cli"}


@pytest.fixture
def facts(db):
    """Payments runs on host-7 in rack 9, owned by Team Blue; a fact in another namespace; a time before the last."""
    cache.clear()  # throttle counts
    runs_on, is_in = (
        services.memory_remember(
            namespace="acme",
            content=f"{subject} {predicate} {object_}.",
            subject=subject,
            predicate=predicate,
            object=object_,
            **ACTOR,
        ).memory.id
        for subject, predicate, object_ in (("Payments API", "runs on", "host-7"), ("host-7", "is in", "Rack 9"))
    )
    services.memory_remember(
        namespace="beta",
        content="Payments API runs on host-9.",
        subject="Payments API",
        predicate="runs on",
        object="host-9",
        **ACTOR,
    )
    before = timezone.now()
    owner = services.memory_remember(
        namespace="acme",
        content="Team Blue owns the Payments API.",
        subject="Team Blue",
        predicate="owns",
        object="the Payments API",
        **ACTOR,
    )
    return {"before": before.isoformat(), "owner": owner.memory.id, "runs_on": runs_on, "is_in": is_in}


def client(**key) -> APIClient:
    _, token = api_key_create(
        name=f"key{len(key)}{sorted(key)}", actor="tester", interface="cli", **{"scopes": ["read"], **key}
    )
    made = APIClient()
    made.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return made


def test_rest_answers_relations_paths_and_mentions_as_of_a_time(facts):
    api = client()

    entity = api.get(GRAPH, {"namespace": "acme", "entity": "payments api"}).json()
    assert [(r["predicate"], r["direction"], r["other"]["display"]) for r in entity["entities"][0]["relations"]] == [
        ("owns", "in", "Team Blue"),
        ("runs on", "out", "host-7"),
    ]
    assert "paths" not in entity
    earlier = api.get(GRAPH, {"namespace": "acme", "entity": "payments api", "as_of": facts["before"]}).json()
    assert [r["predicate"] for r in earlier["entities"][0]["relations"]] == ["runs on"]

    paths = api.get(GRAPH, {"namespace": "acme", "source": "Team Blue", "target": "rack 9"}).json()
    assert [[hop["target"]["name"] for hop in path] for path in paths["paths"]] == [
        ["payments api", "host-7", "rack 9"]
    ]
    assert paths["paths"][0][0]["memory_id"] == facts["owner"] and paths["truncated"] is False
    none_yet = api.get(
        GRAPH, {"namespace": "acme", "source": "Team Blue", "target": "rack 9", "as_of": facts["before"]}
    ).json()
    assert none_yet["paths"] == []

    mentions = api.get(GRAPH, {"namespace": "acme", "query": "Which rack is host-7 in?"}).json()
    assert [found["entity"]["name"] for found in mentions["entities"]] == ["host-7"]


@pytest.mark.parametrize(
    "params, field, words",
    [
        ({}, "entity", "Nothing to ask. Give entity (its relations), source and target"),
        ({"source": "a"}, "target", "target: missing; paths need both source and target."),
        ({"entity": "a", "query": "b"}, "query", "entity and query ask different questions"),
        ({"entity": "a", "as_of": "yesterday"}, "as_of", "'yesterday'"),
        ({"entity": "a", "limit": "0"}, "limit", "limit"),
        ({"entity": "a", "depth": "3"}, "depth", "depth: unknown field. This endpoint takes: namespace, entity"),
    ],
)
def test_rest_refuses_a_wrong_question_with_a_400_naming_it(facts, params, field, words):
    error = error_of(client().get(GRAPH, {"namespace": "acme", **params}), 400)
    assert error["field"] == field and words in error["message"], error


def test_a_key_reads_the_graph_of_its_own_namespaces_only(facts):
    limited = client(namespaces=["acme"])
    assert limited.get(GRAPH, {"entity": "payments api"}).status_code == 200  # its first namespace by default
    error = error_of(limited.get(GRAPH, {"namespace": "beta", "entity": "payments api"}), 403)
    assert error["field"] == "namespace"
    error_of(client(scopes=["write"]).get(GRAPH, {"namespace": "acme", "entity": "payments api"}), 403)
    error_of(APIClient().get(GRAPH, {"namespace": "acme", "entity": "payments api"}), 401)


def test_the_cli_answers_json_with_the_same_fields(facts, capsys):
    call_command("memory", "graph", "--namespace", "acme", "--source", "team blue", "--target", "Rack 9")
    answer = json.loads(capsys.readouterr().out)
    assert [len(path) for path in answer["paths"]] == [3] and answer["source"]["display"] == "Team Blue"

    call_command("memory", "graph", "--namespace", "beta", "--entity", "payments api", "--limit", "1")
    answer = json.loads(capsys.readouterr().out)
    assert [r["other"]["name"] for r in answer["entities"][0]["relations"]] == ["host-9"]


def test_the_tool_text_reads_each_relation_and_path_in_the_facts_own_direction(facts):
    owner, runs_on, is_in = facts["owner"], facts["runs_on"], facts["is_in"]
    assert as_text(selectors.memory_graph(namespace="acme", entity="payments api")).splitlines() == [
        "the Payments API: 2 relations",
        f"  Team Blue owns the Payments API [#{owner}]",
        f"  the Payments API runs on host-7 [#{runs_on}]",
    ]
    assert as_text(selectors.memory_graph(namespace="acme", source="rack 9", target="team blue")).splitlines() == [
        "1 path, shortest first.",
        f"Rack 9 <-[is in #{is_in}]- host-7 <-[runs on #{runs_on}]- Payments API <-[owns #{owner}]- Team Blue",
    ]
    assert as_text(
        selectors.memory_graph(namespace="acme", source="rack 9", target="team blue", as_of=facts["before"])
    ) == ("No path of at most 4 hops between rack 9 and team blue.")
    assert as_text(selectors.memory_graph(namespace="acme", query="nothing here")) == (
        "The text names no entity the facts know."
    )
