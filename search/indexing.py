"""Keeping the full-text indexes in step with the revisions they index.

The FTS5 tables are fed by triggers on memories_revision (search migration 0001),
so they should never drift; ``index_drift`` is how an operator finds out when they
did anyway (a trigger dropped by hand, a restore from a partial copy, a bug).
"""

from django.db import DatabaseError, connection, transaction

FTS_TABLES = ("search_fts_words", "search_fts_trigram")

# Table names cannot be query parameters, so each statement is written out per table.
_INTEGRITY_CHECK = {
    # rank 1 compares the index with its content view, not only with itself.
    "search_fts_words": "INSERT INTO search_fts_words(search_fts_words, rank) VALUES ('integrity-check', 1)",
    "search_fts_trigram": "INSERT INTO search_fts_trigram(search_fts_trigram, rank) VALUES ('integrity-check', 1)",
}
_INDEXED_ROWS = {
    # The docsize shadow table holds one row per indexed document; counting walks its rowid b-tree.
    "search_fts_words": "SELECT count(*) FROM search_fts_words_docsize",
    "search_fts_trigram": "SELECT count(*) FROM search_fts_trigram_docsize",
}
_TRIGGERS = {
    table: (f"{table}_after_insert", f"{table}_after_delete") for table in FTS_TABLES
}


def index_drift() -> list[str]:
    """Return one line per disagreement between the FTS indexes and the revisions; empty when in step."""
    problems = []
    with connection.cursor() as cursor:
        # A full scan of memories_revision: tombstone has no index, and this runs rarely.
        cursor.execute("SELECT count(*) FROM memories_revision WHERE tombstone = 0")
        with_text = cursor.fetchone()[0]
        # sqlite_master is small; no index needed.
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s",
                       ["memories_revision"])
        triggers = {row[0] for row in cursor.fetchall()}
        for table in FTS_TABLES:
            missing = [name for name in _TRIGGERS[table] if name not in triggers]
            if missing:
                problems.append(f"{table}: trigger {', '.join(missing)} is missing, so writes no longer "
                                "reach the index; re-run the search migrations.")
            try:
                # A savepoint, so a failed check leaves the caller's transaction usable.
                with transaction.atomic():
                    cursor.execute(_INTEGRITY_CHECK[table])
            except DatabaseError as error:
                problems.append(f"{table}: the index does not match the revisions ({error}); "
                                f"rebuild it with INSERT INTO {table}({table}) VALUES ('rebuild').")
            cursor.execute(_INDEXED_ROWS[table])
            indexed = cursor.fetchone()[0]
            if indexed != with_text:
                problems.append(f"{table}: {indexed} rows indexed but {with_text} revisions carry text.")
    return problems
