import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0002_hook_sessions_and_refused_ingests"),
    ]

    operations = [
        migrations.CreateModel(
            name="RecalledMemory",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("memory_id", models.BigIntegerField(db_index=True)),
                (
                    "recall",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="items", to="telemetry.hookrecall"
                    ),
                ),
            ],
            options={
                "ordering": ["recall_id", "id"],
            },
        ),
    ]
