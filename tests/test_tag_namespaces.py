"""Tags belong to a namespace: each keeps its own spelling, and every read of tags stays in the namespaces asked.

The case: namespace beta tags a memory ``SecretProjectX``; alpha later uses the same word in
lower case. Alpha must never see beta's spelling, through the service, REST, stats, recall,
the dashboard, the admin, export or import, and moving a memory carries its tags over to the
target namespace. The migration that split the old store-wide tags is run back and forth, and
the one that gave each memory its attribute history is run on a store with an audit trail.
"""

import datetime as dt
import json

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from rest_framework.test import APIClient

from memories import selectors, services
from memories.models import Attributes, ErasureGate, Memory, Revision, Tag
from memories.services.keys import api_key_create

ACTOR = {"actor": "tester", "interface": "cli"}
UTC = dt.timezone.utc


@pytest.fixture
def secret(remember):
    """Beta spells the tag first; alpha then tags its own memory with the same word in lower case."""
    beta = remember("Beta's launch plan for the quiet engine.", namespace="beta", tags=["SecretProjectX"]).memory
    alpha = remember("Alpha's field notes on the quiet engine.", namespace="alpha", tags=["secretprojectx"]).memory
    return alpha, beta


@pytest.fixture
def alpha_api(db) -> APIClient:
    _, token = api_key_create(name="alpha", scopes=["read", "write"], namespaces=["alpha"], **ACTOR)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_each_namespace_keeps_its_own_spelling_of_a_tag(secret):
    alpha, beta = secret

    assert alpha.tags == ["secretprojectx"]
    assert selectors.memory_get(memory_id=alpha.id).tags == ["secretprojectx"]
    assert selectors.memory_get(memory_id=beta.id).tags == ["SecretProjectX"]
    assert sorted(Tag.objects.values_list("namespace", "slug", "name")) == [
        ("alpha", "secretprojectx", "secretprojectx"),
        ("beta", "secretprojectx", "SecretProjectX"),
    ]
    # Within a namespace a tag stays case-insensitive, with that namespace's first spelling.
    services.memory_retag(memory_id=alpha.id, add=["SECRETPROJECTX", "Ops"], **ACTOR)
    later = services.memory_remember(namespace="alpha", content="Another alpha note.", tags=["OPS"], **ACTOR)
    assert later.memory.tags == ["Ops"]
    assert Tag.objects.filter(namespace="alpha").count() == 2


def test_alpha_sees_its_own_spelling_through_rest_list_get_recall_and_stats(secret, alpha_api):
    alpha, _ = secret

    assert alpha_api.get(f"/api/v1/memories/{alpha.id}/").json()["tags"] == ["secretprojectx"]
    listed = alpha_api.get("/api/v1/memories/", {"tags": "SecretProjectX"}).json()
    assert [(item["id"], item["tags"]) for item in listed["items"]] == [(alpha.id, ["secretprojectx"])]
    recalled = alpha_api.post(
        "/api/v1/recall/", {"query": "quiet engine", "tags": ["SECRETPROJECTX"]}, format="json"
    ).json()
    assert [(hit["id"], hit["tags"]) for hit in recalled["hits"]] == [(alpha.id, ["secretprojectx"])]
    stats = alpha_api.get("/api/v1/stats/").json()
    assert stats["top_tags"] == [{"tag": "secretprojectx", "namespace": "alpha", "count": 1}]
    assert "SecretProjectX" not in json.dumps([listed, recalled, stats])


def test_recall_and_list_filter_by_tag_within_the_namespaces_asked(secret):
    alpha, beta = secret

    both = selectors.memory_recall(query="quiet engine", namespace=["alpha", "beta"], tags=["secretprojectx"])
    assert sorted((hit.memory.namespace, hit.memory.tags[0]) for hit in both.hits) == [
        ("alpha", "secretprojectx"),
        ("beta", "SecretProjectX"),
    ]
    only_beta = selectors.memory_recall(query="quiet engine", namespace="beta", tags=["SECRETPROJECTX"])
    assert [hit.memory.id for hit in only_beta.hits] == [beta.id]
    assert [item.id for item in selectors.memory_list(namespace="alpha", tags=["SecretProjectX"]).items] == [alpha.id]


def test_stats_count_each_namespaces_tags_apart(secret, remember):
    remember("A second beta note.", namespace="beta", tags=["secretPROJECTx"])

    assert selectors.memory_stats(namespace="alpha")["top_tags"] == [
        {"tag": "secretprojectx", "namespace": "alpha", "count": 1}
    ]
    assert selectors.memory_stats(namespace="beta")["top_tags"] == [
        {"tag": "SecretProjectX", "namespace": "beta", "count": 2}
    ]
    assert selectors.memory_stats()["top_tags"] == [
        {"tag": "SecretProjectX", "namespace": "beta", "count": 2},
        {"tag": "secretprojectx", "namespace": "alpha", "count": 1},
    ]


def test_the_dashboard_names_each_tags_namespace(secret, admin_client):
    html = admin_client.get("/").content.decode()

    section = html[html.index('id="top-tags"') :]
    assert "<td>SecretProjectX</td><td>beta</td>" in section
    assert "<td>secretprojectx</td><td>alpha</td>" in section


