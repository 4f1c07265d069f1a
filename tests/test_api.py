"""The REST API through Django's test client: every endpoint with good and bad input, auth, errors, limits."""

import json
import re

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connection
from rest_framework.test import APIClient

import memoryproject
from api.exceptions import handler
from memories import services, staging
from memories.models import Memory, Revision
from memories.services import batches
from memories.services.keys import api_key_create, api_key_revoke
from tests.helpers import error_of

# A 401 names where an OAuth client discovers the server (the test client's host is testserver).
CHALLENGE = 'Bearer realm="memory", resource_metadata="http://testserver/.well-known/oauth-protected-resource"'

pytestmark = pytest.mark.django_db

MEMORIES = "/api/v1/memories/"
RECALL = "/api/v1/recall/"
MISSING = 987_654


@pytest.fixture
def keys(db) -> dict[str, str]:
    specs = {
        "writer": {"scopes": ["read", "write"]},
        "reader": {"scopes": ["read"]},
        "admin": {"scopes": ["admin"]},
        "acme": {"scopes": ["read", "write"], "namespaces": ["acme"]},
        "pair": {"scopes": ["read", "write"], "namespaces": ["acme", "beta"]},
        "revoked": {"scopes": ["read", "write"]},
    }
    tokens = {}
    for name, spec in specs.items():
        key, tokens[name] = api_key_create(name=name, actor="tester", interface="cli", **spec)
        if name == "revoked":
            api_key_revoke(prefix=key.prefix, actor="tester", interface="cli")
    return tokens


@pytest.fixture
def api(keys):
    """``api("writer")``: a client sending that key (or the given text as the key); ``api(None)``: no key."""

    def client(name="writer") -> APIClient:
        made = APIClient()
        if name is not None:
            made.credentials(HTTP_AUTHORIZATION=f"Bearer {keys.get(name, name)}")
        return made

    return client


