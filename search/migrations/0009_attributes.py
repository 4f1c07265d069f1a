"""The search snapshot reads namespace and kind as of each query from the attribute rows (memories 0007).

A move or re-kind appends a row, which the snapshot finds by polling for new ids like
revisions, so it no longer needs a reload: the trigger that bumped the generation on
an update of a memory's namespace or kind goes. Deleting attribute rows (erasure, a dead
import's removal) bumps it, as deleting revisions does.
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

FORWARD = [
    "DROP TRIGGER IF EXISTS search_memory_updated",
    """CREATE TRIGGER search_attributes_deleted AFTER DELETE ON memories_attributes
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
]

REVERSE = [
    "DROP TRIGGER IF EXISTS search_attributes_deleted",
    """CREATE TRIGGER search_memory_updated AFTER UPDATE OF namespace, kind ON memories_memory
       WHEN OLD.namespace IS NOT NEW.namespace OR OLD.kind IS NOT NEW.kind
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
]

POSTGRESQL = [
    "DROP TRIGGER IF EXISTS search_memory_updated ON memories_memory",
    "CREATE TRIGGER search_attributes_deleted AFTER DELETE ON memories_attributes FOR EACH ROW "
    "EXECUTE FUNCTION search_bump_generation()",
]

REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS search_attributes_deleted ON memories_attributes",
    "CREATE TRIGGER search_memory_updated AFTER UPDATE OF namespace, kind ON memories_memory FOR EACH ROW "
    "WHEN (OLD.namespace IS DISTINCT FROM NEW.namespace OR OLD.kind IS DISTINCT FROM NEW.kind) "
    "EXECUTE FUNCTION search_bump_generation()",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0008_import_published"), ("memories", "0007_attributes")]

    operations = [
        EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE_POSTGRESQL)
    ]
