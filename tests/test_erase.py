import json

import pytest
from django.db import IntegrityError, connection, transaction

from memories import selectors, services
from memories.models import AuditEvent, ErasureGate, ErasureReceipt, Memory, Revision, Tag
from memories.services.hooks import hook_recall, hook_report
from memoryproject.exceptions import NotFound
from search import postings, text
from telemetry.models import HookRecall, Injection, RecalledMemory
from tests.helpers import key_caller

# Strings porter stemming leaves alone, so the words index stores them whole as well.
SECRET = "xq7zorblax"
SECRET_TITLE = "vrenkolith"
CONTROL = "plomquartz"
# A word only a hook's query holds: what the agent asked, which names the secret as much as its text.
ASKED = "xylophonequartz"


def _indexed(word: str, namespace: str = "acme") -> list[int]:
    """The revisions whose keyword index entries hold ``word``: search's postings, and on SQLite the FTS5 index,
    which must hold the same ones."""
    [(terms, _)] = text.documents_terms([word])
    [stem] = terms
    ids = sorted(postings.read_terms([[(postings.key(namespace, stem), None)]], max_id=2**62)[0][0].tolist())
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT rowid FROM search_fts_words WHERE search_fts_words MATCH %s ORDER BY rowid", [word])
            assert [row[0] for row in cursor.fetchall()] == ids
    return ids


@pytest.fixture
def secret_memory(remember, actor):
    """A memory whose secret is in several revisions, a bounded correction and a tombstone's reason."""
    created = remember(
        f"The vault code is {SECRET}.",
        key=f"vault-{SECRET}",
        title=SECRET_TITLE,
        source=f"note-{SECRET}",
        tags=["vault"],
    )
    memory_id = created.memory.id
    services.memory_revise(memory_id=memory_id, content=f"The vault code is still {SECRET}, rotated.", **actor)
    services.memory_revise(
        memory_id=memory_id,
        content=f"Until 2030 the code was {SECRET}.",
        valid_from="2020-01-01",
        valid_to="2030-01-01",
        **actor,
    )
    services.memory_forget(memory_id=memory_id, reason=f"leaked {SECRET}", **actor)
    return memory_id


def test_erase_removes_every_revision_the_memory_and_its_index_entries(secret_memory, remember, actor):
    control = remember(f"The garden gate code is {CONTROL}.").memory.id
    assert Revision.objects.filter(memory_id=secret_memory).count() == 4
    assert len(_indexed(SECRET)) == 3

    services.memory_erase(memory_id=secret_memory, reason="user asked", **actor)

    assert not Memory.objects.filter(pk=secret_memory).exists()
    assert not Revision.objects.filter(memory_id=secret_memory).exists()
    assert not Memory.tags.through.objects.filter(memory_id=secret_memory).exists()
    assert _indexed(SECRET) == []
    assert _indexed(SECRET_TITLE) == []
    assert len(_indexed(CONTROL)) == 1
    assert Memory.objects.filter(pk=control).exists()


def test_erase_also_takes_a_memory_that_was_never_forgotten(remember, actor):
    memory_id = remember(f"Plain note with {SECRET}.").memory.id

    receipt = services.memory_erase(memory_id=memory_id, **actor)

    assert len(receipt.revision_ids) == 1
    assert not Memory.objects.filter(pk=memory_id).exists()
    assert _indexed(SECRET) == []


def test_the_receipt_holds_ids_and_hashes_but_no_text(secret_memory, actor):
    revisions = list(Revision.objects.filter(memory_id=secret_memory).order_by("id").values_list("id", "content_hash"))

    receipt = services.memory_erase(memory_id=secret_memory, reason="user asked", **actor)

    assert receipt.pk is not None
    assert receipt.memory_id == secret_memory
    assert receipt.namespace == "acme"
    assert receipt.actor == "tester" and receipt.interface == "cli" and receipt.reason == "user asked"
    assert receipt.revision_ids == [revision_id for revision_id, _ in revisions]
    assert receipt.content_hashes == [content_hash for _, content_hash in revisions]
    stored = ErasureReceipt.objects.get(pk=receipt.pk)
    assert SECRET not in json.dumps([stored.revision_ids, stored.content_hashes, stored.reason, stored.namespace])
    event = AuditEvent.objects.get(action="erase")
    assert event.memory_id == secret_memory
    assert event.detail == {"receipt_id": receipt.pk, "revision_ids": receipt.revision_ids}
    for event in AuditEvent.objects.all():
        assert SECRET not in json.dumps(event.detail) and SECRET_TITLE not in json.dumps(event.detail)