def remember(client, content, **fields) -> dict:
    response = client.post(MEMORIES, {"content": content, "namespace": "acme", **fields}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


# --- authentication and the key matrix -------------------------------------------------------------------------


def test_every_endpoint_but_health_needs_a_key(api):
    anonymous = api(None)
    for method, path in (
        ("get", MEMORIES),
        ("post", MEMORIES),
        ("get", f"{MEMORIES}1/"),
        ("patch", f"{MEMORIES}1/"),
        ("delete", f"{MEMORIES}1/"),
        ("get", f"{MEMORIES}1/history/"),
        ("post", f"{MEMORIES}1/restore/"),
        ("get", RECALL),
        ("post", RECALL),
        ("get", "/api/v1/export/"),
        ("post", "/api/v1/import/"),
        ("get", "/api/v1/stats/"),
    ):
        response = (
            getattr(anonymous, method)(path, {}, format="json")
            if method in ("post", "patch")
            else getattr(anonymous, method)(path)
        )
        error = error_of(response, 401)
        assert error == {
            "code": "unauthenticated",
            "message": "Missing API key: send 'Authorization: Bearer <key>'.",
        }, path
        assert response["WWW-Authenticate"] == CHALLENGE
    for probe in ("/api/v1/health/", "/api/v1/health/live/", "/api/v1/health/ready/"):
        assert anonymous.get(probe).status_code == 200


def test_a_wrong_malformed_or_revoked_key_is_refused_with_401(api):
    assert error_of(api("mem_deadbeef_not-a-real-secret").get(MEMORIES), 401)["message"] == (
        "The API key is not valid. Check it was copied whole, or create a new one."
    )
    assert error_of(api("nonsense").get(MEMORIES), 401)["code"] == "unauthenticated"
    assert error_of(api("revoked").get(MEMORIES), 401)["message"] == (
        "This API key was revoked. Ask the operator for a new one."
    )
    basic = APIClient()
    basic.credentials(HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    response = basic.get(MEMORIES)
    assert error_of(response, 401)["message"] == "Send the API key as 'Authorization: Bearer <key>'."
    assert response["WWW-Authenticate"] == CHALLENGE


def test_a_read_only_key_reads_but_cannot_write(api):
    stored = remember(api("writer"), "The wiki moved to Confluence.")
    reader = api("reader")

    assert reader.get(f"{MEMORIES}{stored['id']}/").status_code == 200
    assert reader.get(RECALL, {"query": "wiki"}).json()["hits"][0]["id"] == stored["id"]
    assert reader.post(RECALL, {"query": "wiki"}, format="json").status_code == 200
    for response in (
        reader.post(MEMORIES, {"content": "x", "namespace": "acme"}, format="json"),
        reader.patch(f"{MEMORIES}{stored['id']}/", {"title": "Wiki"}, format="json"),
        reader.delete(f"{MEMORIES}{stored['id']}/"),
        reader.post(f"{MEMORIES}{stored['id']}/restore/", {}, format="json"),
        reader.post("/api/v1/import/", {"memories": []}, format="json"),
    ):
        error = error_of(response, 403)
        assert error == {
            "code": "forbidden",
            "message": "This needs the 'write' scope, and this API key has only: "
            "read. Ask the operator for a key with the 'write' scope.",
        }
    assert Memory.objects.count() == 1


def test_a_key_for_one_namespace_sees_other_namespaces_memories_as_missing(api):
    elsewhere = (
        api("writer").post(MEMORIES, {"content": "Beta's secret plan.", "namespace": "beta"}, format="json").json()
    )
    mine = remember(api("acme"), "Acme's plan.")
    acme = api("acme")
    hidden = (
        f"Memory {elsewhere['id']} not found — it may have expired or been forgotten. "
        "List or recall memories to find valid ids."
    )

    for response in (
        acme.get(f"{MEMORIES}{elsewhere['id']}/"),
        acme.get(f"{MEMORIES}{elsewhere['id']}/history/"),
        acme.patch(f"{MEMORIES}{elsewhere['id']}/", {"title": "x"}, format="json"),
        acme.delete(f"{MEMORIES}{elsewhere['id']}/"),
        acme.post(f"{MEMORIES}{elsewhere['id']}/restore/", {}, format="json"),
    ):
        assert error_of(response, 404) == {"code": "not_found", "message": hidden, "field": "id"}
    # The same words as a memory that does not exist, so ids do not leak.
    assert error_of(acme.get(f"{MEMORIES}{MISSING}/"), 404)["message"] == hidden.replace(
        str(elsewhere["id"]), str(MISSING)
    )
    refused = error_of(acme.get(MEMORIES, {"namespace": "beta"}), 403)
    assert refused == {
        "code": "forbidden",
        "field": "namespace",
        "message": "namespace: 'beta' is not available to this API key; it may use acme.",
    }
    assert error_of(acme.post(MEMORIES, {"content": "x", "namespace": "beta"}, format="json"), 403)["field"] == (
        "namespace"
    )
    assert error_of(acme.get(RECALL, {"query": "plan", "namespace": "beta"}), 403)["field"] == "namespace"
    assert [hit["id"] for hit in acme.get(RECALL, {"query": "plan", "mode": "keyword"}).json()["hits"]] == [mine["id"]]
    assert [item["id"] for item in acme.get(MEMORIES).json()["items"]] == [mine["id"]]
    # Without a namespace a one-namespace key writes to its own.
    assert acme.post(MEMORIES, {"content": "Defaulted."}, format="json").json()["namespace"] == "acme"


# --- memories/: remember and list -------------------------------------------------------------------------------


def test_remember_answers_201_with_the_memory_and_its_location(api):
    response = api().post(
        MEMORIES,
        {
            "content": "The build cache lives on the NAS.",
            "namespace": "acme",
            "title": "Build cache",
            "kind": "fact",
            "tags": ["infra", "CI"],
            "source": "ops handbook",
            "key": "build-cache",
            "ttl_days": 30,
            "subject": "build cache",
            "predicate": "lives on",
            "object": "the NAS",
        },
        format="json",
    )

    assert response.status_code == 201
    stored = response.json()
    assert response["Location"] == f"/api/v1/memories/{stored['id']}/"
    assert (stored["namespace"], stored["key"], stored["kind"], stored["tags"], stored["title"]) == (
        "acme",
        "build-cache",
        "fact",
        ["CI", "infra"],
        "Build cache",
    )
    assert (stored["created"], stored["deduplicated"], stored["revised"]) == (True, False, False)
    assert (stored["subject"], stored["predicate"], stored["object"]) == ("build cache", "lives on", "the NAS")
    assert stored["expires_at"] is not None and stored["valid_to"] is None
    assert set(stored) >= {
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


def test_remembering_the_same_content_again_answers_200_and_stores_nothing(api):
    first = remember(api(), "Our CI runs on Buildkite.")
    again = api().post(MEMORIES, {"content": "Our CI runs on Buildkite.", "namespace": "acme"}, format="json")

    assert again.status_code == 200
    assert (again.json()["id"], again.json()["deduplicated"], again.json()["created"]) == (first["id"], True, False)
    assert Memory.objects.count() == 1


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"content": 5}, "content", "content: Input should be a valid string (got 5)"),
        ({"content": "x", "tags": "ops"}, "tags", "tags: Input should be a valid list (got 'ops')"),
        ({"content": "x", "tags": [1]}, "tags", "tags[0]: Input should be a valid string (got 1)"),
        ({"content": "x", "ttl_days": "5"}, "ttl_days", "ttl_days: Input should be a valid integer (got '5')"),
        ({"content": "x", "ttl_days": True}, "ttl_days", "ttl_days: Input should be a valid integer (got True)"),
        ({"content": "x", "ttl_days": -1}, "ttl_days", "ttl_days: Input should be greater than or equal to 0 (got -1)"),
        (
            {"content": "x", "kind": "opinion"},
            "kind",
            "kind: Input should be 'fact', 'preference', 'decision', "
            "'skill', 'note', 'artifact' or 'event' (got 'opinion')",
        ),
        ({"content": "x", "valid_from": "next week"}, "valid_from", None),
        ({"content": "x", "valid_from": "2025-02-30"}, "valid_from", None),
        ({"content": "x", "namespace": "Not Valid"}, "namespace", None),
        ({"content": ""}, "content", "content: String should have at least 1 character (got '')"),
        ({"content": "   "}, "content", "content: must not be empty."),
        (
            {"content": "x", "subject": "lunch"},
            "predicate",
            "subject, predicate and object go together: give all three or none.",
        ),
        ({"content": "x", "colour": "blue"}, "colour", None),
        ({}, "content", "content: required"),
    ],
)
def test_remember_refuses_bad_input_naming_the_field(api, body, field, message):
    body.setdefault("namespace", "acme")
    error = error_of(api().post(MEMORIES, body, format="json"), 400)

    assert error["code"] == "invalid"
    assert error.get("field") == field
    if message:
        assert error["message"] == message
    else:
        assert error["message"].startswith(f"{field}: ")
    assert Memory.objects.count() == 0


def test_unknown_fields_are_named_with_what_the_endpoint_takes(api):
    error = error_of(api().post(MEMORIES, {"content": "x", "namepsace": "acme"}, format="json"), 400)
    assert error["message"].startswith("namepsace: unknown field. This endpoint takes: content, namespace, key,")
    in_query = error_of(api().post(f"{MEMORIES}?namespace=acme", {"content": "x"}, format="json"), 400)
    assert in_query == {
        "code": "invalid",
        "field": "namespace",
        "message": ("namespace: unknown parameter: this endpoint takes its arguments in the JSON body."),
    }
    assert Memory.objects.count() == 0


