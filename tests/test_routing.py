"""Query routing: each default rule's route, the fall-through to recall, fall backs, scopes, the rules as admin data."""

import datetime as dt
import json
import time

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.questions import QUESTIONS, WHERE, read_question
from mcp_api.rendering import as_text
from memories import services
from memories.models import RouteRule
from memories.selectors.routing import memory_route, resolve_when
from memories.services.keys import api_key_create
from tests.helpers import error_of

ROUTE = "/api/v1/route/"


@pytest.fixture
def store(remember):
    """A keyed memory, a tagged one, facts (an IP, a chain of relations) in acme; a secret in beta."""
    cache.clear()  # throttle counts
    editor = remember("The user edits in Helix.", key="user.editor", tags=["tools"])
    remember("Deploys go out on Tuesdays.", tags=["deploy"])
    ip = remember("The db host has IP 10.0.0.7.", subject="db host", predicate="has ip", object="10.0.0.7")
    remember("Billing API runs on the db host.", subject="Billing API", predicate="runs on", object="db host")
    remember("The db host is in rack 9.", subject="db host", predicate="is in", object="rack 9")
    before = timezone.now()
    later = remember("The user switched to Zed for editing.")
    secret = remember("Beta's launch code is swordfish.", namespace="beta", key="launch")
    return {
        "editor": editor.memory.id,
        "ip": ip.memory.id,
        "before": before,
        "later": later.memory.id,
        "secret": secret.memory.id,
    }


def _route(question, **arguments):
    return memory_route(question=question, namespace=arguments.pop("namespace", ["acme"]), **arguments)


def _ids(result):
    if result.memories:
        return [memory.id for memory in result.memories]
    return [hit.memory.id for hit in result.recall.hits]


# (question, route, rule, extracted)
CASES = [
    ("#{editor}", "lookup", "memory-id", {"id": "{editor}"}),
    ("memory {editor}", "lookup", "memory-id", {"id": "{editor}"}),
    ("key user.editor", "lookup", "key", {"key": "user.editor"}),
    ("tagged deploy", "lookup", "tag", {"tag": "deploy"}),
    ("What is the IP of the db host?", "lookup", "attribute-of", {"attribute": "IP", "entity": "the db host"}),
    ("How are Billing API and rack 9 related?", "graph", "related", {"source": "Billing API", "target": "rack 9"}),
    (
        "What does Billing API run on?",
        "graph",
        "graph-question",
        {"shape": "what-does-it-verb", "entity": "Billing API", "asks": "run on"},
    ),
    ("what does Billing API run on in production", "graph", "depends-on", {"entity": "Billing API"}),
    ("as of {before} what editor does the user use", "as_of", "known-then", {"when": "{before}"}),
    ("what did we know last week about editors", "as_of", "known-then", {"when": "last week"}),
    ("which editor did the user pick yesterday", "as_of", "time-phrase", {"when": "yesterday"}),
    ("the user's editor", "recall", None, {}),
]


@pytest.mark.parametrize(("question", "route", "rule", "extracted"), CASES, ids=[case[0] for case in CASES])
def test_each_route_and_the_fall_through(store, question, route, rule, extracted):
    shown = {name: str(value) if name != "before" else value.isoformat() for name, value in store.items()}
    question = question.format(**shown)
    result = _route(question)
    assert (result.route, result.rule, result.fell_back) == (route, rule, False)
    assert result.extracted == {name: value.format(**shown) for name, value in extracted.items()}
    assert (rule or "No rule matched") in result.why
    if route == "lookup":
        assert result.memories and result.recall is None
    elif route == "graph":  # a graph question also carries the memories behind the relations
        assert result.graph is not None and (result.memories is not None) == (rule == "graph-question")
    else:
        assert result.recall is not None


def test_each_path_answers_what_it_was_asked(store):
    assert _ids(_route(f"#{store['editor']}")) == [store["editor"]]
    assert _ids(_route("key user.editor")) == [store["editor"]]
    assert [memory.content for memory in _route("tagged deploy").memories] == ["Deploys go out on Tuesdays."]
    assert _ids(_route("IP of db host")) == [store["ip"]]
    paths = _route("how are Billing API and rack 9 connected").graph.paths
    assert [[hop.target.name for hop in path] for path in paths] == [["db host", "rack 9"]]
    relations = _route("what does Billing API run on").graph.entities[0].relations
    assert [(relation.predicate, relation.other.name) for relation in relations] == [("runs on", "db host")]
    then = _route(f"as of {store['before'].isoformat()} which editor user")
    assert then.recall.as_of == store["before"] and store["later"] not in _ids(then)
    assert store["later"] in _ids(_route("which editor user"))


