"""Lifecycle states: each attribute row records the memory's state (candidate, active, archived) and why it
changed; API keys can be marked untrusted (their new memories are candidates).

Existing rows and keys become active and trusted. SQLite adds a NOT NULL column with a
default by rebuilding the table, which drops the triggers on it: the append-only ones of
0007 and search's deletion counter (search 0009) are created again, as they were.
"""

from django.db import migrations, models

from memoryproject.migration_ops import EngineSQL, append_only_trigger

# As in 0007_attributes and search's 0009_attributes; the rebuild dropped them.
TRIGGERS = [
    f"""
    CREATE TRIGGER memories_attributes_no_{verb}
    BEFORE {verb.upper()} ON memories_attributes
    WHEN NOT EXISTS (SELECT 1 FROM memories_erasuregate)
    BEGIN
        SELECT RAISE(ABORT, 'attributes are append-only: add a new row instead of changing one');
    END
    """
    for verb in ("update", "delete")
] + [
    """CREATE TRIGGER search_attributes_deleted AFTER DELETE ON memories_attributes
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
]
DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS memories_attributes_no_update",
    "DROP TRIGGER IF EXISTS memories_attributes_no_delete",
    "DROP TRIGGER IF EXISTS search_attributes_deleted",
]

# PostgreSQL adds the columns without a rebuild, so its triggers stay; dropping and making them again is harmless.
POSTGRESQL_TRIGGERS = [
    append_only_trigger(
        f"memories_attributes_no_{verb}",
        "memories_attributes",
        verb,
        "attributes are append-only: add a new row instead of changing one",
    )
    for verb in ("update", "delete")
] + [
    "CREATE TRIGGER search_attributes_deleted AFTER DELETE ON memories_attributes FOR EACH ROW "
    "EXECUTE FUNCTION search_bump_generation()",
]
POSTGRESQL_DROP_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS {name} ON memories_attributes"
    for name in ("memories_attributes_no_update", "memories_attributes_no_delete", "search_attributes_deleted")
]


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0010_revision_confidence"),
        # Its trigger on memories_attributes must exist before the rebuild here, to be made again after it.
        ("search", "0009_attributes"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="trusted",
            field=models.BooleanField(default=True),
        ),
        # The reverse drops the triggers before the rebuild that removes the columns, and makes them again after.
        EngineSQL(
            sql=migrations.RunSQL.noop,
            reverse_sql=TRIGGERS,
            postgresql=migrations.RunSQL.noop,
            reverse_postgresql=POSTGRESQL_TRIGGERS,
        ),
        migrations.AddField(
            model_name="attributes",
            name="reason",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="attributes",
            name="state",
            field=models.CharField(
                choices=[("candidate", "Candidate"), ("active", "Active"), ("archived", "Archived")],
                default="active",
                max_length=16,
            ),
        ),
        EngineSQL(
            sql=DROP_TRIGGERS + TRIGGERS,
            reverse_sql=DROP_TRIGGERS,
            postgresql=POSTGRESQL_DROP_TRIGGERS + POSTGRESQL_TRIGGERS,
            reverse_postgresql=POSTGRESQL_DROP_TRIGGERS,
        ),
    ]