def test_over_long_values_are_refused_with_413(api, settings):
    too_many_bytes = error_of(api().post(MEMORIES, {"content": "é" * 20_000, "namespace": "acme"}, format="json"), 413)
    too_many_chars = error_of(api().post(MEMORIES, {"content": "x" * 40_000, "namespace": "acme"}, format="json"), 413)
    long_title = error_of(api().post(MEMORIES, {"content": "x", "title": "t" * 301}, format="json"), 413)

    assert too_many_bytes == {
        "code": "too_large",
        "field": "content",
        "message": ("content: 40000 bytes is over the limit of 32768 bytes. Split it into smaller memories."),
    }
    assert too_many_chars["field"] == "content" and too_many_chars["code"] == "too_large"
    assert long_title["field"] == "title"
    assert Memory.objects.count() == 0


def test_bodies_that_are_not_one_json_object_are_refused(api):
    client = api()
    duplicate = client.post(MEMORIES, '{"content": "a", "content": "b"}', content_type="application/json")
    broken = client.post(MEMORIES, '{"content": ', content_type="application/json")
    nan = client.post(MEMORIES, '{"content": "x", "ttl_days": NaN}', content_type="application/json")
    listed = client.post(MEMORIES, '["content"]', content_type="application/json")
    form = client.post(MEMORIES, "content=x", content_type="application/x-www-form-urlencoded")
    body = json.dumps({"content": "Encoded otherwise.", "namespace": "acme"})
    utf16 = client.post(MEMORIES, body.encode("utf-16"), content_type="application/json")
    marked = client.post(MEMORIES, b"\xef\xbb\xbf" + body.encode(), content_type="application/json")

    assert error_of(duplicate, 400) == {
        "code": "parse_error",
        "message": ("The body is not valid JSON: duplicate key 'content' in one JSON object."),
    }
    assert error_of(broken, 400)["code"] == "parse_error"
    assert error_of(nan, 400)["message"] == "The body is not valid JSON: NaN is not JSON."
    assert error_of(listed, 400)["message"] == "Invalid data. Expected a dictionary, but got list."
    assert error_of(form, 415)["code"] == "unsupported_media_type"
    # JSON between systems is UTF-8 without a byte order mark, as on /mcp.
    assert error_of(utf16, 400) == {"code": "parse_error", "message": "The body is not valid JSON: not UTF-8."}
    assert error_of(marked, 400)["message"] == (
        "The body is not valid JSON: it starts with a byte order mark; send UTF-8 without one."
    )
    assert Memory.objects.count() == 0


def test_a_body_over_the_limit_is_refused_before_it_is_parsed(api, settings):
    settings.MEMORY_API_MAX_BODY_BYTES = 64 * 1024
    body = json.dumps({"content": "x", "namespace": "acme", "source": "y" * 70_000})
    error = error_of(api().post(MEMORIES, body, content_type="application/json"), 413)

    assert error == {
        "code": "too_large",
        "message": (
            "The request body is over the limit of 65536 bytes (MEMORY_API_MAX_BODY_BYTES). Send less per request: "
            "split the content or the import into smaller parts."
        ),
    }
    # Declared length alone decides: the body behind it is never read.
    declared = api().post(MEMORIES, "{}", content_type="application/json", CONTENT_LENGTH=str(10**9))
    assert error_of(declared, 413)["code"] == "too_large"


def test_list_pages_newest_first_and_filters(api):
    client = api()
    made = [
        remember(client, f"Fact number {n}.", tags=["odd"] if n % 2 else ["even"], kind="fact" if n < 3 else "note")
        for n in range(5)
    ]
    api().post(MEMORIES, {"content": "Elsewhere.", "namespace": "beta"}, format="json")

    first = client.get(MEMORIES, {"namespace": "acme", "limit": 2}).json()
    second = client.get(MEMORIES, {"namespace": "acme", "limit": 2, "cursor": first["next_cursor"]}).json()
    last = client.get(MEMORIES, {"namespace": "acme", "limit": 2, "cursor": second["next_cursor"]}).json()
    assert [item["id"] for item in first["items"] + second["items"] + last["items"]] == [
        memory["id"] for memory in reversed(made)
    ]
    assert last["next_cursor"] is None
    assert [item["id"] for item in client.get(MEMORIES, {"tags": "odd"}).json()["items"]] == [
        made[3]["id"],
        made[1]["id"],
    ]
    assert [item["id"] for item in client.get(MEMORIES, {"tags": ["odd", "even"]}).json()["items"]] == []
    assert [item["id"] for item in client.get(MEMORIES, {"kind": "fact", "namespace": "acme"}).json()["items"]] == [
        made[2]["id"],
        made[1]["id"],
        made[0]["id"],
    ]
    client.delete(f"{MEMORIES}{made[0]['id']}/")
    assert [item["id"] for item in client.get(MEMORIES, {"state": "forgotten"}).json()["items"]] == [made[0]["id"]]
    assert len(client.get(MEMORIES).json()["items"]) == 5
    # As of a time before the forget, the first memory is still active.
    before = client.get(MEMORIES, {"namespace": "acme", "as_of": made[4]["known_at"]}).json()["items"]
    assert [item["id"] for item in before] == [memory["id"] for memory in reversed(made)]


@pytest.mark.parametrize(
    "query, field",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"state": "gone"}, "state"),
        ({"kind": "opinion"}, "kind"),
        ({"cursor": "bm90IG1pbmU"}, "cursor"),
        ({"namespace": "Bad Name"}, "namespace"),
        ({"colour": "blue"}, "colour"),
        ({"limit": ["1", "2"]}, "limit"),
        ({"as_of": "yesterday"}, "as_of"),
        ({"valid_at": "2026-13-01"}, "valid_at"),
    ],
)
def test_list_refuses_bad_parameters(api, query, field):
    error = error_of(api().get(MEMORIES, query), 400)
    assert (error["code"], error["field"]) == ("invalid", field)
    assert error["message"].startswith(f"{field}: ")


# --- memories/{id}/ ---------------------------------------------------------------------------------------------


