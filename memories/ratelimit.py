"""Rate limits per API key: a budget of reads and one of writes a minute, shared by every door and every server.

A REST request and an MCP tool call over HTTP spend the same budget, so a key throttled on
one door is throttled on the other; and the counts live where every app server of the
deployment reads them, so two servers behind a load balancer allow the limit once, not
twice. Each key has one row: the current one-minute window (fixed, aligned to the clock)
and its reads and writes. A request counts itself with one statement, an upsert that
starts the row's counts again when the window has moved on, so old windows need no
clean-up; it is refused when its count passes the budget.

- PostgreSQL: an UNLOGGED table of the store (no WAL, so counting waits for no disk
  flush; a crash empties it, which only forgives a minute's counts), on the request's own
  connection, in autocommit. The window comes from the database's clock, which every
  server shares.
- SQLite: a database file of its own beside the store's (``<database>-ratelimit``).
  Counting a read is a write: in the store's file it would wait behind a long write (an
  import holds the write lock for seconds) and make every other connection's page cache
  stale. The servers of one SQLite store run on one machine, whose clock they share.
  Where that file cannot be made (a read-only disk) or the store is in memory (tests),
  the counts are this process's alone.

Counting that the database refuses (read-only, full, busy) lets the request through:
a limit that cannot be counted is not a reason to refuse work.
"""

import math
import threading

from django.conf import settings
from django.db import connection

from memoryproject import dialect
from memoryproject.exceptions import RateLimited
from memoryproject.storage import SIDE_WRITE_SKIPPED

RATE_SETTINGS = {"read": "MEMORY_API_READS_PER_MINUTE", "write": "MEMORY_API_WRITES_PER_MINUTE"}
WINDOW_SECONDS = 60
# The SQLite file's suffix, beside the database's -wal and lock files.
SQLITE_SUFFIX = "-ratelimit"

# One statement for both engines: a new window starts the counts again from this request's. Every SET expression
# reads the row as it was before the update. PostgreSQL's primary-key conflict locks the row, and SQLite's write
# lock serialises the statement, so concurrent requests each see their own count.
_SPEND = """
    INSERT INTO memories_ratecount (actor, minute, reads, writes) VALUES (%s, {minute}, %s, %s)
    ON CONFLICT (actor) DO UPDATE SET
        reads = CASE WHEN memories_ratecount.minute = excluded.minute THEN memories_ratecount.reads ELSE 0 END
            + excluded.reads,
        writes = CASE WHEN memories_ratecount.minute = excluded.minute THEN memories_ratecount.writes ELSE 0 END
            + excluded.writes,
        minute = excluded.minute
    RETURNING reads, writes, minute, {clock}
"""
# The database's clock, in seconds since the epoch; the window is its minute.
_POSTGRESQL_SPEND = _SPEND.format(
    minute="floor(extract(epoch FROM clock_timestamp()) / 60)::bigint", clock="extract(epoch FROM clock_timestamp())"
)
_SQLITE_SPEND = _SPEND.format(minute="%s", clock="NULL").replace("%s", "?")
_SQLITE_TABLE = (
    "CREATE TABLE IF NOT EXISTS memories_ratecount "
    "(actor TEXT PRIMARY KEY, minute INTEGER NOT NULL, reads INTEGER NOT NULL, writes INTEGER NOT NULL)"
)

_sqlite = threading.local()


def counted(caller, bucket: str) -> bool:
    """Whether ``caller``'s requests in ``bucket`` are counted: callers without a key (``caller.rate_limited``
    false: mcp_stdio, whose user can open the database anyway) are not, nor is anything while the bucket's
    setting is 0."""
    return caller.rate_limited and bool(getattr(settings, RATE_SETTINGS[bucket]))


def charge(caller, bucket: str) -> None:
    """Count one request of ``caller`` against its ``bucket`` ("read" or "write"), or raise RateLimited."""
    if not counted(caller, bucket):
        return
    setting = RATE_SETTINGS[bucket]
    per_minute = getattr(settings, setting)
    spending = _spend(caller.actor, reads=int(bucket == "read"), writes=int(bucket == "write"))
    if spending is None:
        return
    spent, seconds_left = spending
    if spent > per_minute:
        wait = max(1, math.ceil(seconds_left))
        raise RateLimited(
            f"{caller.held_by[0].upper()}{caller.held_by[1:]} is over its {per_minute} {bucket}s a minute "
            f"({setting}), counted across REST "
            f"and MCP on every server; nothing was done. Retry in {wait} s.",
            retry_after_seconds=wait,
        )


def _spend(actor: str, *, reads: int, writes: int) -> tuple[int, float] | None:
    """Add to ``actor``'s counts in the current window; return the bucket's count and the window's seconds left.

    None when the database refused to count (read-only, full, busy).
    """
    if dialect.is_postgresql():
        try:
            with connection.cursor() as cursor:
                cursor.execute(_POSTGRESQL_SPEND, [actor, reads, writes])
                spent_reads, spent_writes, minute, now = cursor.fetchone()
        except SIDE_WRITE_SKIPPED:
            return None
        now = float(now)
    else:
        now = dialect.now().timestamp()
        minute = int(now // WINDOW_SECONDS)
        database = _sqlite_counts()
        try:
            spent_reads, spent_writes, _, _ = database.execute(_SQLITE_SPEND, [actor, minute, reads, writes]).fetchone()
        except database.Database.OperationalError:
            return None
    return (spent_reads if reads else spent_writes), (minute + 1) * WINDOW_SECONDS - now


class _SQLiteCounts:
    """This thread's connection to the SQLite counts, in autocommit: each statement is its own transaction."""

    def __init__(self, name: str, *, uri: bool):
        self.Database = connection.Database  # the driver the store's backend uses (pysqlite3 where it must)
        self.name = name
        self.connection = self.Database.connect(
            name, uri=uri, isolation_level=None, timeout=settings.MEMORY_DB_BUSY_TIMEOUT
        )
        if not uri:
            # A writer never waits for readers, and a commit waits for no disk flush (the file is only counts).
            self.connection.execute("PRAGMA journal_mode = WAL")
            self.connection.execute("PRAGMA synchronous = NORMAL")
        self.connection.execute(_SQLITE_TABLE)

    def execute(self, sql: str, parameters: list):
        return self.connection.execute(sql, parameters)


def _sqlite_counts() -> _SQLiteCounts:
    """This thread's connection to the counts of the store it serves: the file beside it, else this process's."""
    store = str(connection.settings_dict["NAME"])
    counts = getattr(_sqlite, "counts", None)
    if counts is not None and counts.store == store:
        return counts
    counts = None
    if not connection.is_in_memory_db():
        try:
            counts = _SQLiteCounts(f"{store}{SQLITE_SUFFIX}", uri=False)
        except connection.Database.DatabaseError:
            pass  # the folder cannot be written (or the file is not SQLite's): this process counts alone
    if counts is None:
        counts = _SQLiteCounts(f"file:memory-ratecount-{abs(hash(store))}?mode=memory&cache=shared", uri=True)
    counts.store = store
    _sqlite.counts = counts
    return counts
