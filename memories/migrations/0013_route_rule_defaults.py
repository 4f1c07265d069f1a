"""The default routing rules (memories.selectors.routing); the admin edits them from here on."""

from django.db import migrations

_WHEN = (
    r"(?:\d{4}-\d{2}-\d{2}(?:T[0-9:.]+(?:Z|[+-]\d{2}:?\d{2}))?|yesterday|last\s+(?:day|week|month|year)"
    r"|(?:\d{1,4}|an?|one)\s+(?:day|week|month|year)s?\s+ago"
    r"|(?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"(?:\s+\d{4})?)"
)
# (order, name, route, pattern): tried from the lowest order up; the first match wins.
DEFAULTS = [
    (10, "memory-id", "lookup", r"^\s*(?:(?:memory|id)\s*#?\s*|#)(?P<id>\d{1,18})\s*\??\s*$"),
    (20, "key", "lookup", r"^\s*key\s*[:=]?\s*(?P<key>[\w.:@/-]+)\s*\??\s*$"),
    (30, "tag", "lookup", r"^\s*(?:tag(?:ged)?(?:\s+with)?|tag:)\s*(?P<tag>[\w.:/-]+)\s*\??\s*$"),
    (
        40,
        "attribute-of",
        "lookup",
        r"^\s*(?:what(?:'s|\s+is|\s+was)\s+)?(?:the\s+)?(?P<attribute>ip(?:\s+address)?|port|host(?:name)?|url"
        r"|address|version|owner|region)\s+(?:of|for)\s+(?P<entity>[^?]+?)\s*\??\s*$",
    ),
    (
        50,
        "related",
        "graph",
        r"\bhow\s+(?:are|is)\s+(?P<source>.+?)\s+and\s+(?P<target>.+?)\s+(?:related|connected|linked)\b",
    ),
    (
        60,
        "depends-on",
        "graph",
        r"\bwhat\s+does\s+(?P<entity>.+?)\s+(?:depend\s+on|rely\s+on|run\s+on|use|connect\s+to|talk\s+to)\b",
    ),
    (
        70,
        "known-then",
        "as_of",
        r"\b(?:what\s+did\s+(?:we|you|i)\s+know\s+(?:in|on|at|as\s+of)?|as\s+of|as\s+known"
        r"\s+(?:in|on|at)?)\s*(?P<when>" + _WHEN + r")\b",
    ),
    (
        80,
        "time-phrase",
        "as_of",
        r"\b(?P<when>yesterday|last\s+(?:week|month|year)|(?:\d{1,4}|an?|one)\s+(?:day|week|month|year)s?\s+ago)\b",
    ),
]


def add_defaults(apps, schema_editor):
    RouteRule = apps.get_model("memories", "RouteRule")
    for order, name, route, pattern in DEFAULTS:
        RouteRule.objects.get_or_create(name=name, defaults={"order": order, "route": route, "pattern": pattern})


def remove_defaults(apps, schema_editor):
    apps.get_model("memories", "RouteRule").objects.filter(name__in=[name for _, name, _, _ in DEFAULTS]).delete()


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_route_rule")]

    operations = [migrations.RunPython(add_defaults, remove_defaults)]
