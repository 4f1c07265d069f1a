"""What the PostgreSQL server under Django can do.

Search tokenizes with FTS5 in the process on either engine: ``search.text.has_fts5`` checks that part.
"""

from dataclasses import dataclass

from django.db import connection

# PostgreSQL 15 or newer (server_version_num).
MINIMUM_VERSION = 150000


@dataclass(frozen=True)
class Capabilities:
    postgresql_version: str
    version_number: int

    @property
    def problems(self) -> list[str]:
        found = []
        if self.version_number < MINIMUM_VERSION:
            found.append(f"PostgreSQL {self.postgresql_version} is too old; the server needs PostgreSQL 15 or newer.")
        return found


def probe() -> Capabilities:
    """Return the connected server's version."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), current_setting('server_version_num')::int")
        version, number = cursor.fetchone()
    return Capabilities(postgresql_version=version, version_number=number)
