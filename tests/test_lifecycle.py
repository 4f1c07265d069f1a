"""Lifecycle states: candidate, active and archived are recorded transitions, stale is read from age, and every
read answers them as of its time, through every door."""

import datetime as dt
import io
import json
import re
from dataclasses import replace

import pytest
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.models import Fact
from memories import selectors, services
from memories.access import PermissionDenied
from memories.models import ApiKey, Attributes, AuditEvent, ErasureGate, Kind, Memory, Revision
from memories.services.keys import api_key_authenticate, api_key_create
from memories.services.remember import new_memory
from memoryproject.env import SettingError, env_days
from memoryproject.exceptions import Conflict, InvalidInput
from search import snapshot
from tests.helpers import Committed, error_of, key_caller

ACTOR = {"actor": "tester", "interface": "cli"}
UTC = dt.timezone.utc
T0 = dt.datetime(2025, 1, 1, tzinfo=UTC)
DAY = dt.timedelta(days=1)


def state_at(memory_id: int, as_of) -> str:
    return selectors.memory_get(memory_id=memory_id, as_of=as_of).state


def recalled(query: str, **filters) -> dict[int, str]:
    """{memory id: state} of the keyword hits."""
    result = selectors.memory_recall(query=query, mode="keyword", match="any", limit=50, **filters)
    return {hit.memory.id: hit.memory.state for hit in result.hits}


# --- transitions, each answered as of before and after it ---------------------------------------------------------


def test_archive_and_unarchive_are_events_a_read_before_them_does_not_see(remember):
    memory = remember("The staging cluster runs in eu-west-1.").memory
    before_archive = timezone.now()

    archived = services.memory_archive(memory_id=memory.id, reason="moved to the new cluster", **ACTOR)

    assert (archived.changed, archived.memory.state) == (True, "archived")
    assert state_at(memory.id, before_archive) == "active"
    assert state_at(memory.id, None) == "archived"
    after_archive = timezone.now()
    unarchived = services.memory_unarchive(memory_id=memory.id, reason="still in use", **ACTOR)
    assert (unarchived.changed, unarchived.memory.state) == (True, "active")
    assert state_at(memory.id, after_archive) == "archived"
    assert state_at(memory.id, before_archive) == "active"
    rows = selectors.attribute_history(memory_id=memory.id)
    assert [(row.state, row.reason, row.author) for row in rows] == [
        ("active", "", "tester"),
        ("archived", "moved to the new cluster", "tester"),
        ("active", "still in use", "tester"),
    ]
    # The history as of a time lists the changes known by then.
    assert [row.state for row in selectors.attribute_history(memory_id=memory.id, as_of=after_archive)] == [
        "active",
        "archived",
    ]
    events = AuditEvent.objects.filter(memory_id=memory.id, action__in=["archive", "unarchive"]).order_by("at", "id")
    assert [(event.action, event.detail) for event in events] == [
        ("archive", {"from_state": "active", "to_state": "archived"}),
        ("unarchive", {"from_state": "archived", "to_state": "active"}),
    ]


def test_a_candidate_is_promoted_from_then_on(remember):
    memory = remember("The build cache lives on the NAS.", state="candidate").memory
    assert memory.state == "candidate"
    before = timezone.now()

    promoted = services.memory_promote(memory_id=memory.id, reason="checked with ops", **ACTOR)

    assert (promoted.changed, promoted.memory.state) == (True, "active")
    assert (state_at(memory.id, before), state_at(memory.id, None)) == ("candidate", "active")
    assert services.memory_promote(memory_id=memory.id, **ACTOR).changed is False


def _fact(content, *, actor, state="active", namespace="ops"):
    return services.memory_remember(
        namespace=namespace,
        content=content,
        subject="build cache",
        predicate="lives on",
        object="the NAS",
        state=state,
        actor=actor,
        interface="api",
    ).memory


