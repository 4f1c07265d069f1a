"""The audit (memories.selectors.audit): whether the store keeps each of its promises."""

from pydantic import Field

from memoryproject.records import Instant, Record


class AuditFinding(Record):
    """One check of the audit: whether the store keeps that promise, and if not where and how to fix it."""

    check: str = Field(
        description=("indexes, graph, embedder, states, tombstones, expired, imports or confidence (information only).")
    )
    ok: bool
    count: int = Field(description="How many rows (or problems) the finding is about; 0 when ok.")
    ids: list[int] = Field(description="The first ids concerned (memories for states, revisions otherwise).")
    detail: str
    fix: str = Field(description="The command that repairs it, when one does.")
    fixable: bool = Field(description="audit --fix repairs it (it only rebuilds derived rows from the history).")


class AuditReport(Record):
    """The whole audit at one time; ok when every check is."""

    at: Instant
    ok: bool
    findings: list[AuditFinding]