def test_the_admin_tag_filter_lists_the_chosen_namespaces_tags_only(secret, admin_client):
    alpha, _ = secret

    filtered = admin_client.get("/admin/memories/memory/", {"namespace__exact": "alpha"}).content.decode()
    everything = admin_client.get("/admin/memories/memory/").content.decode()

    assert "secretprojectx" in filtered and "SecretProjectX" not in filtered
    assert "SecretProjectX (beta)" in everything and "secretprojectx (alpha)" in everything


def test_moving_a_memory_moves_its_tags_to_the_target_namespaces_rows(secret, remember):
    alpha, beta = secret
    services.memory_retag(memory_id=beta.id, add=["Launch"], **ACTOR)

    moved = services.memory_move(memory_id=beta.id, namespace="alpha", **ACTOR)

    # Alpha's spelling wins where alpha has the tag; a tag alpha lacks comes with the memory's spelling.
    assert moved.memory.tags == ["Launch", "secretprojectx"]
    alpha_row = Tag.objects.get(namespace="alpha", slug="secretprojectx")
    assert set(alpha_row.memories.values_list("pk", flat=True)) == {alpha.id, beta.id}
    # Beta's rows no longer name the moved memory; they stay only for its history (as of before the move).
    assert not Tag.objects.filter(namespace="beta", memories__isnull=False).exists()
    assert set(Tag.objects.filter(namespace="beta").values_list("slug", flat=True)) == {"launch", "secretprojectx"}
    assert Memory.objects.get(pk=beta.id).tags.get(slug="launch").namespace == "alpha"
    assert [
        hit.memory.id for hit in selectors.memory_recall(query="quiet engine", namespace="alpha", tags=["launch"]).hits
    ] == [beta.id]


def test_moving_keeps_the_source_namespaces_row_while_another_memory_uses_it(secret, remember):
    _, beta = secret
    stays = remember("Beta keeps this one.", namespace="beta", tags=["secretprojectx"]).memory

    services.memory_move(memory_id=beta.id, namespace="gamma", **ACTOR)

    assert selectors.memory_get(memory_id=stays.id).tags == ["SecretProjectX"]
    assert selectors.memory_get(memory_id=beta.id).tags == ["SecretProjectX"]
    assert sorted(Tag.objects.values_list("namespace", flat=True)) == ["alpha", "beta", "gamma"]


def test_export_and_import_keep_each_namespaces_spelling(secret):
    alpha, _ = secret
    exported = json.loads("".join(services.memories_export(namespace="alpha")))
    assert [item["tags"] for item in exported["memories"]] == [["secretprojectx"]]

    document = {
        "format": exported["format"],
        "version": exported["version"],
        "memories": [
            {
                "namespace": "delta",
                "key": "first",
                "tags": ["MixedCase"],
                "revisions": [{"content": "Delta spelled it first.", "known_at": "2024-01-01T00:00:00Z"}],
            },
            {
                "namespace": "epsilon",
                "key": "second",
                "tags": ["mixedcase"],
                "revisions": [{"content": "Epsilon spelled it second.", "known_at": "2024-01-02T00:00:00Z"}],
            },
        ],
    }
    services.memories_import(document=document, trusted=True, **ACTOR)

    assert selectors.memory_get(namespace="epsilon", key="second").tags == ["mixedcase"]
    assert selectors.memory_get(namespace="delta", key="first").tags == ["MixedCase"]


# --- the migration that split store-wide tags ------------------------------------------------------------------

BEFORE = ("memories", "0003_api_key")
SPLIT = ("memories", "0004_tag_namespace")


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


def _links(apps) -> dict:
    """{memory key: [(tag namespace or None, tag name)]} as the database holds them now."""
    Memory = apps.get_model("memories", "Memory")
    namespaced = any(field.name == "namespace" for field in apps.get_model("memories", "Tag")._meta.fields)
    return {
        memory.key: sorted((tag.namespace if namespaced else None, tag.name) for tag in memory.tags.all())
        for memory in Memory.objects.order_by("key")
    }


@pytest.fixture
def append_only_rows_cleared():
    """After a test that migrates (transaction=True): revisions and attribute rows are append-only, so the flush
    that ends the test needs them removed first, under the gate erasure opens."""
    yield
    with transaction.atomic():
        ErasureGate.objects.create(opened_at=timezone.now())
        Attributes.all_objects.all().delete()
        Revision.all_objects.filter(tombstone=True).delete()
        Revision.all_objects.all().delete()
        ErasureGate.objects.all().delete()


