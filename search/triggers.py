"""Making a dropped trigger again, exactly as the migrations last made it.

Django records a migration as applied once it ran, so running the migrations again does
not bring back a trigger dropped later (by hand, or by a partial restore). The
migrations stay the one place a trigger is written: this reads their SQL for the
database's engine, in the order they apply, and runs the last ``CREATE TRIGGER`` each
missing trigger got.
"""

import re

from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import RunSQL

_CREATE = re.compile(r"\s*CREATE\s+TRIGGER\s+(\w+)", re.IGNORECASE)
_DROP = re.compile(r"\s*DROP\s+TRIGGER\s+(?:IF\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


def _statements(operation: RunSQL) -> list[str]:
    """The statements ``operation`` runs forwards on this database's engine (``EngineSQL`` has PostgreSQL's own)."""
    sql = operation.sql
    if connection.vendor == "postgresql" and hasattr(operation, "postgresql"):
        sql = operation.postgresql
    if sql == RunSQL.noop:
        return []
    statements = [sql] if isinstance(sql, str) else list(sql)
    return [statement if isinstance(statement, str) else statement[0] for statement in statements]


def trigger_definitions() -> dict[str, str]:
    """{trigger name: the statement that made it last}, over the migrations in the order they apply."""
    graph = MigrationLoader(connection, ignore_no_migrations=True).graph
    plan = list(dict.fromkeys(node for leaf in graph.leaf_nodes() for node in graph.forwards_plan(leaf)))
    definitions = {}
    for node in plan:
        for operation in graph.nodes[node].operations:
            if not isinstance(operation, RunSQL):
                continue
            for statement in _statements(operation):
                if made := _CREATE.match(statement):
                    definitions[made.group(1)] = statement
                elif dropped := _DROP.match(statement):
                    definitions.pop(dropped.group(1), None)
    return definitions


def create_triggers(names: list[str]) -> list[str]:
    """Make each of the triggers ``names`` as its migration did; return the names made."""
    definitions = trigger_definitions()
    unknown = [name for name in names if name not in definitions]
    if unknown:
        raise LookupError(f"No migration makes the trigger(s) {', '.join(unknown)}.")
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(definitions[name])
    return list(names)
