"""System checks: the database features the server needs are present."""

from django.core import checks
from django.db import connection


@checks.register(checks.Tags.database)
def sqlite_capabilities(app_configs, databases=None, **kwargs):
    if not databases or "default" not in databases:
        return []
    if connection.vendor == "postgresql":
        from memoryproject.pg_backend.capabilities import probe
    else:
        from memoryproject.sqlite_backend.capabilities import probe

    return [checks.Error(problem, id="memories.E001") for problem in probe().problems]
