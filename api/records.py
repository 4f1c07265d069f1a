"""Records only REST sends: the health probes and the error body (the shape every error takes)."""

from typing import Literal

from pydantic import Field

from memoryproject.records import OmittedWhenEmpty, Record


class EmbedderHealth(Record):
    name: str
    device: str
    available: bool


class Health(Record):
    status: Literal["ok", "degraded"]
    version: str = Field(description="The server's version.")
    api_version: str = Field(description="The REST API version (the /api/v1/ in every path).")
    database: Literal["ok", "error", "read-only", "full"] = Field(
        description=(
            "ok; error: it cannot be read; read-only or full: it can be read, but writes would be refused now."
        )
    )
    database_engine: str = Field(
        description=(
            "The engine, with its version to an API key with the admin scope, e.g. 'postgresql 15.18' (without "
            "one: 'postgresql'); the engine alone when the database cannot be read."
        )
    )
    search_mode: str
    embedder: EmbedderHealth
    uptime_seconds: int


class Liveness(Record):
    status: str = Field(description="Always ok: the process answers. The database is not asked.")
    version: str = Field(description="The version of the server that answered (as health/ gives it).")


class Readiness(Record):
    status: Literal["ready", "not_ready"]
    database: Literal["ok", "error"] = Field(description="ok: it answered; error: it cannot be reached or read.")
    unapplied_migrations: list[str] = Field(
        description="Migrations of this server's code the database has not applied ('app.name'): the schema is "
        "behind the code until 'manage.py migrate' runs."
    )
    message: OmittedWhenEmpty[str] = Field(default=None, description="Why the server is not ready, when it is not.")


class ErrorDetail(Record):
    code: str = Field(
        description="invalid, too_large, unauthenticated, forbidden, not_found, conflict, duplicate, "
        "parse_error, method_not_allowed, unsupported_media_type, throttled, unavailable, "
        "read_only, storage_full, internal."
    )
    message: str = Field(description="What went wrong and what to do, safe to show an agent.")
    field: OmittedWhenEmpty[str] = Field(None, description="The field or parameter at fault.")
    memory_id: OmittedWhenEmpty[int] = Field(
        None, description=("With duplicate: the memory that already holds the content.")
    )


class ErrorResponse(Record):
    error: ErrorDetail
