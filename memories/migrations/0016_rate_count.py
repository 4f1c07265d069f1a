"""The rate limits' counts on PostgreSQL, where every app server sees them (memories/ratelimit.py).

UNLOGGED: counting writes no WAL, so a request's count waits for no disk flush, and a crash only empties the table.
On SQLite the counts are a file of their own beside the database, made on first use: nothing to do here.
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL


class Migration(migrations.Migration):
    dependencies = [("memories", "0015_oauth_interface")]

    operations = [
        EngineSQL(
            migrations.RunSQL.noop,
            migrations.RunSQL.noop,
            postgresql=(
                "CREATE UNLOGGED TABLE memories_ratecount (actor text PRIMARY KEY, minute bigint NOT NULL, "
                "reads integer NOT NULL, writes integer NOT NULL)"
            ),
            reverse_postgresql="DROP TABLE memories_ratecount",
        ),
    ]
