"""The fact rows: each revision's triple in normal form, kept in step with the revisions.

Memories' services call ``record_facts`` in the transaction that appends revisions and
``delete_facts`` before revisions are deleted (erasure, purge, a dead import's removal),
so the rows never outlive the text they came from. ``rebuild_facts`` derives them all
again from the revisions (``manage.py reindex --graph``) and ``fact_drift`` says where
the stored rows differ from what a rebuild would give.
"""

from django.db import connection, transaction

from knowledge.models import Fact
from knowledge.names import entity_name, predicate_name

# Rows per INSERT and per read of the revisions when rebuilding.
_CHUNK = 5000


def fact_row(revision_id: int, memory_id: int, subject: str, predicate: str, object_: str) -> tuple | None:
    """The fact row (revision id, memory id, subject, predicate, object) of a revision with this triple, or None.

    A revision carries a triple when all three parts name something after normalising
    (a tombstone's parts are empty); a part that normalises to nothing names no entity.
    """
    row = (
        revision_id,
        memory_id,
        entity_name(subject or ""),
        predicate_name(predicate or ""),
        entity_name(object_ or ""),
    )
    return row if all(row[2:]) else None


def _insert(rows: list[tuple]) -> None:
    with connection.cursor() as cursor:
        # One prepared statement for every row; the table's indexes follow.
        cursor.executemany(
            "INSERT INTO knowledge_fact (revision_id, memory_id, subject, predicate, object) "
            "VALUES (%s, %s, %s, %s, %s)",
            rows,
        )


def record_facts(revisions) -> None:
    """Write the fact rows of new revisions, in the caller's transaction.

    ``revisions``: (id, memory id, subject, predicate, object) of each new revision;
    those without a triple are skipped.
    """
    rows = [row for row in (fact_row(*revision) for revision in revisions) if row is not None]
    if rows:
        _insert(rows)


def delete_facts(revision_ids) -> None:
    """Delete the fact rows of these revisions (called before the revisions themselves are deleted)."""
    revision_ids = list(revision_ids)
    for start in range(0, len(revision_ids), _CHUNK):
        Fact.objects.filter(revision_id__in=revision_ids[start : start + _CHUNK]).delete()


def _derived_rows():
    """Every fact row the revisions give, in revision id order, read in chunks."""
    after = 0
    with connection.cursor() as cursor:
        while True:
            # The revisions' primary key orders and bounds each chunk; tombstones carry no triple.
            cursor.execute(
                "SELECT id, memory_id, subject, predicate, object FROM memories_revision "
                "WHERE id > %s AND tombstone = %s AND subject <> '' ORDER BY id LIMIT %s",
                [after, False, _CHUNK],
            )
            chunk = cursor.fetchall()
            if not chunk:
                return
            after = chunk[-1][0]
            for revision in chunk:
                row = fact_row(*revision)
                if row is not None:
                    yield row


def rebuild_facts() -> int:
    """Drop every fact row and derive them again from the revisions, in one transaction; return the count."""
    count = 0
    with transaction.atomic():
        Fact.objects.all().delete()
        chunk = []
        for row in _derived_rows():
            chunk.append(row)
            if len(chunk) == _CHUNK:
                _insert(chunk)
                count, chunk = count + len(chunk), []
        _insert(chunk)
        count += len(chunk)
    return count


# Lines fact_drift reports per kind of difference, at most.
_DRIFT_SHOWN = 5


def fact_drift() -> list[str]:
    """Return one line per kind of disagreement between the stored fact rows and a rebuild; empty when in step.

    Reads every revision with a triple and every fact row (an audit's work, not a request's).
    """
    derived = {row[0]: row for row in _derived_rows()}
    stored = {
        key[0]: key
        for key in Fact.objects.values_list("revision_id", "memory_id", "subject", "predicate", "object").iterator(
            chunk_size=_CHUNK
        )
    }
    missing = sorted(set(derived) - set(stored))
    extra = sorted(set(stored) - set(derived))
    different = sorted(pk for pk in set(derived) & set(stored) if derived[pk] != stored[pk])
    problems = []
    for ids, what in (
        (missing, "have a triple but no fact row"),
        (extra, "have a fact row but no triple (or no longer exist)"),
        (different, "have a fact row that differs from their triple"),
    ):
        if ids:
            shown = ", ".join(str(pk) for pk in ids[:_DRIFT_SHOWN]) + (", ..." if len(ids) > _DRIFT_SHOWN else "")
            problems.append(
                f"facts: {len(ids)} revisions {what} (revision {shown}); rebuild them with 'manage.py reindex --graph'."
            )
    return problems