def test_get_answers_as_of_a_past_time_and_about_a_valid_time(api):
    client = api()
    first = remember(client, "The VPN endpoint is vpn1.example.")
    client.patch(f"{MEMORIES}{first['id']}/", {"content": "The VPN endpoint is vpn2.example."}, format="json")
    corrected = client.patch(
        f"{MEMORIES}{first['id']}/",
        {"content": "During the migration: vpn3.example.", "valid_from": "2020-01-01", "valid_to": "2020-02-01"},
        format="json",
    ).json()
    bounded = client.get(f"{MEMORIES}{first['id']}/history/").json()["revisions"][-1]
    # The answer shows what holds now, and says what the correction wrote and where it holds.
    assert (corrected["changed"], corrected["content"]) == (True, "The VPN endpoint is vpn2.example.")
    assert corrected["correction"] == {
        "revision_id": bounded["revision_id"],
        "title": "",
        "content": "During the migration: vpn3.example.",
        "valid_from": "2020-01-01T00:00:00.000000Z",
        "valid_to": "2020-02-01T00:00:00.000000Z",
    }
    plain = client.patch(f"{MEMORIES}{first['id']}/", {"title": "VPN"}, format="json").json()
    assert "correction" not in plain
    assert (bounded["valid_from"], bounded["valid_to"]) == (
        "2020-01-01T00:00:00.000000Z",
        "2020-02-01T00:00:00.000000Z",
    )

    assert client.get(f"{MEMORIES}{first['id']}/").json()["content"] == "The VPN endpoint is vpn2.example."
    assert client.get(f"{MEMORIES}{first['id']}/", {"as_of": first["known_at"]}).json()["content"] == (
        "The VPN endpoint is vpn1.example."
    )
    during = client.get(f"{MEMORIES}{first['id']}/", {"valid_at": "2020-01-15T12:00:00Z"}).json()
    assert (during["content"], during["revision_id"]) == ("During the migration: vpn3.example.", bounded["revision_id"])
    before = client.get(f"{MEMORIES}{first['id']}/", {"as_of": "2000-01-01"})
    assert error_of(before, 404)["code"] == "not_found"


@pytest.mark.parametrize(
    "path, query, status, field",
    [
        (f"{MEMORIES}{MISSING}/", {}, 404, "id"),
        (f"{MEMORIES}0/", {}, 400, "id"),
        (f"{MEMORIES}99999999999999999999/", {}, 400, "id"),
        (f"{MEMORIES}1/", {"as_of": "yesterday"}, 400, "as_of"),
        (f"{MEMORIES}1/", {"valid_at": "2025-13-01"}, 400, "valid_at"),
        (f"{MEMORIES}1/", {"as_of": "2025-05-01T09:30:00"}, 400, "as_of"),
        (f"{MEMORIES}1/", {"when": "now"}, 400, "when"),
    ],
)
def test_get_refuses_bad_ids_and_times(api, path, query, status, field):
    remember(api(), "One memory.")
    assert error_of(api().get(path, query), status)["field"] == field


def test_patch_revises_and_retags_in_one_call(api):
    client = api()
    first = remember(client, "Lunch is at noon.", tags=["office"])
    updated = client.patch(
        f"{MEMORIES}{first['id']}/",
        {"content": "Lunch is at one.", "add_tags": ["food"], "remove_tags": ["OFFICE"], "ttl_days": 10},
        format="json",
    )

    assert updated.status_code == 200
    body = updated.json()
    assert (body["changed"], body["content"], body["tags"]) == (True, "Lunch is at one.", ["food"])
    assert body["expires_at"] is not None
    history = client.get(f"{MEMORIES}{first['id']}/history/").json()
    assert [revision["content"] for revision in history["revisions"]] == ["Lunch is at noon.", "Lunch is at one."]
    same = client.patch(f"{MEMORIES}{first['id']}/", {"add_tags": ["food"]}, format="json").json()
    assert same["changed"] is False


def test_writes_that_meet_an_unfinished_imports_memory_answer_409_or_404_and_write_nothing(api):
    batch = batches.batch_begin(trusted=False, actor="importer", interface="cli")
    with staging.writing(batch.pk):
        held = services.memory_remember(
            namespace="acme", key="fridge", content="Theirs.", actor="importer", interface="cli"
        ).memory.id
    client = api()

    taken = error_of(
        client.post(MEMORIES, {"content": "Mine.", "namespace": "acme", "key": "fridge"}, format="json"), 409
    )
    assert taken["code"] == "conflict" and "belongs to an import that has not finished" in taken["message"]
    for response in (
        client.patch(f"{MEMORIES}{held}/", {"content": "Changed."}, format="json"),
        client.post(f"{MEMORIES}{held}/restore/", {}, format="json"),
        client.delete(f"{MEMORIES}{held}/"),
    ):
        assert error_of(response, 404)["code"] == "not_found"
    assert [revision.content for revision in Revision.all_objects.filter(memory_id=held)] == ["Theirs."]
    assert Memory.all_objects.count() == 1


def test_patch_refuses_nothing_to_do_duplicates_and_forgotten_memories(api):
    client = api()
    first = remember(client, "Standup is at 9:30.")
    second = remember(client, "Standup is at 10:00.")

    nothing = error_of(client.patch(f"{MEMORIES}{first['id']}/", {}, format="json"), 400)
    assert nothing["message"].startswith("Nothing to update")
    duplicate = error_of(
        client.patch(f"{MEMORIES}{second['id']}/", {"content": "Standup is at 9:30."}, format="json"), 409
    )
    assert duplicate == {
        "code": "duplicate",
        "field": "content",
        "memory_id": first["id"],
        "message": (
            f"Memory {first['id']} (acme/{first['key']}) already holds exactly this content. "
            f"Update or tag memory {first['id']} instead of duplicating it."
        ),
    }
    client.delete(f"{MEMORIES}{first['id']}/")
    forgotten = error_of(client.patch(f"{MEMORIES}{first['id']}/", {"title": "x"}, format="json"), 409)
    assert forgotten == {
        "code": "conflict",
        "field": "id",
        "message": (f"Memory {first['id']} is forgotten. Restore it first, or remember the content anew."),
    }
    assert error_of(client.patch(f"{MEMORIES}{second['id']}/", {"ttl_days": -2}, format="json"), 400)["field"] == (
        "ttl_days"
    )
    assert (
        error_of(client.patch(f"{MEMORIES}{second['id']}/", {"content": None, "tags": ["x"]}, format="json"), 400)[
            "field"
        ]
        == "tags"
    )
    # A refused retag leaves no revision behind.
    refused = client.patch(f"{MEMORIES}{second['id']}/", {"title": "New", "add_tags": ["bad tag!"]}, format="json")
    assert error_of(refused, 400)["field"] == "tags"
    assert len(client.get(f"{MEMORIES}{second['id']}/history/").json()["revisions"]) == 1


