"""A term's postings are kept per namespace: the key is the memory's namespace, "\\x1f", then the term.

Reading a term for one namespace then costs the same whatever other namespaces hold
(a query's timing must not tell one tenant what another stores). Each packed row is
split by the namespace of its revisions (their order kept, segments numbered anew per
key); tail rows get their namespace in front. Going back joins each term's rows again.
"""

from collections import defaultdict

import numpy as np
from django.db import migrations

from memoryproject.migration_ops import RANDOM_BIGINT

SEPARATOR = "\x1f"
# PostgreSQL's words for SQLite's functions used below, replaced in this order.
POSTGRESQL = {"instr(term, char(31))": "strpos(term, chr(31))", "char(31)": "chr(31)", "random()": RANDOM_BIGINT}


def _sql(cursor, sql: str) -> str:
    """``sql`` as written for SQLite, or in PostgreSQL's words."""
    if cursor.db.vendor == "postgresql":
        for sqlite, postgresql in POSTGRESQL.items():
            sql = sql.replace(sqlite, postgresql)
    return sql


def _namespaces(cursor) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Revision ids ascending, the namespace code of each, and the namespace names."""
    cursor.execute(
        "SELECT r.id, m.namespace FROM memories_revision r JOIN memories_memory m ON m.id = r.memory_id ORDER BY r.id"
    )
    rows = cursor.fetchall()
    names = sorted({namespace for _, namespace in rows})
    code = {name: number for number, name in enumerate(names)}
    ids = np.array([row[0] for row in rows], dtype=np.int64)
    codes = np.array([code[row[1]] for row in rows], dtype=np.int64)
    return ids, codes, names


def forward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        ids, codes, names = _namespaces(cursor)
        cursor.execute("SELECT term, revision_ids, tfs FROM search_posting ORDER BY term, segment")
        packed = cursor.fetchall()
        rows, segments = [], defaultdict(int)
        for term, revision_ids, tfs in packed:
            held = np.frombuffer(revision_ids, dtype="<u4").astype(np.int64)
            counts = np.frombuffer(tfs, dtype="<u2")
            at = np.minimum(np.searchsorted(ids, held), max(len(ids) - 1, 0))
            known = (ids[at] == held) if len(ids) else np.zeros(len(held), dtype=bool)
            owner = np.where(known, codes[at] if len(ids) else -1, -1)
            for number in np.unique(owner[owner >= 0]).tolist():
                mine = owner == number
                key = names[number] + SEPARATOR + term
                rows.append((key, segments[key], held[mine].astype("<u4").tobytes(), counts[mine].tobytes()))
                segments[key] += 1
        cursor.execute("DELETE FROM search_posting")
        cursor.executemany(
            "INSERT INTO search_posting (term, segment, revision_ids, tfs) VALUES (%s, %s, %s, %s)", rows
        )
        cursor.execute(
            _sql(
                cursor,
                "UPDATE search_posting_tail SET term = (SELECT m.namespace FROM memories_revision r JOIN memories_memory m "
                "ON m.id = r.memory_id WHERE r.id = search_posting_tail.revision_id) || char(31) || term",
            )
        )
        cursor.execute(_sql(cursor, "UPDATE search_state SET packed_version = random() WHERE id = 1"))


def backward(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT term, revision_ids, tfs FROM search_posting")
        joined = defaultdict(list)
        for key, revision_ids, tfs in cursor.fetchall():
            joined[key.split(SEPARATOR, 1)[1]].append(
                (np.frombuffer(revision_ids, dtype="<u4"), np.frombuffer(tfs, dtype="<u2"))
            )
        rows = []
        for term, parts in joined.items():
            held = np.concatenate([part[0] for part in parts])
            counts = np.concatenate([part[1] for part in parts])
            order = np.argsort(held, kind="stable")
            rows.append((term, 0, held[order].tobytes(), counts[order].tobytes()))
        cursor.execute("DELETE FROM search_posting")
        cursor.executemany(
            "INSERT INTO search_posting (term, segment, revision_ids, tfs) VALUES (%s, %s, %s, %s)", rows
        )
        cursor.execute(_sql(cursor, "UPDATE search_posting_tail SET term = substr(term, instr(term, char(31)) + 1)"))
        cursor.execute(_sql(cursor, "UPDATE search_state SET packed_version = random() WHERE id = 1"))


class Migration(migrations.Migration):
    dependencies = [("search", "0005_posting_segments")]

    operations = [migrations.RunPython(forward, backward)]
