"""SQLite backend that loads sqlite-vec and sets the pragmas this server relies on.

Python's stdlib ``sqlite3`` is often built without ``enable_load_extension``
(it is here). Django's SQLite backend imports ``sqlite3`` by name, so the swap
to ``pysqlite3`` (a newer SQLite with extension loading, FTS5 and trigram) must
happen before Django's backend module is first imported.
"""

import sqlite3 as _stdlib_sqlite3
import sys

if not hasattr(_stdlib_sqlite3.Connection, "enable_load_extension"):
    if "django.db.backends.sqlite3.base" in sys.modules:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "django.db.backends.sqlite3 was imported before memoryproject.sqlite_backend; "
            "it would keep the stdlib sqlite3 that cannot load sqlite-vec."
        )
    import pysqlite3
    import pysqlite3.dbapi2

    sys.modules["sqlite3"] = pysqlite3
    sys.modules["sqlite3.dbapi2"] = pysqlite3.dbapi2
