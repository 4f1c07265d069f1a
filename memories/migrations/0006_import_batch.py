"""Import batches: an import writes in short transactions, and its rows count once the batch is published.

The new columns are nullable foreign keys, which SQLite adds with ALTER TABLE ADD
COLUMN: the revision table is not rebuilt, so its triggers (append-only, FTS) and the
search view over it stay. Removing them would rebuild the table, so going back leaves
the table and the unused columns in place, and going forward again adds only what is missing.
Other engines (PostgreSQL) add and remove them with Django's own schema changes.
"""

import django.db.models.deletion
from django.db import migrations, models

from memoryproject.migration_ops import SQLiteDatabaseOperations

CREATE_BATCH_TABLE = (
    'CREATE TABLE IF NOT EXISTS "memories_importbatch" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
    '"state" varchar(16) NOT NULL, "trusted" bool NOT NULL, "actor" varchar(200) NOT NULL, '
    '"interface" varchar(8) NOT NULL, "started_at" datetime NOT NULL, "progress_at" datetime NOT NULL, '
    '"published_at" datetime NULL, "counts_from" datetime NULL, "host" varchar(255) NOT NULL, "pid" integer NOT NULL)'
)


def add_batch_columns(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table, index in (
            ("memories_memory", "memories_memory_batch_id_efe8ed68"),
            ("memories_revision", "memories_revision_batch_id_0923df8f"),
        ):
            cursor.execute(f'PRAGMA table_info("{table}")')
            if "batch_id" not in {row[1] for row in cursor.fetchall()}:
                cursor.execute(
                    f'ALTER TABLE "{table}" ADD COLUMN "batch_id" bigint NULL '
                    'REFERENCES "memories_importbatch" ("id") DEFERRABLE INITIALLY DEFERRED'
                )
            cursor.execute(f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("batch_id")')


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0005_erasurereceipt_telemetry_queries_removed"),
    ]

    operations = [
        SQLiteDatabaseOperations(
            state_operations=[
                migrations.CreateModel(
                    name="ImportBatch",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[("writing", "Writing"), ("published", "Published")],
                                default="writing",
                                max_length=16,
                            ),
                        ),
                        ("trusted", models.BooleanField()),
                        ("actor", models.CharField(max_length=200)),
                        ("interface", models.CharField(max_length=8)),
                        ("started_at", models.DateTimeField()),
                        ("progress_at", models.DateTimeField()),
                        ("published_at", models.DateTimeField(blank=True, null=True)),
                        ("counts_from", models.DateTimeField(blank=True, null=True)),
                        ("host", models.CharField(max_length=255)),
                        ("pid", models.IntegerField()),
                    ],
                ),
            ],
            database_operations=[migrations.RunSQL(CREATE_BATCH_TABLE, migrations.RunSQL.noop)],
        ),
        SQLiteDatabaseOperations(
            state_operations=[
                migrations.AddField(
                    model_name="memory",
                    name="batch",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memories.importbatch",
                    ),
                ),
                migrations.AddField(
                    model_name="revision",
                    name="batch",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memories.importbatch",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(add_batch_columns, migrations.RunPython.noop)],
        ),
    ]
