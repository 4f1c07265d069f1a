"""What an import did, and the document export writes and import reads."""

from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from memoryproject.records import InstantText, Record


class ImportReport(Record):
    created: int = 0
    revised: int = 0
    unchanged: int = 0
    duplicates: int = 0
    forgotten: int = 0
    skipped: int = 0
    errors: SkipJsonSchema[list[str]] = Field(default_factory=list, exclude=True)


class ImportResult(ImportReport):
    """What an import did, and how it was asked for."""

    trusted: bool
    dry_run: bool = Field(description="True: nothing was written.")


# Only a description: memories.services.export writes the document, and memories.services.imports reads it.
class ExportDocument(BaseModel):
    """The export format: every memory with its full history; import takes the same document."""

    format: str | None = Field(None, description="The format's name, which import checks.")
    version: int | None = None
    exported_at: InstantText | None = None
    as_of: InstantText | None = None
    namespace: str | None = None
    memories: list[dict[str, Any]] = Field(
        description=("Each memory: namespace, key, kind, tags, state, created_at, and revisions oldest first.")
    )
