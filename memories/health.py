"""Health checks of the server's storage, shared by ``manage.py doctor`` and any status page.

Each check returns a ``Check``; none raises, so one broken part (a missing table, an
unreadable file) is reported next to the others instead of hiding them.
"""

import os
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

from memories.models import Memory
from memories.selectors.unfinished_imports import batch_rows, is_dead, unpublished_batches
from memoryproject import dialect
from memoryproject.sqlite_backend.capabilities import probe
from search import text
from search.indexing import index_drift

PYTHON_MIN = (3, 11)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def python_version() -> Check:
    ok = sys.version_info[:2] >= PYTHON_MIN
    detail = platform.python_version()
    if not ok:
        detail += f" (needs {PYTHON_MIN[0]}.{PYTHON_MIN[1]} or newer)"
    return Check("python", ok, detail)


def sqlite_features() -> list[Check]:
    found = probe()
    return [
        Check("sqlite", True, found.sqlite_version),
        Check("fts5", found.fts5, "available" if found.fts5 else "not compiled into SQLite"),
        Check("sqlite-vec", bool(found.sqlite_vec), found.sqlite_vec or "extension not loaded"),
    ]


def postgresql_features() -> list[Check]:
    """The server's version, and FTS5 in the SQLite library that tokenizes text in this process (search.text)."""
    from memoryproject.pg_backend.capabilities import MINIMUM_VERSION
    from memoryproject.pg_backend.capabilities import probe as probe_postgresql

    found = probe_postgresql()
    fts5 = text.has_fts5()
    recent = found.version_number >= MINIMUM_VERSION
    return [
        Check("postgresql", recent, found.postgresql_version + ("" if recent else " (needs 15 or newer)")),
        Check("fts5", fts5, "available" if fts5 else "not compiled into the SQLite that tokenizes text"),
    ]


