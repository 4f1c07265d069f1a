"""DatabaseWrapper: Django's SQLite backend plus sqlite-vec and durable, concurrent pragmas."""

import sqlite_vec
from django.conf import settings
from django.db.backends.sqlite3 import base as sqlite3_base

Database = sqlite3_base.Database

# Pragmas set on every new connection, and why:
CONNECTION_PRAGMAS = (
    # Readers never block the writer and the writer never blocks readers.
    "PRAGMA journal_mode = WAL",
    # In WAL mode NORMAL is durable across application crashes; only a power
    # loss can drop the last transactions, never corrupt the file.
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    # Freed pages are zeroed, so erased text does not linger in the file.
    "PRAGMA secure_delete = ON",
)


class DatabaseWrapper(sqlite3_base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        conn = super().get_new_connection(conn_params)
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        timeout_ms = int(float(conn_params.get("timeout", 5)) * 1000)
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms:d}")
        for pragma in CONNECTION_PRAGMAS:
            conn.execute(pragma)
        # Reads through a memory map (settings.MEMORY_DB_MMAP_MB): no read() call or copy per page.
        conn.execute(f"PRAGMA mmap_size = {int(settings.MEMORY_DB_MMAP_MB) * 2**20:d}")
        return conn
