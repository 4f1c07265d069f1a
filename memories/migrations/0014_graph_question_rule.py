"""The graph-question routing rule: questions knowledge.questions reads are answered from the learned graph."""

from django.db import migrations, models

# Tried before attribute-of, so "who is the owner of X" asks the graph; what the question table does not read
# ("what is the IP of X") goes on to the next rule.
ORDER, NAME, ROUTE = 35, "graph-question", "graph"
PATTERN = r"^\s*(?P<question>(?:who|whom|what|which|where)\b.*)"


def add_rule(apps, schema_editor):
    RouteRule = apps.get_model("memories", "RouteRule")
    RouteRule.objects.get_or_create(name=NAME, defaults={"order": ORDER, "route": ROUTE, "pattern": PATTERN})


def remove_rule(apps, schema_editor):
    apps.get_model("memories", "RouteRule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("memories", "0013_route_rule_defaults")]

    operations = [
        migrations.AlterField(
            model_name="routerule",
            name="pattern",
            field=models.TextField(
                help_text=(
                    "A Python regular expression, matched case-insensitively anywhere in the question; its named groups "
                    "say what it extracts: lookup: id, key, tag, or attribute and entity; graph: source and target, or "
                    "entity, or question (read by the graph question table; a question it does not read goes on to the "
                    "next rule); as_of: when."
                )
            ),
        ),
        migrations.RunPython(add_rule, remove_rule),
    ]