@pytest.mark.parametrize(
    ("question", "lacking"),
    [
        ("#999999", "No memory #999999"),
        ("key no.such.key", "No memory has the key"),
        ("tagged nothing-here", "carries the tag"),
        ("port of db host", "no fact gives"),
        ("how are Billing API and Zed related", "No path joins"),
        ("what does nobody run on", "no relation"),
        ("which editor does the user use", "hold no 'user uses ?' as of now"),
        ("where is rack 9", "hold no 'rack 9 runs on / hosted on"),
    ],
)
def test_a_routed_path_that_finds_nothing_falls_back_to_recall_and_says_so(store, question, lacking):
    result = _route(question)
    assert result.route == "recall" and result.fell_back and result.rule
    assert lacking.casefold() in result.why.casefold() and "Fell back to recall." in result.why
    assert result.recall is not None


def test_routing_reads_only_the_namespaces_asked(store):
    by_id = _route(f"#{store['secret']}")
    assert by_id.fell_back and store["secret"] not in _ids(by_id)
    assert _route("key launch").fell_back
    assert _ids(_route("key launch", namespace=["beta"])) == [store["secret"]]


def test_time_phrases_resolve_to_an_as_of():
    now = dt.datetime(2026, 5, 20, 12, tzinfo=dt.timezone.utc)
    day = dt.timedelta(days=1)
    assert resolve_when("yesterday", now=now) == now - day
    assert resolve_when("last week", now=now) == now - 7 * day
    assert resolve_when("3 months ago", now=now) == now - 90 * day
    assert resolve_when("March", now=now) == dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc) - dt.timedelta(
        microseconds=1
    )
    assert resolve_when("in December", now=now).year == 2025  # the latest December begun by now
    assert resolve_when("May", now=now) == now  # a month not over yet: as known now
    assert resolve_when("2026-01-15", now=now) == dt.datetime(2026, 1, 15, tzinfo=dt.timezone.utc)
    with pytest.raises(ValueError, match="not a time phrase"):
        resolve_when("the olden days", now=now)


def test_rules_are_data_tried_in_order_and_disabled_rules_are_skipped(store):
    RouteRule.objects.create(order=5, name="everything-is-key", route="lookup", pattern=r"^(?P<key>user\.editor)$")
    assert _route("user.editor").rule == "everything-is-key"
    RouteRule.objects.filter(name="memory-id").update(enabled=False)
    assert _route(f"#{store['editor']}").route == "recall"
    RouteRule.objects.filter(name="graph-question").update(enabled=False)
    assert _route("What does Billing API run on?").rule == "depends-on"


def test_the_admin_edits_rules_and_refuses_a_bad_pattern(store, admin_client):
    rule = RouteRule.objects.get(name="tag")
    url = f"/admin/memories/routerule/{rule.pk}/change/"
    assert admin_client.get("/admin/memories/routerule/").status_code == 200
    form = {"order": 30, "name": "tag", "route": "lookup", "enabled": "on"}
    refused = admin_client.post(url, {**form, "pattern": r"^tagged (?P<tag>[\w-]+"})
    assert refused.status_code == 200 and "not a valid regular expression" in refused.content.decode()
    wrong_groups = admin_client.post(url, {**form, "pattern": r"^tagged (?P<word>\w+)$"})
    assert "needs the named group" in wrong_groups.content.decode()
    assert RouteRule.objects.get(pk=rule.pk).pattern == rule.pattern  # nothing saved
    saved = admin_client.post(url, {**form, "pattern": r"^label (?P<tag>[\w-]+)$"})
    assert saved.status_code == 302
    assert _route("label deploy").rule == "tag" and _route("tagged deploy").route == "recall"


