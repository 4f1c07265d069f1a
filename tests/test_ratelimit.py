"""Rate limits hold per deployment: servers sharing a database share each key's budget (memories/ratelimit.py).

Run on SQLite by default and on PostgreSQL under ``python -m tests.postgres``: the two
servers are real processes on one database, as behind a load balancer.
"""

import contextlib
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memories.ratelimit import WINDOW_SECONDS
from tests.mcp_client import http_client
from tests.subprocesses import serve


def _clear_of_a_window_boundary(needed: float = 15) -> None:
    """Wait, if need be, for a new one-minute window: a test's counts must not be split between two."""
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < needed:
        time.sleep(left + 0.1)


@contextlib.contextmanager
def two_servers(instance, tmp_path, **limits: str):
    """Two server processes on ``instance``'s database (each its own data directory for its log and secret key)."""
    env = {**instance.env, **limits}
    second = tmp_path / "second"
    second.mkdir()
    with serve(env) as first_base, serve({**env, "MEMORY_DATA_DIR": str(second)}) as second_base:
        yield first_base, second_base


def test_two_servers_on_one_database_allow_a_key_its_reads_and_writes_once_not_twice(instance, tmp_path):
    token = instance.create_api_keys(limited={})["limited"]
    headers = {"Authorization": f"Bearer {token}"}
    with two_servers(instance, tmp_path, MEMORY_API_READS_PER_MINUTE="10", MEMORY_API_WRITES_PER_MINUTE="4") as bases:
        clients = [httpx.Client(base_url=f"{base}/api/v1", headers=headers, timeout=30) for base in bases]

        def read(number: int) -> httpx.Response:
            return clients[number % 2].get("/memories/", params={"namespace": "rates"})

        def write(number: int) -> httpx.Response:
            body = {"namespace": "rates", "content": f"Rate fact {number}."}
            return clients[number % 2].post("/memories/", json=body)

        _clear_of_a_window_boundary()
        # At once, half to each server: each request is counted once, whatever the interleaving.
        with ThreadPoolExecutor(8) as pool:
            reads = list(pool.map(read, range(24)))
            writes = list(pool.map(write, range(10)))
        statuses = sorted(response.status_code for response in reads)
        assert statuses == [200] * 10 + [429] * 14
        assert sorted(response.status_code for response in writes) == [201] * 4 + [429] * 6
        refused = next(response for response in reads if response.status_code == 429)
        assert refused.json()["error"]["code"] == "throttled"
        assert "10 reads a minute (MEMORY_API_READS_PER_MINUTE)" in refused.json()["error"]["message"]
        assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_SECONDS
        # MCP on either server spends the same budget: spent.
        with http_client(f"{bases[1]}/mcp", token) as mcp:
            assert "4 writes a minute" in mcp.error("memory_remember", {"content": "One more.", "namespace": "rates"})
        stored = instance.sql("SELECT count(*) FROM memories_memory WHERE namespace = 'rates'")
    assert stored == [(4,)]


def test_another_key_keeps_its_own_budget_on_both_servers(instance, tmp_path):
    tokens = instance.create_api_keys(spent={}, fresh={})
    with two_servers(instance, tmp_path, MEMORY_API_READS_PER_MINUTE="2") as bases:
        _clear_of_a_window_boundary()
        for base in bases:
            httpx.get(f"{base}/api/v1/memories/", headers={"Authorization": f"Bearer {tokens['spent']}"})
        for base in bases:
            fresh = httpx.get(f"{base}/api/v1/memories/", headers={"Authorization": f"Bearer {tokens['fresh']}"})
            spent = httpx.get(f"{base}/api/v1/memories/", headers={"Authorization": f"Bearer {tokens['spent']}"})
            assert (fresh.status_code, spent.status_code) == (200, 429)


@pytest.mark.sqlite_only("SQLite's single write lock")
def test_counting_a_read_does_not_wait_for_a_long_write_on_sqlite(instance):
    token = instance.create_api_keys(reader={})["reader"]
    env = {**instance.env, "MEMORY_DB_BUSY_TIMEOUT": "5"}
    with serve(env) as base:
        client = httpx.Client(base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert client.get("/memories/").status_code == 200  # stamps the key's last use: no write for a minute
        # A long write (an import, a purge) holds the store's write lock.
        with contextlib.closing(sqlite3.connect(instance.db_path, isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            answered = client.get("/memories/")
            waited = time.monotonic() - started
            writer.execute("ROLLBACK")
    assert answered.status_code == 200
    assert waited < 2, f"a read waited {waited:.1f} s for the write lock"