def test_delete_forgets_once_keeps_history_and_restore_brings_it_back(api):
    client = api()
    stored = remember(client, "The old office is on Elm Street.")

    forgotten = client.delete(f"{MEMORIES}{stored['id']}/", {"reason": "we moved"}, QUERY_STRING="reason=we+moved")
    assert forgotten.status_code == 200
    assert (forgotten.json()["changed"], forgotten.json()["state"]) == (True, "forgotten")
    assert client.delete(f"{MEMORIES}{stored['id']}/").json()["changed"] is False
    assert error_of(client.get(f"{MEMORIES}{stored['id']}/"), 404)["code"] == "not_found"
    assert (
        client.get(f"{MEMORIES}{stored['id']}/", {"as_of": stored["known_at"]}).json()["content"] == (stored["content"])
    )
    tombstone = client.get(f"{MEMORIES}{stored['id']}/history/").json()["revisions"][-1]
    assert (tombstone["tombstone"], tombstone["hides"], tombstone["reason"]) == (
        True,
        stored["revision_id"],
        "we moved",
    )
    before = client.get(f"{MEMORIES}{stored['id']}/history/", {"as_of": stored["known_at"]}).json()
    assert len(before["revisions"]) == 1

    restored = client.post(f"{MEMORIES}{stored['id']}/restore/", {"reason": "moved back"}, format="json")
    assert (restored.status_code, restored.json()["state"], restored.json()["changed"]) == (200, "active", True)
    assert client.get(f"{MEMORIES}{stored['id']}/").json()["content"] == stored["content"]
    assert client.post(f"{MEMORIES}{stored['id']}/restore/", {}, format="json").json()["changed"] is False
    assert (
        error_of(client.post(f"{MEMORIES}{stored['id']}/restore/", {"why": "x"}, format="json"), 400)["field"] == "why"
    )
    assert error_of(client.delete(f"{MEMORIES}{MISSING}/"), 404)["message"] == (
        f"Memory {MISSING} not found. List or recall memories to find valid ids."
    )


# --- recall/ ----------------------------------------------------------------------------------------------------


def test_recall_by_get_and_post_ranks_and_explains(api):
    client = api()
    deploys = remember(client, "Deploys go out on Tuesdays after the standup.")
    remember(client, "The standup is at 9:30 in the small room.")
    later = remember(client, "Deploys are frozen during the December holidays.")

    by_get = client.get(
        RECALL, {"query": "deploys tuesdays", "mode": "keyword", "match": "any", "explain": "true", "namespace": "acme"}
    ).json()
    by_post = client.post(
        RECALL,
        {"query": "deploys tuesdays", "mode": "keyword", "match": "any", "explain": True, "namespace": ["acme"]},
        format="json",
    ).json()
    assert [hit["id"] for hit in by_get["hits"]] == [deploys["id"], later["id"]]
    assert [hit["score"] for hit in by_get["hits"]] == [hit["score"] for hit in by_post["hits"]]
    assert by_get["hits"][0]["explain"] and by_get["hits"][0]["matched_terms"] == ["deploys", "tuesdays"]
    assert set(by_get) >= {"query", "terms", "match_mode", "hits"}
    limited = client.get(RECALL, {"query": "deploys", "limit": 1, "kinds": ["note"], "mode": "keyword"}).json()
    assert len(limited["hits"]) == 1
    nothing = client.post(RECALL, {"query": "zeppelin", "mode": "keyword"}, format="json").json()
    assert nothing["hits"] == [] and nothing["hint"]


def test_recall_answers_as_of_a_past_time(api):
    client = api()
    first = remember(client, "The release train leaves on Mondays.")
    client.patch(f"{MEMORIES}{first['id']}/", {"content": "The release train leaves on Fridays."}, format="json")
    client.post(MEMORIES, {"content": "Release notes live in the wiki.", "namespace": "acme"}, format="json")

    now = client.get(RECALL, {"query": "release train", "mode": "keyword"}).json()
    then = client.get(RECALL, {"query": "release train", "mode": "keyword", "as_of": first["known_at"]}).json()
    assert now["hits"][0]["content"] == "The release train leaves on Fridays."
    assert [(hit["id"], hit["content"]) for hit in then["hits"]] == [(first["id"], first["content"])]
    assert then["as_of"] == first["known_at"]
    assert client.get(RECALL, {"query": "release", "as_of": "1999-01-01"}).json()["hits"] == []


