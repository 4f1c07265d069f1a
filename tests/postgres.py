"""A throwaway PostgreSQL cluster for tests: its own folder, a free loopback port, gone at exit.

PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` user.
"""

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

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
    """A running cluster; ``url(name)`` names a database on it (``create(name)`` makes one).

    ``durable``: PostgreSQL's own defaults (fsync, synchronous commit), as a real server runs, for
    benchmarks; tests go without.
    """

    def __init__(self, *, durable: bool = False):
        self.folder = Path(tempfile.mkdtemp(prefix="memory-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        subprocess.run(
            _as_owner(
                [
                    _tool("initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        # Loopback only, its socket in its own folder; a test cluster without durability.
        self.options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c max_connections=200"
        if not durable:
            self.options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self.start()
        atexit.register(self.stop)

    def start(self):
        """Start the server (again, after ``halt``); return once it accepts connections."""
        subprocess.run(
            _as_owner(
                [
                    _tool("pg_ctl"),
                    "-D",
                    str(self.data),
                    "-o",
                    self.options,
                    "-w",
                    "-l",
                    str(self.folder / "log"),
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )

    def halt(self):
        """Stop the server as an operator does (``pg_ctl stop``, fast mode: sessions are ended), keeping its data."""
        subprocess.run(
            _as_owner([_tool("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
            check=True,
            capture_output=True,
        )

    def require_passwords(self, user: str):
        """Make ``user`` log in with its password over TCP (every other user stays trusted)."""
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"host all {user} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        self.sql("SELECT pg_reload_conf()")

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
            subprocess.run(
                _as_owner([_tool("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]), capture_output=True
            )
        shutil.rmtree(self.folder, ignore_errors=True)


# --- The suite on PostgreSQL -------------------------------------------------------------
# `make test-postgres` runs `python -m tests.postgres`: one cluster for the run, the suite's
# own database on it (MEMORY_DATABASE_URL), and one database per child process's data
# directory (``database_url``), where SQLite would have a file.


def database_name(data_dir: Path) -> str:
    import hashlib

    return "t_" + hashlib.sha1(str(data_dir).encode()).hexdigest()[:20]


def database_url(data_dir: Path, *, copy_of: Path | None = None) -> str:
    """The URL of the database that stands for ``data_dir``'s file, created if missing: empty, or a copy of
    ``copy_of``'s (which no one may be connected to).

    Only under ``python -m tests.postgres``: its databases live on the run's cluster.
    """
    import psycopg

    server = urlsplit(os.environ["MEMORY_DATABASE_URL"])
    name = database_name(data_dir)
    with psycopg.connect(server._replace(path="/postgres").geturl(), autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            template = f' TEMPLATE "{database_name(copy_of)}"' if copy_of else ""
            connection.execute(f'CREATE DATABASE "{name}"{template}')
    return server._replace(path=f"/{name}").geturl()


def main(arguments: list[str]) -> int:
    """Run pytest with ``arguments`` on a throwaway cluster; return its exit status."""
    why = missing()
    if why:
        print(f"make test-postgres: {why}; install Debian's postgresql package.", file=sys.stderr)
        return 2
    cluster = Cluster()
    try:
        env = {**os.environ, "MEMORY_DATABASE_URL": cluster.create("memory")}
        return subprocess.run([sys.executable, "-m", "pytest", *arguments], env=env).returncode
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