def _postgresql_read_only() -> bool:
    """Whether the server would refuse writes: a standby, or read-only by default for this session."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'")
        return cursor.fetchone()[0]


def database_writable() -> Check:
    connection = connections[DEFAULT_DB_ALIAS]
    if dialect.is_postgresql():
        read_only = _postgresql_read_only()
        return Check(
            "database writable",
            not read_only,
            ("read-only (a standby, or default_transaction_read_only) " if read_only else "") + dialect.location(),
        )
    if connection.is_in_memory_db():
        return Check("database writable", True, "in-memory database")
    path = Path(connection.settings_dict["NAME"])
    # WAL mode creates -wal and -shm files next to the database, so the folder must be writable too.
    problems = [
        f"{where} {place} is not writable"
        for where, place in (("file", path), ("folder", path.parent))
        if not os.access(place, os.W_OK)
    ]
    return Check("database writable", not problems, "; ".join(problems) or str(path))


def _write_refusal() -> str | None:
    """Return "read-only" or "full" when a write to the database would be refused now, else None.

    Reads only: no write lock is taken and nothing is written, however often a load balancer asks.
    """
    if dialect.is_postgresql():
        # A full disk is only known when a write fails (SQLSTATE 53100, a DatabaseFull).
        return "read-only" if _postgresql_read_only() else None
    connection = connections[DEFAULT_DB_ALIAS]
    with connection.cursor() as cursor:
        pragmas = {}
        for name in ("query_only", "page_count", "max_page_count", "freelist_count", "page_size", "wal_autocheckpoint"):
            cursor.execute(f"PRAGMA {name}")  # names from the tuple above, not input
            pragmas[name] = cursor.fetchone()[0]
    if pragmas["query_only"]:
        return "read-only"
    if pragmas["page_count"] >= pragmas["max_page_count"] and not pragmas["freelist_count"]:
        return "full"  # the file has reached its size limit and has no free page left to reuse
    if connection.is_in_memory_db():
        return None
    if not database_writable().ok:
        return "read-only"
    # The WAL grows by up to wal_autocheckpoint pages before a checkpoint; with less room than that a write can fail.
    folder = os.statvfs(Path(connection.settings_dict["NAME"]).parent)
    free_blocks = folder.f_bfree if os.geteuid() == 0 else folder.f_bavail  # root may use the reserved blocks
    if free_blocks * folder.f_frsize < max(pragmas["wal_autocheckpoint"], 1) * pragmas["page_size"]:
        return "full"
    return None


def database_state() -> str:
    """Return "ok", "error" (it cannot be read), or "read-only" / "full" (it can, but writes would be refused)."""
    try:
        Memory.objects.exists()
        return _write_refusal() or "ok"
    except (DatabaseError, OSError):
        return "error"


def integrity() -> Check:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        # Reads every page and index; slow on a big file, which is why only doctor runs it.
        cursor.execute("PRAGMA integrity_check")
        rows = [row[0] for row in cursor.fetchall()]
    return Check("integrity", rows == ["ok"], "; ".join(rows[:5]))


def unapplied_migrations() -> list[str]:
    """Every migration of this code that the database has not applied, as ``app.name``, in order; two small queries.

    Raises the database's error when it cannot be read.
    """
    loader = MigrationExecutor(connections[DEFAULT_DB_ALIAS]).loader
    # Every known migration, not only those a plan to the leaves would run: a record
    # missing in the middle of an app's history is a problem too.
    return [f"{app}.{name}" for app, name in sorted(set(loader.graph.nodes) - set(loader.applied_migrations))]


def schema_current() -> Check:
    names = unapplied_migrations()
    if not names:
        return Check("schema", True, "all migrations applied")
    return Check("schema", False, f"{len(names)} unapplied migration(s), first {names[0]}; run 'manage.py migrate'")


def index_in_step() -> Check:
    problems = index_drift()
    return Check("index drift", not problems, " ".join(problems) or "search indexes match the revisions")


def embedder_matches() -> Check:
    """The stored vectors come from the embedder MEMORY_EMBEDDER selects: vectors of two models mean nothing to each
    other, and only a semantic recall would notice."""
    from memories.selectors.stats import search_mode
    from search.embeddings import get_embedder

    name = get_embedder().name  # its name only: its dimension would load a model
    found = search_mode()
    stored, source = found["vectors"], found["stored_vectors_from"]
    if stored and source != name:
        return Check(
            "embedder",
            False,
            f"the database holds {stored} vector(s) from {source}, but MEMORY_EMBEDDER={found['embedder']} "
            f"selects {name}, so semantic recall compares unlike vectors; run 'manage.py backfill --reembed' "
            f"to re-embed every revision with {name}, or set MEMORY_EMBEDDER back",
        )
    detail = f"{stored} vector(s) from {name}"
    if found["pending_vectors"]:
        detail += f"; {found['pending_vectors']} revision(s) wait for one, which 'manage.py backfill' embeds"
    return Check("embedder", True, detail)


def unfinished_imports() -> Check:
    """Imports still writing: a live one is fine; one whose process died leaves rows only purge removes."""
    from memoryproject.timeparse import format_instant

    unfinished = unpublished_batches()
    dead = [batch for batch in unfinished if is_dead(batch)]
    if dead:
        lines = []
        for batch in dead:
            counts = batch_rows(batch)
            lines.append(
                f"import batch {batch.pk} (started {format_instant(batch.started_at)} by {batch.actor}, "
                f"pid {batch.pid} on {batch.host}) died unpublished with {counts['memories']} memory(ies) "
                f"and {counts['revisions']} revision(s), visible nowhere;"
            )
        return Check("imports", False, " ".join(lines) + " run 'manage.py purge' to remove them.")
    if unfinished:
        return Check("imports", True, f"{len(unfinished)} import(s) in progress")
    return Check("imports", True, "no unfinished import")


def run_checks() -> list[Check]:
    """Return every check, in the order an operator reads them: platform, database, schema, indexes."""
    connection = connections[DEFAULT_DB_ALIAS]
    if dialect.is_postgresql():
        try:
            connection.ensure_connection()
        except DatabaseError as error:
            cause = str(error.__cause__ or error).strip().splitlines()[0]
            return [python_version(), Check("database", False, f"cannot connect to {dialect.location()}: {cause}")]
        # PostgreSQL checks its own pages (contrib amcheck, pg_checksums): integrity is SQLite's check only.
        engine_checks = (("postgresql", postgresql_features), ("database writable", database_writable))
    else:
        path = Path(connection.settings_dict["NAME"])
        if not connection.is_in_memory_db() and not path.exists():
            # Connecting would create an empty file and hide the real problem.
            return [
                python_version(),
                Check(
                    "database file",
                    False,
                    f"{path} does not exist; run 'manage.py migrate' (or 'make run') to create it",
                ),
            ]
        engine_checks = (
            ("sqlite", sqlite_features),
            ("database writable", database_writable),
            ("integrity", integrity),
        )
    checks = []
    for name, check in (
        ("python", python_version),
        *engine_checks,
        ("schema", schema_current),
        ("index drift", index_in_step),
        ("embedder", embedder_matches),
        ("imports", unfinished_imports),
    ):
        try:
            result = check()
        except Exception as error:  # noqa: BLE001 - a check that cannot run is a failed check
            result = Check(name, False, f"could not run: {error}")
        checks.extend(result if isinstance(result, list) else [result])
    return checks
