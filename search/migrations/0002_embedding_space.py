"""The embedding space: which model's vectors the database holds, in one row.

The vec0 table of vectors (``search_vectors``) and its delete trigger are not created
here: their dimension depends on the embedder, so ``search.vectors.ensure_space``
creates them when the first vectors are stored. Reversing drops them too, since the
trigger on memories_revision would fail once its table is gone.
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

FORWARD = [
    # One row at most (id = 1). ``generation`` counts every change to the stored vectors,
    # so a process holding a copy of them knows when to reload.
    """
    CREATE TABLE search_embedding_space (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        embedder TEXT NOT NULL,
        dim INTEGER NOT NULL CHECK (dim > 0),
        created_at TEXT NOT NULL,
        generation INTEGER NOT NULL DEFAULT 0
    )
    """,
]

REVERSE = [
    "DROP TRIGGER IF EXISTS search_vectors_after_delete",
    "DROP TABLE IF EXISTS search_vectors",
    "DROP TABLE IF EXISTS search_embedding_space",
]

POSTGRESQL = [
    """
    CREATE TABLE search_embedding_space (
        id integer PRIMARY KEY CHECK (id = 1),
        embedder text NOT NULL,
        dim integer NOT NULL CHECK (dim > 0),
        created_at text NOT NULL,
        generation bigint NOT NULL DEFAULT 0
    )
    """,
]

# search.vectors makes the table, its trigger and the trigger's function of the same name on PostgreSQL.
REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS search_vectors_after_delete ON memories_revision",
    "DROP FUNCTION IF EXISTS search_vectors_after_delete()",
    "DROP TABLE IF EXISTS search_vectors",
    "DROP TABLE IF EXISTS search_embedding_space",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0001_fts_indexes")]

    operations = [
        EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE_POSTGRESQL)
    ]
