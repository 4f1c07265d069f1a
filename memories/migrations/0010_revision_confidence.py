"""A revision may carry its writer's stated confidence (0..1; null: not stated).

A nullable column without a default, which SQLite adds with ALTER TABLE ADD COLUMN: the
revision table is not rebuilt, so its triggers (append-only) and the views over it stay.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0009_attribute_set_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="revision",
            name="confidence",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
