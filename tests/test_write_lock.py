"""The write lock: nothing slow runs while it is held, and writers wait for it in line, not in SQLite's busy handler."""

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from memories import selectors, services
from memories.models import Memory
from memoryproject.sqlite_backend.writelock import WriteLock
from search import postings
from search.embeddings import HashEmbedder

ACTOR = {"actor": "tester", "interface": "cli"}


@pytest.fixture
def embedded_under_lock(db, monkeypatch):
    """Each text embedded from now on, with whether a service's transaction (the write lock) was open then."""
    calls = []
    embed = HashEmbedder.embed
    test_blocks = len(connection.atomic_blocks)  # the test's own transaction, which a server does not have

    def spy(self, texts):
        calls.extend((text, len(connection.atomic_blocks) > test_blocks) for text in texts)
        return embed(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", spy)
    return calls


def test_remember_embeds_its_text_before_the_write_lock(embedded_under_lock):
    services.memory_remember(namespace="acme", content="The deploy runs on Fridays.", **ACTOR)

    assert embedded_under_lock
    assert [text for text, locked in embedded_under_lock if locked] == []


def test_update_embeds_its_new_text_before_the_write_lock(embedded_under_lock):
    memory = services.memory_remember(namespace="acme", content="The deploy runs on Fridays.", **ACTOR).memory
    embedded_under_lock.clear()

    services.memory_update(memory_id=memory.id, content="The deploy runs on Thursdays.", add_tags=["ops"], **ACTOR)

    assert [text for text, _ in embedded_under_lock] == ["The deploy runs on Thursdays."]
    assert [text for text, locked in embedded_under_lock if locked] == []


def test_revise_embeds_its_new_text_before_the_write_lock(embedded_under_lock):
    memory = services.memory_remember(namespace="acme", content="The deploy runs on Fridays.", **ACTOR).memory
    embedded_under_lock.clear()

    services.memory_revise(memory_id=memory.id, content="The deploy runs on Mondays.", **ACTOR)

    assert embedded_under_lock == [("The deploy runs on Mondays.", False)]


def test_the_admin_add_page_embeds_its_text_before_the_write_lock(embedded_under_lock, admin_client):
    response = admin_client.post(
        "/admin/memories/memory/add/",
        {"namespace": "acme", "kind": "note", "content": "The deploy runs on Fridays.", "_save": "Save"},
    )

    assert response.status_code == 302
    assert embedded_under_lock == [("The deploy runs on Fridays.", False)]


def test_the_admin_change_page_embeds_its_new_text_before_the_write_lock(embedded_under_lock, admin_client):
    from memories.admin.forms import MemoryChangeForm

    memory_id = services.memory_remember(
        namespace="acme", content="The deploy runs on Fridays.", tags=["ops"], **ACTOR
    ).memory.id
    embedded_under_lock.clear()
    page = MemoryChangeForm(instance=Memory.objects.get(pk=memory_id))
    data = {name: value or "" for name, value in page.initial.items() if name in page.fields}
    data.update(kind="decision", content="The deploy runs on Thursdays.", tags="ops, ci", ttl_days="", _save="Save")

    response = admin_client.post(f"/admin/memories/memory/{memory_id}/change/", data)

    assert response.status_code == 302
    assert embedded_under_lock == [("The deploy runs on Thursdays.", False)]
    memory = selectors.memory_get(memory_id=memory_id)
    assert (memory.kind, memory.content, memory.tags) == ("decision", "The deploy runs on Thursdays.", ["ci", "ops"])


def test_the_write_that_fills_the_postings_tail_folds_it_only_after_it_commits(
    db, monkeypatch, django_capture_on_commit_callbacks
):
    services.memory_remember(namespace="acme", content="The deploy runs on Fridays.", **ACTOR)
    monkeypatch.setattr(postings, "COMPACT_AFTER", 8)  # the next write's postings cross it
    test_blocks = len(connection.atomic_blocks)
    fold, folds = postings._fold, []

    def watched(cursor, new, **bounds):
        folds.append(len(connection.atomic_blocks) > test_blocks)  # in a transaction (its own, below)
        return fold(cursor, new, **bounds)

    monkeypatch.setattr(postings, "_fold", watched)

    def recalled():
        return [(hit.memory.id, hit.score) for hit in selectors.memory_recall(query="deploy", mode="keyword").hits]

    with django_capture_on_commit_callbacks(execute=True):  # run what a commit runs, as on a server
        services.memory_remember(namespace="acme", content="The deploy pipeline needs two approvals.", **ACTOR)
        assert folds == []  # the write has returned, its transaction over, and nothing was folded
        unfolded = recalled()

    assert folds == [True]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), (SELECT tail_rows FROM search_state) FROM search_posting_tail")
        assert cursor.fetchone() == (0, 0)
    assert len(unfolded) == 2 and recalled() == unfolded


