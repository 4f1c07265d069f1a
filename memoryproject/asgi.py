"""ASGI entry point: ``uvicorn memoryproject.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
application = get_asgi_application()

# Load the embedding model now, not under the first write's lock (a few seconds).
from search.embeddings import get_embedder  # noqa: E402

get_embedder().available()
