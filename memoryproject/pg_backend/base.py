"""DatabaseWrapper: Django's PostgreSQL backend (psycopg 3) with the server's write lock and domain errors.

Every atomic block's transaction starts by taking one transaction-level advisory lock, as
every SQLite transaction starts with the write lock and BEGIN IMMEDIATE: writers run one at
a time, so ids are committed in id order (pollers of ``id > last seen`` skip nothing) and a
clock read under the lock follows commit order, for every server sharing the database.
PostgreSQL releases the lock after the commit is visible and queues waiters first come,
first served. The wait is bounded by ``lock_timeout`` (MEMORY_DB_BUSY_TIMEOUT, set in the
connection's options by settings.py).

A ``schema`` in MEMORY_DATABASE_URL (SCHEMA here) is a store of its own: migrate creates
it, every connection's search path is it alone (settings.py), and its write and migration
locks are its own.
"""

import contextlib
import re
import time
import zlib
from collections.abc import Callable, Iterator

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base as postgresql_base
from django.db.utils import DatabaseErrorWrapper
from django.utils.functional import cached_property
from psycopg_pool import PoolTimeout

from memoryproject import metrics
from memoryproject.exceptions import Busy
from memoryproject.pg_backend.pool import ConnectionPool
from memoryproject.storage import (
    FULL_MESSAGE,
    LOCKED_MESSAGE,
    MIGRATION_LOCKED_MESSAGE,
    DatabaseFull,
    DatabaseLocked,
    DatabaseReadOnly,
    DatabaseUnreachable,
)

Database = postgresql_base.Database
# The advisory lock's key: any constant, the same in every server ("memorywl" in ASCII). Keys are per database.
WRITE_LOCK_KEY = 0x6D656D6F7279776C
# The migration lock's ("migrlock"): its high 32 bits differ from the write lock's, and a schema's crc32 changes only
# the low 32, so the two keys never meet, whatever the schemas.
MIGRATION_LOCK_KEY = 0x6D6967726C6F636B

# The server went away in the middle of a request (it stopped, restarted or ended the session).
LOST_MESSAGE = (
    "The connection to the database was lost (PostgreSQL stopped or restarted), so the request was not "
    "completed and any write in it was rolled back. Retry in a few seconds."
)
READ_ONLY_MESSAGE = (
    "The database is read-only (a standby, or default_transaction_read_only), so nothing was "
    "written. Point MEMORY_DATABASE_URL at the primary (or make the database writable), then retry."
)
POOL_BUSY_MESSAGE = (
    "Every database connection of this server process stayed in use for the whole busy timeout, so "
    "nothing was read or written. Try again in a few seconds; if it recurs, raise "
    "MEMORY_DB_POOL_SIZE (within the database's max_connections)."
)


# What libpq puts before its reason: where it tried, which a client need not learn (doctor shows it to the operator).
_WHERE_TRIED = re.compile(
    r"^(connection failed: )?connection to server "
    r'(at "[^"]*"( \([^)]*\))?, port \d+|on socket "[^"]*") failed: (FATAL: )?'
)


def cannot_connect(error: BaseException) -> DatabaseUnreachable:
    """The domain error for a connection that could not be made, with libpq's reason (which never holds the
    password): refused, timed out, no such user or database, password authentication failed, too many clients."""
    reason = _WHERE_TRIED.sub("", " ".join(str(error).split("\n", 1)[0].split()))
    return DatabaseUnreachable(
        f"Cannot connect to the database: {reason[:300]}. Nothing was read or written. Check that PostgreSQL is "
        "running and accepts this server's connections, and the host, port, user, password and database name in "
        "MEMORY_DATABASE_URL; then retry."
    )


def refusal(error: BaseException, *, connected: bool) -> Exception | None:
    """The domain error for a psycopg error that says busy, full, read-only or unreachable, else None."""
    state = getattr(error, "sqlstate", None) or ""
    if isinstance(error, PoolTimeout):  # no connection of the pool came free within the busy timeout
        return DatabaseLocked(POOL_BUSY_MESSAGE)
    if state == "55P03":  # lock_not_available: lock_timeout ran out
        return DatabaseLocked(LOCKED_MESSAGE)
    if state == "53100":  # disk_full
        return DatabaseFull(FULL_MESSAGE)
    if state == "25006":  # read_only_sql_transaction
        return DatabaseReadOnly(READ_ONLY_MESSAGE)
    if not connected and isinstance(error, Database.OperationalError):  # a connect that failed, for any reason
        return cannot_connect(error)
    # Connection exceptions (class 08), the server shutting down or starting (57P01-57P03).
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return DatabaseUnreachable(LOST_MESSAGE)
    return None


