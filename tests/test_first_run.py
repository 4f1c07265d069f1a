"""What `make run` and `make demo` do before serving: the first admin login and API key, the demo data."""

import os
import pty
import re
import secrets
import stat
import subprocess
import sys

import pytest

from memoryproject import dialect
from tests.subprocesses import BASE_DIR, Instance, clean_env, copy_migrated

pytestmark = pytest.mark.slow

CHECK_LOGIN = """
    import sys
    from django.contrib.auth import authenticate, get_user_model
    user = authenticate(username=sys.argv[1], password=sys.argv[2])
    print(get_user_model().objects.count(), user is not None and user.is_superuser)
"""


def first_run(instance) -> str:
    done = instance.manage("first_run")
    assert done.returncode == 0, done.stderr
    return done.stdout


CHECK_KEY = """
    import sys
    from memories.services.keys import api_key_authenticate
    from memories.models import ApiKey
    caller = api_key_authenticate(sys.argv[1], interface="mcp")
    print(ApiKey.objects.count(), ",".join(sorted(caller.scopes)), caller.namespaces)
"""


def secrets_file(instance):
    return instance.data_dir / "memory.db.first-run"


def test_first_run_writes_the_drawn_password_and_key_to_a_file_only_its_owner_reads_and_not_to_a_pipe(instance):
    first = first_run(instance)
    second = first_run(instance)

    written = secrets_file(instance).read_text()
    assert stat.S_IMODE(secrets_file(instance).stat().st_mode) == 0o600
    passwords = re.findall(r"^\s+password: (\S+)$", written, re.MULTILINE)
    assert len(passwords) == 1
    assert re.search(r"^\s+username: admin$", written, re.MULTILINE)
    assert instance.run(CHECK_LOGIN, "admin", passwords[0]).split() == ["1", "True"]
    keys = re.findall(r"^\s+key: (mem_\S+)$", written, re.MULTILINE)
    assert len(keys) == 1
    assert instance.run(CHECK_KEY, keys[0]).split() == ["1", "read,write", "None"]
    # stdout is a pipe here, as under a process manager that sends it to the logs: the file is named, not shown.
    assert first.splitlines() == [
        "Created the first admin login 'admin' and the first API key.",
        f"  the drawn password and key: in {secrets_file(instance)} (mode 0600, yours only); read, then delete it",
    ]
    assert second == ""


def test_first_run_shows_the_drawn_password_and_key_once_on_a_terminal(instance):
    leader, follower = pty.openpty()
    done = subprocess.run(
        [sys.executable, "manage.py", "first_run"], cwd=BASE_DIR, env=instance.env, stdout=follower, timeout=60
    )
    os.close(follower)
    shown = b""
    while chunk := _read_terminal(leader):
        shown += chunk
    os.close(leader)

    assert done.returncode == 0
    written = secrets_file(instance).read_text()
    assert "shown this once:" in shown.decode()
    for line in written.splitlines():
        assert line in shown.decode().replace("\r\n", "\n").splitlines()


def _read_terminal(leader: int) -> bytes:
    try:
        return os.read(leader, 4096)
    except OSError:  # EIO: the writer has gone
        return b""


def test_an_operator_gives_the_first_password_and_key_in_files_and_nothing_secret_is_written_or_shown(instance):
    password_file, key_file = instance.data_dir / "password", instance.data_dir / "key"
    password_file.write_text("correct horse battery staple\n")
    key = f"mem_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    key_file.write_text(key + "\n")
    instance.env.update(MEMORY_FIRST_ADMIN_PASSWORD_FILE=str(password_file), MEMORY_FIRST_API_KEY_FILE=str(key_file))

    output = first_run(instance)

    assert output.splitlines() == [
        "Created the first admin login 'admin' and the first API key.",
        "  as given in MEMORY_FIRST_ADMIN_PASSWORD and MEMORY_FIRST_API_KEY",
    ]
    assert not secrets_file(instance).exists()
    assert instance.run(CHECK_LOGIN, "admin", "correct horse battery staple").split() == ["1", "True"]
    assert instance.run(CHECK_KEY, key).split() == ["1", "read,write", "None"]


def test_a_given_password_alone_leaves_only_the_drawn_key_in_the_file(instance):
    instance.env["MEMORY_FIRST_ADMIN_PASSWORD"] = "correct horse battery staple"

    output = first_run(instance)

    assert "  as given in MEMORY_FIRST_ADMIN_PASSWORD" in output.splitlines()
    written = secrets_file(instance).read_text()
    assert "password" not in written and re.search(r"^\s+key: mem_\S+$", written, re.MULTILINE)
    assert instance.run(CHECK_LOGIN, "admin", "correct horse battery staple").split() == ["1", "True"]


