"""What an HTTP request costs the server before any work: wall time and server CPU per request.

    .venv/bin/python benchmarks/http_floor.py [--memories 10000] [--requests 300] [--rate-limits] \
        [--output benchmarks/results/http_floor.json]

A store of ``--memories`` memories (hash embedder, ``history.bulk_load``) is served as
``make run`` serves it (uvicorn, one worker, ``memoryproject.asgi``) with throttling off
(``--rate-limits``: on, with budgets no run reaches, so every keyed request is counted);
one keep-alive connection (TCP_NODELAY, as urllib3 and httpx set it) sends each request
``--requests`` times after a warm-up. Per request kind: wall p50/p95 at the client, and the
server process's CPU time per request (from /proc, user + system), which does not depend
on what else the machine runs. The kinds go from no Django view at all to a keyword
recall: a static file (WhiteNoise), a 404 under /api/ (URL resolution, the JSON error),
health (no key, one query), keyword recall by GET and POST (key check, serializer, the
engine), and the same recall as an MCP tools/call. The same recall in-process is timed
too, so the difference is the door's cost.
"""

import argparse
import http.client
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def server_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rate-limits", action="store_true", help="count every keyed request against a budget")
    parser.add_argument("--output", default="benchmarks/results/http_floor.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-http-floor-"))
    db_path = workdir / "memory.db"
    harness.setup(db_path, embedder="hash")
    from corpus import Corpus
    from django.db import connection
    from django.utils import timezone
    from history import bulk_load, make_history

    from memories.selectors import memory_recall
    from memories.services.keys import api_key_create
    from tests.subprocesses import clean_env, serve

    bulk_load(make_history(Corpus(0), args.memories, now=timezone.now(), namespace="bench"))
    _, key = api_key_create(name="http floor", scopes=["read"], actor="bench", interface="cli")
    connection.close()
    budget = "1000000" if args.rate_limits else "0"
    env = clean_env(
        workdir,
        MEMORY_DB_PATH=str(db_path),
        MEMORY_API_READS_PER_MINUTE=budget,
        MEMORY_API_WRITES_PER_MINUTE=budget,
        MEMORY_LOG_LEVEL="ERROR",
    )
    query = {"query": "deploy database", "mode": "keyword", "limit": 10}
    kinds = {
        "static file (WhiteNoise)": ("GET", "/static/dashboard/dashboard.css", None),
        "404 under /api/": ("GET", "/api/v1/nowhere/", None),
        "health": ("GET", "/api/v1/health/", None),
        "keyword recall, GET": ("GET", "/api/v1/recall/?query=deploy+database&mode=keyword&limit=10", None),
        "keyword recall, POST": ("POST", "/api/v1/recall/", query),
        # The same recall as an MCP tool call (one JSON-RPC POST; the endpoint keeps no session).
        "keyword recall, MCP tools/call": (
            "POST",
            "/mcp",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": query},
            },
        ),
    }
    results = {}
    with serve(env, timeout=120) as base:
        port = int(base.rsplit(":", 1)[1])
        pid = next(int(line.split()[0]) for line in os.popen(f"pgrep -af 'uvicorn.*--port {port}'").read().splitlines())
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        client.connect()
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }

        def call(method, path, body):
            client.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = client.getresponse()
            response.read()
            return response.status

        for name, (method, path, body) in kinds.items():
            for _ in range(20):
                call(method, path, body)
            walls, statuses = [], set()
            before = server_cpu_seconds(pid)
            for _ in range(args.requests):
                start = time.perf_counter()
                statuses.add(call(method, path, body))
                walls.append(time.perf_counter() - start)
            cpu = server_cpu_seconds(pid) - before
            results[name] = {
                **harness.summary_ms(walls),
                "status": sorted(statuses),
                "server_cpu_ms_per_request": round(cpu * 1000 / args.requests, 3),
            }
        client.close()
    for _ in range(20):
        memory_recall(**query)
    walls = []
    for _ in range(args.requests):
        start = time.perf_counter()
        memory_recall(**query)
        walls.append(time.perf_counter() - start)
    results["keyword recall, in-process"] = harness.summary_ms(walls)
    output = {
        "benchmark": "http_floor",
        "command": " ".join(sys.argv),
        "memories": args.memories,
        "requests_per_kind": args.requests,
        "rate_limits": args.rate_limits,
        "environment": harness.environment(),
        "load_average": os.getloadavg(),
        "results": results,
    }
    for name, stats in results.items():
        print(f"{name:28} p50 {stats['p50_ms']:7.2f} ms  server CPU {stats.get('server_cpu_ms_per_request', '-')}")
    harness.save(output, Path(args.output))


if __name__ == "__main__":
    main()
