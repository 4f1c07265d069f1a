"""The database refusing a write for lack of room or of write access, in the words every door shows.

SQLite answers "database or disk is full" (SQLITE_FULL) when the file cannot grow and
"attempt to write a readonly database" (SQLITE_READONLY) when it cannot be written; the
transaction is rolled back either way, so nothing was partly written. ``storage_error``
turns those into domain errors, which REST answers with 507 and 503 (``api.exceptions``),
MCP as tool errors (``mcp_api.tools``) and the CLI as JSON errors (``manage.py memory``).
The health probe's view of the same conditions is ``memories.health.database_state``.
"""

from django.db import DatabaseError

from memoryproject.exceptions import MemoryServiceError, ReadOnlyStorage, StorageFull

# SQLite's primary result codes (extended codes carry them in the low byte).
SQLITE_READONLY = 8
SQLITE_FULL = 13

FULL_MESSAGE = ("The database disk is full, so nothing was written. Free space on the disk that holds the "
                "database (or raise its size limit), then retry.")
READ_ONLY_MESSAGE = ("The database is read-only, so nothing was written. Make the database file and its folder "
                     "writable by the server (or remount its disk read-write), then retry.")


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
    return None