def test_an_active_memory_of_another_author_corroborates_a_candidate(db):
    candidate = _fact("The build cache lives on the NAS.", actor="key:scraper", state="candidate")
    same_author = _fact("Build cache: on the NAS.", actor="key:scraper")
    assert state_at(candidate.id, None) == "candidate"  # its own author cannot vouch for it
    elsewhere = _fact("The build cache lives on the NAS, per ops.", actor="key:ops", namespace="dev")
    assert state_at(candidate.id, None) == "candidate"  # nor a memory of another namespace
    before = timezone.now()

    confirming = _fact("Ops: the build cache lives on the nas.", actor="key:ops")

    assert (state_at(candidate.id, before), state_at(candidate.id, None)) == ("candidate", "active")
    row = Attributes.objects.filter(memory_id=candidate.id).latest("id")
    assert (row.reason, row.author) == (f"corroborated by memory {confirming.id} (key:ops)", "key:ops")
    assert AuditEvent.objects.filter(action="promote", memory_id=candidate.id).get().detail["corroborated_by"] == (
        confirming.id
    )
    # The other way round: a new candidate whose fact an active memory of another author states starts active.
    late = _fact("Build cache location: the NAS.", actor="key:bot", state="candidate")
    assert late.state == "active" and state_at(late.id, None) == "active"
    assert {same_author.state, elsewhere.state} == {"active"}


def test_unarchive_brings_back_the_state_before_the_archive(remember):
    memory = remember("The intern's notes on the parser.", state="candidate").memory
    services.memory_archive(memory_id=memory.id, **ACTOR)
    assert services.memory_unarchive(memory_id=memory.id, **ACTOR).memory.state == "candidate"
    assert services.memory_unarchive(memory_id=memory.id, **ACTOR).changed is False


def test_transitions_that_do_not_apply_are_refused_and_write_nothing(remember):
    memory = remember("The release train leaves on Wednesdays.").memory
    services.memory_archive(memory_id=memory.id, **ACTOR)
    rows = Attributes.objects.filter(memory_id=memory.id).count()
    with pytest.raises(Conflict, match="is archived: promote applies to a memory that is candidate. Unarchive it"):
        services.memory_promote(memory_id=memory.id, **ACTOR)
    assert services.memory_archive(memory_id=memory.id, **ACTOR).changed is False

    services.memory_unarchive(memory_id=memory.id, **ACTOR)
    services.memory_forget(memory_id=memory.id, **ACTOR)
    with pytest.raises(Conflict, match="is forgotten. Restore it first"):
        services.memory_archive(memory_id=memory.id, **ACTOR)
    with pytest.raises(InvalidInput, match="reason"):
        services.memory_unarchive(memory_id=memory.id, reason="x" * 501, **ACTOR)
    assert Attributes.objects.filter(memory_id=memory.id).count() == rows + 1  # the unarchive only


def test_a_state_carries_over_retags_moves_and_revisions(remember):
    memory = remember("Payroll runs on the 25th.", state="candidate").memory
    services.memory_retag(memory_id=memory.id, add=["finance"], **ACTOR)
    services.memory_move(memory_id=memory.id, namespace="hr", **ACTOR)
    updated = services.memory_update(memory_id=memory.id, content="Payroll runs on the 26th.", kind="fact", **ACTOR)
    assert updated.memory.state == "candidate"
    assert [row.state for row in selectors.attribute_history(memory_id=memory.id)] == ["candidate"] * 4


def test_a_new_memory_starts_only_as_candidate_or_active(remember):
    with pytest.raises(InvalidInput, match="state: 'archived' is not one of candidate, active"):
        remember("Anything at all about the weather.", state="archived")


# --- stale: read from age per kind, never stored ------------------------------------------------------------------


@pytest.fixture
def ages(settings):
    settings.MEMORY_STALE_AFTER_DAYS = {"note": 30, "fact": 365}


def test_stale_comes_from_the_visible_revisions_age_at_the_reads_as_of(ages, remember):
    note = remember("The office wifi password rotates monthly.", known_at=T0).memory
    fact = remember("The company was founded in 1998.", known_at=T0, kind="fact").memory
    decision = remember("We use Postgres for the billing service.", known_at=T0, kind="decision").memory

    assert state_at(note.id, T0 + 30 * DAY) == "active"  # exactly the age: not older than it
    assert state_at(note.id, T0 + 31 * DAY) == "stale"
    assert state_at(fact.id, T0 + 31 * DAY) == "active"
    assert state_at(fact.id, T0 + 366 * DAY) == "stale"
    assert state_at(decision.id, T0 + 3650 * DAY) == "active"  # a kind not named never goes stale

    # A revision renews it; a read before the revision still sees the old one's age.
    services.memory_revise(memory_id=note.id, content="The office wifi password rotates weekly.", **ACTOR)
    assert state_at(note.id, None) == "active"
    assert state_at(note.id, T0 + 31 * DAY) == "stale"
    assert Attributes.objects.filter(memory_id=note.id).values_list("state", flat=True).distinct().get() == "active"


