"""Conflicts through REST and the CLI (in process): one vocabulary, scopes, namespaces, clear refusals."""

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memories import services
from memories.models import AuditEvent, Revision
from memories.services.keys import api_key_create
from tests.helpers import error_of

pytestmark = pytest.mark.django_db

CONFLICTS = "/api/v1/conflicts/"


@pytest.fixture
def api(db):
    def client(scopes=("read", "write"), namespaces=None) -> APIClient:
        _, token = api_key_create(name="k", scopes=list(scopes), namespaces=namespaces, actor="tester", interface="cli")
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return made

    return client


@pytest.fixture
def pair(remember):
    first = remember(
        "Payments API runs on host-7.", subject="Payments API", predicate="runs on", object="host-7"
    ).memory
    second = remember(
        "Payments API runs on host-9.", subject="payments api", predicate="runs on", object="host-9"
    ).memory
    return first, second


def resolve(client, conflict, **body):
    return client.post(f"{CONFLICTS}{conflict}/resolve/", body, format="json")


def test_rest_lists_conflicts_with_both_sides_and_resolves_one_by_keeping(api, pair):
    first, second = pair
    client = api()

    listed = client.get(CONFLICTS, {"namespace": "acme"})
    assert listed.status_code == 200, listed.content
    body = listed.json()
    assert body["total"] == 1
    (conflict,) = body["conflicts"]
    assert conflict["id"] == f"{first.id}-{second.id}"
    assert (conflict["left"]["object"], conflict["right"]["object"]) == ("host-7", "host-9")
    assert conflict["left"]["provenance"]["author"] == "tester"
    assert client.get(f"/api/v1/memories/{first.id}/").json()["conflicts"][0]["memory_id"] == second.id
    recalled = client.get("/api/v1/recall/", {"query": "payments", "namespace": "acme", "mode": "keyword"}).json()
    assert all(hit["conflicts"][0]["conflict_id"] == conflict["id"] for hit in recalled["hits"])

    done = resolve(client, conflict["id"], resolution="keep", keep=second.id, reason="host-7 was retired")
    assert done.status_code == 200, done.content
    assert [memory["state"] for memory in done.json()["memories"]] == ["forgotten", "active"]
    assert AuditEvent.objects.filter(action="resolve_conflict", interface="api").count() == 2
    after = client.get(CONFLICTS).json()
    assert (after["total"], after["conflicts"]) == (0, [])
    assert "conflicts" not in client.get(f"/api/v1/memories/{second.id}/").json()

    again = error_of(resolve(client, conflict["id"], resolution="keep", keep=first.id), 409)
    assert again["code"] == "conflict" and "no longer exists" in again["message"] and again["field"] == "id"


@pytest.mark.parametrize(
    ("conflict", "body", "field"),
    [
        ("abc", {"resolution": "keep", "keep": 1}, "id"),
        ("7-3", {"resolution": "keep", "keep": 3}, "id"),
        (None, {"resolution": "discard", "keep": 1}, "resolution"),
        (None, {"resolution": "keep"}, "keep"),
        (None, {"resolution": "keep", "keep": "1"}, "keep"),
        (None, {"resolution": "split", "boundary": "someday"}, "boundary"),
        (None, {"resolution": "merge", "keep": 1, "content": "x", "colour": "red"}, "colour"),
    ],
)
def test_rest_refuses_bad_input_with_400_naming_the_field(api, pair, conflict, body, field):
    conflict = conflict or f"{pair[0].id}-{pair[1].id}"
    count = Revision.objects.count()
    error = error_of(resolve(api(), conflict, **body), 400)
    assert error["field"] == field
    assert Revision.objects.count() == count
    assert error_of(api().get(CONFLICTS, {"limit": 0}), 400)["field"] == "limit"
    assert error_of(api().get(CONFLICTS, {"as_of": "May"}), 400)["field"] == "as_of"


def test_rest_keeps_to_the_keys_scopes_and_namespaces(api, pair, remember):
    first, second = pair
    remember("Search runs on host-1.", namespace="beta", subject="Search", predicate="runs on", object="host-1")
    remember("Search runs on host-2.", namespace="beta", subject="Search", predicate="runs on", object="host-2")
    conflict = f"{first.id}-{second.id}"

    assert error_of(resolve(api(scopes=("read",)), conflict, resolution="keep", keep=first.id), 403)
    assert error_of(api(namespaces=["beta"]).get(CONFLICTS, {"namespace": "acme"}), 403)["field"] == "namespace"
    assert [c["namespace"] for c in api(namespaces=["beta"]).get(CONFLICTS).json()["conflicts"]] == ["beta"]
    assert {c["namespace"] for c in api().get(CONFLICTS).json()["conflicts"]} == {"acme", "beta"}
    # A memory of another namespace is refused as a missing one is.
    assert error_of(resolve(api(namespaces=["beta"]), conflict, resolution="keep", keep=first.id), 404)
    assert Revision.objects.filter(tombstone=True).count() == 0


def _cli(*arguments) -> dict:
    out = io.StringIO()
    call_command("memory", *arguments, stdout=out)
    return json.loads(out.getvalue())


def test_the_cli_lists_and_resolves_conflicts_in_the_same_words(pair):
    first, second = pair

    listed = _cli("conflicts", "--namespace", "acme")
    assert [conflict["id"] for conflict in listed["conflicts"]] == [f"{first.id}-{second.id}"]

    merged = _cli(
        "resolve",
        f"{first.id}-{second.id}",
        "--resolution",
        "merge",
        "--keep",
        str(first.id),
        "--content",
        "Payments API moved from host-7 to host-9.",
        "--reason",
        "both were true once",
    )
    assert merged["resolution"] == "merge" and len(merged["revision_ids"]) == 2
    assert merged["memories"][0]["content"] == "Payments API moved from host-7 to host-9."
    assert _cli("conflicts")["conflicts"] == []
    assert AuditEvent.objects.filter(action="resolve_conflict").first().interface == "cli"


def test_the_cli_refuses_a_resolution_without_its_arguments(pair):
    from memoryproject.exceptions import InvalidInput

    with pytest.raises(InvalidInput) as error:
        _cli("resolve", f"{pair[0].id}-{pair[1].id}", "--resolution", "split")
    assert error.value.field == "boundary"
    assert services.conflict_memory_ids(f"{pair[0].id}-{pair[1].id}") == (pair[0].id, pair[1].id)
