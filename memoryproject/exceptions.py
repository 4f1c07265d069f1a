"""Domain errors. Every interface maps these once (HTTP JSON, MCP tool error, CommandError, admin message).

Messages are safe to show to an agent and say what to do next. They live in the project
package, below every app, because every app raises them (telemetry included, which
imports nothing of memories).
"""


class MemoryServiceError(Exception):
    code = "error"

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

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


class NotFound(MemoryServiceError):
    code = "not_found"


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


class Busy(Unavailable):
    """The database stayed locked by other writers for the whole busy timeout (MEMORY_DB_BUSY_TIMEOUT)."""

    code = "busy"
    # What REST sends as Retry-After: long enough for a long write to finish, short for a client to wait.
    retry_after_seconds = 2
