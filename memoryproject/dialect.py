"""The SQL that differs between the engines the server runs on (SQLite, PostgreSQL), in one place.

Search and the services write their raw SQL once and take from here the fragments
that are spelt differently, and the few steps that are done differently. Each function
reads ``connection.vendor`` at call time; the SQLite forms are what the code wrote
before PostgreSQL was supported.
"""

import datetime as dt
import os

from django.db import connection
from django.utils import timezone

from memoryproject.migration_ops import RANDOM_BIGINT


def is_postgresql() -> bool:
    return connection.vendor == "postgresql"


def database_key() -> str:
    """A name for the database the connection points at, to key per-process caches of its rows by."""
    settings = connection.settings_dict
    if is_postgresql():
        # A database name alone is ambiguous across servers, and holds a store per schema.
        return f"{settings['HOST']}:{settings['PORT']}/{settings['NAME']}" + (
            f"/{settings['SCHEMA']}" if settings.get("SCHEMA") else ""
        )
    return str(settings["NAME"])


def engine() -> str:
    """The engine and its version, such as "sqlite 3.46.1" or "postgresql 15.18" (no query on SQLite)."""
    if not is_postgresql():
        return f"sqlite {connection.Database.sqlite_version}"
    number = connection.pg_version  # server_version_num, read once per connection
    return f"postgresql {number // 10000}.{number % 10000}"


def location() -> str:
    """Where the data is: SQLite's file, or PostgreSQL's user@host:port/name[?schema=...] (never the password)."""
    fields = connection.settings_dict
    if is_postgresql():
        return f"{fields['USER']}@{fields['HOST']}:{fields['PORT']}/{fields['NAME']}" + (
            f"?schema={fields['SCHEMA']}" if fields.get("SCHEMA") else ""
        )
    return str(fields["NAME"])


def size_bytes() -> int:
    """The database's size on disk: SQLite's file and its WAL; PostgreSQL's database (0 in memory)."""
    if is_postgresql():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
    path = location()
    if path.startswith(":memory:") or path.startswith("file:"):
        return 0
    return sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))


def chunks(cursor, sql: str, params: list, *, size: int):
    """Run ``sql`` and yield its rows in lists of at most ``size``; only the list in hand is held in this process.

    One statement, so the rows are one state of the database. On PostgreSQL libpq would
    otherwise hold the whole result before the first row is read, and send bytea as hex
    text, twice its size: rows come ``size`` at a time (libpq's chunked mode), in binary.
    """
    if not is_postgresql():
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(size):
            yield rows
        return
    from psycopg import ClientCursor

    rows = []
    # Client-side binding (MEMORY_DB_PREPARED_STATEMENTS=0) can only read text.
    binary = not isinstance(cursor.cursor, ClientCursor)
    with connection.wrap_database_errors:  # as Django's own cursor does: its errors, not psycopg's
        for row in cursor.cursor.stream(sql, params, binary=binary, size=size):
            rows.append(row)
            if len(rows) == size:
                yield rows
                rows = []
    if rows:
        yield rows


def connection_limit() -> tuple[int, int] | None:
    """On PostgreSQL, the server's max_connections and how many of them are reserved (for superusers, and from
    PostgreSQL 16 for pg_use_reserved_connections); None on SQLite, which has no such limit."""
    if not is_postgresql():
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true), '0')::int"
        )
        return cursor.fetchone()


def micros(column: str) -> str:
    """SQL for a stored datetime column as exact integer microseconds since the epoch (NULL stays NULL)."""
    if is_postgresql():
        # extract() answers numeric since PostgreSQL 14: exact to the microsecond.
        return f"(extract(epoch FROM {column}) * 1000000)::bigint"
    # Django stores 'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC) as text; julianday would round through a double.
    return (
        f"(unixepoch({column}) * 1000000 + CAST(substr({column}, 21, 6) || "
        f"substr('000000', 1, 6 - length(substr({column}, 21, 6))) AS INTEGER))"
    )


def new_version() -> str:
    """SQL for a fresh random 63-bit version number, for caches that compare it with the one they hold."""
    if is_postgresql():
        return RANDOM_BIGINT
    return "random()"  # SQLite's is a random 64-bit integer


def contains(haystack: str, needle: str) -> str:
    """SQL that is true where the text ``haystack`` contains the text ``needle`` (both SQL expressions)."""
    function = "strpos" if is_postgresql() else "instr"
    return f"{function}({haystack}, {needle}) > 0"


def ordered_join() -> str:
    """A join that keeps the left table the outer loop: SQLite's CROSS JOIN; PostgreSQL's planner chooses."""
    return "JOIN" if is_postgresql() else "CROSS JOIN"


def existing(cursor, names: list[str]) -> set[str]:
    """Which of ``names`` exist as a table, view or trigger."""
    if is_postgresql():
        # The catalogues are indexed by name.
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relname = ANY(%s) AND pg_table_is_visible(oid) "
            "UNION SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s) AND NOT tgisinternal "
            "AND pg_table_is_visible(tgrelid)",
            [list(names), list(names)],
        )
    else:
        # sqlite_master is small; no index needed.
        cursor.execute(f"SELECT name FROM sqlite_master WHERE name IN ({', '.join(['%s'] * len(names))})", names)
    return {row[0] for row in cursor.fetchall()}


def triggers_on(cursor, table: str) -> set[str]:
    """The names of the triggers on ``table``."""
    if is_postgresql():
        # pg_trigger's index on tgrelid; to_regclass answers NULL for a missing table.
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal", [table])
    else:
        # sqlite_master is small; no index needed.
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table])
    return {row[0] for row in cursor.fetchall()}


def now() -> dt.datetime:
    """The time a read takes as now when it names none: the clock writes are stamped by (``locked_now``).

    On PostgreSQL that is the database's, so a read sees every write committed before it,
    through any server sharing the database, whatever the app servers' clocks say.
    """
    if not is_postgresql():
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0].astimezone(dt.timezone.utc)


def clock_column() -> str:
    """A column that reads ``now()`` in a query that runs anyway: PostgreSQL's clock; NULL on SQLite, whose clock
    is this process's. Read the value with ``clock_value``."""
    return "clock_timestamp()" if is_postgresql() else "NULL"


def clock_value(value: dt.datetime | None) -> dt.datetime:
    """``now()`` from a ``clock_column`` just read."""
    return value.astimezone(dt.timezone.utc) if value is not None else now()


def locked_now() -> dt.datetime:
    """The time to stamp a write with (known_at and the like); call it inside the write's transaction.

    Writes are serialised by the write lock, which the transaction holds from its start,
    so stamps follow commit order as long as they come from one clock. SQLite has one
    server, whose clock that is. On PostgreSQL several servers may share the database:
    the database's clock is the one they share. clock_timestamp(), not now(), which is
    the transaction's start, before it waited for the lock.
    """
    return now()
