"""Revisions are append-only: triggers refuse UPDATE and DELETE unless an erasure gate is open.

The gate is a row in memories_erasuregate that only ``memory_erase`` and ``purge``
insert and remove inside their own transaction, so no other connection ever sees it.
"""

from django.db import migrations

from memoryproject.migration_ops import APPEND_ONLY_FUNCTION, DROP_APPEND_ONLY_FUNCTION, EngineSQL, append_only_trigger

FORWARD = [
    """
    CREATE TRIGGER memories_revision_no_update
    BEFORE UPDATE ON memories_revision
    WHEN NOT EXISTS (SELECT 1 FROM memories_erasuregate)
    BEGIN
        SELECT RAISE(ABORT, 'revisions are append-only: add a new revision instead of updating one');
    END
    """,
    """
    CREATE TRIGGER memories_revision_no_delete
    BEFORE DELETE ON memories_revision
    WHEN NOT EXISTS (SELECT 1 FROM memories_erasuregate)
    BEGIN
        SELECT RAISE(ABORT, 'revisions are append-only: forget (tombstone) or erase instead of deleting');
    END
    """,
]

REVERSE = [
    "DROP TRIGGER IF EXISTS memories_revision_no_update",
    "DROP TRIGGER IF EXISTS memories_revision_no_delete",
]


POSTGRESQL = [
    APPEND_ONLY_FUNCTION,
    append_only_trigger(
        "memories_revision_no_update",
        "memories_revision",
        "update",
        "revisions are append-only: add a new revision instead of updating one",
    ),
    append_only_trigger(
        "memories_revision_no_delete",
        "memories_revision",
        "delete",
        "revisions are append-only: forget (tombstone) or erase instead of deleting",
    ),
]

REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS memories_revision_no_update ON memories_revision",
    "DROP TRIGGER IF EXISTS memories_revision_no_delete ON memories_revision",
    DROP_APPEND_ONLY_FUNCTION,
]


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial")]

    operations = [
        EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE_POSTGRESQL)
    ]
