"""A version of the packed postings, so a process may keep terms it read in memory.

``search_state.packed_version`` takes a new random value in the transaction of every
change to ``search_posting`` (``postings._fold`` and ``postings.remove``, its only
writers). A value names one content of the packed rows: a rolled-back change takes its
value back with it, and two databases never share one (it is drawn here too), so a
cached copy read under a value is valid wherever that value is read again.
"""

from django.db import migrations

from memoryproject.migration_ops import RANDOM_BIGINT, EngineSQL

FORWARD = [
    "ALTER TABLE search_state ADD COLUMN packed_version INTEGER NOT NULL DEFAULT 0",
    "UPDATE search_state SET packed_version = random() WHERE id = 1",
]

REVERSE = ["ALTER TABLE search_state DROP COLUMN packed_version"]

POSTGRESQL = [
    "ALTER TABLE search_state ADD COLUMN packed_version bigint NOT NULL DEFAULT 0",
    f"UPDATE search_state SET packed_version = {RANDOM_BIGINT} WHERE id = 1",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0003_postings")]

    operations = [EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE)]