def test_only_active_memories_go_stale(ages, remember):
    candidate = remember("Someone said the VPN changes in May.", known_at=T0, state="candidate").memory
    archived = remember("The old VPN used port 1194.", known_at=T0).memory
    services.memory_archive(memory_id=archived.id, **ACTOR)
    assert state_at(candidate.id, None) == "candidate"
    assert state_at(archived.id, None) == "archived"


def test_list_filters_by_lifecycle_state_now_and_as_of(ages, remember):
    old = remember("Old note about the coffee machine.", known_at=T0).memory
    fresh = remember("Fresh note about the coffee machine.").memory
    candidate = remember("A rumour about the coffee machine.", state="candidate").memory
    archived = remember("Archived note about the coffee machine.").memory
    before_archive = timezone.now()
    services.memory_archive(memory_id=archived.id, **ACTOR)

    def listed(state, **when):
        return {item.id: item.state for item in selectors.memory_list(state=state, **when).items}

    assert listed("active") == {old.id: "stale", fresh.id: "active", candidate.id: "candidate", archived.id: "archived"}
    assert listed("stale") == {old.id: "stale"}
    assert listed("candidate") == {candidate.id: "candidate"}
    assert listed("archived") == {archived.id: "archived"}
    assert listed("archived", as_of=before_archive) == {}
    assert listed("stale", as_of=T0 + DAY) == {}
    assert listed("active", as_of=before_archive)[archived.id] == "active"


# --- recall ----------------------------------------------------------------------------------------------------


def test_recall_leaves_archived_out_by_default_marks_stale_and_filters_by_state(ages, remember):
    old = remember("Harbour crane inspection notes.", known_at=T0).memory
    fresh = remember("Harbour pilot boarding notes.").memory
    candidate = remember("Harbour dredging rumour.", state="candidate").memory
    archived = remember("Harbour closure notes from last year.").memory
    before_archive = timezone.now()
    services.memory_archive(memory_id=archived.id, **ACTOR)

    assert recalled("harbour") == {old.id: "stale", fresh.id: "active", candidate.id: "candidate"}
    assert recalled("harbour", states=["archived"]) == {archived.id: "archived"}
    assert recalled("harbour", states=["active"]) == {fresh.id: "active"}
    assert recalled("harbour", states=["stale", "candidate"]) == {old.id: "stale", candidate.id: "candidate"}
    assert recalled("harbour", as_of=before_archive)[archived.id] == "active"
    # Stale once older than the age, to the microsecond, as get says.
    assert recalled("harbour", states=["stale"], as_of=T0 + 30 * DAY) == {}
    assert recalled("harbour", states=["stale"], as_of=T0 + 30 * DAY + dt.timedelta(microseconds=1)) == {
        old.id: "stale"
    }
    with pytest.raises(InvalidInput, match="states: 'forgotten' is not one of candidate, active, stale, archived"):
        recalled("harbour", states=["forgotten"])


def test_a_state_filter_does_not_move_the_scores_of_what_it_keeps(remember):
    kept = remember("Lighthouse lamp maintenance schedule.").memory
    other = remember("Lighthouse keeper rota for the lighthouse.").memory
    before = selectors.memory_recall(query="lighthouse", mode="keyword", explain=True)
    services.memory_archive(memory_id=other.id, **ACTOR)
    after = selectors.memory_recall(query="lighthouse", mode="keyword", explain=True)
    # Like kinds and tags, states choose among the visible memories; the statistics count them all.
    score = {hit.memory.id: hit.explain["bm25"] for hit in before.hits}
    assert [(hit.memory.id, hit.explain["bm25"]) for hit in after.hits] == [(kept.id, score[kept.id])]


# --- untrusted keys ----------------------------------------------------------------------------------------------


