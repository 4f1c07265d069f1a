"""System checks: the database features the server needs are present."""

from django.core import checks
from django.db import connection

from search import text


@checks.register(checks.Tags.database)
def sqlite_capabilities(app_configs, databases=None, **kwargs):
    if not databases or "default" not in databases:
        return []
    if connection.vendor == "postgresql":
        from memoryproject.pg_backend.capabilities import probe

        # Search tokenizes with FTS5 in the process on PostgreSQL too.
        problems = probe().problems + (
            []
            if text.has_fts5()
            else ["FTS5 is not compiled into the SQLite library that tokenizes text; keyword search cannot work."]
        )
    else:
        from memoryproject.sqlite_backend.capabilities import probe

        problems = probe().problems
    return [checks.Error(problem, id="memories.E001") for problem in problems]
