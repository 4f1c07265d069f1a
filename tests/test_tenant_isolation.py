"""The work a recall does depends only on the namespaces it searches.

If a word only another namespace holds made a recall do more work than a word nobody
holds, its timing would tell one tenant what another stores. The count of SQLite
virtual-machine steps a recall runs is a deterministic measure of that work.
"""

import pytest
from django.db import connection

from memories import services
from memories.selectors import memory_recall
from tests.helpers import copies_as_in_a_server

ACTOR = {"actor": "tester", "interface": "cli"}


def sqlite_steps(call) -> int:
    """How many virtual-machine steps SQLite runs for ``call``."""
    connection.ensure_connection()
    steps = 0

    def step():
        nonlocal steps
        steps += 1
        return 0  # go on

    connection.connection.set_progress_handler(step, 1)
    try:
        call()
    finally:
        connection.connection.set_progress_handler(None, 1)
    return steps


@pytest.fixture
def alpha(db, monkeypatch):
    """Alpha's memories, and one in omega, whose keys sort after everyone's (as they would in a live store).

    The per-process caches see through the test's transaction, as they work in a server, and
    are dropped after it: its rows roll back, and later tests reuse their ids.
    """
    copies_as_in_a_server(monkeypatch)
    for number in range(20):
        services.memory_remember(namespace="alpha", content=f"Alpha note {number} about the quarterly budget.", **ACTOR)
    services.memory_remember(namespace="omega", content="Omega keeps the last word.", **ACTOR)


def store_in_beta(count=150):
    for number in range(count):
        services.memory_remember(
            namespace="beta",
            content=f"Beta secret {number}: the zanzibarite vault sits in the 坐标系统 room, row {number}.",
            **ACTOR,
        )


@pytest.mark.sqlite_only("counts SQLite's VM steps; PostgreSQL has no such counter")
@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(
    "word",
    [
        "zanzibarite",  # a whole word
        "zanzibar",  # a word's beginning: the prefix range
        "anzibari",  # inside a word: the substring channel
        "坐标系统",  # CJK: the bigram channel
    ],
)
def test_what_another_namespace_stores_does_not_change_the_work_of_a_recall(alpha, mode, word):
    def recall():
        return memory_recall(query=f"budget {word}", namespace="alpha", mode=mode, limit=5)

    recall(), recall()  # caches warmed
    before = sqlite_steps(recall)
    store_in_beta()
    assert {hit.memory.namespace for hit in memory_recall(query=word, namespace="beta").hits} == {"beta"}
    recall(), recall()
    assert sqlite_steps(recall) == before
    assert [hit.memory.namespace for hit in recall().hits] == ["alpha"] * 5


def test_a_moved_memory_is_found_by_its_words_in_its_new_namespace_only(alpha):
    store_in_beta(10)
    moved = services.memory_remember(
        namespace="alpha", content="The lighthouse keeper logs the fog horn tests.", **ACTOR
    ).memory.id
    services.memory_move(memory_id=moved, namespace="beta", **ACTOR)
    for query in ("lighthouse", "lightho", "ghthous"):  # a word, a prefix, a substring
        assert [hit.memory.id for hit in memory_recall(query=query, namespace="beta", mode="keyword").hits] == [moved]
        assert memory_recall(query=query, namespace="alpha", mode="keyword").hits == []
    services.memory_move(memory_id=moved, namespace="alpha", **ACTOR)
    assert [hit.memory.id for hit in memory_recall(query="lighthouse", namespace="alpha", mode="keyword").hits] == [
        moved
    ]
    assert memory_recall(query="lighthouse", namespace="beta", mode="keyword").hits == []
