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
import importlib
import io
import json
import logging

import pytest
from django.apps import apps
from django.conf import settings
from django.core.cache import cache
from django.core.management import get_commands
from django.db import connection, transaction
from rest_framework.test import APIClient

from mcp_api.server import MemoryToolError, current_caller
from mcp_api.tools import MemoryTools
from memories.management.cli import NOT_MIGRATED_MESSAGE, ProjectCommand
from memories.management.commands.memory import Command as MemoryCommand
from memories.models import AuditEvent, Memory, Revision, Tag
from memories.services.keys import api_key_create
from memoryproject.storage import FULL_MESSAGE, READ_ONLY_MESSAGE
from telemetry.models import HookRecall
from tests.helpers import error_of, key_caller
from tests.subprocesses import clean_env, manage, python, read_only_mount

pytestmark = pytest.mark.django_db

MEMORIES = "/api/v1/memories/"
HEALTH = "/api/v1/health/"
HOOK_RECALL = "/api/v1/hooks/recall/"
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


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
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


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
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


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
def test_a_hook_recall_on_a_read_only_database_answers_its_block_without_the_telemetry_row(api, caplog):
    with read_only_database(), caplog.at_level(logging.WARNING, logger="memories.services.hooks"):
        recalled = api.post(
            HOOK_RECALL, {"query": "stored before the trouble", "harness": "claude-code"}, format="json"
        )
        searched = api.get("/api/v1/recall/", {"query": "stored before the trouble"})

    assert recalled.status_code == 200
    assert "Already stored before the trouble." in recalled.json()["block"]
    assert recalled.json()["recall_id"] is None
    assert not HookRecall.objects.exists()
    assert READ_ONLY_MESSAGE in caplog.text
    assert searched.status_code == 200 and searched.json()["hits"]
    again = api.post(HOOK_RECALL, {"query": "stored before the trouble"}, format="json").json()
    assert again["recall_id"] == HookRecall.objects.get().pk


# Near the 2,000-character limit: three such rows cannot share one page, so one needs a page the file may not grow by.
LONG_QUERY = "stored before the trouble " + " ".join(f"padding{number}" for number in range(185))


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
def test_a_hook_recall_on_a_full_database_answers_its_block_without_the_telemetry_row(api):
    with full_database():
        # min_score=0: the padding makes the query mostly words no memory has, which relevance would hold back.
        answers = [api.post(HOOK_RECALL, {"query": LONG_QUERY, "min_score": 0}, format="json") for _ in range(3)]

    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert all("Already stored before the trouble." in answer.json()["block"] for answer in answers)
    stored = [answer.json()["recall_id"] for answer in answers if answer.json()["recall_id"] is not None]
    assert len(stored) < 3
    assert sorted(HookRecall.objects.values_list("pk", flat=True)) == sorted(stored)


def _remember_through_mcp():
    arguments = dict(
        content=CONTENT,
        namespace="acme",
        key=None,
        title=None,
        kind="note",
        tags=None,
        ttl_days=None,
        valid_from=None,
        valid_to=None,
        source=None,
        subject=None,
        predicate=None,
        object=None,
        force=False,
        confidence=None,
    )
    token = current_caller.set(key_caller(interface="mcp"))
    try:
        return MemoryTools().memory_remember(**arguments)
    finally:
        current_caller.reset(token)


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
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


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
def test_the_cli_prints_the_same_messages_as_json_errors():
    with full_database():
        full = _remember_through_the_cli()
    with read_only_database():
        read_only = _remember_through_the_cli()

    assert full[0] == 2 and json.loads(full[1]) == {
        "error": {"code": "storage_full", "message": FULL_MESSAGE, "field": None}
    }
    assert read_only[0] == 2 and json.loads(read_only[1]) == {
        "error": {"code": "read_only", "message": READ_ONLY_MESSAGE, "field": None}
    }
    assert not Memory.objects.exists()


def test_every_command_of_the_project_ends_a_domain_error_in_one_place():
    project_apps = {config.name for config in apps.get_app_configs() if (settings.BASE_DIR / config.name).is_dir()}
    commands = {name: app for name, app in get_commands().items() if app in project_apps}

    assert {"memory", "import_memories", "purge", "first_run", "load_demo", "mcp_stdio"} <= set(commands)
    for name, app in commands.items():
        assert issubclass(importlib.import_module(f"{app}.management.commands.{name}").Command, ProjectCommand), name


