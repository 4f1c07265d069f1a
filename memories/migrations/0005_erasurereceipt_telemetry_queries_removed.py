from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0004_tag_namespace"),
    ]

    operations = [
        migrations.AddField(
            model_name="erasurereceipt",
            name="telemetry_queries_removed",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