def test_a_waiting_writer_gets_the_lock_when_the_holder_releases_it(tmp_path):
    path = str(tmp_path / "memory.db-writelock")
    holder, waiter = WriteLock(path, timeout=10), WriteLock(path, timeout=10)
    events = []
    holder.acquire()

    def wait():
        waiter.acquire()
        events.append("waiter has it")
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)
    events.append("holder releases")
    holder.release()
    thread.join(timeout=5)

    assert events == ["holder releases", "waiter has it"]
    holder.close(), waiter.close()


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_lock_held_by_another_process_times_out_and_is_freed_when_that_process_is_killed(tmp_path):
    path = str(tmp_path / "memory.db-writelock")
    other = subprocess.Popen([sys.executable, "-c", HOLD, path], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "held\n"
        lock = WriteLock(path, timeout=0.2)
        with pytest.raises(OperationalError, match="database is locked"):
            lock.acquire()

        other.send_signal(signal.SIGKILL)
        other.wait()
        lock.acquire()
        assert lock.held
        lock.close()
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


HELD_DURING_TRANSACTIONS = """
import fcntl, json, os
from django.db import connection, transaction

def free():
    # Another open of the file, as another process's connection would have.
    fd = os.open(str(connection.settings_dict["NAME"]) + "-writelock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)

seen = {}
with transaction.atomic():
    services.memory_remember(namespace="acme", content="Committed.", **ACTOR)
    seen["in a transaction"] = free()
seen["after commit"] = free()
try:
    with transaction.atomic():
        services.memory_remember(namespace="acme", content="Rolled back.", **ACTOR)
        raise RuntimeError
except RuntimeError:
    pass
seen["after rollback"] = free()
print(json.dumps(seen))
"""


@pytest.mark.sqlite_only(
    "the lock file beside SQLite's database; PostgreSQL's advisory lock is tested in tests/test_postgres.py"
)
@pytest.mark.slow
def test_a_transaction_on_a_database_file_holds_the_lock_file_until_it_ends(instance):
    seen = json.loads(instance.run(HELD_DURING_TRANSACTIONS))

    assert seen == {"in a transaction": False, "after commit": True, "after rollback": True}


def test_a_remember_s_transaction_runs_only_its_checks_and_inserts(db):
    services.memory_remember(namespace="acme", content="Warms the per-process caches.", **ACTOR)
    with CaptureQueriesContext(connection) as captured:
        services.memory_remember(namespace="acme", content="The deploy runs on Fridays.", **ACTOR)

    # PostgreSQL stamps the write with its own clock, read under the write lock (memoryproject.dialect.locked_now).
    statements = [query["sql"] for query in captured.captured_queries if query["sql"] != "SELECT clock_timestamp()"]
    begin = next(number for number, sql in enumerate(statements) if sql.startswith("SAVEPOINT"))
    # Inside the transaction (its savepoint here, the test's own transaction around it): the
    # exact-duplicate check; the memory, its attribute set and revision inserts; the revision's document row,
    # postings and the tail's new count; the vector (the embedding space read, then a savepoint
    # with the space, the vector's check, insert and generation); the audit event. The namespace
    # comes with the memory the service holds: nothing is read back.
    assert len(statements[begin:]) == 17, "\n".join(statements[begin:])
