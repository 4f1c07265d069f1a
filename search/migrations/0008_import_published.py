"""``search_state.published`` counts the imports published, so a search snapshot notices one cheaply.

Publishing an import changes which rows count without adding or deleting any: a
process's snapshot reads this counter with the generation and then reads only the
publication times of the imports it holds rows of, instead of reloading every row.
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

FORWARD = ["ALTER TABLE search_state ADD COLUMN published INTEGER NOT NULL DEFAULT 0"]
REVERSE = ["ALTER TABLE search_state DROP COLUMN published"]
POSTGRESQL = ["ALTER TABLE search_state ADD COLUMN published bigint NOT NULL DEFAULT 0"]


class Migration(migrations.Migration):
    dependencies = [("search", "0007_drop_trigram_index"), ("memories", "0006_import_batch")]

    operations = [EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE)]