class _ErrorWrapper(DatabaseErrorWrapper):
    """Django's wrapper of driver errors, turning a lock timeout, a full disk, a read-only or unreachable database
    into errors that are both database errors and domain errors (what every door maps)."""

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_type is not None and issubclass(exc_type, Database.Error):
            refused = refusal(exc_value, connected=self.wrapper.connection is not None)
            metrics.count_database_error(Database, exc_type, refused)
            if refused is not None:
                self.wrapper.errors_occurred = True
                raise refused from exc_value
        return super().__exit__(exc_type, exc_value, traceback)


class DatabaseWrapper(postgresql_base.DatabaseWrapper):
    """Django's PostgreSQL wrapper; an atomic block's transaction first waits in line for the write lock."""

    def _start_transaction_under_autocommit(self):
        # Django calls this (instead of turning autocommit off) when an outermost atomic block starts.
        started = time.perf_counter()
        self._set_autocommit(False)
        try:
            with self.wrap_database_errors, self.connection.cursor() as cursor:
                # The transaction begins with this statement, so nothing in it ran before the lock was held.
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", (self.write_lock_key,))
                if not cursor.fetchone()[0]:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (self.write_lock_key,))
                    # Counted once it waited and got the lock, as on SQLite: a wait that timed out is a timeout.
                    metrics.WRITE_LOCK_CONTENDED.inc()
        except BaseException as error:
            if isinstance(error, DatabaseLocked):
                metrics.WRITE_LOCK_TIMEOUTS.inc()
            # Back to autocommit, as before the block: Django still takes the connection to be in it.
            with contextlib.suppress(Database.Error):  # a broken connection is closed by Django before reuse
                self.connection.rollback()
                self.connection.autocommit = True
            raise
        metrics.WRITE_LOCK_WAIT_SECONDS.observe(time.perf_counter() - started)

    @cached_property
    def write_lock_key(self) -> int:
        return self._store_key(WRITE_LOCK_KEY)

    @cached_property
    def migration_lock_key(self) -> int:
        return self._store_key(MIGRATION_LOCK_KEY)

    def _store_key(self, constant: int) -> int:
        """An advisory lock's key: the constant, or for a store in a schema (beside others) a key of its own."""
        schema = self.settings_dict.get("SCHEMA")
        return constant ^ zlib.crc32(schema.encode()) if schema else constant

    @contextlib.contextmanager
    def migration_lock(self, *, timeout: float, on_wait: Callable[[], None]) -> Iterator[None]:
        """Hold the store's migration lock while the block runs; call ``on_wait`` once if another migrate holds it.

        A session-level advisory lock, on a connection of its own: Django's may be closed, or given back to a pool
        still holding a session's locks, while migrations run. Closing it releases the lock, as the server does
        when a migrate dies. Raise ``Busy`` after ``timeout`` seconds in line.
        """
        try:
            session = Database.connect(**self.get_connection_params(), autocommit=True)
        except Database.OperationalError as error:
            raise cannot_connect(error) from error
        with session:
            if not session.execute("SELECT pg_try_advisory_lock(%s)", [self.migration_lock_key]).fetchone()[0]:
                on_wait()
                # The connection's lock_timeout is the busy timeout, for writes; a migration may take minutes.
                session.execute("SELECT set_config('lock_timeout', %s, false)", [str(int(timeout * 1000))])
                try:
                    session.execute("SELECT pg_advisory_lock(%s)", [self.migration_lock_key])
                except Database.errors.LockNotAvailable:
                    raise Busy(MIGRATION_LOCKED_MESSAGE) from None
            yield

    def prepare_database(self):
        """Before migrate: create the URL's schema when it is missing (CREATE on the database needed only then)."""
        super().prepare_database()
        schema = self.settings_dict.get("SCHEMA")
        if schema:
            with self.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema])
                if cursor.fetchone() is None:
                    cursor.execute(f"CREATE SCHEMA {schema}")  # a plain name: checked by memoryproject.env

    @property
    def pool(self) -> ConnectionPool | None:
        """This process's pool for the alias (``memoryproject.pg_backend.pool``'s, not psycopg_pool's), or None."""
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        if self.alias not in self._connection_pools:
            # As Django makes its own: opened on first use, each connection set up as Django sets one up.
            pool = ConnectionPool(
                kwargs={**self.get_connection_params(), "autocommit": True},
                open=False,
                configure=self._configure_connection,
                check=self.settings_dict["CONN_HEALTH_CHECKS"],
                **({} if options is True else options),
            )
            self._connection_pools.setdefault(self.alias, pool)  # of two threads making one at once, the first wins
        return self._connection_pools[self.alias]

    @cached_property
    def wrap_database_errors(self):
        return _ErrorWrapper(self)

    def is_in_memory_db(self):
        """Never: callers that handle SQLite's in-memory test database ask every backend."""
        return False