def _run_command(name: str, *arguments: str) -> tuple[int, str, str]:
    """Run ``manage.py name arguments`` as the shell does; return its exit status, stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    command = importlib.import_module(f"memories.management.commands.{name}").Command(stdout=stdout, stderr=stderr)
    # A savepoint, as the command's own process has a transaction: a refused write cannot break the test's.
    with transaction.atomic(), pytest.raises(SystemExit) as exited:
        command.run_from_argv(["manage.py", name, *arguments])
    return exited.value.code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture
def export_file(tmp_path):
    path = tmp_path / "export.json"
    path.write_text(
        json.dumps(
            {
                "format": "memory-export",
                "version": 1,
                "memories": [
                    {"namespace": "acme", "key": "review", "kind": "note", "revisions": [{"content": CONTENT}]}
                ],
            }
        )
    )
    return str(path)


# Writes big enough to need new pages of a full file, and every writing command's first write on a read-only one.
@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
@pytest.mark.parametrize(
    "condition, message, arguments",
    [
        (full_database, FULL_MESSAGE, ["load_demo"]),
        (full_database, FULL_MESSAGE, ["import_memories", "EXPORT"]),
        (read_only_database, READ_ONLY_MESSAGE, ["load_demo"]),
        (read_only_database, READ_ONLY_MESSAGE, ["import_memories", "EXPORT"]),
        (read_only_database, READ_ONLY_MESSAGE, ["first_run"]),
        (read_only_database, READ_ONLY_MESSAGE, ["create_api_key", "--name", "ops"]),
    ],
)
def test_other_commands_print_the_message_on_one_line_and_exit_1(export_file, condition, message, arguments):
    arguments = [export_file if argument == "EXPORT" else argument for argument in arguments]
    with condition():
        status, stdout, stderr = _run_command(*arguments)

    assert (status, stdout, stderr) == (1, "", f"CommandError: {message}\n")
    assert not Memory.objects.exists()


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
@pytest.mark.slow
def test_a_database_on_a_read_only_disk_is_read_and_writes_are_refused_with_the_message_not_a_traceback(
    instance, tmp_path
):
    instance.memory("remember", "Written before the disk became read-only.")
    with read_only_mount(instance.data_dir, tmp_path / "read-only") as folder:
        env = clean_env(folder, MEMORY_SECRET_KEY="read-only-test-" + "k" * 40)  # none can be written there
        # No -wal or -shm file can be made there: the file is read as it is, and writes are refused.
        listed = manage("memory", "list", env=env)
        refused = manage("memory", "remember", "Written to a read-only disk.", env=env)
        first_run = manage("first_run", env=env)
        state = python("from memories.health import database_state; print(database_state())", env=env)

    assert listed.returncode == 0, listed.stderr
    assert [item["content"] for item in json.loads(listed.stdout)["items"]] == [
        "Written before the disk became read-only."
    ]
    assert refused.returncode == 2 and refused.stdout == ""
    assert json.loads(refused.stderr) == {"error": {"code": "read_only", "message": READ_ONLY_MESSAGE, "field": None}}
    assert (first_run.returncode, first_run.stdout, first_run.stderr) == (1, "", f"CommandError: {READ_ONLY_MESSAGE}\n")
    assert state.stdout == "read-only\n"
    assert instance.memory("remember", "Written once the disk is writable again.")["content"].startswith("Written")


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
@pytest.mark.slow
def test_a_database_without_tables_is_one_line_for_every_command_and_json_for_memory(tmp_path):
    env = clean_env(tmp_path)  # a new, empty database file: never migrated

    listed = manage("memory", "list", env=env)
    purged = manage("purge", env=env)

    assert listed.returncode == 2 and json.loads(listed.stderr) == {
        "error": {"code": "not_migrated", "message": NOT_MIGRATED_MESSAGE, "field": None}
    }
    assert (purged.returncode, purged.stdout, purged.stderr) == (1, "", f"CommandError: {NOT_MIGRATED_MESSAGE}\n")


BUSY_READS = """
import json, sqlite3, sys
from django.db import connection
from django.test import Client
from memories.services.keys import api_key_create

services.memory_remember(namespace="acme", content="The VPN endpoint is vpn1.example.", **ACTOR)
_, token = api_key_create(name="reader", scopes=["read"], **ACTOR)
# Another writer holds the database's write lock for longer than this process's busy timeout.
holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
holder.execute("BEGIN IMMEDIATE")
client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
recall = client.get("/api/v1/recall/", {"query": "VPN endpoint", "mode": "keyword"})
hook = client.post("/api/v1/hooks/recall/", {"query": "VPN endpoint"}, content_type="application/json")
holder.execute("ROLLBACK")
print(json.dumps({"recall": [recall.status_code, len(recall.json().get("hits", []))],
                  "hook": [hook.status_code, hook.json().get("recall_id", "absent"),
                           "vpn1" in hook.json().get("block", "")]}))
"""


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
@pytest.mark.slow
def test_reads_answer_when_their_side_writes_meet_a_lock_that_stays_busy(instance):
    # The key's last use and the hook's telemetry row are skipped; the reads answer as usual.
    instance.env["MEMORY_DB_BUSY_TIMEOUT"] = "1"
    assert json.loads(instance.run(BUSY_READS)) == {"recall": [200, 1], "hook": [200, None, True]}


@pytest.mark.sqlite_only("makes the condition with SQLite's pragmas and files; tests/test_postgres.py has PostgreSQL's")
@pytest.mark.parametrize(
    ("condition", "status", "code", "message"),
    [(full_database, 507, "storage_full", FULL_MESSAGE), (read_only_database, 503, "read_only", READ_ONLY_MESSAGE)],
)
def test_learn_answers_a_full_or_read_only_database_as_every_write_does(api, condition, status, code, message):
    before = rows()
    # A skill whose steps need new pages, beside a fact and a decision that would fit in the free room of old ones.
    steps = "\n".join(f"{number}. {CONTENT}" for number in (1, 2))
    text = {
        "text": f"The billing API runs on Kubernetes. We decided to use Go.\nTo review storage:\n{steps}",
        "namespace": "acme",
    }

    with condition():
        refused = api.post("/api/v1/learn/", text, format="json")
        with pytest.raises(MemoryToolError) as through_mcp:
            _learn_through_mcp(text["text"])

    assert error_of(refused, status) == {"code": code, "message": message}
    assert str(through_mcp.value) == message
    assert rows() == before
    assert api.post("/api/v1/learn/", text, format="json").json()["stored"]


def _learn_through_mcp(text: str):
    token = current_caller.set(key_caller(interface="mcp"))
    try:
        return MemoryTools().memory_learn(text=text, namespace="acme", source=None, tags=None)
    finally:
        current_caller.reset(token)
