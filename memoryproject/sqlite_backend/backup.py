"""Copies of a live database through SQLite's online backup API, and the lock that keeps a restore from a served file.

A file copy of a database in use can catch a transaction half-written, or miss what is still
in the write-ahead log. The backup API copies pages from one read transaction instead: the
copy is the database as of one instant, and in WAL mode the server's writers go on meanwhile.
The same API writes a restore into the database file, so SQLite keeps its WAL consistent.

A server holds a shared lock on ``<database>-serving`` for as long as it runs (the kernel
drops it when the process ends, however it ends); a restore takes it exclusively, so it
is refused while any server runs, and no server starts while it restores. On a read-only disk,
where the file is missing and cannot be made, a server runs without it: nothing can be restored there.
"""

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connections

from memoryproject.env import fail
from memoryproject.sqlite_backend.base import Database
from memoryproject.sqlite_backend.writelock import open_lock_file

# Tables whose rows a copy must hold as many of as the source did, and which its summary names.
COUNTED_TABLES = ("memories_memory", "memories_revision")
# How every SQLite database file starts.
SQLITE_MAGIC = b"SQLite format 3\x00"


class CopyFailed(Exception):
    """The copy could not be made, or does not pass its checks; the message says what to do."""


@dataclass(frozen=True)
class Copy:
    path: Path
    bytes: int
    seconds: float
    rows: dict[str, int]  # COUNTED_TABLES' rows in the copy


def _rows(connection) -> dict[str, int]:
    counts = {}
    for table in COUNTED_TABLES:
        # Names from the tuple above, not input.
        counts[table] = connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return counts


def count_rows(path: Path) -> dict[str, int]:
    """Return COUNTED_TABLES' rows in the database file at ``path``, read without writing to it."""
    try:
        connection = Database.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return _rows(connection)
        finally:
            connection.close()
    except Database.Error as error:
        raise CopyFailed(f"{path} cannot be read: {error}.") from None


def check_copy(path: Path) -> dict[str, int]:
    """Check a database file (integrity, foreign keys, the project's tables); return its counted rows.

    Raise CopyFailed naming the first problem.
    """
    try:
        connection = Database.connect(f"file:{path}?mode=ro", uri=True)
    except Database.Error as error:
        raise CopyFailed(f"{path} cannot be opened as a database: {error}.") from None
    try:
        # Reads every page and index, the full-text indexes' own checks included.
        problems = [row[0] for row in connection.execute("PRAGMA integrity_check").fetchall()]
        if problems != ["ok"]:
            raise CopyFailed(f"{path} fails SQLite's integrity check: {'; '.join(problems[:5])}.")
        orphans = connection.execute("PRAGMA foreign_key_check").fetchall()
        if orphans:
            raise CopyFailed(
                f"{path} has {len(orphans)} row(s) whose foreign keys point nowhere, first in {orphans[0][0]}."
            )
        try:
            return _rows(connection)
        except Database.OperationalError as error:
            raise CopyFailed(f"{path} is not a memory server's database ({error}).") from None
    except Database.DatabaseError as error:  # not a database at all
        raise CopyFailed(f"{path} cannot be read as a database: {error}.") from None
    finally:
        connection.close()


def not_a_backup(path: Path) -> str | None:
    """Say why the file at ``path`` is not a copy ``backup`` could have written; None when it could be one.

    A copy is a database with COUNTED_TABLES in rollback-journal mode. A server switches the file it opens to WAL
    mode, so a database in WAL mode is a store, not a copy.
    """
    try:
        with path.open("rb") as file:
            header = file.read(100)  # the database header
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        return "it is not a SQLite database"
    if header[18:20] != b"\x01\x01":  # the file format's read and write versions: 2 in WAL mode
        return "it is a database in WAL mode, as a server leaves the store it runs on"
    try:
        connection = Database.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            connection.close()
    except Database.Error as error:
        return f"it cannot be read as a database ({error})"
    if not set(COUNTED_TABLES) <= tables:
        return "it is not a memory server's database"
    return None


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _move_to_new_name(partial: Path, path: Path) -> None:
    """Give ``partial`` the name ``path``, raising FileExistsError rather than replacing a file there."""
    try:
        os.link(partial, path)  # fails if a file appeared at path meanwhile
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: a rename, after one more look
        if path.exists():
            raise FileExistsError(path) from None
        os.rename(partial, path)
    else:
        partial.unlink()


