"""PostgreSQL backend: Django's, plus the write lock and the storage errors the SQLite backend gives."""
