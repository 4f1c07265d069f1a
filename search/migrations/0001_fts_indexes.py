"""Full-text indexes over revisions, kept in step by triggers (so they cannot drift).

Two FTS5 tables read their text from the view ``search_revision_text`` over
memories_revision (external content, so the text is stored once): ``porter unicode61`` for words and stems, ``trigram`` for
substrings and scripts without spaces. Tombstones carry no text and are not indexed.
PostgreSQL has no FTS5: there nothing is made (search ranks from its postings, 0003).
``secure-delete`` makes an erasure remove the terms from the index at once instead
of leaving them in older segments until a merge.
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

TABLES = {
    "search_fts_words": "porter unicode61 remove_diacritics 2",
    "search_fts_trigram": "trigram",
}


def forward_sql():
    statements = [
        # Rebuild and integrity-check read the content through this view, so they
        # agree with the triggers on what is indexed: every revision but tombstones.
        """CREATE VIEW search_revision_text AS
           SELECT id, title, content FROM memories_revision WHERE tombstone = 0""",
    ]
    for table, tokenizer in TABLES.items():
        statements += [
            f"""CREATE VIRTUAL TABLE {table} USING fts5(
                title, content,
                content='search_revision_text', content_rowid='id',
                tokenize='{tokenizer}'
            )""",
            f"INSERT INTO {table}({table}, rank) VALUES ('secure-delete', 1)",
            f"""CREATE TRIGGER {table}_after_insert AFTER INSERT ON memories_revision
                WHEN NEW.tombstone = 0
                BEGIN
                    INSERT INTO {table}(rowid, title, content) VALUES (NEW.id, NEW.title, NEW.content);
                END""",
            f"""CREATE TRIGGER {table}_after_delete AFTER DELETE ON memories_revision
                WHEN OLD.tombstone = 0
                BEGIN
                    INSERT INTO {table}({table}, rowid, title, content)
                    VALUES ('delete', OLD.id, OLD.title, OLD.content);
                END""",
            f"INSERT INTO {table}({table}) VALUES ('rebuild')",
        ]
    return statements


def reverse_sql():
    statements = []
    for table in TABLES:
        statements += [
            f"DROP TRIGGER IF EXISTS {table}_after_insert",
            f"DROP TRIGGER IF EXISTS {table}_after_delete",
            f"DROP TABLE IF EXISTS {table}",
        ]
    return statements + ["DROP VIEW IF EXISTS search_revision_text"]


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_revision_append_only")]

    operations = [
        EngineSQL(
            sql=forward_sql(),
            reverse_sql=reverse_sql(),
            postgresql=migrations.RunSQL.noop,
            reverse_postgresql=migrations.RunSQL.noop,
        )
    ]
