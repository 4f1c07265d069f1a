"""The audit: what the store promises about itself, checked whole, each finding with ids and its fix.

``manage.py audit`` (exit 1 on a problem; ``--fix`` repairs what is safe), MCP
``memory_audit``, REST ``audit/`` and the admin's audit page all read ``run_audit``.
``manage.py doctor`` runs the cheap part (``memories.health``); the audit reads every row
and both full-text indexes, seconds at 100k memories. A check's ``fix`` names the command
that repairs it; ``fixable`` ones are repaired by ``memories.services.audit.audit_fix``,
which only rebuilds derived rows from the revisions and never touches the history.
"""

import datetime as dt

from django.db.models import Exists, OuterRef, Q, Subquery

from knowledge.facts import fact_drift
from memories import health
from memories.models import Memory, Revision, State
from memories.records.audit_report import AuditFinding, AuditReport
from memories.selectors.memory_records import records_with_confidence
from memoryproject import dialect
from search.indexing import document_drift, index_drift
from search.vectors import vector_drift

# Ids listed per finding, at most; the count says how many there are.
IDS_SHOWN = 20
# Buckets of confidence the distribution reports, by their lower bound.
CONFIDENCE_BUCKETS = (0.0, 0.25, 0.5, 0.75)


def _finding(
    check: str,
    ids: list[int],
    *,
    problem: str,
    fine: str,
    fix: str = "",
    fixable: bool = False,
    count: int | None = None,
) -> AuditFinding:
    count = len(ids) if count is None else count
    return AuditFinding(
        check=check,
        ok=count == 0,
        count=count,
        ids=ids[:IDS_SHOWN],
        detail=problem.format(count=count) if count else fine,
        fix=fix if count else "",
        fixable=fixable and count > 0,
    )


def _lines(check: str, problems: list[str], *, fine: str, fix: str, fixable: bool) -> AuditFinding:
    return AuditFinding(
        check=check,
        ok=not problems,
        count=len(problems),
        ids=[],
        detail=" ".join(problems) or fine,
        fix=fix if problems else "",
        fixable=fixable and bool(problems),
    )


def tombstones_hiding_nothing() -> AuditFinding:
    """A tombstone hides a revision of its own memory, with text, learned before it; anything else hides nothing."""
    hidden = Revision.all_objects.filter(pk=OuterRef("hides_id"))
    wrong = Revision.all_objects.filter(tombstone=True).exclude(
        Exists(hidden.filter(memory_id=OuterRef("memory_id"), tombstone=False, known_at__lte=OuterRef("known_at")))
    )
    return _finding(
        "tombstones",
        list(wrong.order_by("pk").values_list("pk", flat=True)),
        problem="{count} tombstone revision(s) hide no earlier revision of their own memory (ids are "
        "revisions); the history is append-only, so erase the memory if the forget was wrong.",
        fine="every tombstone hides an earlier revision of its own memory",
    )


def memories_against_history():
    """Memories whose state the history contradicts: a memory is forgotten exactly when its newest revision (by
    known_at, id) is a tombstone. Annotated with ``newest_is_tombstone``."""
    newest = Revision.objects.filter(memory=OuterRef("pk")).latest_known().values("tombstone")[:1]
    return Memory.objects.annotate(newest_is_tombstone=Subquery(newest)).filter(
        Q(state=State.FORGOTTEN, newest_is_tombstone=False) | Q(state=State.ACTIVE, newest_is_tombstone=True)
    )


def states_against_history() -> AuditFinding:
    wrong = memories_against_history()
    return _finding(
        "states",
        list(wrong.order_by("pk").values_list("pk", flat=True)),
        problem="{count} memory(ies) have a state their history contradicts (forgotten without a "
        "tombstone last, or active with one).",
        fine="every memory's state follows its history",
        fix="manage.py audit --fix (sets each state from the history)",
        fixable=True,
    )


