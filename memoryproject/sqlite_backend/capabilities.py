"""What the SQLite library under Django can do: FTS5, sqlite-vec."""

from dataclasses import dataclass

from django.db import connection


@dataclass(frozen=True)
class Capabilities:
    sqlite_version: str
    fts5: bool
    sqlite_vec: str | None  # version, or None when the extension is not loaded

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.fts5:
            found.append("FTS5 is not compiled into SQLite; keyword search cannot work.")
        if not self.sqlite_vec:
            found.append("The sqlite-vec extension is not loaded; vector search cannot work.")
        return found


def probe() -> Capabilities:
    """Return what the connected SQLite supports, trying each feature on a temp table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_version()")
        version = cursor.fetchone()[0]
        fts5 = _works(cursor, "CREATE VIRTUAL TABLE temp.capability_probe USING fts5(body)")
        try:
            cursor.execute("SELECT vec_version()")
            vec = cursor.fetchone()[0]
        except Exception:
            vec = None
    return Capabilities(sqlite_version=version, fts5=fts5, sqlite_vec=vec)


def _works(cursor, create_sql: str) -> bool:
    try:
        cursor.execute(create_sql)
    except Exception:
        return False
    cursor.execute("DROP TABLE temp.capability_probe")
    return True
