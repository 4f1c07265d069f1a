"""Processes, or one process's threads, using one SQLite file at once: nothing lost, nothing locked, in order."""

import json
import subprocess
import sys
import time

import pytest

from tests.subprocesses import BASE_DIR

pytestmark = pytest.mark.slow

# Each writer connects, says it is ready, waits for the go file, then writes through
# the services: `remembers` new memories of its own and `revises` of the shared one.
WRITER = """
import pathlib, sys, time
import django
django.setup()
from django.db import connection
from memories import services

name, remembers, revises, shared_id, barrier = sys.argv[1:]
barrier = pathlib.Path(barrier)
connection.ensure_connection()
(barrier / f"ready-{name}").touch()
while not (barrier / "go").exists():
    time.sleep(0.001)
for number in range(int(remembers)):
    services.memory_remember(namespace="race", key=f"{name}-{number}", content=f"{name} wrote note {number}.",
                             actor=name, interface="cli")
for number in range(int(revises)):
    services.memory_revise(memory_id=int(shared_id), content=f"{name} revision {number}.", actor=name,
                           interface="cli")
"""


def run_writers(instance, names, *, remembers, revises, shared_id):
    """Start one process per name, release them together, and return their (exit code, stderr)."""
    barrier = instance.data_dir.parent / "barrier"
    barrier.mkdir()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, name, str(remembers), str(revises), str(shared_id), str(barrier)],
            cwd=BASE_DIR,
            env=instance.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("ready-*"))) < len(names):
            assert all(writer.poll() is None for writer in writers), "a writer died before the start"
            assert time.monotonic() < deadline, "writers did not get ready"
            time.sleep(0.01)
        (barrier / "go").touch()
        results = [writer.communicate(timeout=120) for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
    return [(writer.returncode, stderr) for writer, (_, stderr) in zip(writers, results)]


def shared_memory(instance) -> int:
    return int(
        instance.run("""
        print(services.memory_remember(namespace="race", key="shared", content="Shared, first version.",
                                       **ACTOR).memory.id)
    """)
    )


def revisions_and_audit(instance, memory_id) -> tuple[list[dict], dict[int, int | None]]:
    """Return the memory's revisions in id order, and each revise audit's revision -> previous revision."""
    answer = json.loads(
        instance.run(
            """
        import json, sys
        from memories.models import AuditEvent, Revision
        memory_id = int(sys.argv[1])
        revisions = [
            {"id": row.id, "content": row.content, "known_at": row.known_at.isoformat(), "author": row.author}
            for row in Revision.objects.filter(memory_id=memory_id).order_by("id")
        ]
        chain = [[event.detail["revision_id"], event.detail["previous_revision_id"]]
                 for event in AuditEvent.objects.filter(memory_id=memory_id, action="revise")]
        print(json.dumps({"revisions": revisions, "chain": chain}))
    """,
            str(memory_id),
        )
    )
    return answer["revisions"], {revision_id: previous for revision_id, previous in answer["chain"]}


def test_writers_at_once_lose_nothing_and_never_see_a_locked_database(instance):
    names, count = ["alpha", "bravo", "charlie"], 100
    shared_id = shared_memory(instance)

    outcomes = run_writers(instance, names, remembers=count, revises=count, shared_id=shared_id)

    assert outcomes == [(0, "")] * len(names)
    stats = instance.memory("stats", "--namespace", "race")
    assert stats["memories"] == 1 + len(names) * count
    assert stats["visible"] == 1 + len(names) * count
    # One revision per new memory, plus the shared memory's first version and every revise.
    assert stats["revisions"] == len(names) * count + 1 + len(names) * count
    notes = instance.memory("list", "--namespace", "race", "--limit", "200")
    assert len(notes["items"]) == 200 and notes["next_cursor"] is not None


def test_writers_revising_one_memory_leave_one_strictly_ordered_history(instance):
    names, count = ["alpha", "bravo"], 100
    shared_id = shared_memory(instance)

    outcomes = run_writers(instance, names, remembers=0, revises=count, shared_id=shared_id)

    assert outcomes == [(0, "")] * len(names)
    revisions, chain = revisions_and_audit(instance, shared_id)
    assert len(revisions) == 1 + len(names) * count
    # Written order (ids) and known order (known_at) agree, so the last write is the one shown.
    out_of_order = [
        (earlier, later) for earlier, later in zip(revisions, revisions[1:]) if earlier["known_at"] >= later["known_at"]
    ]
    assert out_of_order == [], "a revision written later is known earlier: was the clock read before the write lock?"
    # Every revise built on the revision written just before it: none was based on a stale read.
    assert chain == {later["id"]: earlier["id"] for earlier, later in zip(revisions, revisions[1:])}
    for name in names:
        mine = [revision["content"] for revision in revisions if revision["author"] == name]
        assert mine == [f"{name} revision {number}." for number in range(count)]
    shown = instance.memory("get", str(shared_id))
    assert shown["revision_id"] == revisions[-1]["id"]


# Threads of one process, as a server's request threads are: each has its own connection
# and all share the per-process copies (snapshot, vectors).
THREADS = """
import json, threading
from django.db import connection
from memories.selectors import memory_recall
from search import snapshot, vectors

for number in range(20):
    services.memory_remember(namespace="race", content=f"Seed note {number} about the nightly backup.", **ACTOR)
memory_recall(query="nightly backup", namespace="race", mode="hybrid")  # the copies, loaded once
reloads, failures, found = [], [], []
real_extend, real_start_over, real_load = snapshot._extend, vectors.vector_state, vectors.namespace_vectors

def extend(view, *, after, shared=False):
    if after == 0:
        reloads.append("snapshot")
    return real_extend(view, after=after, shared=shared)

def start_over():
    reloads.append("vectors")
    return real_start_over()

def load(namespace, *, up_to_id):
    reloads.append(f"vectors of {namespace}")
    return real_load(namespace, up_to_id=up_to_id)

snapshot._extend, vectors.vector_state, vectors.namespace_vectors = extend, start_over, load
start = threading.Barrier(6)

def writer(name):
    try:
        start.wait()
        for number in range(15):
            services.memory_remember(namespace="race", content=f"{name} wrote entry {number} on the rota.", **ACTOR)
    except Exception as error:
        failures.append(repr(error))
    finally:
        connection.close()

def reader():
    try:
        start.wait()
        for number in range(15):
            found.append(len(memory_recall(query="entry rota", namespace="race", mode="hybrid", limit=5).hits))
    except Exception as error:
        failures.append(repr(error))
    finally:
        connection.close()

threads = [threading.Thread(target=writer, args=(name,)) for name in ("alpha", "bravo", "charlie", "delta")]
threads += [threading.Thread(target=reader) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
hits = {hit.memory.content for hit in memory_recall(query="wrote entry rota", namespace="race", mode="keyword",
                                                     limit=100).hits}
print(json.dumps({"failures": failures, "reloads": reloads, "found": found, "hits": sorted(hits)}))
"""


def test_threads_writing_and_recalling_at_once_share_the_copies_without_reloading_them(instance):
    instance.env["MEMORY_EMBEDDER"] = "hash"
    seen = json.loads(instance.run(THREADS))
    assert seen["failures"] == []
    assert seen["reloads"] == []  # each copy grew by what was written; none started over from row 0
    assert len(seen["found"]) == 30
    expected = {
        f"{name} wrote entry {number} on the rota."
        for name in ("alpha", "bravo", "charlie", "delta")
        for number in range(15)
    }
    assert set(seen["hits"]) == expected
