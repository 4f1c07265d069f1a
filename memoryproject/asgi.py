"""ASGI entry point: ``uvicorn memoryproject.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402

from mcp_api.transport import BodyLimit  # noqa: E402

# Oversized MCP requests are refused here, before Django spools their bodies (README, MCP).
application = BodyLimit(django_application, path="/mcp", limit=settings.MEMORY_MCP_MAX_BODY_BYTES)

# Load the embedding model now, not under the first write's lock (a few seconds).
from search.embeddings import get_embedder  # noqa: E402

get_embedder().available()