def test_an_untrusted_caller_writes_candidates_and_may_not_change_states(db):
    untrusted = replace(key_caller(), trusted=False)
    assert untrusted.new_memory_state == "candidate" and key_caller().new_memory_state == "active"
    with pytest.raises(PermissionDenied, match="This API key is marked untrusted"):
        untrusted.require_trusted("promote")
    key_caller().require_trusted("promote")
    written = services.hook_ingest(caller=untrusted, content="The printer on floor 3 jams on A3 paper.")
    assert selectors.memory_get(memory_id=written.memory_id).state == "candidate"


@pytest.fixture
def rest(db):
    def client(trusted: bool) -> APIClient:
        _, token = api_key_create(name=f"trusted {trusted}", scopes=["read", "write"], trusted=trusted, **ACTOR)
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return made

    return client


def test_rest_untrusted_writes_are_candidates_that_a_trusted_key_promotes_archives_and_unarchives(rest):
    untrusted, trusted = rest(False), rest(True)
    made = untrusted.post(
        "/api/v1/memories/", {"content": "Backups run at 02:00 UTC.", "namespace": "ops"}, format="json"
    ).json()
    assert made["state"] == "candidate"
    error = error_of(untrusted.post(f"/api/v1/memories/{made['id']}/promote/", {}, format="json"), 403)
    assert "marked untrusted" in error["message"]

    promoted = trusted.post(f"/api/v1/memories/{made['id']}/promote/", {"reason": "checked the cron"}, format="json")
    assert promoted.status_code == 200 and (promoted.json()["state"], promoted.json()["changed"]) == ("active", True)
    archived = trusted.post(f"/api/v1/memories/{made['id']}/archive/", {}, format="json").json()
    assert archived["state"] == "archived"
    error = error_of(trusted.post(f"/api/v1/memories/{made['id']}/promote/", {}, format="json"), 409)
    assert error["code"] == "conflict"
    recall = trusted.get("/api/v1/recall/", {"query": "backups", "mode": "keyword"}).json()
    assert recall["hits"] == []
    recall = trusted.get("/api/v1/recall/", {"query": "backups", "mode": "keyword", "states": "archived"}).json()
    assert [(hit["id"], hit["state"]) for hit in recall["hits"]] == [(made["id"], "archived")]
    assert trusted.post(f"/api/v1/memories/{made['id']}/unarchive/", {}, format="json").json()["state"] == "active"
    history = trusted.get(f"/api/v1/memories/{made['id']}/history/").json()
    assert [(row["state"], row["reason"]) for row in history["attributes"]] == [
        ("candidate", ""),
        ("active", "checked the cron"),
        ("archived", ""),
        ("active", ""),
    ]
    error = error_of(trusted.post("/api/v1/memories/999999/archive/", {}, format="json"), 404)
    assert error["field"] == "id"


def test_create_api_key_untrusted_makes_a_key_whose_writes_are_candidates(db):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "--name", "scraper", "--untrusted", stdout=out, stderr=err)
    assert "untrusted: its new memories are candidates" in err.getvalue()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    made = client.post("/api/v1/memories/", {"content": "The canteen closes at 15:00."}, format="json").json()
    assert made["state"] == "candidate"


# --- admin and CLI -----------------------------------------------------------------------------------------------


