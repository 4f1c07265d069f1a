"""Migration operations for schemas that differ between SQLite and PostgreSQL.

SQLite keeps running exactly the statements it always ran; PostgreSQL runs its own
form of the same schema (PL/pgSQL triggers, bytea, C-collated keys), or nothing where
a SQLite structure has no use there (the FTS5 tables: search reads its own postings).
"""

from django.db import migrations

# A random signed 64-bit integer, like SQLite's random() (PostgreSQL's is a float in [0, 1)).
RANDOM_BIGINT = "((random() - 0.5) * 18446744073709551616)::bigint"

# One function behind every append-only trigger: it refuses the change unless an erasure
# gate row is visible, with SQLSTATE class 23 so Django raises IntegrityError, as on SQLite.
APPEND_ONLY_FUNCTION = """
    CREATE FUNCTION memories_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM memories_erasuregate) THEN
            RAISE EXCEPTION USING ERRCODE = '23000', MESSAGE = TG_ARGV[0];
        END IF;
        IF TG_OP = 'DELETE' THEN
            RETURN OLD;
        END IF;
        RETURN NEW;
    END
    $$
"""
DROP_APPEND_ONLY_FUNCTION = "DROP FUNCTION IF EXISTS memories_append_only()"


def append_only_trigger(name: str, table: str, verb: str, message: str) -> str:
    """The PostgreSQL form of a ``BEFORE <verb> ... RAISE(ABORT, message)`` trigger of SQLite."""
    return (
        f"CREATE TRIGGER {name} BEFORE {verb.upper()} ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION memories_append_only('{message}')"
    )


class EngineSQL(migrations.RunSQL):
    """RunSQL whose SQLite statements stay as they were, with PostgreSQL's own (``RunSQL.noop``: none)."""

    def __init__(self, sql, reverse_sql=None, *, postgresql, reverse_postgresql=None, **kwargs):
        super().__init__(sql, reverse_sql, **kwargs)
        self.postgresql = postgresql
        self.reverse_postgresql = reverse_postgresql

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        kwargs["postgresql"] = self.postgresql
        if self.reverse_postgresql is not None:
            kwargs["reverse_postgresql"] = self.reverse_postgresql
        return name, args, kwargs

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return self._postgresql().database_forwards(app_label, schema_editor, from_state, to_state)
        return super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return self._postgresql().database_backwards(app_label, schema_editor, from_state, to_state)
        return super().database_backwards(app_label, schema_editor, from_state, to_state)

    def _postgresql(self):
        return migrations.RunSQL(self.postgresql, self.reverse_postgresql, hints=self.hints)


class SQLiteDatabaseOperations(migrations.SeparateDatabaseAndState):
    """On SQLite, the hand-written database operations; elsewhere the state operations' own schema changes.

    For SQLite tricks (ALTER TABLE ADD COLUMN instead of a rebuild) that other engines need not play.
    """

    def _elsewhere(self):
        return migrations.SeparateDatabaseAndState(
            state_operations=self.state_operations, database_operations=self.state_operations
        )

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "sqlite":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return self._elsewhere().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "sqlite":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return self._elsewhere().database_backwards(app_label, schema_editor, from_state, to_state)
