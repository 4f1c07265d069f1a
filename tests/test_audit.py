"""The audit: each promise of the store checked; plant a fault, the audit finds it, --fix repairs what is safe,
and the audit then finds nothing."""

import datetime as dt
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge.models import Fact
from memories import services
from memories.models import Memory, Revision, State
from memories.selectors import audit
from memories.services.keys import api_key_create
from tests.helpers import error_of

ACTOR = {"actor": "tester", "interface": "cli"}
pytestmark = pytest.mark.django_db


@pytest.fixture
def store(remember):
    kept = remember(
        "The payments API runs on host-7.", subject="payments API", predicate="runs on", object="host-7"
    ).memory
    dropped = remember("The standup is at nine.").memory
    services.memory_forget(memory_id=dropped.id, reason="moved", **ACTOR)
    return kept, dropped


def _finding(name: str):
    return next(finding for finding in audit.run_audit().findings if finding.check == name)


def test_a_sound_store_passes_every_check_and_the_command_exits_0(store, capsys):
    report = audit.run_audit()
    assert report.ok, [finding for finding in report.findings if not finding.ok]
    assert {finding.check for finding in report.findings} == {
        "indexes",
        "graph",
        "embedder",
        "states",
        "tombstones",
        "expired",
        "imports",
        "confidence",
    }
    call_command("audit")
    assert capsys.readouterr().out.rstrip().endswith("All 8 checks passed.")


def test_a_state_the_history_contradicts_is_found_and_fixed_from_the_history(store):
    kept, dropped = store
    Memory.objects.filter(pk=kept.id).update(state=State.FORGOTTEN)
    Memory.objects.filter(pk=dropped.id).update(state=State.ACTIVE)
    finding = _finding("states")
    assert (finding.ok, finding.count, finding.ids, finding.fixable) == (False, 2, [kept.id, dropped.id], True)
    report, done = services.audit_fix(**ACTOR)
    assert done["states_set"] == 2 and report.ok
    assert dict(Memory.objects.values_list("pk", "state")) == {kept.id: "active", dropped.id: "forgotten"}


def test_a_missing_fact_row_and_a_missing_postings_document_are_found_and_rebuilt(store):
    kept, _ = store
    Fact.objects.filter(memory_id=kept.id).delete()
    revision = Revision.objects.filter(memory_id=kept.id).get()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM search_document WHERE revision_id = %s", [revision.pk])
    assert not _finding("graph").ok and not _finding("indexes").ok
    assert f"revision {revision.pk}" in _finding("indexes").detail
    report, done = services.audit_fix(**ACTOR)
    assert report.ok and done["documents_added"] == 1 and done["fact_rows"] == 1
    assert Fact.objects.filter(memory_id=kept.id).count() == 1


def test_a_dropped_trigger_is_made_again_by_fix_and_writes_reach_the_index_again(store, remember):
    postgresql = connection.vendor == "postgresql"
    dropped = ["search_revision_deleted", "memories_revision_no_update"]
    if not postgresql:  # FTS5 and its triggers are SQLite's
        dropped.append("search_fts_words_after_insert")
    with connection.cursor() as cursor:
        for name in dropped:
            # DDL is transactional on both engines: the test's own rollback restores the triggers.
            cursor.execute(f"DROP TRIGGER {name}" + (" ON memories_revision" if postgresql else ""))
    remember("Written while the index was not listening.")
    finding = _finding("indexes")
    assert not finding.ok and all(name in finding.detail for name in dropped)
    assert finding.fixable and "makes missing triggers again" in finding.fix

    report, done = services.audit_fix(**ACTOR)
    assert report.ok, [finding for finding in report.findings if not finding.ok]
    assert done["triggers_made"] == len(dropped)
    # The append-only rule holds again, and so does the index's trigger.
    with pytest.raises(Exception, match="append-only"), transaction.atomic():
        Revision.objects.filter(memory_id=store[0].id).update(content="changed")
    remember("Written once the trigger is back.")
    assert _finding("indexes").ok


def test_a_tombstone_that_hides_another_memorys_revision_is_found_and_not_fixed(store):
    kept, dropped = store
    other = Revision.objects.filter(memory_id=kept.id).get()
    stray = Revision.objects.create(
        memory_id=dropped.id,
        tombstone=True,
        hides=other,
        content_hash="",
        known_at=timezone.now(),
        valid_from=timezone.now(),
        author="tester",
        interface="cli",
    )
    finding = _finding("tombstones")
    assert (finding.ok, finding.ids, finding.fixable) == (False, [stray.pk], False)
    report, _ = services.audit_fix(**ACTOR)
    assert not report.ok  # the history is append-only: only erasure removes it


def test_expired_rows_are_reported_with_purge_as_the_fix(remember):
    memory = remember("A note that lives a day.", ttl_days=1).memory
    assert audit.expired_rows(timezone.now()).ok
    later = audit.expired_rows(timezone.now() + dt.timedelta(days=2))
    assert (later.ok, later.count, later.fix) == (False, 1, "manage.py purge")
    assert later.ids == list(Revision.objects.filter(memory_id=memory.id).values_list("pk", flat=True))


def test_the_command_exits_1_on_a_problem_and_fix_repairs_it(store, capsys):
    kept, _ = store
    Fact.objects.all().delete()
    with pytest.raises(CommandError, match="1 of 8 checks found problems: graph") as failed:
        call_command("audit")
    assert failed.value.returncode == 1
    call_command("audit", "--fix", "--json")
    answer = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert answer["ok"] is True and answer["repaired"]["fact_rows"] == 1


def test_rest_gives_the_audit_to_an_admin_key_for_every_namespace_only(store):
    def client(**spec):
        _, secret = api_key_create(name="k", **spec, **ACTOR)
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return made

    answer = client(scopes=["read", "admin"]).get("/api/v1/audit/")
    assert answer.status_code == 200 and answer.json()["ok"] is True
    assert error_of(client(scopes=["read", "write"]).get("/api/v1/audit/"), 403)["code"] == "forbidden"
    limited = error_of(client(scopes=["read", "admin"], namespaces=["acme"]).get("/api/v1/audit/"), 403)
    assert "covers every namespace" in limited["message"]


def test_the_admin_page_lists_the_findings_and_a_superuser_repairs_them(store, admin_client):
    Fact.objects.all().delete()
    page = admin_client.get("/admin/memories/memory/audit/").content.decode()
    assert "graph" in page and "problem" in page and "Repair what is safe" in page
    admin_client.post("/admin/memories/memory/audit/")
    assert _finding("graph").ok
