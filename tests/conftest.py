import os
import tempfile
from pathlib import Path

import pytest
from django.test import override_settings

from memories import services

# Fixtures every test module may ask for by name: servers and stores in processes of their own, and the browser.
pytest_plugins = ("tests.subprocesses", "tests.browser")


def pytest_collection_modifyitems(config, items):
    """Under ``make test-postgres``, skip the tests of SQLite's own mechanisms, with their reason."""
    if not os.environ.get("MEMORY_DATABASE_URL"):
        return
    for item in items:
        marker = item.get_closest_marker("sqlite_only")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"SQLite only: {marker.args[0]}"))


@pytest.fixture(scope="session", autouse=True)
def model_cache():
    """Models exported to ONNX go to one directory outside the repository, which later test runs reuse."""
    path = Path(tempfile.gettempdir()) / "memory-tests-model-cache"
    with override_settings(MEMORY_MODEL_CACHE=path):
        yield path


@pytest.fixture(autouse=True)
def hash_embedder(settings):
    """Embed with the dependency-free hash embedder; tests about meaning switch to the model themselves."""
    settings.MEMORY_EMBEDDER = "hash"


@pytest.fixture
def minilm(settings):
    """The real embedding model, for tests about semantics (loaded once per test run)."""
    settings.MEMORY_EMBEDDER = "minilm"


@pytest.fixture
def remember(db):
    """Remember through the service layer as the CLI would; returns the RememberResult."""

    def _remember(content, namespace="acme", **fields):
        return services.memory_remember(namespace=namespace, content=content, actor="tester", interface="cli", **fields)

    return _remember


@pytest.fixture
def actor():
    return {"actor": "tester", "interface": "cli"}
