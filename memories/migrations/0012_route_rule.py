"""RouteRule: the rules of query routing (memories.selectors.routing), data the admin edits."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0011_lifecycle_state"),
    ]

    operations = [
        migrations.CreateModel(
            name="RouteRule",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "order",
                    models.PositiveIntegerField(default=100, help_text="Rules are tried from the lowest order up."),
                ),
                ("name", models.SlugField(max_length=64, unique=True)),
                (
                    "pattern",
                    models.TextField(
                        help_text="A Python regular expression, matched case-insensitively anywhere in the question; its named groups say what it extracts: lookup: id, key, tag, or attribute and entity; graph: source and target, or entity; as_of: when."
                    ),
                ),
                (
                    "route",
                    models.CharField(
                        choices=[
                            ("lookup", "exact lookup"),
                            ("graph", "graph question"),
                            ("as_of", "point-in-time recall"),
                        ],
                        max_length=16,
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
            ],
            options={
                "ordering": ["order", "id"],
            },
        ),
    ]