def search_indexes() -> AuditFinding:
    """Every revision with text once in each keyword channel and in the vectors, and nothing else there."""
    problems = index_drift(full=True) + document_drift() + vector_drift()
    return _lines(
        "indexes",
        problems,
        fine="the keyword indexes, postings and vectors match the revisions",
        fix="manage.py audit --fix (makes missing triggers again, rebuilds the full-text index, adds missing "
        "postings; vectors: manage.py backfill --reembed)",
        fixable=True,
    )


def vectors_embedder() -> AuditFinding:
    check = health.embedder_matches()
    return AuditFinding(
        check="embedder",
        ok=check.ok,
        count=0 if check.ok else 1,
        ids=[],
        detail=check.detail,
        fix="" if check.ok else "manage.py backfill --reembed",
        fixable=False,
    )


def graph_rows() -> AuditFinding:
    return _lines(
        "graph",
        fact_drift(),
        fine="the fact rows match the revisions' triples",
        fix="manage.py audit --fix (or manage.py reindex --graph)",
        fixable=True,
    )


def expired_rows(now: dt.datetime) -> AuditFinding:
    expired = Revision.objects.filter(expires_at__lte=now)
    return _finding(
        "expired",
        list(expired.order_by("expires_at", "pk").values_list("pk", flat=True)[:IDS_SHOWN]),
        count=expired.count(),
        problem="{count} revision(s) expired and wait for purge (ids are revisions); they are hidden "
        "now but still on disk.",
        fine="no expired revision waits for purge",
        fix="manage.py purge",
    )


def unfinished_imports() -> AuditFinding:
    check = health.unfinished_imports()
    return AuditFinding(
        check="imports",
        ok=check.ok,
        count=0 if check.ok else 1,
        ids=[],
        detail=check.detail,
        fix="" if check.ok else "manage.py purge",
        fixable=False,
    )


# Visible memories whose confidence is worked out per step of the audit's confidence finding.
_CONFIDENCE_CHUNK = 500


def _buckets(values) -> dict[str, int]:
    """How many of ``values`` (each 0..1, or None) fall in each quarter, and how many are None."""
    counts = {"unstated": 0, **{f"from {low:g}": 0 for low in CONFIDENCE_BUCKETS}}
    for value in values:
        if value is None:
            counts["unstated"] += 1
        else:
            low = max(low for low in CONFIDENCE_BUCKETS if value >= low)
            counts[f"from {low:g}"] += 1
    return counts


def confidence_distribution(now: dt.datetime) -> AuditFinding:
    """Information, never a problem: the confidence of the memories visible now (memories.confidence), and how
    sure the writers of their revisions said they were."""
    shown = list(Revision.objects.visible(as_of=now).order_by("pk").values_list("pk", "confidence"))
    computed = []
    for start in range(0, len(shown), _CONFIDENCE_CHUNK):
        records = records_with_confidence([pk for pk, _ in shown[start : start + _CONFIDENCE_CHUNK]], as_of=now)
        computed.extend(record.confidence for record in records.values())
    worked_out = ", ".join(f"{value} {name}" for name, value in _buckets(computed).items() if name != "unstated")
    stated = ", ".join(f"{value} {name}" for name, value in _buckets(value for _, value in shown).items())
    return AuditFinding(
        check="confidence",
        ok=True,
        count=0,
        ids=[],
        detail=f"confidence of the memories visible now: {worked_out}; stated confidence of their revisions: {stated}",
        fix="",
        fixable=False,
    )


def run_audit() -> AuditReport:
    """Every check, problems first in the order an operator fixes them: derived rows, then the history's own."""
    now = dialect.now()
    findings = [
        search_indexes(),
        graph_rows(),
        vectors_embedder(),
        states_against_history(),
        tombstones_hiding_nothing(),
        expired_rows(now),
        unfinished_imports(),
        confidence_distribution(now),
    ]
    return AuditReport(at=now, ok=all(finding.ok for finding in findings), findings=findings)