def test_the_append_only_triggers_still_refuse_changes_after_an_erase(secret_memory, remember, actor):
    other = remember("Another memory that must stay put.").memory.id
    services.memory_erase(memory_id=secret_memory, **actor)

    assert not ErasureGate.objects.exists()
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Revision.objects.filter(memory_id=other).delete()
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Revision.objects.filter(memory_id=other).update(content="rewritten")
    assert Revision.objects.get(memory_id=other).content == "Another memory that must stay put."


def test_erasing_an_unknown_id_raises_not_found(db, actor):
    with pytest.raises(NotFound, match="Memory 999 not found"):
        services.memory_erase(memory_id=999, **actor)
    assert not ErasureReceipt.objects.exists()


def test_erasing_twice_says_the_memory_is_gone(secret_memory, actor):
    services.memory_erase(memory_id=secret_memory, **actor)
    with pytest.raises(NotFound):
        services.memory_erase(memory_id=secret_memory, **actor)
    assert ErasureReceipt.objects.count() == 1


def test_erase_rolls_back_completely_when_a_step_fails(secret_memory, actor):
    revisions_before = sorted(Revision.objects.filter(memory_id=secret_memory).values_list("id", flat=True))
    indexed_before = _indexed(SECRET)
    with connection.cursor() as cursor:
        # The receipt is written after every delete, so failing there tests a full rollback.
        # DDL is transactional on both engines: the test's own rollback removes this trigger.
        if connection.vendor == "sqlite":
            cursor.execute("""CREATE TRIGGER test_refuse_receipt BEFORE INSERT ON memories_erasurereceipt
                              BEGIN SELECT RAISE(ABORT, 'receipt refused by test'); END""")
        else:
            cursor.execute("""CREATE FUNCTION test_refuse_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
                              BEGIN RAISE EXCEPTION USING ERRCODE = '23000', MESSAGE = 'receipt refused by test';
                              END $$""")
            cursor.execute("""CREATE TRIGGER test_refuse_receipt BEFORE INSERT ON memories_erasurereceipt
                              FOR EACH ROW EXECUTE FUNCTION test_refuse_receipt()""")

    with pytest.raises(IntegrityError, match="receipt refused by test"):
        services.memory_erase(memory_id=secret_memory, **actor)

    assert Memory.objects.filter(pk=secret_memory).exists()
    assert sorted(Revision.objects.filter(memory_id=secret_memory).values_list("id", flat=True)) == revisions_before
    assert _indexed(SECRET) == indexed_before
    assert Memory.objects.get(pk=secret_memory).tags.filter(slug="vault").exists()
    assert not ErasureGate.objects.exists()
    assert not AuditEvent.objects.filter(action="erase").exists()


# The scenario below runs in separate processes against a real database file, because
# the point is what is left in the file's bytes, and the test database lives in memory.

_WRITE = """
from django.db import connection
from memories.access import Caller
from memories.services.hooks import hook_recall, hook_report
secret = services.memory_remember(namespace="acme", content="The vault code is %(secret)s.",
                                  key="vault-%(secret)s", title="%(title)s", source="note-%(secret)s",
                                  subject="vault", predicate="has code", object="%(secret)s", **ACTOR).memory.id
services.memory_revise(memory_id=secret, content="The vault code is still %(secret)s.", **ACTOR)
hooks = Caller(actor="key:hooks", interface="api", scopes=frozenset({"read"}), namespaces=("acme",))
asked = "what is the %(asked)s vault code"
block = hook_recall(caller=hooks, query=asked, mode="keyword", harness="claude-code", hook="UserPromptSubmit")
assert [hit.memory_id for hit in block.hits] == [secret]
hook_report(caller=hooks, harness="claude-code", hook="UserPromptSubmit", characters=len(block.block), query=asked,
            memories=[{"memory_id": hit.memory_id, "revision_id": hit.revision_id} for hit in block.hits])
services.memory_forget(memory_id=secret, reason="leaked %(secret)s", **ACTOR)
services.memory_remember(namespace="acme", content="The garden gate code is %(control)s.", **ACTOR)
with connection.cursor() as cursor:
    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print(secret)
"""

_ERASE = """
import json
from pathlib import Path
from django.db import connection
receipt = services.memory_erase(memory_id=%(id)d, reason="user asked", **ACTOR)
# Read while this process still holds its connection: closing the last one would checkpoint anyway.
path = Path(connection.settings_dict["NAME"])
data = b"".join(part.read_bytes() for part in sorted(path.parent.glob(path.name + "*")))
print(json.dumps({"revision_ids": receipt.revision_ids, "queries": receipt.telemetry_queries_removed,
                  "found": [word for word in %(words)r if word.encode() in data]}))
"""


