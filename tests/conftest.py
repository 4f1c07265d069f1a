import pytest

from memories import services


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
        return services.memory_remember(namespace=namespace, content=content, actor="tester", interface="cli",
                                        **fields)

    return _remember


@pytest.fixture
def actor():
    return {"actor": "tester", "interface": "cli"}
