"""Domain errors. Every interface maps these once (HTTP JSON, MCP tool error, CommandError, admin message).

Messages are safe to show to an agent and say what to do next. They live in the project
package, below every app, because every app raises them (telemetry included, which
imports nothing of memories).
"""


def encodable(text: str) -> str:
    """Return ``text`` with any lone surrogate written as its escape (``\\ud800``), so it encodes as UTF-8.

    JSON's ``"\\ud800"`` parses to a string no UTF-8 writer accepts; a message that echoes
    one would fail while it is being sent.
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class MemoryServiceError(Exception):
    code = "error"
    # Seconds after which the same request may succeed (REST's Retry-After, MCP's): None when waiting will not help.
    retry_after_seconds: int | None = None

    def __init__(self, message: str, *, field: str | None = None):
        # Messages echo what a client sent: made safe here, once, for every door.
        message = encodable(message)
        super().__init__(message)
        self.message = message
        self.field = encodable(field) if field else field

    def as_dict(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        return error


class InvalidInput(MemoryServiceError):
    """A value is malformed, out of range or not allowed."""

    code = "invalid"


class TooLarge(InvalidInput):
    """A value or a batch is over a documented limit."""

    code = "too_large"


class NotAdmitted(InvalidInput):
    """A new memory's text is only a pleasantry or an acknowledgement (memories.admission)."""

    code = "not_admitted"


class NotFound(MemoryServiceError):
    code = "not_found"


class MemoryNotFound(NotFound):
    """No memory with this id (that the caller may see): the one wording every door sends.

    ``maybe_hidden``: the memory may exist but be hidden (expired, forgotten, another
    namespace), so the message says so. The hint names no door's own tool or endpoint.
    """

    def __init__(self, memory_id, *, maybe_hidden: bool = True):
        why = " — it may have expired or been forgotten" if maybe_hidden else ""
        super().__init__(f"Memory {memory_id} not found{why}. List or recall memories to find valid ids.", field="id")


class Conflict(MemoryServiceError):
    """The request is valid but clashes with the memory's current state."""

    code = "conflict"


class DuplicateContent(Conflict):
    """A change would make a memory's content identical to another visible memory."""

    code = "duplicate"

    def __init__(self, message: str, *, memory_id: int, field: str | None = "content"):
        super().__init__(message, field=field)
        self.memory_id = memory_id


class Unavailable(MemoryServiceError):
    """A part of the server the request needs cannot run here (for example, no embedding model)."""

    code = "unavailable"


class Unreachable(Unavailable):
    """No connection to the database server could be made (it is down or restarting, or refused this server's
    address, user or password); the message carries its reason. Nothing was read or written."""

    # A restart takes a few seconds; the server connects again on the first request after it.
    retry_after_seconds = 5


class StorageFull(MemoryServiceError):
    """The database could not grow (its disk, or its size limit, is full); the write was rolled back whole."""

    code = "storage_full"


class ReadOnlyStorage(Unavailable):
    """The database cannot be written (a read-only file, folder or mount); the write was rolled back whole."""

    code = "read_only"


class Busy(Unavailable):
    """The database stayed locked by other writers for the whole busy timeout (MEMORY_DB_BUSY_TIMEOUT)."""

    code = "busy"
    # What REST sends as Retry-After: long enough for a long write to finish, short for a client to wait.
    retry_after_seconds = 2


class RateLimited(MemoryServiceError):
    """Over an API key's reads or writes a minute (memories.ratelimit); nothing was done."""

    code = "throttled"

    def __init__(self, message: str, *, retry_after_seconds: int):
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds
