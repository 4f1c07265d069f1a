"""The database refusing a write for lack of room or of write access, in the words every door shows.

SQLite answers "database or disk is full" (SQLITE_FULL) when the file cannot grow and
"attempt to write a readonly database" (SQLITE_READONLY) when it cannot be written; the
transaction is rolled back either way, so nothing was partly written. "unable to open
database file" (SQLITE_CANTOPEN) is the same trouble met earlier, as a connection opens.
``storage_error`` turns those into domain errors, which REST answers with 507 and 503
(``api.exceptions``), MCP as tool errors (``mcp_api.tools``) and the CLI as JSON errors
(``manage.py memory``). The health probe's view of the same conditions is
``memories.health.database_state``.
"""

from django.db import DatabaseError

from memoryproject.exceptions import MemoryServiceError, ReadOnlyStorage, StorageFull, Unavailable

# SQLite's primary result codes (extended codes carry them in the low byte).
SQLITE_READONLY = 8
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14

FULL_MESSAGE = ("The database disk is full, so nothing was written. Free space on the disk that holds the "
                "database (or raise its size limit), then retry.")
READ_ONLY_MESSAGE = ("The database is read-only, so nothing was written. Make the database file and its folder "
                     "writable by the server (or remount its disk read-write), then retry.")
# A WAL database cannot even be opened where its folder cannot be written (no -wal and -shm files can be made).
CANT_OPEN_MESSAGE = ("The database file cannot be opened, so nothing was read or written. Check that it exists and "
                     "that the server can write it and its folder (or remount its disk read-write), then retry.")


def _sqlite_code(error: DatabaseError) -> int | None:
    """SQLite's primary result code of ``error`` (Django keeps the driver's exception as the cause), else None."""
    code = getattr(error.__cause__, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(error)  # drivers without sqlite_errorcode: SQLite's own fixed messages for these codes
    if "database or disk is full" in text:
        return SQLITE_FULL
    if "readonly database" in text:
        return SQLITE_READONLY
    if "unable to open database file" in text:
        return SQLITE_CANTOPEN
    return None


def storage_error(error: BaseException) -> MemoryServiceError | None:
    """Return the domain error for a write the database refused for lack of room or of write access, else None."""
    if not isinstance(error, DatabaseError):
        return None
    code = _sqlite_code(error)
    if code == SQLITE_FULL:
        return StorageFull(FULL_MESSAGE)
    if code == SQLITE_READONLY:
        return ReadOnlyStorage(READ_ONLY_MESSAGE)
    if code == SQLITE_CANTOPEN:
        return Unavailable(CANT_OPEN_MESSAGE)
    return None
