"""What the PostgreSQL server under Django can do, and whether the in-process FTS5 tokenizer works."""

from dataclasses import dataclass

from django.db import connection

# PostgreSQL 15 or newer (server_version_num).
MINIMUM_VERSION = 150000


@dataclass(frozen=True)
class Capabilities:
    postgresql_version: str
    version_number: int
    fts5: bool  # of the SQLite library search.text tokenizes with, in this process

    @property
    def problems(self) -> list[str]:
        found = []
        if self.version_number < MINIMUM_VERSION:
            found.append(f"PostgreSQL {self.postgresql_version} is too old; the server needs PostgreSQL 15 or newer.")
        if not self.fts5:
            found.append("FTS5 is not compiled into the SQLite library that tokenizes text; keyword search cannot "
                         "work.")
        return found


def probe() -> Capabilities:
    """Return the connected server's version, and whether search's tokenizer has FTS5."""
    from search.text import sqlite3

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), current_setting('server_version_num')::int")
        version, number = cursor.fetchone()
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute("CREATE VIRTUAL TABLE capability_probe USING fts5(body)")
        fts5 = True
    except sqlite3.Error:
        fts5 = False
    finally:
        scratch.close()
    return Capabilities(postgresql_version=version, version_number=number, fts5=fts5)
