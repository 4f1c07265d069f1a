"""Small helpers several test modules share."""

from django.db import connection

from memories.access import Caller
from memoryproject import dialect


class Committed:
    """The connection as a server's process sees it between requests, for a module to see through
    (``monkeypatch.setattr(module, "connection", Committed())``): the test's own transaction never
    commits, and inside one the per-process copies keep nothing, since the rows might roll back."""

    in_atomic_block = False

    def __getattr__(self, name):
        return getattr(connection, name)


def copies_as_in_a_server(monkeypatch) -> None:
    """Start this process's snapshot and vector copies empty, seeing through the test's transaction as a server's
    do; dropped after the test (its rows roll back, and later tests reuse their ids)."""
    from search import cosines, snapshot

    monkeypatch.setattr(snapshot, "connection", Committed())
    monkeypatch.setattr(cosines, "connection", Committed())
    monkeypatch.setattr(snapshot, "_snapshots", {})
    monkeypatch.setattr(cosines, "_copies", {})


def key_caller(*namespaces: str, scopes=("read", "write"), interface: str = "api") -> Caller:
    """The Caller an API key with these scopes stands for; no namespaces means every namespace."""
    return Caller(actor="key:hooks", interface=interface, scopes=frozenset(scopes), namespaces=namespaces or None)


def error_of(response, status: int) -> dict:
    """The ``error`` object of a REST error response, after checking its status and its one shape."""
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()
    assert set(body) == {"error"}
    assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "field", "memory_id"}
    return body["error"]


def clock_reads(count: int = 1) -> int:
    """The queries ``count`` readings of the clock cost: PostgreSQL's is the database's (``dialect.now``)."""
    return count if dialect.is_postgresql() else 0