@pytest.mark.parametrize(
    "method, arguments, field, status",
    [
        ("get", {}, "query", 400),
        ("post", {}, "query", 400),
        ("get", {"query": "x", "limit": 101}, "limit", 400),
        ("post", {"query": "x", "limit": 0}, "limit", 400),
        ("post", {"query": "x", "limit": "5"}, "limit", 400),
        ("get", {"query": "x", "match": "some"}, "match", 400),
        ("post", {"query": "x", "mode": "vibes"}, "mode", 400),
        ("post", {"query": "x", "explain": "yes"}, "explain", 400),
        ("post", {"query": "x", "explain": 1}, "explain", 400),
        ("post", {"query": "x", "limit": 5.0}, "limit", 400),
        ("get", {"query": "x", "limit": ["5", "6"]}, "limit", 400),
        ("post", {"query": "x", "namespace": 7}, "namespace", 400),
        ("post", {"query": "x", "namespace": []}, "namespace", 400),
        ("get", {"query": "x", "as_of": "2025-02-30"}, "as_of", 400),
        ("post", {"query": "x", "valid_at": "soon"}, "valid_at", 400),
        ("post", {"query": "x", "kinds": ["opinion"]}, "kinds", 400),
        ("post", {"query": "   "}, "query", 400),
        ("post", {"query": "x" * 2001}, "query", 413),
        ("post", {"query": "x", "top_k": 3}, "top_k", 400),
        ("get", {"query": "x", "namespace": "Not Valid"}, "namespace", 400),
    ],
)
def test_recall_refuses_bad_arguments(api, method, arguments, field, status):
    client = api()
    response = client.get(RECALL, arguments) if method == "get" else client.post(RECALL, arguments, format="json")
    error = error_of(response, status)
    assert error["field"] == field
    assert error["message"].startswith(field)


def test_answers_leave_out_the_optional_keys_that_are_empty(api):
    client = api()
    plain = remember(client, "Standups are at 9:30 in the small room.")
    triple = remember(client, "The CI runs on Buildkite.", subject="CI", predicate="runs on", object="Buildkite")

    assert not {"subject", "predicate", "object", "near_twin"} & set(plain)
    assert (triple["subject"], triple["predicate"], triple["object"]) == ("CI", "runs on", "Buildkite")
    hits = client.get(RECALL, {"query": "standups", "mode": "keyword"}).json()["hits"]
    assert "explain" not in hits[0] and "subject" not in hits[0]
    assert client.get(RECALL, {"query": "standups", "mode": "keyword", "explain": "true"}).json()["hits"][0]["explain"]
    assert list(hits[0])[:4] == ["id", "key", "namespace", "kind"] and list(hits[0])[-5:] == [
        "score",
        "snippet",
        "matched_terms",
        "relevant",
        "age",
    ]


def test_hostile_queries_are_searched_as_text(api):
    client = api()
    remember(client, 'He said "NEAR(deploy" AND * OR')
    for query in ('"', "AND", "*", "NEAR(", "deploy OR", "'; DROP TABLE memories_memory; --"):
        assert client.get(RECALL, {"query": query}).status_code == 200, query


# --- export/ and import/ ------------------------------------------------------------------------------------------


def export(client, **query) -> dict:
    response = client.get("/api/v1/export/", query)
    assert response.status_code == 200, response.content
    assert response.streaming and response["Content-Type"] == "application/json"
    return json.loads(b"".join(response.streaming_content))


def test_export_then_import_round_trips_over_http(api):
    writer = api("writer")
    kept = remember(writer, "Kept memory.", tags=["keep"], key="kept")
    changed = remember(writer, "First text.", key="changed")
    writer.patch(f"{MEMORIES}{changed['id']}/", {"content": "Second text."}, format="json")
    gone = remember(writer, "Forgotten memory.", key="gone")
    writer.delete(f"{MEMORIES}{gone['id']}/")

    document = export(writer, namespace="acme")
    assert document["namespace"] == "acme" and len(document["memories"]) == 3
    assert export(writer, namespace="acme")["memories"] == document["memories"]
    for memory in document["memories"]:
        memory["namespace"] = "copy"

    plain = writer.post("/api/v1/import/", document, format="json")
    assert plain.status_code == 200, plain.content
    assert plain.json() == {
        "created": 2,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 0,
        "forgotten": 0,
        "skipped": 1,
        "trusted": False,
        "dry_run": False,
    }
    copied = {item["key"]: item for item in writer.get(MEMORIES, {"namespace": "copy"}).json()["items"]}
    assert {key: item["content"] for key, item in copied.items()} == {"kept": "Kept memory.", "changed": "Second text."}
    assert copied["kept"]["tags"] == ["keep"]

    for memory in document["memories"]:
        memory["namespace"] = "restored"
    refused = writer.post("/api/v1/import/?trusted=true", document, format="json")
    assert error_of(refused, 403)["message"].startswith("This needs the 'admin' scope")
    trusted = api("admin").post("/api/v1/import/?trusted=true", document, format="json")
    assert trusted.json() == {
        "created": 3,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 0,
        "forgotten": 1,
        "skipped": 0,
        "trusted": True,
        "dry_run": False,
    }
    restored = writer.get(MEMORIES, {"namespace": "restored", "state": "all"}).json()["items"]
    by_key = {item["key"]: item for item in restored}
    assert by_key["kept"]["known_at"] == kept["known_at"]
    history = writer.get(f"{MEMORIES}{by_key['changed']['id']}/history/").json()["revisions"]
    assert [revision["known_at"] for revision in history] == [
        revision["known_at"] for revision in document["memories"][1]["revisions"]
    ]
    assert by_key["gone"]["state"] == "forgotten"
    again = api("admin").post("/api/v1/import/?trusted=true", document, format="json").json()
    assert again["unchanged"] == 3 and again["created"] == 0


