"""The FTS5 trigram index goes: substrings are found in each namespace's own terms (``postings.containing``).

A global trigram index made a query's work depend on every namespace's text, and every
write paid for it. Going back rebuilds it from the revisions, as migration 0001 built it.
PostgreSQL never had it (0001).
"""

import importlib

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

TABLE = "search_fts_trigram"
_initial = importlib.import_module("search.migrations.0001_fts_indexes")

FORWARD = [
    f"DROP TRIGGER IF EXISTS {TABLE}_after_insert",
    f"DROP TRIGGER IF EXISTS {TABLE}_after_delete",
    f"DROP TABLE IF EXISTS {TABLE}",
]

# The statements of 0001 that build this table, in order: create, secure-delete, triggers, rebuild.
REVERSE = [statement for statement in _initial.forward_sql() if TABLE in statement]


class Migration(migrations.Migration):
    dependencies = [("search", "0006_namespaced_postings")]

    operations = [
        EngineSQL(
            sql=FORWARD,
            reverse_sql=REVERSE,
            postgresql=migrations.RunSQL.noop,
            reverse_postgresql=migrations.RunSQL.noop,
        )
    ]
