"""DatabaseWrapper: Django's SQLite backend plus sqlite-vec and durable, concurrent pragmas."""

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import sqlite_vec
from django.conf import settings
from django.db.backends.sqlite3 import base as sqlite3_base
from django.db.utils import DatabaseErrorWrapper, OperationalError
from django.utils.functional import cached_property

from memoryproject import metrics
from memoryproject.exceptions import Busy
from memoryproject.sqlite_backend.writelock import WriteLock, open_lock_file
from memoryproject.storage import LOCKED_MESSAGE, MIGRATION_LOCKED_MESSAGE, DatabaseLocked, refusal

Database = sqlite3_base.Database
# SQLite's result code when the busy timeout ran out with the database still locked.
_SQLITE_BUSY = 5
# How often a migrate retries the migration lock that another holds: migrations take seconds, not milliseconds.
_MIGRATION_LOCK_RETRY_SECONDS = 0.05

# Pragmas set on every new connection, and why:
CONNECTION_PRAGMAS = (
    # Readers never block the writer and the writer never blocks readers.
    "PRAGMA journal_mode = WAL",
    # In WAL mode NORMAL is durable across application crashes; only a power
    # loss can drop the last transactions, never corrupt the file.
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    # Freed pages are zeroed, so erased text does not linger in the file.
    "PRAGMA secure_delete = ON",
)


def is_lock_timeout(error: BaseException) -> bool:
    """Whether ``error`` is SQLite giving up on a lock after the busy timeout."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == _SQLITE_BUSY
    return str(error).startswith("database is locked")


def _unwritable_without_wal(path: Path) -> bool:
    """Whether the database file at ``path`` sits in a folder this process cannot write, with no -wal beside it."""
    return path.is_file() and not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists()


class _ErrorWrapper(DatabaseErrorWrapper):
    """Django's wrapper of driver errors, turning a lock timeout, a full disk and a read-only or unopenable
    database into errors that are both database errors and domain errors (what every door maps)."""

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is not None and issubclass(exc_type, Database.Error):
            refused = None
            if issubclass(exc_type, Database.OperationalError):
                refused = DatabaseLocked(LOCKED_MESSAGE) if is_lock_timeout(exc_value) else refusal(exc_value)
            metrics.count_database_error(Database, exc_type, refused)
            if refused is not None:
                self.wrapper.errors_occurred = True
                raise refused from exc_value
        return super().__exit__(exc_type, exc_value, traceback)


class DatabaseWrapper(sqlite3_base.DatabaseWrapper):
    """Django's SQLite wrapper; a transaction waits in line for the write lock (``writelock``) before BEGIN."""

    # None for an in-memory database (tests): no other process can share it.
    write_lock = None

    def _start_transaction_under_autocommit(self):
        if self.write_lock is not None:
            started = time.perf_counter()
            try:
                waited = self.write_lock.acquire()
            except OperationalError as error:  # waited the whole busy timeout in line
                metrics.WRITE_LOCK_TIMEOUTS.inc()
                metrics.DATABASE_ERRORS.labels(kind="busy").inc()
                raise DatabaseLocked(LOCKED_MESSAGE) from error
            metrics.WRITE_LOCK_WAIT_SECONDS.observe(time.perf_counter() - started)
            if waited:
                metrics.WRITE_LOCK_CONTENDED.inc()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_write_lock()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_write_lock()

    def _close(self):
        try:
            return super()._close()
        finally:
            if self.write_lock is not None:
                self.write_lock.close()
                self.write_lock = None

    def _release_write_lock(self):
        if self.write_lock is not None:
            self.write_lock.release()

    @cached_property
    def wrap_database_errors(self):
        return _ErrorWrapper(self)

    @contextlib.contextmanager
    def migration_lock(self, *, timeout: float, on_wait: Callable[[], None]) -> Iterator[None]:
        """Hold the store's migration lock while the block runs; call ``on_wait`` once if another migrate holds it.

        An ``flock`` on ``<database>-migratelock``, a file of its own: the write lock is taken by every migration
        inside, so the two cannot be one. Raise ``Busy`` after ``timeout`` seconds in line. An in-memory database
        has no other process to keep out, and where no lock file can be made (a read-only disk) migrate can write
        nothing either: both run without the lock.
        """
        fd = None if self.is_in_memory_db() else open_lock_file(f"{self.settings_dict['NAME']}-migratelock")
        if fd is None:
            yield
            return
        try:  # closing the file releases the lock, as the kernel does when a migrate dies
            deadline = time.monotonic() + timeout
            waited = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise Busy(MIGRATION_LOCKED_MESSAGE) from None
                    if not waited:
                        on_wait()
                        waited = True
                    time.sleep(_MIGRATION_LOCK_RETRY_SECONDS)
            yield
        finally:
            os.close(fd)

    def get_connection_params(self):
        params = super().get_connection_params()
        name = str(params["database"])
        if not self.is_in_memory_db() and not name.startswith("file:") and _unwritable_without_wal(Path(name)):
            # SQLite opens a WAL database only where it finds or can make the -wal and -shm files beside it. In a folder
            # it cannot write (a read-only mount) with no -wal there, the file alone holds every commit: opened as
            # immutable it answers reads, and a write fails as read-only. Nothing may write the file meanwhile.
            params["database"] = f"file:{quote(name)}?immutable=1"
        return params

    def get_new_connection(self, conn_params):
        conn = super().get_new_connection(conn_params)
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        timeout = float(conn_params.get("timeout", 5))
        timeout_ms = int(timeout * 1000)
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms:d}")
        for pragma in CONNECTION_PRAGMAS:
            conn.execute(pragma)
        # Reads through a memory map (settings.MEMORY_DB_MMAP_MB): no read() call or copy per page.
        conn.execute(f"PRAGMA mmap_size = {int(settings.MEMORY_DB_MMAP_MB) * 2**20:d}")
        if self.write_lock is not None:
            self.write_lock.close()
        # The lock file sits beside the database, like SQLite's own -wal and -shm.
        in_memory = self.is_in_memory_db()
        self.write_lock = None if in_memory else WriteLock(f"{self.settings_dict['NAME']}-writelock", timeout=timeout)
        return conn