def test_import_is_all_or_nothing_and_checks_namespaces_and_size(api, settings):
    writer = api("writer")
    good = {"namespace": "acme", "key": "a", "revisions": [{"content": "Fine."}]}
    bad = {"namespace": "acme", "key": "b", "revisions": [{"content": "Bad.", "valid_from": "someday"}]}

    refused = writer.post("/api/v1/import/", {"memories": [good, bad]}, format="json")
    error = error_of(refused, 400)
    assert error["field"] == "memories[1].revisions[0].valid_from"
    assert error["message"].startswith("Nothing was imported: 1 problem(s) in the document.")
    assert Memory.objects.count() == 0
    assert error_of(writer.post("/api/v1/import/", [good], format="json"), 400)["field"] == "document"
    assert (
        error_of(writer.post("/api/v1/import/?dry_run=maybe", {"memories": []}, format="json"), 400)["field"]
        == "dry_run"
    )
    dry = writer.post("/api/v1/import/?dry_run=true", {"memories": [good]}, format="json").json()
    assert (dry["created"], dry["dry_run"], Memory.objects.count()) == (1, True, 0)

    elsewhere = {"namespace": "beta", "key": "c", "revisions": [{"content": "Beta."}]}
    limited = error_of(api("acme").post("/api/v1/import/", {"memories": [good, elsewhere]}, format="json"), 403)
    assert limited == {
        "code": "forbidden",
        "field": "memories[1].namespace",
        "message": ("memories[1].namespace: 'beta' is not available to this API key; it may use acme."),
    }
    assert Memory.objects.count() == 0

    settings.MEMORY_API_MAX_IMPORT_BYTES = 64 * 1024
    big = {"memories": [{**good, "revisions": [{"content": "x" * 30_000}]} for _ in range(3)]}
    assert error_of(writer.post("/api/v1/import/", big, format="json"), 413)["message"].startswith(
        "The request body is over the limit of 65536 bytes (MEMORY_API_MAX_IMPORT_BYTES)."
    )


def test_export_refuses_bad_parameters_and_a_key_must_name_one_of_several_namespaces(api):
    assert error_of(api().get("/api/v1/export/", {"as_of": "tomorrowish"}), 400)["field"] == "as_of"
    assert error_of(api().get("/api/v1/export/", {"namespace": "Bad Name"}), 400)["field"] == "namespace"
    several = error_of(api("pair").get("/api/v1/export/"), 400)
    assert several["message"] == "namespace: this API key may use several namespaces (acme, beta); name one."
    remember(api(), "In acme.")
    api().post(MEMORIES, {"content": "In beta.", "namespace": "beta"}, format="json")
    assert [memory["namespace"] for memory in export(api("acme"))["memories"]] == ["acme"]
    assert error_of(api("acme").get("/api/v1/export/", {"namespace": "beta"}), 403)["code"] == "forbidden"


# --- stats/ and health/ -------------------------------------------------------------------------------------------


def test_stats_count_and_hide_server_wide_fields_from_limited_keys(api):
    remember(api(), "One.", tags=["t"])
    api().post(MEMORIES, {"content": "Two.", "namespace": "beta"}, format="json")

    everything = api().get("/api/v1/stats/").json()
    assert (everything["memories"], everything["visible"]) == (2, 2)
    assert set(everything["namespaces"]) == {"acme", "beta"}
    assert {"database_bytes", "database_engine", "schema", "search_mode", "embedder"} <= set(everything)
    assert everything["database_engine"].startswith(f"{connection.vendor} ")
    assert "database_path" not in everything
    limited = api("acme").get("/api/v1/stats/").json()
    assert (limited["memories"], set(limited["namespaces"])) == (1, {"acme"})
    assert not {"database_bytes", "database_engine", "sqlite_version", "schema", "search_mode", "database_path"} & set(
        limited
    )
    assert error_of(api("pair").get("/api/v1/stats/"), 400)["field"] == "namespace"
    assert api("pair").get("/api/v1/stats/", {"namespace": "beta"}).json()["memories"] == 1


def test_health_needs_no_key_and_shows_no_secrets(api, settings):
    response = api(None).get("/api/v1/health/")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"] == "ok" and body["api_version"] == "v1"
    assert body["version"] == memoryproject.__version__
    assert body["embedder"] == {"name": "hash-v1", "device": "cpu", "available": True}
    assert body["search_mode"] == "hybrid" and isinstance(body["uptime_seconds"], int)
    assert body["database_engine"] == connection.vendor  # the engine's version is for admin keys
    text = response.content.decode()
    assert settings.SECRET_KEY not in text and str(settings.MEMORY_DB_PATH) not in text


def test_health_shows_the_database_engine_s_version_only_to_an_admin_key(api):
    engines = {name: api(name).get("/api/v1/health/").json()["database_engine"] for name in ("admin", "writer", "bad")}

    assert re.fullmatch(rf"{connection.vendor} \d+\.\d+(\.\d+)?", engines["admin"])
    assert engines["writer"] == engines["bad"] == connection.vendor


