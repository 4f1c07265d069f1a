"""Run the project as separate processes, each against its own data directory.

Starting Django costs about a second per process, so the ``migrated_db`` fixture
migrates one database per test module and ``instance`` gives every test a copy of it.
Test modules import the fixtures they use.
"""

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import postgres

BASE_DIR = Path(__file__).resolve().parent.parent


def clean_env(data_dir: Path, **extra: str) -> dict:
    """Return an environment for a child process: no MEMORY_* settings but the data paths, the hash embedder
    and ``extra`` (which may override them). On PostgreSQL (``make test-postgres``) the data directory's
    database stands for its file."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMORY_")}
    if os.environ.get("MEMORY_DATABASE_URL"):
        env["MEMORY_DATABASE_URL"] = postgres.database_url(data_dir)
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        MEMORY_DATA_DIR=str(data_dir),
        MEMORY_DB_PATH=str(data_dir / "memory.db"),
        # Child processes embed with the dependency-free embedder unless a test asks for
        # the model: loading MiniLM costs seconds per process.
        MEMORY_EMBEDDER="hash",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def manage(*args: str, env: dict, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def manage_at_once(*args: str, env: dict, count: int = 2, timeout: float = 180) -> list[subprocess.CompletedProcess]:
    """Start ``count`` ``manage.py`` processes with the same arguments at once; wait for them all."""
    command = [sys.executable, "manage.py", *args]
    processes = [
        subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    done = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=timeout)
        done.append(subprocess.CompletedProcess(command, process.returncode, stdout, stderr))
    return done


def python(code: str, *args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with Django set up (settings read from ``env``)."""
    prelude = "import django; django.setup()\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code, *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Instance:
    """One server's data directory with a migrated database, and the commands to drive it."""

    data_dir: Path
    env: dict

    @property
    def db_path(self) -> Path:
        return self.data_dir / "memory.db"

    def manage(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return manage(*args, env=self.env, stdin=stdin)

    def sql(self, statement: str, parameters=()) -> list[tuple]:
        """Run one statement (``%s`` placeholders) on this instance's database, SQLite file or PostgreSQL; its rows."""
        if "MEMORY_DATABASE_URL" in self.env:
            import psycopg

            with psycopg.connect(self.env["MEMORY_DATABASE_URL"], autocommit=True) as connection:
                cursor = connection.execute(statement, parameters)
                return cursor.fetchall() if cursor.description else []
        with contextlib.closing(sqlite3.connect(self.db_path, isolation_level=None)) as connection:
            return connection.execute(statement.replace("%s", "?"), parameters).fetchall()

    def run(self, code: str, *args: str) -> str:
        """Run ``code`` in a fresh process with ``services`` imported (one start-up for many writes)."""
        prelude = "from memories import services, selectors\nACTOR = {'actor': 'tester', 'interface': 'cli'}\n"
        done = python(prelude + textwrap.dedent(code), *args, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def memory(self, *args: str, stdin: str | None = None):
        """Run ``manage.py memory ...`` that must succeed; return its JSON answer."""
        done = self.manage("memory", *args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        return json.loads(done.stdout)

    def memory_error(self, *args: str, stdin: str | None = None) -> dict:
        """Run ``manage.py memory ...`` that must fail as documented; return its JSON error."""
        done = self.manage("memory", *args, stdin=stdin)
        assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        error = json.loads(lines[0])["error"]
        assert set(error) == {"code", "message", "field"}
        return error

    def create_api_keys(self, **specs: dict) -> dict[str, str]:
        """Create API keys in one process and return their plaintexts by name.

        Each spec: ``scopes`` (default read and write), ``namespaces`` (default all), ``revoked``, ``trusted``
        (default true).
        """
        created = self.run(
            """
            import json, sys
            from memories.services.keys import api_key_create, api_key_revoke
            tokens = {}
            for name, spec in json.loads(sys.argv[1]).items():
                key, tokens[name] = api_key_create(name=name, scopes=spec.get("scopes", ["read", "write"]),
                                                   namespaces=spec.get("namespaces"),
                                                   trusted=spec.get("trusted", True), **ACTOR)
                if spec.get("revoked"):
                    api_key_revoke(prefix=key.prefix, **ACTOR)
            print(json.dumps(tokens))
        """,
            json.dumps(specs),
        )
        return json.loads(created)


@contextlib.contextmanager
def read_only_mount(folder: Path, at: Path):
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve(env: dict, *, timeout: float = 30):
    """Run the server as `make run` does (uvicorn on loopback, a free port); yield its base URL.

    Its output goes to ``server.log`` in the data directory (a pipe nobody reads would
    block the server once full).
    """
    with serve_process(env, timeout=timeout) as (base, _):
        yield base


@contextlib.contextmanager
def serve_process(env: dict, *, timeout: float = 30):
    """``serve``, yielding the base URL and the server's process (for its pid)."""
    port = free_port()
    log_path = Path(env["MEMORY_DATA_DIR"]) / "server.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "memoryproject.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--http",
            "memoryproject.httpprotocol:HttpProtocol",
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert process.poll() is None, log_path.read_text()
            try:
                with urllib.request.urlopen(f"{base}/admin/login/", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, f"the server did not answer within {timeout} seconds"
            time.sleep(0.1)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def migrated_db(tmp_path_factory) -> Path:
    data_dir = tmp_path_factory.mktemp("migrated")
    done = manage("migrate", "--noinput", "-v", "0", env=clean_env(data_dir))
    assert done.returncode == 0, done.stderr
    # A clean exit checkpoints the WAL into the main file, so that one file is the whole database.
    assert not (data_dir / "memory.db-wal").exists()
    return data_dir / "memory.db"


@pytest.fixture
def instance(tmp_path, migrated_db) -> Instance:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    copy_migrated(migrated_db, data_dir)
    return Instance(data_dir=data_dir, env=clean_env(data_dir))


@pytest.fixture(scope="module")
def module_instance(tmp_path_factory, migrated_db) -> Instance:
    """One instance for a whole module, for a server that every test of the module talks to."""
    data_dir = tmp_path_factory.mktemp("instance")
    copy_migrated(migrated_db, data_dir)
    return Instance(data_dir=data_dir, env=clean_env(data_dir))


def copy_migrated(migrated_db: Path, data_dir: Path) -> None:
    """Give ``data_dir`` a copy of the migrated database: its file, or on PostgreSQL its database."""
    if os.environ.get("MEMORY_DATABASE_URL"):
        postgres.database_url(data_dir, copy_of=migrated_db.parent)
    else:
        shutil.copyfile(migrated_db, data_dir / "memory.db")