def test_rest_mcp_text_and_cli_give_the_same_answer(store, capsys):
    _, token = api_key_create(name="router", actor="tester", interface="cli", scopes=["read"], namespaces=["acme"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    got = api.get(ROUTE, {"question": "key user.editor"}).json()
    assert (got["route"], got["rule"], got["memories"][0]["id"]) == ("lookup", "key", store["editor"])
    posted = api.post(ROUTE, {"question": "what does Billing API run on"}, format="json").json()
    assert posted["route"] == "graph" and "recall" not in posted
    assert api.get(ROUTE, {"question": f"#{store['secret']}"}).json()["fell_back"] is True
    assert error_of(api.get(ROUTE, {"question": "x", "namespace": "beta"}), 403)
    assert error_of(api.get(ROUTE, {}), 400)["field"] == "question"
    text = as_text(_route("what does Billing API run on"))
    assert text.startswith(
        "Route: graph. Rule 'graph-question' matched (shape='what-does-it-verb', "
        "entity='Billing API', asks='run on'): 'Billing API runs on ?', as of now."
    )
    assert "Billing API runs on the db host." in text
    call_command("memory", "route", "key user.editor", "--namespace", "acme")
    printed = json.loads(capsys.readouterr().out)
    assert (printed["route"], printed["memories"][0]["id"]) == ("lookup", store["editor"])


# Graph questions: facts learned from chat, asked about at the time the question states -------------------------

LEARNED = (
    "Since January 2025 Nadia leads Orion.",
    "On 1 June 2025 Kenji replaced Nadia as lead of Orion.",
    "Since March 2025 Atlas uses Redis.",
    "On 1 February 2026 Atlas switched from Redis to Valkey.",
    "The Berlin office is located in Mitte.",
    "The billing service depends on Postgres and Kafka.",
    "The payments team owns the deploy pipeline.",
    "Lena reports to Sam.",
    "Chen joined the payments team.",
)


@pytest.fixture
def learned(db):
    """The facts of LEARNED in acme, each written by learn from its sentence, in order."""
    cache.clear()  # throttle counts
    for text in LEARNED:
        services.memory_learn(text=text, namespace="acme", actor="tester", interface="cli")
        time.sleep(0.002)  # the next call's instant differs from this one's


def _answer(result) -> list[str]:
    return sorted(relation.other.name for relation in result.graph.entities[0].relations)


# (question, shape, the names that answer it, the valid time asked about: None for now)
GRAPH_QUESTIONS = [
    ("who leads Orion", "who-verbs", ["kenji"], None),
    ("Who leads Orion now?", "who-verbs", ["kenji"], None),
    ("who led Orion in May 2025", "who-verbs", ["nadia"], "2025-05-01"),
    ("who was the lead of Orion as of 2025-06-01?", "role-of", ["kenji"], "2025-06-01"),
    ("what does Atlas use as of 2026-03-01", "what-does-it-verb", ["valkey"], "2026-03-01"),
    ("what did Atlas use as of 2026-01-15", "what-does-it-verb", ["redis"], "2026-01-15"),
    ("where is the Berlin office?", "where-is", ["mitte"], None),
    ("what does the billing service depend on", "what-does-it-verb", ["kafka", "postgres"], None),
    ("who owns the deploy pipeline", "who-verbs", ["payments team"], None),
    ("who does Lena report to", "what-does-it-verb", ["sam"], None),
    ("what team is Chen on", "what-team", ["payments team"], None),
]


@pytest.mark.parametrize(
    ("question", "shape", "names", "valid_at"), GRAPH_QUESTIONS, ids=[case[0] for case in GRAPH_QUESTIONS]
)
def test_a_graph_question_is_answered_from_the_learned_facts_at_the_time_it_states(
    learned, question, shape, names, valid_at
):
    result = _route(question)
    assert (result.route, result.rule, result.fell_back, result.extracted["shape"]) == (
        "graph",
        "graph-question",
        False,
        shape,
    )
    assert _answer(result) == names
    graph = result.graph
    if valid_at is None:
        assert graph.valid_at == graph.as_of and result.why.endswith(", as of now.")
    else:
        assert graph.valid_at == dt.datetime.fromisoformat(valid_at).replace(tzinfo=dt.timezone.utc)
        assert result.why.endswith(f", valid at {valid_at}, as known now.")
        assert graph.as_of > graph.valid_at  # valid then, as known now
    # The memories behind the relations: the revisions that held then, with their ids and where they came from.
    relations = graph.entities[0].relations
    assert [(memory.id, memory.revision_id) for memory in result.memories] == [
        (relation.memory_id, relation.revision_id) for relation in relations
    ]
    assert all(memory.source.startswith("learn: text chars ") for memory in result.memories)


def test_the_answer_for_a_past_time_is_the_fact_that_held_then_and_says_when_it_ended(learned):
    result = _route("who led Orion in May 2025")
    assert result.why == (
        "Rule 'graph-question' matched (shape='who-verbs', entity='Orion', asks='led', "
        "when='in May 2025'): '? leads Orion', valid at 2025-05-01, as known now."
    )
    [nadia] = result.memories
    assert nadia.content == "Since January 2025 Nadia leads Orion."
    assert (nadia.valid_from, nadia.valid_to) == (
        dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc),
        dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc),
    )
    assert _answer(_route("who leads Orion")) == ["kenji"]


@pytest.mark.parametrize(
    ("question", "lacking"),
    [
        ("who led Orion in 2024", "The facts of 'acme' hold no '? leads Orion' valid at 2024-01-01, as known now."),
        ("who owns Atlas", "hold no 'Atlas owned by ?' as of now."),
        ("who does Chen report to", "hold no 'Chen reports to ?' or '? manages Chen' as of now."),
    ],
)
def test_a_graph_question_the_facts_do_not_answer_falls_back_to_recall_and_says_so(learned, question, lacking):
    result = _route(question)
    assert (result.route, result.rule, result.fell_back) == ("recall", "graph-question", True)
    assert result.why.endswith(f"{lacking} Fell back to recall.") and result.recall is not None
    assert result.graph is None and result.memories is None