def test_liveness_asks_the_database_nothing(api, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = api(None).get("/api/v1/health/live/")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": memoryproject.__version__}


def test_readiness_answers_ready_and_names_a_migration_the_database_lacks(api):
    assert api(None).get("/api/v1/health/ready/").json() == {
        "status": "ready",
        "database": "ok",
        "unapplied_migrations": [],
    }
    with connection.cursor() as cursor:  # as a database restored from before the last upgrade would be
        cursor.execute("DELETE FROM django_migrations WHERE app = 'telemetry' AND name LIKE '0001%%'")

    response = api(None).get("/api/v1/health/ready/")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready" and body["database"] == "ok"
    assert [name.split("_")[0] for name in body["unapplied_migrations"]] == ["telemetry.0001"]
    assert body["message"].startswith("The database's schema is behind this server's code: 1 unapplied migration")
    assert "Retry-After" not in response


# --- errors, throttling ------------------------------------------------------------------------------------------


def test_paths_and_methods_the_api_lacks_answer_in_the_error_shape(api):
    assert error_of(api().get("/api/v1/nothing/"), 404)["message"] == (
        "No endpoint at /api/v1/nothing/. The endpoints are listed at /api/docs/."
    )
    assert "did you mean /api/v1/memories/" in error_of(api().get("/api/v1/memories"), 404)["message"]
    assert error_of(api().put(MEMORIES, {}, format="json"), 405) == {
        "code": "method_not_allowed",
        "message": 'Method "PUT" not allowed.',
    }
    assert error_of(api().get(f"{MEMORIES}1/restore/"), 405)["code"] == "method_not_allowed"
    # Django's CSRF check does not answer for the API: a write to a wrong path is a 404 like a read.
    csrf_checked = APIClient(enforce_csrf_checks=True)
    assert error_of(csrf_checked.post("/api/v1/memories/1,2/", {}, format="json"), 404)["code"] == "not_found"


def test_django_validation_errors_become_400_not_500():
    response = handler(DjangoValidationError("A rule in a model was broken."), {})
    assert (response.status_code, response.data) == (
        400,
        {"error": {"code": "invalid", "message": ("A rule in a model was broken.")}},
    )


LONE_SURROGATE = "\ud800"  # what JSON's "\\ud800" parses to: a str no UTF-8 writer takes


@pytest.mark.parametrize(
    "path, body, field",
    [
        (MEMORIES, {"content": "Odd kind.", "kind": LONE_SURROGATE}, "kind"),
        (RECALL, {"query": "odd", "mode": LONE_SURROGATE}, "mode"),
        (RECALL, {"query": "odd", "match": LONE_SURROGATE}, "match"),
        (RECALL, {"query": "odd", "kinds": [LONE_SURROGATE]}, "kinds"),
        ("/api/v1/hooks/recall/", {"query": "odd", "mode": LONE_SURROGATE}, "mode"),
        ("/api/v1/hooks/recall/", {"query": "odd", "kinds": ["note", LONE_SURROGATE]}, "kinds"),
        ("/api/v1/hooks/ingest/", {"text": "Odd kind.", "kind": LONE_SURROGATE}, "kind"),
        (MEMORIES, {"content": "Odd field name.", LONE_SURROGATE: 1}, LONE_SURROGATE),
    ],
)
def test_a_lone_surrogate_in_a_value_or_a_name_is_a_clear_400_that_escapes_it(api, path, body, field):
    # json.dumps escapes it, as a client's JSON would; parsed, it is a lone surrogate again.
    response = api().post(path, json.dumps(body), content_type="application/json")
    error = error_of(response, 400)
    assert error["code"] == "invalid" and error["field"] == field.encode("utf-8", "backslashreplace").decode()
    assert "\\ud800" in error["message"]


def test_more_query_parameters_than_django_reads_are_a_clear_400_with_or_without_a_key(api, settings):
    query = "&".join(f"p{index}=1" for index in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    for client in (api(), api(None)):
        error = error_of(client.get(f"{MEMORIES}?{query}"), 400)
        assert error == {
            "code": "invalid",
            "message": (
                f"More than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} query parameters: send at most "
                f"{settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}, and long lists in a JSON body."
            ),
        }


def test_each_key_is_throttled_on_its_own_with_retry_after(api, settings):
    settings.MEMORY_API_READS_PER_MINUTE = 2
    settings.MEMORY_API_WRITES_PER_MINUTE = 1
    reader, writer = api("reader"), api("writer")

    assert [reader.get(MEMORIES).status_code for _ in range(2)] == [200, 200]
    throttled = reader.get(RECALL, {"query": "x"})
    error = error_of(throttled, 429)
    assert error["code"] == "throttled" and 1 <= int(throttled["Retry-After"]) <= 60
    assert writer.get(MEMORIES).status_code == 200  # another key has its own budget
    assert writer.post(MEMORIES, {"content": "One.", "namespace": "acme"}, format="json").status_code == 201
    assert error_of(writer.post(MEMORIES, {"content": "Two.", "namespace": "acme"}, format="json"), 429)
    # Recall by POST reads: it spends the read budget, not the write one.
    assert writer.post(RECALL, {"query": "one"}, format="json").status_code == 200
    settings.MEMORY_API_READS_PER_MINUTE = 0
    assert reader.get(MEMORIES).status_code == 200


# --- schema and docs -----------------------------------------------------------------------------------------------


ENDPOINTS = {
    "/api/v1/memories/": {"get", "post"},
    "/api/v1/memories/{id}/": {"get", "patch", "delete"},
    "/api/v1/memories/{id}/history/": {"get"},
    "/api/v1/memories/{id}/restore/": {"post"},
    "/api/v1/memories/{id}/promote/": {"post"},
    "/api/v1/memories/{id}/archive/": {"post"},
    "/api/v1/memories/{id}/unarchive/": {"post"},
    "/api/v1/recall/": {"get", "post"},
    "/api/v1/learn/": {"post"},
    "/api/v1/conflicts/": {"get"},
    "/api/v1/conflicts/{id}/resolve/": {"post"},
    "/api/v1/graph/": {"get"},
    "/api/v1/audit/": {"get"},
    "/api/v1/route/": {"get", "post"},
    "/api/v1/export/": {"get"},
    "/api/v1/import/": {"post"},
    "/api/v1/stats/": {"get"},
    "/api/v1/health/": {"get"},
    "/api/v1/health/live/": {"get"},
    "/api/v1/health/ready/": {"get"},
}


def test_the_openapi_schema_validates_and_lists_every_endpoint(api):
    from drf_spectacular.validation import validate_schema

    response = api(None).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate_schema(schema)
    documented = {
        path: {method for method in item if method in ("get", "post", "patch", "delete", "put")}
        for path, item in schema["paths"].items()
    }
    assert {path: methods for path, methods in documented.items() if not path.startswith("/api/v1/hooks/")} == (
        ENDPOINTS
    )
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert "200" in operation["responses"] or "201" in operation["responses"], (path, method)
            if method in ("post", "patch"):
                assert "requestBody" in operation, (path, method)
            keyed = not path.startswith("/api/v1/health/")
            assert (operation.get("security") == [{"ApiKey": []}]) == keyed, (path, method)
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["ApiKey"]["description"],
    }


def test_the_docs_page_lists_every_endpoint_and_loads_nothing_from_the_network(api):
    response = api(None).get("/api/docs/")

    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    for path in ENDPOINTS:
        assert f"<code>{path}</code>" in page
    assert "https://" not in page and "http://" not in page and "<script src" not in page