def test_admin_actions_promote_archive_and_unarchive_with_a_reason(admin_client, remember):
    candidate = remember("The fire drill is on the first Monday.", state="candidate").memory
    active = remember("Visitors sign in at reception.").memory

    def act(name, ids, **extra):
        data = {"action": name, "_selected_action": [str(memory_id) for memory_id in ids], **extra}
        if "apply" not in extra:
            data["index"] = "0"
        return admin_client.post("/admin/memories/memory/", data, follow=True)

    form = act("promote_memories", [candidate.id])
    assert 'name="reason"' in form.content.decode() and "Promote memories" in form.content.decode()
    response = act("promote_memories", [candidate.id, active.id], apply="yes", reason="confirmed by facilities")
    assert "Promoted 1 memory. 1 were already active." in [str(m) for m in get_messages(response.wsgi_request)]
    newest = selectors.attribute_history(memory_id=candidate.id)[-1]
    assert (newest.state, newest.reason, newest.author) == ("active", "confirmed by facilities", "user:admin")

    response = act("archive_memories", [active.id], apply="yes", reason="")
    assert '<td class="field-state_value">archived</td>' in response.content.decode()
    response = act("promote_memories", [active.id, candidate.id], apply="yes")
    assert any(str(m).startswith("Nothing was changed:") for m in get_messages(response.wsgi_request))
    act("unarchive_memories", [active.id], apply="yes", reason="still open")
    assert state_at(active.id, None) == "active"
    page = admin_client.get("/admin/memories/memory/", {"state": "archived"}).content.decode()
    assert f"/admin/memories/memory/{active.id}/change/" not in page
    page = admin_client.get("/admin/memories/memory/", {"state": "candidate"}).content.decode()
    assert f"/admin/memories/memory/{active.id}/change/" not in page
    page = admin_client.get("/admin/memories/memory/", {"state": "active"}).content.decode()
    assert f"/admin/memories/memory/{active.id}/change/" in page
    page = admin_client.get(f"/admin/memories/memory/{active.id}/change/").content.decode()
    assert "state active (still open)" in page and '<div class="readonly">active</div>' in page


def test_the_cli_archives_promotes_and_recalls_by_state(remember):
    memory = remember("The loading dock opens at 6am.", state="candidate").memory

    def run(*argv) -> dict:
        out = io.StringIO()
        call_command("memory", *argv, stdout=out)
        return json.loads(out.getvalue())

    assert run("promote", str(memory.id), "--reason", "seen it")["state"] == "active"
    assert run("archive", str(memory.id))["state"] == "archived"
    assert run("recall", "loading dock", "--mode", "keyword")["hits"] == []
    assert [hit["id"] for hit in run("recall", "loading dock", "--mode", "keyword", "--state", "archived")["hits"]] == [
        memory.id
    ]
    assert run("unarchive", str(memory.id))["state"] == "active"


# --- settings and storage -----------------------------------------------------------------------------------------


def test_the_stale_ages_are_read_strictly(monkeypatch):
    keys = ("fact", "note")
    for value, expected in (("fact=365, note=180", {"fact": 365, "note": 180}), ("none", {}), ("", {"note": 1})):
        monkeypatch.setenv("X_DAYS", value)
        assert env_days("X_DAYS", {"note": 1}, keys=keys) == expected
    for value in ("fact=0", "fact=x", "event=3", "fact=1,fact=2", "fact", "fact=1.5", "fact=36501"):
        monkeypatch.setenv("X_DAYS", value)
        with pytest.raises(SettingError, match="X_DAYS"):
            env_days("X_DAYS", {}, keys=keys)


def test_the_settings_know_the_kinds_the_models_declare(settings):
    assert settings.MEMORY_KINDS == tuple(Kind.values)


@pytest.fixture
def append_only_rows_cleared():
    """After a test that migrates (transaction=True): the flush needs the append-only rows removed under the gate."""
    yield
    with transaction.atomic():
        ErasureGate.objects.create(opened_at=timezone.now())
        Attributes.all_objects.all().delete()
        Revision.all_objects.all().delete()
        ErasureGate.objects.all().delete()


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_rows_active_and_the_attribute_rows_append_only(append_only_rows_cleared):
    executor = MigrationExecutor(connection)
    executor.migrate([("memories", "0009_attribute_set_name")])
    apps = executor.loader.project_state([("memories", "0009_attribute_set_name")]).apps
    OldMemory, OldAttributes = apps.get_model("memories", "Memory"), apps.get_model("memories", "Attributes")
    memory = OldMemory.objects.create(namespace="acme", key="k", created_at=T0)
    OldAttributes.objects.create(memory=memory, known_at=T0, namespace="acme", kind="note", author="a", interface="cli")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    row = Attributes.objects.get(memory_id=memory.pk)
    assert (row.state, row.reason, row.namespace) == ("active", "", "acme")
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Attributes.objects.filter(pk=row.pk).update(state="archived")
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Attributes.objects.filter(pk=row.pk).delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT generation FROM search_state")
        generation = cursor.fetchone()[0]
        with transaction.atomic():
            ErasureGate.objects.create(opened_at=timezone.now())
            Attributes.objects.filter(pk=row.pk).delete()
            ErasureGate.objects.all().delete()
        cursor.execute("SELECT generation FROM search_state")
        assert cursor.fetchone()[0] == generation + 1  # search's trigger on the table came back too