@pytest.mark.parametrize(
    ("question", "route", "rule"),
    [
        ("who leads Orion as known on 2025-03-01", "as_of", "known-then"),  # what was known then: recall as of then
        ("what did we know last week about Orion", "as_of", "known-then"),
        ("What is the IP of Orion?", "recall", "attribute-of"),  # no IP fact: the lookup falls back
        ("who runs Atlas", "recall", None),  # "runs" leads only a team: "who runs the data team"
    ],
)
def test_a_question_the_question_table_does_not_read_goes_on_to_the_next_rule(learned, question, route, rule):
    result = _route(question)
    assert (result.route, result.rule) == (route, rule)


# (question, shape, relations asked for): the entity's part and the verb's direction in the vocabulary decide.
READ = [
    ("who owns the deploy pipeline", "who-verbs", [("owned by", "out")]),
    ("what does the payments team own", "what-does-it-verb", [("owned by", "in")]),
    ("who is the deploy pipeline maintained by", "what-is-it-verbed", [("owned by", "out")]),
    ("who is Orion led by", "what-is-it-verbed", [("leads", "in")]),
    ("who is in charge of Orion", "who-verbs", [("leads", "in")]),
    ("what is Mei in charge of", "what-is-it-verbed", [("leads", "out")]),
    ("who's Lena's manager", "whose-role", [("manages", "in"), ("reports to", "out")]),
    ("who is the owner of the deploy pipeline", "role-of", [("owned by", "out")]),
    ("who runs the data team", "who-verbs", [("leads", "in")]),
    ("what runs on host-3", "who-verbs", [("runs on", "in")]),
    ("what is hosted on host-3", "who-is-verbed", [("hosted on", "in")]),
    ("what's the recommender built with", "what-is-it-verbed", [("uses", "out")]),
    ("which editor does the user use", "what-does-it-verb", [("uses", "out")]),
    ("where does Lena live", "where-does", list(WHERE)),
    ("who is on the payments team", "who-verbs", [("member of", "in")]),
]


@pytest.mark.parametrize(("question", "shape", "relations"), READ, ids=[case[0] for case in READ])
def test_the_question_table_reads_the_relations_and_their_direction(question, shape, relations):
    asked = read_question(question, now=timezone.now())
    assert (asked.shape, list(asked.relations)) == (shape, relations)


def test_each_shape_of_the_question_table_reads_its_own_example():
    for question in QUESTIONS:
        asked = read_question(question.example, now=timezone.now())
        assert asked is not None and asked.shape == question.name, question.example
        assert asked.relations and asked.when == "" and asked.valid_at is None


def test_a_graph_question_reads_its_time_and_leaves_it_out_of_the_entity():
    now = dt.datetime(2026, 5, 20, 12, tzinfo=dt.timezone.utc)
    last_month = read_question("what did Atlas use last month?", now=now)
    assert (last_month.entity, last_month.when, last_month.valid_at) == (
        "Atlas",
        "last month",
        dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc),
    )
    assert read_question("Who currently leads our payments team?", now=now).entity == "payments team"
    for hostile in ('who leads "Orion" AND *', "who leads " + "x " * 2000, "who leads", "what does it use", "who"):
        asked = read_question(hostile, now=now)
        assert asked is None or asked.entity  # never an empty or pronoun entity


def test_the_rest_door_answers_a_graph_question_with_the_time_it_used(learned):
    _, token = api_key_create(name="router", actor="tester", interface="cli", scopes=["read"], namespaces=["acme"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    got = api.get(ROUTE, {"question": "who led Orion in May 2025"}).json()
    assert (got["route"], got["rule"], got["extracted"]) == (
        "graph",
        "graph-question",
        {"shape": "who-verbs", "entity": "Orion", "asks": "led", "when": "in May 2025"},
    )
    assert got["graph"]["valid_at"] == "2025-05-01T00:00:00.000000Z"
    assert [relation["other"]["name"] for relation in got["graph"]["entities"][0]["relations"]] == ["nadia"]
    assert [memory["content"] for memory in got["memories"]] == ["Since January 2025 Nadia leads Orion."]
    posted = api.post(ROUTE, {"question": "what does Atlas use as of 2026-03-01"}, format="json").json()
    assert [memory["content"] for memory in posted["memories"]] == [
        "On 1 February 2026 Atlas switched from Redis to Valkey."
    ]
    fallen = api.post(ROUTE, {"question": "who led Orion in 2024"}, format="json").json()
    assert (fallen["route"], fallen["fell_back"], "graph" in fallen) == ("recall", True, False)
