"""Packed postings in segments, so a fold writes the new ids instead of each touched term's whole row.

A term's ids were one row, rewritten whole by every fold that touched the term: at 1M
memories, where common terms hold hundreds of thousands of ids, a fold took 1.0-3.6 s
under the write lock. Now a term has one or more rows (``segment`` 0, 1, ...), each
holding ascending ids, every id of a segment above every id of the segments before it;
``postings._fold`` appends a segment and merges the last ones only while they are small
beside the new one, so a term keeps a few segments, each more than twice the size of the
next. Existing rows become segment 0; going back joins each term's segments in order.
"""

from django.db import migrations

FORWARD = [
    # A rowid table with its key in an index, no longer WITHOUT ROWID: there the key and
    # the blobs shared one b-tree, and a seek compared whole records, overflow pages and all.
    """CREATE TABLE search_posting_segmented (
        id INTEGER PRIMARY KEY,
        term TEXT NOT NULL,
        segment INTEGER NOT NULL,
        revision_ids BLOB NOT NULL,
        tfs BLOB NOT NULL
    )""",
    "INSERT INTO search_posting_segmented (term, segment, revision_ids, tfs) "
    "SELECT term, 0, revision_ids, tfs FROM search_posting ORDER BY term",
    "DROP TABLE search_posting",
    "ALTER TABLE search_posting_segmented RENAME TO search_posting",
    "CREATE UNIQUE INDEX search_posting_term_segment ON search_posting (term, segment)",
    # The same postings, but a new value: no process's copy outlives a change of the table (0004).
    "UPDATE search_state SET packed_version = random() WHERE id = 1",
]


def join_segments(apps, schema_editor):
    """Back to one row per term: each term's segments joined in order (their ids ascend across them)."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("""CREATE TABLE search_posting_joined (
            term TEXT PRIMARY KEY,
            revision_ids BLOB NOT NULL,
            tfs BLOB NOT NULL
        ) WITHOUT ROWID""")
        cursor.execute("SELECT term, revision_ids, tfs FROM search_posting ORDER BY term, segment")
        joined: dict[str, tuple[list[bytes], list[bytes]]] = {}
        for term, ids, tfs in cursor.fetchall():
            parts = joined.setdefault(term, ([], []))
            parts[0].append(bytes(ids))
            parts[1].append(bytes(tfs))
        cursor.executemany("INSERT INTO search_posting_joined (term, revision_ids, tfs) VALUES (%s, %s, %s)",
                           [(term, b"".join(ids), b"".join(tfs)) for term, (ids, tfs) in joined.items()])
        cursor.execute("DROP TABLE search_posting")  # its index goes with it
        cursor.execute("ALTER TABLE search_posting_joined RENAME TO search_posting")
        cursor.execute("UPDATE search_state SET packed_version = random() WHERE id = 1")


class Migration(migrations.Migration):
    dependencies = [("search", "0004_packed_version")]

    operations = [
        migrations.RunSQL(sql=FORWARD, reverse_sql=migrations.RunSQL.noop),
        migrations.RunPython(migrations.RunPython.noop, reverse_code=join_segments),
    ]
