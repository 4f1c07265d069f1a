"""Exact point-in-time BM25 needs its own postings: per term, the revisions holding it and how often.

FTS5 can only score against every row it holds, visible or not, so the engine keeps
the same tokenisation (porter unicode61) as postings it can mask by visibility:

- ``search_document``: per revision with text, its token count (and CJK bigram count).
- ``search_posting``: per term, packed ascending revision ids (uint32) and counts (uint16).
- ``search_posting_tail``: postings written since the last compaction, folded into
  ``search_posting`` in batches, so a write never rewrites a long blob.
- ``search_state``: a generation number that triggers bump on every change a reader's
  cache cannot see by polling for new revision ids (deleted revisions, changed
  memories' namespace or kind; tags are filtered in SQL per query).
"""

from django.db import migrations

from memoryproject.migration_ops import EngineSQL

FORWARD = [
    """CREATE TABLE search_document (
        revision_id INTEGER PRIMARY KEY,
        ntok INTEGER NOT NULL,
        nbigram INTEGER NOT NULL
    )""",
    """CREATE TABLE search_posting (
        term TEXT PRIMARY KEY,
        revision_ids BLOB NOT NULL,
        tfs BLOB NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE search_posting_tail (
        term TEXT NOT NULL,
        revision_id INTEGER NOT NULL,
        tf INTEGER NOT NULL,
        PRIMARY KEY (term, revision_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX search_posting_tail_revision ON search_posting_tail (revision_id)",
    """CREATE TABLE search_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        generation INTEGER NOT NULL,
        tail_rows INTEGER NOT NULL
    )""",
    "INSERT INTO search_state (id, generation, tail_rows) VALUES (1, 0, 0)",
    """CREATE TRIGGER search_revision_deleted AFTER DELETE ON memories_revision
       BEGIN
           DELETE FROM search_document WHERE revision_id = OLD.id;
           DELETE FROM search_posting_tail WHERE revision_id = OLD.id;
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
    """CREATE TRIGGER search_revision_updated AFTER UPDATE ON memories_revision
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
    # Only the columns the cache holds; state changes (forget, restore) are revisions already.
    """CREATE TRIGGER search_memory_updated AFTER UPDATE OF namespace, kind ON memories_memory
       WHEN OLD.namespace IS NOT NEW.namespace OR OLD.kind IS NOT NEW.kind
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
    """CREATE TRIGGER search_memory_deleted AFTER DELETE ON memories_memory
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
       END""",
]

REVERSE = [
    "DROP TRIGGER IF EXISTS search_memory_deleted",
    "DROP TRIGGER IF EXISTS search_memory_updated",
    "DROP TRIGGER IF EXISTS search_revision_updated",
    "DROP TRIGGER IF EXISTS search_revision_deleted",
    "DROP TABLE IF EXISTS search_state",
    "DROP TABLE IF EXISTS search_posting_tail",
    "DROP TABLE IF EXISTS search_posting",
    "DROP TABLE IF EXISTS search_document",
]

# PostgreSQL: terms compare byte by byte (COLLATE "C"), as SQLite's BINARY does, since keys are read by ranges
# (a namespace's terms, a prefix); triggers call functions. Integers are bigint, as SQLite's INTEGER is 64-bit.
POSTGRESQL = [
    """CREATE TABLE search_document (
        revision_id bigint PRIMARY KEY,
        ntok integer NOT NULL,
        nbigram integer NOT NULL
    )""",
    """CREATE TABLE search_posting (
        term text COLLATE "C" PRIMARY KEY,
        revision_ids bytea NOT NULL,
        tfs bytea NOT NULL
    )""",
    """CREATE TABLE search_posting_tail (
        term text COLLATE "C" NOT NULL,
        revision_id bigint NOT NULL,
        tf integer NOT NULL,
        PRIMARY KEY (term, revision_id)
    )""",
    "CREATE INDEX search_posting_tail_revision ON search_posting_tail (revision_id)",
    """CREATE TABLE search_state (
        id integer PRIMARY KEY CHECK (id = 1),
        generation bigint NOT NULL,
        tail_rows bigint NOT NULL
    )""",
    "INSERT INTO search_state (id, generation, tail_rows) VALUES (1, 0, 0)",
    """CREATE FUNCTION search_bump_generation() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
           RETURN NULL;
       END
       $$""",
    """CREATE FUNCTION search_revision_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
           DELETE FROM search_document WHERE revision_id = OLD.id;
           DELETE FROM search_posting_tail WHERE revision_id = OLD.id;
           UPDATE search_state SET generation = generation + 1 WHERE id = 1;
           RETURN NULL;
       END
       $$""",
    "CREATE TRIGGER search_revision_deleted AFTER DELETE ON memories_revision FOR EACH ROW "
    "EXECUTE FUNCTION search_revision_deleted()",
    "CREATE TRIGGER search_revision_updated AFTER UPDATE ON memories_revision FOR EACH ROW "
    "EXECUTE FUNCTION search_bump_generation()",
    "CREATE TRIGGER search_memory_updated AFTER UPDATE OF namespace, kind ON memories_memory FOR EACH ROW "
    "WHEN (OLD.namespace IS DISTINCT FROM NEW.namespace OR OLD.kind IS DISTINCT FROM NEW.kind) "
    "EXECUTE FUNCTION search_bump_generation()",
    "CREATE TRIGGER search_memory_deleted AFTER DELETE ON memories_memory FOR EACH ROW "
    "EXECUTE FUNCTION search_bump_generation()",
]

REVERSE_POSTGRESQL = [
    "DROP TRIGGER IF EXISTS search_memory_deleted ON memories_memory",
    "DROP TRIGGER IF EXISTS search_memory_updated ON memories_memory",
    "DROP TRIGGER IF EXISTS search_revision_updated ON memories_revision",
    "DROP TRIGGER IF EXISTS search_revision_deleted ON memories_revision",
    "DROP FUNCTION IF EXISTS search_revision_deleted()",
    "DROP FUNCTION IF EXISTS search_bump_generation()",
    "DROP TABLE IF EXISTS search_state",
    "DROP TABLE IF EXISTS search_posting_tail",
    "DROP TABLE IF EXISTS search_posting",
    "DROP TABLE IF EXISTS search_document",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0002_embedding_space")]

    operations = [
        EngineSQL(sql=FORWARD, reverse_sql=REVERSE, postgresql=POSTGRESQL, reverse_postgresql=REVERSE_POSTGRESQL)
    ]