# --- export and import ---------------------------------------------------------------------------------------------


def exported(namespace: str, **options) -> dict:
    return json.loads("".join(services.memories_export(namespace=namespace, **options)))


@pytest.mark.parametrize("trusted", [True, False])
def test_exports_carry_the_recorded_state_at_their_cutoff_and_imports_keep_it(remember, trusted):
    remember("The spare keys are in the blue box.", namespace="old", key="keys", state="candidate")
    archived = remember("The old alarm code was changed.", namespace="old", key="alarm").memory
    before_archive = timezone.now()
    services.memory_archive(memory_id=archived.id, **ACTOR)

    assert {item["key"]: item["state"] for item in exported("old")["memories"]} == {
        "keys": "candidate",
        "alarm": "archived",
    }
    assert exported("old", as_of=before_archive)["memories"][1]["state"] == "active"

    document = exported("old")
    for item in document["memories"]:
        item["namespace"] = "new"
    services.memories_import(document=document, trusted=trusted, **ACTOR)
    assert {item.key: item.state for item in selectors.memory_list(namespace="new", state="all").items} == {
        "keys": "candidate",
        "alarm": "archived",
    }


def test_an_import_refuses_a_state_that_is_read_not_recorded(db):
    document = {
        "memories": [
            {
                "namespace": "acme",
                "key": "k",
                "state": "stale",
                "revisions": [{"content": "The plant needs water weekly.", "known_at": "2025-01-01T00:00:00Z"}],
            }
        ]
    }
    with pytest.raises(
        InvalidInput,
        match="state: 'stale' contradicts the history, whose last revision is not a "
        "tombstone \\(expected one of candidate, active, archived\\)",
    ):
        services.memories_import(document=document, trusted=True, **ACTOR)


def test_an_untrusted_keys_import_makes_candidates_of_what_would_be_active(rest, remember):
    remember("The boiler is serviced in October.", namespace="src", key="boiler")
    archived = remember("The old boiler was a Vaillant.", namespace="src", key="old-boiler").memory
    services.memory_archive(memory_id=archived.id, **ACTOR)
    document = exported("src")
    for item in document["memories"]:
        item["namespace"] = "dst"
    response = rest(False).post("/api/v1/import/", document, format="json")
    assert response.status_code == 200, response.content
    assert {item.key: item.state for item in selectors.memory_list(namespace="dst", state="all").items} == {
        "boiler": "candidate",
        "old-boiler": "archived",
    }


def test_a_hook_block_marks_stale_and_candidate_memories_and_leaves_archived_ones_out(ages, remember):
    remember("Parking permits are renewed in March.", known_at=T0)
    remember("Parking for visitors is on level 2.", state="candidate")
    archived = remember("Parking was free until 2020.").memory
    services.memory_archive(memory_id=archived.id, **ACTOR)

    answer = services.hook_recall(caller=key_caller(), query="parking", mode="keyword")

    assert sorted(hit.state for hit in answer.hits) == ["candidate", "stale"]
    headers = [line for line in answer.block.splitlines() if line.startswith("## memory")]
    assert sorted(header.rsplit(" · ", 1)[1] for header in headers) == ["candidate", "stale"]
    assert "free until 2020" not in answer.block


def test_recall_reads_stale_at_each_querys_own_time_from_a_shared_copy(ages, remember, monkeypatch):
    # As in a server: the per-process copy sees through the test's transaction and is kept between recalls.
    monkeypatch.setattr(snapshot, "connection", Committed())
    monkeypatch.setattr(snapshot, "_snapshots", {})
    old = remember("Quarry blasting schedule notes.", known_at=T0).memory
    later = remember("Quarry access road notes.", known_at=T0).memory
    services.memory_archive(memory_id=later.id, **ACTOR)  # from now on: a state code to read, not before then

    # Two points with the same attribute rows known: the copy answers both from one set of state codes.
    assert recalled("quarry", states=["stale"], as_of=T0 + 40 * DAY) == {old.id: "stale", later.id: "stale"}
    assert recalled("quarry", states=["stale"], as_of=T0 + 10 * DAY) == {}
    assert recalled("quarry", states=["active"], as_of=T0 + 10 * DAY) == {old.id: "active", later.id: "active"}
    assert recalled("quarry", states=["active"], as_of=T0 + 40 * DAY) == {}
    assert recalled("quarry", states=["archived"]) == {later.id: "archived"}


