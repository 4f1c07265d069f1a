import pytest

from memories import services


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
