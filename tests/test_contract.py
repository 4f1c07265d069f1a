"""One contract, every interface: the same scenarios run through the service layer, MCP and REST.

Each scenario is written once against a small driver and run once per interface, with
the same expectations, so the interfaces cannot drift apart. MCP and REST talk to one
real server. Every driver works in a namespace of its own test.
"""

import re

import httpx
import pytest

from memories import selectors, services
from memoryproject.exceptions import MemoryServiceError
from tests.mcp_client import ToolFailed, http_client
from tests.subprocesses import serve

# Every test has the database, MCP ones too: a service driver that asked for ``db`` through
# getfixturevalue() from a fixture was handed the real data/memory.db, not the test database.
pytestmark = [pytest.mark.slow, pytest.mark.django_db]


class Refused(Exception):
    """The interface refused the call; ``str()`` is the message it gave."""


class ServiceDriver:
    """The service layer, called as an interface adapter would (a remember is services.memory_remember, ...)."""

    credit = {"actor": "contract", "interface": "cli"}

    def __init__(self, namespace: str):
        self.namespace = namespace

    def _run(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except MemoryServiceError as error:
            raise Refused(error.message) from None

    def remember(self, content, **fields) -> dict:
        return self._run(
            services.memory_remember, namespace=self.namespace, content=content, **fields, **self.credit
        ).as_dict()

    def get(self, memory_id, **times) -> dict:
        return self._run(selectors.memory_get, memory_id=memory_id, **times).as_dict()

    def update(self, memory_id, *, add_tags=None, remove_tags=None, **fields) -> dict:
        changed = False
        if fields:
            result = self._run(services.memory_revise, memory_id=memory_id, **fields, **self.credit)
            changed = result.changed
        if add_tags or remove_tags:
            result = self._run(
                services.memory_retag, memory_id=memory_id, add=add_tags, remove=remove_tags, **self.credit
            )
            changed = changed or result.changed
        return {**result.as_dict(), "changed": changed}

    def forget(self, memory_id, reason=None) -> dict:
        return self._run(services.memory_forget, memory_id=memory_id, reason=reason, **self.credit).as_dict()

    def history(self, memory_id) -> list[dict]:
        return [revision.as_dict() for revision in self._run(selectors.memory_history, memory_id=memory_id)]

    def recall(self, query, **options) -> dict:
        return self._run(selectors.memory_recall, query=query, namespace=self.namespace, **options).as_dict()


class McpDriver:
    """The MCP tools, through the official client and a real server."""

    def __init__(self, client, namespace: str):
        self.client = client
        self.namespace = namespace

    def _call(self, tool, arguments) -> dict:
        try:
            return self.client.call(tool, {name: value for name, value in arguments.items() if value is not None})
        except ToolFailed as error:
            raise Refused(str(error)) from None

    def remember(self, content, **fields) -> dict:
        return self._call("memory_remember", {"content": content, "namespace": self.namespace, **fields})

    def get(self, memory_id, **times) -> dict:
        return self._call("memory_get", {"id": memory_id, **times})

    def update(self, memory_id, **fields) -> dict:
        return self._call("memory_update", {"id": memory_id, **fields})

    def forget(self, memory_id, reason=None) -> dict:
        return self._call("memory_set_state", {"id": memory_id, "action": "forget", "reason": reason})

    def history(self, memory_id) -> list[dict]:
        return self._call("memory_history", {"id": memory_id})["revisions"]

    def recall(self, query, **options) -> dict:
        return self._call("memory_recall", {"query": query, "namespace": self.namespace, **options})


class RestDriver:
    """The REST API, over HTTP against a real server."""

    def __init__(self, client: httpx.Client, namespace: str):
        self.client = client
        self.namespace = namespace

    def _send(self, method, path, **options) -> dict:
        response = self.client.request(method, f"/api/v1/{path}", **options)
        body = response.json()
        if response.status_code >= 400:
            assert set(body) == {"error"}, body
            raise Refused(body["error"]["message"])
        return body

    @staticmethod
    def _given(fields: dict) -> dict:
        return {name: value for name, value in fields.items() if value is not None}

    def remember(self, content, **fields) -> dict:
        return self._send("POST", "memories/", json={"content": content, "namespace": self.namespace, **fields})

    def get(self, memory_id, **times) -> dict:
        return self._send("GET", f"memories/{memory_id}/", params=times)

    def update(self, memory_id, **fields) -> dict:
        return self._send("PATCH", f"memories/{memory_id}/", json=fields)

    def forget(self, memory_id, reason=None) -> dict:
        return self._send("DELETE", f"memories/{memory_id}/", params=self._given({"reason": reason}))

    def history(self, memory_id) -> list[dict]:
        return self._send("GET", f"memories/{memory_id}/history/")["revisions"]

    def recall(self, query, **options) -> dict:
        return self._send("POST", "recall/", json={"query": query, "namespace": self.namespace, **options})


@pytest.fixture(scope="module")
def live_server(module_instance):
    token = module_instance.create_api_keys(contract={})["contract"]
    with serve(module_instance.env) as base:
        yield base, token


@pytest.fixture(scope="module")
def mcp_session(live_server):
    base, token = live_server
    with http_client(f"{base}/mcp", token) as client:
        yield client


@pytest.fixture(scope="module")
def rest_session(live_server):
    base, token = live_server
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        yield client


@pytest.fixture(params=["service", "mcp", "rest"])
def interface(request):
    namespace = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[-64:].lstrip("-_")
    if request.param == "service":
        return ServiceDriver(namespace)
    if request.param == "rest":
        return RestDriver(request.getfixturevalue("rest_session"), namespace)
    return McpDriver(request.getfixturevalue("mcp_session"), namespace)


def refused(call, *args, **kwargs) -> str:
    with pytest.raises(Refused) as caught:
        call(*args, **kwargs)
    return str(caught.value)


MEMORY_FIELDS = {
    "id",
    "key",
    "namespace",
    "kind",
    "title",
    "content",
    "tags",
    "revision_id",
    "known_at",
    "valid_from",
    "valid_to",
    "expires_at",
    "source",
    "content_hash",
}


def test_remember_stores_a_memory_that_get_returns(interface):
    stored = interface.remember(
        "The build cache lives on the NAS.",
        title="Build cache",
        kind="fact",
        tags=["infra", "CI"],
        source="ops handbook",
        key="build-cache",
    )

    assert MEMORY_FIELDS <= set(stored)
    assert (stored["created"], stored["deduplicated"], stored["revised"]) == (True, False, False)
    assert (stored["namespace"], stored["key"], stored["kind"], stored["tags"]) == (
        interface.namespace,
        "build-cache",
        "fact",
        ["CI", "infra"],
    )
    assert stored["valid_from"] == stored["known_at"] and stored["valid_to"] is None
    fetched = interface.get(stored["id"])
    assert {name: fetched[name] for name in MEMORY_FIELDS} == {name: stored[name] for name in MEMORY_FIELDS}


def test_remembering_stored_content_again_stores_nothing_and_merges_tags(interface):
    # Tag spellings are global (the first one wins), so these are the test's own tags.
    first = interface.remember("Our CI runs on Buildkite.", tags=["pipelines"])
    again = interface.remember("  Our CI runs on Buildkite.\r\n", tags=["PIPELINES", "runners"])

    assert (again["id"], again["revision_id"], again["created"], again["deduplicated"]) == (
        first["id"],
        first["revision_id"],
        False,
        True,
    )
    assert again["tags"] == ["pipelines", "runners"]
    assert len(interface.history(first["id"])) == 1


def test_remember_under_an_existing_key_adds_a_revision(interface):
    first = interface.remember("Runbook, first edition.", key="runbook")
    same = interface.remember("Runbook, first edition.", key="runbook")
    second = interface.remember("Runbook, second edition.", key="runbook")

    assert same["deduplicated"] and same["revision_id"] == first["revision_id"]
    assert (second["id"], second["revised"]) == (first["id"], True)
    assert [revision["content"] for revision in interface.history(first["id"])] == [
        "Runbook, first edition.",
        "Runbook, second edition.",
    ]


def test_update_replaces_the_text_from_now_on_and_history_keeps_the_old(interface):
    first = interface.remember("The VPN endpoint is vpn1.example.", tags=["network"])
    updated = interface.update(
        first["id"], content="The VPN endpoint is vpn2.example.", add_tags=["vpn"], remove_tags=["NETWORK"]
    )

    assert (updated["changed"], updated["id"], updated["tags"]) == (True, first["id"], ["vpn"])
    assert interface.get(first["id"])["content"] == "The VPN endpoint is vpn2.example."
    assert interface.get(first["id"], as_of=first["known_at"])["content"] == first["content"]
    history = interface.history(first["id"])
    assert [(revision["content"], revision["tombstone"]) for revision in history] == [
        (first["content"], False),
        ("The VPN endpoint is vpn2.example.", False),
    ]
    assert history[1]["revision_id"] == updated["revision_id"]


def test_forget_hides_the_memory_once_and_keeps_its_history(interface):
    stored = interface.remember("The old office is on Elm Street.")
    forgotten = interface.forget(stored["id"], reason="we moved")
    again = interface.forget(stored["id"])

    assert (forgotten["changed"], forgotten["state"], again["changed"]) == (True, "forgotten", False)
    assert refused(interface.get, stored["id"]) == (
        f"Memory {stored['id']} not found — it may have expired or been forgotten. "
        "List or recall memories to find valid ids."
    )
    assert interface.get(stored["id"], as_of=stored["known_at"])["content"] == stored["content"]
    tombstone = interface.history(stored["id"])[-1]
    assert (tombstone["tombstone"], tombstone["hides"], tombstone["reason"]) == (
        True,
        stored["revision_id"],
        "we moved",
    )
    assert interface.recall("old office elm street")["hits"] == []
    assert refused(interface.update, stored["id"], title="Elm") == (
        f"Memory {stored['id']} is forgotten. Restore it first, or remember the content anew."
    )


def test_recall_ranks_the_best_match_first_and_answers_as_of_a_past_time(interface):
    deploys = interface.remember("Deploys go out on Tuesdays after the standup.")
    interface.remember("The standup is at 9:30 in the small room.")
    later = interface.remember("Deploys are frozen during the December holidays.")

    now = interface.recall("deploys tuesdays", mode="keyword", match="any", explain=True)
    assert [hit["id"] for hit in now["hits"]] == [deploys["id"], later["id"]]
    assert now["hits"][0]["score"] > now["hits"][1]["score"] > 0
    assert now["hits"][0]["matched_terms"] == ["deploys", "tuesdays"] and now["hits"][0]["explain"]
    hybrid = interface.recall("when do deploys go out")
    assert hybrid["hits"][0]["id"] == deploys["id"] and hybrid["mode"] == "hybrid"
    before = interface.recall("deploys", as_of=deploys["known_at"])
    assert [hit["id"] for hit in before["hits"]] == [deploys["id"]]
    nothing = interface.recall("zeppelin", mode="keyword")
    assert nothing["hits"] == [] and nothing["hint"]


def test_refusals_name_the_problem_the_same_way(interface):
    first = interface.remember("Lunch is at noon.")
    second = interface.remember("Lunch is at one.")

    assert refused(interface.update, second["id"], content="Lunch is at noon.") == (
        f"Memory {first['id']} ({interface.namespace}/{first['key']}) already holds exactly this content. "
        f"Update or tag memory {first['id']} instead of duplicating it."
    )
    assert refused(interface.forget, 987_654) == ("Memory 987654 not found. List or recall memories to find valid ids.")
    assert refused(interface.remember, "x", valid_from="next week").startswith(
        "valid_from: 'next week' is not a date or a time with a timezone."
    )
    assert refused(interface.recall, "lunch", as_of="2025-02-30").startswith(
        "as_of: '2025-02-30' is not a real date or time"
    )
    assert refused(interface.remember, "x", subject="lunch") == (
        "subject, predicate and object go together: give all three or none."
    )
    assert refused(interface.remember, "é" * 20_000).startswith(
        "content: 40000 bytes is over the limit of 32768 bytes."
    )
    # Values of the wrong kind are refused naming the field (the wording is each interface's own).
    assert "kind" in refused(interface.remember, "x", kind="opinion")
    if not isinstance(interface, ServiceDriver):  # a limit's range is the doors' to check, by the argument models
        assert "limit" in refused(interface.recall, "lunch", limit=101)
    assert interface.get(second["id"])["revision_id"] == second["revision_id"]