def test_a_key_made_untrusted_in_the_admin_writes_candidates(admin_client):
    response = admin_client.post(
        "/admin/memories/apikey/add/",
        {"name": "scraper", "scopes": ["read", "write"], "namespaces": "", "untrusted": "on", "_save": "Save"},
    )
    assert response.status_code == 200
    key = ApiKey.objects.get()
    assert key.trusted is False
    token = re.search(r'id="api-key" readonly size="80" value="(mem_[^"]+)"', response.content.decode()).group(1)
    assert api_key_authenticate(token, interface="api").new_memory_state == "candidate"
    assert '<td class="field-trusted">' in admin_client.get("/admin/memories/apikey/").content.decode()


# --- many new memories at once ------------------------------------------------------------------------------------

NEW = [
    {
        "content": "The API uses Redis.",
        "kind": "fact",
        "subject": "API",
        "predicate": "uses",
        "object": "Redis",
        "confidence": 0.5,
        "source": "learn: notes chars 0-19",
    },
    {"content": "Deploys go out on Tuesdays.", "title": "Deploys", "kind": "note", "valid_from": "2025-01-01"},
]


def _written(namespace: str) -> list[tuple]:
    """What the store holds for a namespace's memories, without ids, keys or times."""
    rows = []
    for memory in Memory.objects.filter(namespace=namespace).order_by("pk"):
        revision = memory.revisions.get()
        attributes = Attributes.objects.get(memory=memory)
        fact = Fact.objects.filter(revision_id=revision.pk).values_list("subject", "predicate", "object").first()
        event = AuditEvent.objects.get(memory_id=memory.pk)
        rows.append(
            (
                memory.kind,
                memory.state,
                sorted(memory.tags.values_list("name", flat=True)),
                attributes.namespace == namespace,
                attributes.kind,
                attributes.state,
                sorted(tag.name for tag in attributes.tags.all()),
                revision.content,
                revision.title,
                revision.subject,
                revision.predicate,
                revision.object,
                revision.confidence,
                revision.source,
                revision.valid_to,
                revision.author,
                revision.interface,
                fact,
                event.action,
                sorted(event.detail),
            )
        )
    return rows


@pytest.mark.django_db
def test_remembering_many_new_memories_writes_what_remembering_each_one_writes():
    for fields in NEW:
        services.memory_remember(
            namespace="one", tags=["ops"], state="candidate", look_for_near_twin=False, **ACTOR, **fields
        )
    written = services.memories_remember_new(
        namespace="many", memories=[new_memory(**fields) for fields in NEW], tags=["ops"], state="candidate", **ACTOR
    )

    assert _written("many") == _written("one")
    assert [revision.valid_from for revision in written][1] == T0
    assert len({revision.known_at for revision in written}) == 1
    (hit,) = selectors.memory_recall(query="deploys tuesdays", namespace=["many"], mode="keyword").hits
    assert hit.memory.id == written[1].memory_id


@pytest.mark.django_db
def test_a_new_memory_among_many_is_corroborated_as_one_alone_is():
    services.memory_remember(
        namespace="acme",
        content="Redis serves the API's cache.",
        actor="alice",
        interface="cli",
        kind="fact",
        subject="api",
        predicate="uses",
        object="redis",
    )
    (revision,) = services.memories_remember_new(
        namespace="acme", memories=[new_memory(**NEW[0])], tags=[], state="candidate", **ACTOR
    )
    assert selectors.memory_get(memory_id=revision.memory_id).state == "active"


@pytest.mark.django_db
def test_many_new_memories_with_an_empty_validity_are_refused_whole():
    bad = new_memory(content="Held never.", valid_from="2025-02-01", valid_to="2025-01-01")
    with pytest.raises(InvalidInput, match="valid_to must be later than valid_from"):
        services.memories_remember_new(namespace="acme", memories=[new_memory(**NEW[0]), bad], tags=[], **ACTOR)
    assert not Memory.objects.exists()
