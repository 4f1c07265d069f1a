"""A throwaway PostgreSQL cluster for tests: its own folder, a free loopback port, gone at exit.

PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` user.
"""

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

# Debian's layout first (the CI machine's), then whatever is on PATH.
_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _tool(name: str) -> str | None:
    for folder in _BIN_DIRS:
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


def missing() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    if _tool("initdb") is None or _tool("pg_ctl") is None:
        return "PostgreSQL's initdb and pg_ctl are not installed"
    if os.geteuid() == 0:
        try:
            subprocess.run(["id", "postgres"], check=True, capture_output=True)
        except subprocess.CalledProcessError:
            return "running as root, and there is no postgres user to run the cluster as"
    return None


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """A running cluster; ``url(name)`` names a database on it (``create(name)`` makes one)."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="memory-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        subprocess.run(_as_owner([_tool("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                                  "-E", "UTF8", "--locale=C", "--no-sync"]),
                       check=True, capture_output=True)
        # Loopback only, no durability (a test cluster), its socket in its own folder.
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        subprocess.run(_as_owner([_tool("pg_ctl"), "-D", str(self.data), "-o", options, "-w",
                                  "-l", str(self.folder / "log"), "start"]),
                       check=True, capture_output=True)
        atexit.register(self.stop)

    def url(self, name: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def sql(self, statement: str, *, database: str = "postgres"):
        """Run one statement in autocommit (CREATE DATABASE cannot run in a transaction); return its rows."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as connection:
            cursor = connection.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def create(self, name: str) -> str:
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self):
        if self.data.exists():
            subprocess.run(_as_owner([_tool("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)
