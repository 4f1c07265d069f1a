"""Query routing: each default rule's route, the fall-through to recall, fall backs, scopes, the rules as admin data."""

import datetime as dt
import json

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from mcp_api.text import as_text
from memories.models import RouteRule
from memories.routing import memory_route, resolve_when
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
    return {"editor": editor.memory.id, "ip": ip.memory.id, "before": before, "later": later.memory.id,
            "secret": secret.memory.id}


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
    ("What does Billing API run on?", "graph", "depends-on", {"entity": "Billing API"}),
    ("as of {before} what editor does the user use", "as_of", "known-then", {"when": "{before}"}),
    ("what did we know last week about editors", "as_of", "known-then", {"when": "last week"}),
    ("which editor did the user pick yesterday", "as_of", "time-phrase", {"when": "yesterday"}),
    ("which editor does the user use", "recall", None, {}),
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
    elif route == "graph":
        assert result.graph is not None and result.memories is None
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


@pytest.mark.parametrize(("question", "lacking"), [
    ("#999999", "No memory #999999"),
    ("key no.such.key", "No memory has the key"),
    ("tagged nothing-here", "carries the tag"),
    ("port of db host", "no fact gives"),
    ("how are Billing API and Zed related", "No path joins"),
    ("what does nobody run on", "no relation"),
])
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
        microseconds=1)
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
    assert text.startswith("Route: graph. Rule 'depends-on' matched") and "runs on" in text
    call_command("memory", "route", "key user.editor", "--namespace", "acme")
    printed = json.loads(capsys.readouterr().out)
    assert (printed["route"], printed["memories"][0]["id"]) == ("lookup", store["editor"])
