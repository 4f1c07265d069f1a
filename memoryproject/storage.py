"""The database refusing a write for lack of room or of write access, in the words every door shows.

SQLite answers "database or disk is full" (SQLITE_FULL) when the file cannot grow and
"attempt to write a readonly database" (SQLITE_READONLY) when it cannot be written; the
transaction is rolled back either way, so nothing was partly written. "unable to open
database file" (SQLITE_CANTOPEN) is the same trouble met earlier, as a connection opens.
The project's SQLite backend raises them as domain errors (``refusal``), which REST answers
with 507 and 503, MCP as tool errors, the ``memory`` command as JSON errors and every other
command as one line (``memories.management.cli.ProjectCommand``), as every domain error. The
health probe's view of the same conditions is ``memories.health.database_state``.
"""

from django.db.utils import OperationalError

from memoryproject.exceptions import (
    Busy,
    MemoryServiceError,
    ReadOnlyStorage,
    StorageFull,
    Unavailable,
    Unreachable,
)

# SQLite's primary result codes (extended codes carry them in the low byte).
SQLITE_ERROR = 1
SQLITE_READONLY = 8
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14

FULL_MESSAGE = (
    "The database disk is full, so nothing was written. Free space on the disk that holds the "
    "database (or raise its size limit), then retry."
)
READ_ONLY_MESSAGE = (
    "The database is read-only, so nothing was written. Make the database file and its folder "
    "writable by the server (or remount its disk read-write), then retry."
)
# A WAL database cannot even be opened where its folder cannot be written (no -wal and -shm files can be made).
CANT_OPEN_MESSAGE = (
    "The database file cannot be opened, so nothing was read or written. Check that it exists and "
    "that the server can write it and its folder (or remount its disk read-write), then retry."
)

# A write the database refused whole for want of room or write access: about the database, not the data sent.
WRITE_REFUSALS = (StorageFull, ReadOnlyStorage)
# What a read writes on the side (a key's last use, a hook's telemetry row) is skipped on these, and on a lock
# that stayed busy: the read itself still answers.
SIDE_WRITE_SKIPPED = (*WRITE_REFUSALS, Busy)


def refusal(error: BaseException) -> MemoryServiceError | None:
    """The domain error for a driver error that says the database is full, read-only or cannot be opened, else None.

    Called on the driver's own exception (``sqlite_backend``'s error wrapper), before Django wraps it.
    """
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        code &= 0xFF
    if code in (None, SQLITE_ERROR):
        # Drivers without sqlite_errorcode, and virtual tables (sqlite-vec's) that report SQLite's failure as a
        # plain error ending with its message: SQLite's own fixed messages for these codes.
        text = str(error)
        code = (
            SQLITE_FULL
            if text.endswith("database or disk is full")
            else SQLITE_READONLY
            if text.endswith("readonly database")
            else SQLITE_CANTOPEN
            if text.endswith("unable to open database file")
            else None
        )
    if code == SQLITE_FULL:
        return DatabaseFull(FULL_MESSAGE)
    if code == SQLITE_READONLY:
        return DatabaseReadOnly(READ_ONLY_MESSAGE)
    if code == SQLITE_CANTOPEN:
        return DatabaseCannotOpen(CANT_OPEN_MESSAGE)
    return None


# Both a database error (Django's transaction handling treats them as one) and the domain error every door maps.
class DatabaseFull(OperationalError, StorageFull):
    pass


class DatabaseReadOnly(OperationalError, ReadOnlyStorage):
    pass


class DatabaseCannotOpen(OperationalError, Unavailable):
    pass


class DatabaseUnreachable(OperationalError, Unreachable):
    pass


class DatabaseLocked(OperationalError, Busy):
    """ "database is locked" after the busy timeout: a database error, and the domain error every door maps once."""


LOCKED_MESSAGE = (
    "The database is busy with other writes (an import, a purge --vacuum) and stayed locked for "
    "the whole busy timeout. Nothing was written; try again in a few seconds."
)
# One migrate waited in line for another on the same store (memories/management/commands/migrate.py) until it gave up.
MIGRATION_LOCKED_MESSAGE = (
    "Another migrate on this store held the migration lock for the whole wait, so this one "
    "applied nothing. Let it finish (or stop it if it hangs), then run migrate again."
)