def backup(source, path: Path, *, overwrite: bool) -> Copy:
    """Copy the database behind ``source`` (a DB-API connection in autocommit) to ``path`` and check the copy.

    The copy is written beside ``path`` under a temporary name and takes ``path`` only once
    it has passed its checks; an existing ``path`` is replaced only when ``overwrite``, and only
    if it is an earlier copy (``not_a_backup``).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise CopyFailed(f"{path} already exists; backup does not overwrite a file unless given --force.")
    if path.is_dir():
        raise CopyFailed(f"{path} is a folder; give the path of the file to create.")
    if path.exists():
        reason = not_a_backup(path)
        if reason is not None:
            raise CopyFailed(
                f"{path} is not a backup ({reason}); even with --force, backup replaces only a backup "
                "it wrote. Move the file away or give another path."
            )
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        target = Database.connect(partial)
    except Database.Error as error:
        raise CopyFailed(f"Cannot create {partial}: {error}.") from None
    try:
        # One read transaction: the rows counted here and the pages copied are the same instant.
        source.execute("BEGIN")
        try:
            expected = _rows(source)
            source.backup(target)
        finally:
            source.execute("COMMIT")
        # One self-contained file: no -wal beside it to lose. A server sets WAL again when it opens it.
        target.execute("PRAGMA journal_mode = DELETE")
        target.close()
        seconds = time.monotonic() - started
        rows = check_copy(partial)
        if rows != expected:
            raise CopyFailed(f"The copy holds {rows} rows but the database held {expected}; nothing was kept.")
        _fsync(partial)
        if overwrite:
            os.replace(partial, path)
        else:
            _move_to_new_name(partial, path)
        _fsync(path.parent)
    except FileExistsError:
        raise CopyFailed(f"{path} already exists; backup does not overwrite a file unless given --force.") from None
    except OSError as error:
        raise CopyFailed(f"Cannot write {path}: {error.strerror}. Nothing was written there.") from None
    except Database.Error as error:
        raise CopyFailed(f"The backup failed: {error}. Nothing was written to {path}.") from None
    finally:
        target.close()
        partial.unlink(missing_ok=True)
    return Copy(path=path, bytes=path.stat().st_size, seconds=seconds, rows=rows)


class ServingLock:
    """The lock on ``<database>-serving``: shared by every running server, exclusive for a restore."""

    def __init__(self, database: Path):
        self.path = Path(f"{database}-serving")
        self.fd = None

    def _take(self, mode: int) -> bool | None:
        """Take it in ``mode``; False while another process holds it.

        None where the file is missing and cannot be made (a read-only disk).
        """
        if self.fd is None:
            self.fd = open_lock_file(self.path)
            if self.fd is None:
                return None
        try:
            fcntl.flock(self.fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def serve(self) -> bool:
        """Take it shared, for this process's life; False while a restore holds it.

        Where the file is missing and cannot be made (a read-only disk), a restore cannot take it either: True.
        """
        return self._take(fcntl.LOCK_SH) is not False

    def restore(self) -> bool:
        """Take it exclusively; False while any server holds it. Raise CopyFailed where its file cannot be made."""
        taken = self._take(fcntl.LOCK_EX)
        if taken is None:
            raise CopyFailed(
                f"Cannot create {self.path}: the database's folder cannot be written, so nothing can be "
                "restored into it. Make the folder writable (or remount its disk read-write), then retry."
            )
        return taken

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the lock
            self.fd = None


def restore(path: Path, database: Path) -> Copy:
    """Write the checked backup at ``path`` over ``database`` through the backup API; the caller holds the locks.

    Every page of ``database`` is replaced in one transaction: a restore that fails leaves it as it was.
    """
    expected = check_copy(path)
    started = time.monotonic()
    source = Database.connect(f"file:{path}?mode=ro", uri=True)
    target = None
    try:
        target = Database.connect(database, isolation_level=None)
        source.backup(target)
        problems = [row[0] for row in target.execute("PRAGMA quick_check").fetchall()]
        rows = _rows(target)
    except Database.Error as error:
        raise CopyFailed(f"The restore failed: {error}.") from None
    finally:
        source.close()
        if target is not None:
            target.close()
    if problems != ["ok"] or rows != expected:
        raise CopyFailed(
            f"The restored database does not match {path} ({'; '.join(problems[:5])}; {rows} rows, "
            f"expected {expected}). Run the restore again."
        )
    return Copy(path=Path(database), bytes=Path(database).stat().st_size, seconds=time.monotonic() - started, rows=rows)


_held: list[ServingLock] = []


def hold_while_serving(database) -> None:
    """Hold the serving lock of ``database`` (shared) for the rest of this process; stop it while a restore runs."""
    name = str(database)
    if connections[DEFAULT_DB_ALIAS].vendor != "sqlite":
        return  # PostgreSQL (MEMORY_DATABASE_URL): no file here, and restore is SQLite's
    if name == ":memory:" or name.startswith("file:") or not Path(name).parent.is_dir():
        return  # nothing a restore could replace
    lock = ServingLock(Path(name))
    if not lock.serve():
        fail(f"A restore is replacing {name}; start the server again once it has finished.")
    _held.append(lock)
