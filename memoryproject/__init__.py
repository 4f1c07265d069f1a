"""The memory server: a Django project (settings, URLs, ASGI/WSGI entry points, SQLite backend)."""

__version__ = "0.1.0"