@pytest.mark.parametrize(
    ("setting", "value", "refusal"),
    [
        ("MEMORY_FIRST_ADMIN_PASSWORD", "Qz7#p", "MEMORY_FIRST_ADMIN_PASSWORD is refused: This password is too short."),
        (
            "MEMORY_FIRST_API_KEY",
            "mem_0123abcd_tooshort",
            "MEMORY_FIRST_API_KEY is refused: expected mem_<8 lower-case",
        ),
        ("MEMORY_FIRST_API_KEY", "mem_0123ABCD_" + "x" * 43, "MEMORY_FIRST_API_KEY is refused: expected mem_<8 lower"),
    ],
)
def test_a_given_password_or_key_too_weak_is_refused_in_one_line_without_repeating_it_and_nothing_is_made(
    instance, setting, value, refusal
):
    instance.env[setting] = value

    done = instance.manage("first_run")

    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and refusal in done.stderr
    assert value not in done.stderr
    assert instance.sql("SELECT count(*) FROM auth_user") == [(0,)]
    assert instance.sql("SELECT count(*) FROM memories_apikey") == [(0,)]


def test_a_setting_given_both_as_a_value_and_as_a_file_stops_start_up_in_one_line(instance):
    (instance.data_dir / "key").write_text("whatever\n")
    instance.env.update(MEMORY_SECRET_KEY="k" * 40, MEMORY_SECRET_KEY_FILE=str(instance.data_dir / "key"))

    done = instance.manage("first_run")

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Both MEMORY_SECRET_KEY and MEMORY_SECRET_KEY_FILE are set: set only one of them."
    ]


def test_first_run_leaves_a_database_with_a_login_alone_and_says_how_to_make_a_key(instance):
    instance.run("""
        from django.contrib.auth import get_user_model
        get_user_model().objects.create_superuser(username="ops", email="", password="a long passphrase")
    """)

    output = first_run(instance)

    assert "password" not in output
    assert output.splitlines() == ["No API key yet: create one with 'manage.py create_api_key --name NAME'."]
    assert instance.run(CHECK_LOGIN, "ops", "a long passphrase").split() == ["1", "True"]


def _until_listening(process: subprocess.Popen) -> tuple[bool, list[str]]:
    """Read a server's output up to its MEMORY_SERVER_LISTENING line: whether it came, and the lines before it."""
    before = []
    for line in process.stdout:
        if line.startswith("MEMORY_SERVER_LISTENING "):
            return True, before
        before.append(line)
    return False, before


def test_two_servers_started_at_once_on_a_new_store_both_serve_and_one_makes_the_first_login_and_key(
    tmp_path, migrated_db
):
    for attempt in range(3):  # the race is in the first half-second of each start: a few tries catch it
        data_dir = tmp_path / f"store-{attempt}"
        data_dir.mkdir()
        copy_migrated(migrated_db, data_dir)
        store = Instance(data_dir=data_dir, env={**clean_env(data_dir), "MEMORY_PORT": "0"})
        errors = [data_dir / f"server-{number}.stderr" for number in (1, 2)]
        servers = [
            subprocess.Popen(
                [sys.executable, "manage.py", "serve"],
                cwd=BASE_DIR,
                env=store.env,
                stdout=subprocess.PIPE,
                stderr=path.open("w"),
                text=True,
            )
            for path in errors
        ]
        try:
            outputs = [_until_listening(process) for process in servers]
        finally:
            for process in servers:
                process.terminate()
                process.wait(timeout=30)

        assert [listening for listening, _ in outputs] == [True, True], [path.read_text() for path in errors]
        made = [before for _, before in outputs if any(line.startswith("Created the first admin") for line in before)]
        assert len(made) == 1, outputs
        assert re.search(r"^\s+key: mem_\S+$", (data_dir / "memory.db.first-run").read_text(), re.MULTILINE)
        assert store.sql("SELECT count(*) FROM auth_user") == [(1,)]
        assert store.sql("SELECT count(*) FROM memories_apikey") == [(1,)]


def row_counts(instance) -> dict[str, int]:
    """Rows in every ordinary table of the instance's database (FTS5's virtual tables left out on SQLite)."""
    if dialect.is_postgresql():
        listed = instance.sql("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    else:
        listed = instance.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE %s", ["CREATE VIRTUAL TABLE%"]
        )
    return {table: instance.sql(f'SELECT COUNT(*) FROM "{table}"')[0][0] for (table,) in listed}


def test_load_demo_tells_its_stories_once_and_a_second_run_changes_nothing(instance):
    first = instance.manage("load_demo")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "Demo namespace 'demo': 15 memories added, 0 already there. Try: manage.py memory list --namespace demo"
    ]
    after_first = row_counts(instance)

    second = instance.manage("load_demo")
    assert second.returncode == 0, second.stderr
    assert "0 memories added, 15 already there" in second.stdout
    assert row_counts(instance) == after_first

    stats = instance.memory("stats", "--namespace", "demo")
    # 15 first versions, one revision, one bounded correction and one tombstone.
    assert (stats["memories"], stats["visible"], stats["forgotten"], stats["revisions"]) == (15, 14, 1, 18)
    assert stats["with_ttl"] == 1
    assert after_first["memories_revision"] == 18
    lab = ("get", "--namespace", "demo", "--key", "demo-lab-address")
    assert "Harbor Street" in instance.memory(*lab, "--valid-at", "2025-06-15")["content"]
    assert "Mill Road, Tacoma" in instance.memory(*lab)["content"]
    battery = ("get", "--namespace", "demo", "--key", "battery-supplier")
    assert "Voltaic" in instance.memory(*battery, "--as-of", "2025-06-01")["content"]
    assert "Helio Power" in instance.memory(*battery)["content"]