def _file_bytes(db_path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(db_path.parent.glob(db_path.name + "*")))


@pytest.mark.sqlite_only(
    "reads SQLite's file and WAL (secure_delete); PostgreSQL's VACUUM frees rows without zeroing pages, "
    "see docs/postgresql.md"
)
@pytest.mark.slow
def test_erased_text_is_gone_from_the_database_file_and_its_wal(instance):
    words = {"secret": SECRET, "title": SECRET_TITLE, "control": CONTROL, "asked": ASKED}
    memory_id = int(instance.run(_WRITE % words))
    before = _file_bytes(instance.db_path)
    for word in words.values():
        assert word.encode() in before, f"{word} should be in the file before the erase"

    # No checkpoint by the test this time: the erase itself must leave neither file holding the text.
    erased = json.loads(instance.run(_ERASE % {"id": memory_id, "words": list(words.values())}))

    assert len(erased["revision_ids"]) == 3
    assert erased["queries"] == 2  # the hook recall's and the injection report's
    assert erased["found"] == [CONTROL]
    after = _file_bytes(instance.db_path)
    assert SECRET.encode() not in after
    assert SECRET_TITLE.encode() not in after
    assert ASKED.encode() not in after
    assert CONTROL.encode() in after


def test_erase_removes_the_query_text_of_the_hook_recalls_and_injections_that_returned_it(remember, actor):
    secret = remember(f"The {ASKED} vault code is 4417.").memory
    remember("The garden gate opens at dawn.")
    hooks = key_caller("acme")
    asked = f"what is the {ASKED} vault code"
    found = hook_recall(caller=hooks, query=asked, mode="keyword", harness="claude-code", hook="UserPromptSubmit")
    assert [hit.memory_id for hit in found.hits] == [secret.id]
    hook_report(
        caller=hooks,
        harness="claude-code",
        hook="UserPromptSubmit",
        characters=len(found.block),
        query=asked,
        memories=[{"memory_id": secret.id, "revision_id": secret.revision_id}],
    )
    elsewhere = hook_recall(caller=hooks, query="when does the garden gate open", mode="keyword")
    assert secret.id not in [hit.memory_id for hit in elsewhere.hits]

    receipt = services.memory_erase(memory_id=secret.id, **actor)

    assert receipt.telemetry_queries_removed == 2
    assert ErasureReceipt.objects.get(pk=receipt.pk).telemetry_queries_removed == 2
    assert not HookRecall.objects.filter(query__icontains=ASKED).exists()
    assert not Injection.objects.filter(query__icontains=ASKED).exists()
    # The rows stay (telemetry's totals do not change), and a query that never returned the memory is kept.
    assert (HookRecall.objects.count(), Injection.objects.count()) == (2, 1)
    assert HookRecall.objects.get(pk=elsewhere.recall_id).query == "when does the garden gate open"
    assert not RecalledMemory.objects.filter(memory_id=secret.id).exists()


def test_erase_drops_tags_only_it_used_and_scrubs_its_audit_details(remember, actor):
    shared = remember("Shared tag holder", tags=["common"]).memory
    secret = remember("Private memory", tags=["common", "project-nightingale"]).memory
    services.memory_retag(memory_id=secret.id, add=["codename-lark"], **actor)
    services.memory_erase(memory_id=secret.id, **actor)
    assert set(Tag.objects.values_list("slug", flat=True)) == {"common"}
    details = [event.detail for event in AuditEvent.objects.filter(memory_id=secret.id).exclude(action="erase")]
    assert details and all(detail == {} for detail in details)
    assert selectors.memory_get(memory_id=shared.id).tags == ["common"]


def test_the_erase_command_needs_yes_and_then_leaves_a_receipt(instance):
    memory_id = instance.memory("remember", "Erase me from the shell")["id"]

    shown = instance.manage("erase", str(memory_id))
    assert shown.returncode == 0 and "Would erase memory" in shown.stdout
    assert instance.memory("get", str(memory_id))["content"] == "Erase me from the shell"

    done = instance.manage("erase", str(memory_id), "--yes", "--reason", "user request")
    assert done.returncode == 0 and "1 revision(s); receipt" in done.stdout
    assert instance.memory_error("get", str(memory_id))["code"] == "not_found"
    again = instance.manage("erase", str(memory_id), "--yes")
    assert again.returncode == 1 and "not found" in again.stderr