@pytest.mark.django_db(transaction=True)
def test_the_migration_splits_shared_tags_per_namespace_and_merges_them_back(append_only_rows_cleared):
    apps = _migrate(BEFORE)
    OldMemory, OldTag = apps.get_model("memories", "Memory"), apps.get_model("memories", "Tag")
    shared = OldTag.objects.create(slug="secretprojectx", name="SecretProjectX")
    solo = OldTag.objects.create(slug="solo", name="Solo")
    OldTag.objects.create(slug="unused", name="Unused")  # carried by no memory

    def memory(namespace, key, day, *tags):
        made = OldMemory.objects.create(namespace=namespace, key=key, created_at=dt.datetime(2024, 1, day, tzinfo=UTC))
        made.tags.set(tags)

    memory("alpha", "alpha-later", 3, shared)
    memory("beta", "beta-first", 1, shared, solo)  # beta's memory came first: beta keeps the row and its spelling
    memory("alpha", "alpha-second", 2, shared)
    before = _links(apps)

    apps = _migrate(SPLIT)

    SplitTag = apps.get_model("memories", "Tag")
    assert sorted(SplitTag.objects.values_list("namespace", "slug", "name")) == [
        ("alpha", "secretprojectx", "secretprojectx"),
        ("beta", "secretprojectx", "SecretProjectX"),
        ("beta", "solo", "Solo"),
    ]
    assert SplitTag.objects.get(namespace="beta", slug="secretprojectx").pk == shared.pk
    assert _links(apps) == {
        "alpha-later": [("alpha", "secretprojectx")],
        "alpha-second": [("alpha", "secretprojectx")],
        "beta-first": [("beta", "SecretProjectX"), ("beta", "Solo")],
    }

    apps = _migrate(BEFORE)

    assert _links(apps) == before
    assert sorted(apps.get_model("memories", "Tag").objects.values_list("pk", "slug", "name")) == [
        (shared.pk, "secretprojectx", "SecretProjectX"),
        (solo.pk, "solo", "Solo"),
    ]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert sorted(Tag.objects.values_list("namespace", "name")) == [
        ("alpha", "secretprojectx"),
        ("beta", "SecretProjectX"),
        ("beta", "Solo"),
    ]
    assert [tag.name for tag in Memory.objects.get(key="alpha-later").tags.all()] == ["secretprojectx"]


AUDITED = ("memories", "0006_import_batch")
ATTRIBUTES = ("memories", "0007_attributes")


@pytest.mark.django_db(transaction=True)
def test_the_attributes_migration_rebuilds_each_memorys_history_from_the_audit_trail(append_only_rows_cleared):
    apps = _migrate(AUDITED)
    OldMemory, OldTag = apps.get_model("memories", "Memory"), apps.get_model("memories", "Tag")
    OldRevision, OldEvent = apps.get_model("memories", "Revision"), apps.get_model("memories", "AuditEvent")

    def day(number):
        return dt.datetime(2024, 1, number, tzinfo=UTC)

    # Created in beta tagged Old (a note), retagged to New, moved to alpha, re-kinded to fact, then to decision.
    moved = OldMemory.objects.create(namespace="alpha", key="moved", kind="decision", created_at=day(1))
    moved.tags.set([OldTag.objects.create(namespace="alpha", slug="new", name="New")])
    OldRevision.objects.create(
        memory=moved,
        content="The deploy runs on Fridays.",
        content_hash="x",
        known_at=day(1),
        valid_from=day(1),
        author="writer",
        interface="api",
    )
    for at, action, detail in [
        (3, "retag", {"added": ["New"], "removed": ["Old"]}),
        (5, "move", {"from_namespace": "beta", "to_namespace": "alpha"}),
        (6, "rekind", {"kind": "fact"}),
        (7, "rekind", {"kind": "decision"}),
        (8, "revise", {"revision_id": 99}),
    ]:
        OldEvent.objects.create(
            at=day(at), actor=f"{action} by ann", interface="mcp", action=action, memory_id=moved.pk, detail=detail
        )
    plain = OldMemory.objects.create(namespace="gamma", key="plain", kind="skill", created_at=day(2))
    plain.tags.set([OldTag.objects.create(namespace="gamma", slug="solo", name="Solo")])

    apps = _migrate(ATTRIBUTES)

    rows = apps.get_model("memories", "Attributes").objects.order_by("memory_id", "known_at", "id")
    assert [
        (
            row.memory_id,
            row.known_at.day,
            row.namespace,
            row.kind,
            sorted(tag.name for tag in row.tags.all()),
            row.author,
            row.interface,
        )
        for row in rows
    ] == [
        # The kind before the first re-kind is not recorded: the one that event set stands for it.
        (moved.pk, 1, "beta", "fact", ["Old"], "writer", "api"),
        (moved.pk, 3, "beta", "fact", ["New"], "retag by ann", "mcp"),
        (moved.pk, 5, "alpha", "fact", ["New"], "move by ann", "mcp"),
        (moved.pk, 6, "alpha", "fact", ["New"], "rekind by ann", "mcp"),
        (moved.pk, 7, "alpha", "decision", ["New"], "rekind by ann", "mcp"),
        (plain.pk, 2, "gamma", "skill", ["Solo"], "migration", "cli"),
    ]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    then = selectors.memory_get(memory_id=moved.pk, as_of="2024-01-04")
    assert (then.namespace, then.tags) == ("beta", ["New"])
    assert selectors.memory_get(namespace="beta", key="moved", as_of="2024-01-02").tags == ["Old"]
