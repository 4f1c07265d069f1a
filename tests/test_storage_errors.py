"""A database that cannot take writes, full or read-only: every door says so and what to do, and nothing is lost.

REST answers 507 (full) or 503 (read-only) with the one message ``memoryproject.storage``
words, MCP and the CLI show the same message, health reports the condition with a 503,
reads keep working, nothing is partly written, and the same write succeeds once the
condition is gone. SQLite's own limits make the conditions real: ``PRAGMA max_page_count``
at the file's current size makes it raise "database or disk is full", and ``PRAGMA
query_only`` "attempt to write a readonly database" (tests may run as root, for whom a
read-only file mode changes nothing).
"""

import contextlib
import io
import json
import subprocess

import pytest
from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient

from mcp_api.server import MemoryToolError, current_caller
from mcp_api.tools import MemoryTools
from memories.management.commands.memory import Command as MemoryCommand
from memories.models import AuditEvent, Memory, Revision, Tag
from memories.services.keys import api_key_create
from memoryproject.storage import CANT_OPEN_MESSAGE, FULL_MESSAGE, READ_ONLY_MESSAGE
from tests.helpers import error_of, key_caller
from tests.subprocesses import clean_env, instance, manage, migrated_db, python  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

MEMORIES = "/api/v1/memories/"
HEALTH = "/api/v1/health/"
# Long enough to need new pages (its text overflows one), so a full file must refuse it.
CONTENT = "The quarterly storage review found " + " ".join(f"finding{number}" for number in range(800)) + "."


@contextlib.contextmanager
def full_database():
    """The file may not grow by a page: SQLite raises SQLITE_FULL on a write that needs one.

    A filler row first takes the free pages inside the file, which a write would reuse; the
    test's transaction rolls it back with everything else.
    """
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        filler = (free + 1) * cursor.fetchone()[0]
        cursor.execute("CREATE TABLE test_filler (data BLOB)")
        cursor.execute("INSERT INTO test_filler VALUES (zeroblob(%s))", [filler])
        cursor.execute("PRAGMA freelist_count")
        assert cursor.fetchone()[0] == 0
        cursor.execute("PRAGMA page_count")
        cursor.execute(f"PRAGMA max_page_count = {cursor.fetchone()[0]:d}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA max_page_count = 4294967294")


@contextlib.contextmanager
def read_only_database():
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA query_only = ON")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA query_only = OFF")


@pytest.fixture
def api() -> APIClient:
    cache.clear()  # throttle counts
    _, token = api_key_create(name="writer", scopes=["read", "write"], actor="tester", interface="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.post(MEMORIES, {"content": "Already stored before the trouble.", "namespace": "acme"}, format="json")
    return client


def rows() -> dict:
    return {model.__name__: model.objects.count() for model in (Memory, Revision, Tag, AuditEvent)}


def write(client):
    return client.post(MEMORIES, {"content": CONTENT, "namespace": "acme", "tags": ["review"]}, format="json")


def test_a_full_database_answers_507_writes_nothing_and_takes_the_write_once_there_is_room(api):
    before = rows()

    with full_database():
        refused = write(api)
        health = APIClient().get(HEALTH)
        listed = api.get(MEMORIES)

    assert error_of(refused, 507) == {"code": "storage_full", "message": FULL_MESSAGE}
    assert "Free space" in FULL_MESSAGE and "retry" in FULL_MESSAGE
    assert rows() == before
    assert health.status_code == 503
    assert (health.json()["status"], health.json()["database"]) == ("degraded", "full")
    assert listed.status_code == 200  # reads still work
    assert write(api).status_code == 201
    assert APIClient().get(HEALTH).json()["database"] == "ok"


def test_a_read_only_database_answers_503_writes_nothing_and_reads_still_work(api):
    before = rows()

    with read_only_database():
        refused = write(api)
        health = APIClient().get(HEALTH)
        listed = api.get(MEMORIES)

    assert error_of(refused, 503) == {"code": "read_only", "message": READ_ONLY_MESSAGE}
    assert rows() == before
    assert health.status_code == 503
    assert (health.json()["status"], health.json()["database"]) == ("degraded", "read-only")
    assert listed.status_code == 200 and listed.json()["items"]
    assert write(api).status_code == 201


def _remember_through_mcp():
    arguments = dict(content=CONTENT, namespace="acme", key=None, title=None, kind="note", tags=None, ttl_days=None,
                     valid_from=None, valid_to=None, source=None, subject=None, predicate=None, object=None)
    token = current_caller.set(key_caller(interface="mcp"))
    try:
        return MemoryTools().memory_remember(**arguments)
    finally:
        current_caller.reset(token)


def test_mcp_tools_give_the_same_messages():
    with full_database(), pytest.raises(MemoryToolError) as full:
        _remember_through_mcp()
    with read_only_database(), pytest.raises(MemoryToolError) as read_only:
        _remember_through_mcp()

    assert str(full.value) == FULL_MESSAGE
    assert str(read_only.value) == READ_ONLY_MESSAGE
    assert not Memory.objects.exists()
    assert _remember_through_mcp().created


def _remember_through_the_cli() -> tuple[int, str]:
    stderr = io.StringIO()
    command = MemoryCommand(stdout=io.StringIO(), stderr=stderr)
    with pytest.raises(SystemExit) as exited:
        command.run_from_argv(["manage.py", "memory", "remember", CONTENT, "--namespace", "acme"])
    return exited.value.code, stderr.getvalue()


def test_the_cli_prints_the_same_messages_as_json_errors():
    with full_database():
        full = _remember_through_the_cli()
    with read_only_database():
        read_only = _remember_through_the_cli()

    assert full[0] == 2 and json.loads(full[1]) == {
        "error": {"code": "storage_full", "message": FULL_MESSAGE, "field": None}}
    assert read_only[0] == 2 and json.loads(read_only[1]) == {
        "error": {"code": "read_only", "message": READ_ONLY_MESSAGE, "field": None}}
    assert not Memory.objects.exists()


@contextlib.contextmanager
def read_only_mount(folder, at):
    """``folder`` bind-mounted read-only at ``at``: what root cannot write either. Skips where mounts are refused."""
    at.mkdir()
    if subprocess.run(["mount", "--bind", str(folder), str(at)], capture_output=True).returncode:
        pytest.skip("bind mounts need root and CAP_SYS_ADMIN")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(at)], capture_output=True).returncode:
            pytest.skip("this kernel refused a read-only bind mount")
        yield at
    finally:
        subprocess.run(["umount", str(at)], capture_output=True)


@pytest.mark.slow
def test_a_database_on_a_read_only_disk_is_refused_with_the_message_not_a_traceback(instance, tmp_path):
    with read_only_mount(instance.data_dir, tmp_path / "read-only") as folder:
        env = clean_env(folder, MEMORY_SECRET_KEY="read-only-test-" + "k" * 40)  # none can be written there
        # SQLite cannot make the -wal and -shm files a WAL database needs there, so it cannot open it at all.
        refused = manage("memory", "remember", "Written to a read-only disk.", env=env)
        state = python("from memories.health import database_state; print(database_state())", env=env)

    assert refused.returncode == 2 and refused.stdout == ""
    assert json.loads(refused.stderr) == {"error": {"code": "unavailable", "message": CANT_OPEN_MESSAGE, "field": None}}
    assert state.stdout == "error\n"
    assert instance.memory("remember", "Written once the disk is writable again.")["content"].startswith("Written")
