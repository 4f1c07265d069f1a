"""Import batches: an import writes in short transactions, and its rows count once the batch is published.

The new columns are nullable foreign keys, which SQLite adds with ALTER TABLE ADD
COLUMN: the revision table is not rebuilt, so its triggers (append-only, FTS) stay.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("memories", "0003_api_key"),
    ]

    operations = [
        migrations.CreateModel(
            name="ImportBatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("state", models.CharField(choices=[("writing", "Writing"), ("published", "Published")],
                                           default="writing", max_length=16)),
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
        migrations.AddField(
            model_name="memory",
            name="batch",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="memories.importbatch"),
        ),
        migrations.AddField(
            model_name="revision",
            name="batch",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name="+", to="memories.importbatch"),
        ),
    ]
