"""Server memory under many stalled request bodies, and how long the stalled sockets stay open.

    .venv/bin/python benchmarks/stalled_bodies.py [--connections 1000] [--hold 60] \
        [--output benchmarks/results/stalled_bodies.json]

A fresh server per variant, started as ``make run`` starts one (``manage.py serve``,
hash embedder), is warmed with a few whole requests; then ``--connections`` sockets each
send ``POST /mcp`` headers with ``Content-Length: 1048000`` and part of the body, and
stall. Variants:

- ``no key``: no Authorization header, 1,000,000 bytes of the body (issue 42's probe);
- ``key``: a valid key, half the body;
- ``partial-headers``: the headers cut off in the middle, no body (uvicorn's to time out,
  before any ASGI application sees the request).

The server's resident memory (``VmRSS``) is sampled every 0.1 s from before the first
connection until ``--settle`` seconds after the client closed the sockets the server
left open after ``--hold`` seconds. Per variant: RSS before, at its peak and after; the
answers the sockets got; how long each stalled socket stayed open after its last byte
was sent (the server closing it), and how many were still open at the end of the hold.
"""

import argparse
import errno
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

DECLARED = 1_048_000
LISTENING = "MEMORY_SERVER_LISTENING"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for process {pid}")


def start_server(env: dict, workdir: Path, name: str) -> tuple[subprocess.Popen, int]:
    """Start ``manage.py serve`` on a free port; return the process and the port once it listens."""
    log = open(workdir / f"server-{name}.log", "w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", "0"],
        cwd=harness.ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    for line in process.stdout:
        if line.startswith(LISTENING):
            return process, json.loads(line.split(" ", 1)[1])["port"]
    raise SystemExit(f"the server exited at start; see {workdir}/server-{name}.log")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def warm_up(port: int, key: str) -> None:
    """Whole requests through both doors, so the first stalled one does not pay for lazy imports."""
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(ping)}\r\nConnection: close\r\n\r\n"
    )
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            connection.sendall(head.encode() + ping)
            while connection.recv(65536):
                pass


def stall(
    port: int,
    pid: int,
    *,
    connections: int,
    key: str | None,
    sent_bytes: int,
    hold: float,
    settle: float,
    partial_headers: bool = False,
) -> dict:
    """Open the stalled connections, watch them and the server's memory; return the figures."""
    body = memoryview(b"x" * sent_bytes)
    authorization = f"Authorization: Bearer {key}\r\n" if key else ""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\n{authorization}"
        f"Content-Length: {DECLARED}\r\n\r\n"
    ).encode()
    if partial_headers:
        head = head[: head.index(b"Content-Length") + 10]
    selector = selectors.DefaultSelector()
    samples = []  # (seconds since start, RSS MB)
    rss_before = []
    for _ in range(5):
        rss_before.append(rss_mb(pid))
        time.sleep(0.1)
    start = time.monotonic()
    state = {}
    for _ in range(connections):
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        state[sock] = {
            "out": memoryview(head),
            "body": body,
            "stalled_at": None,
            "answered_at": None,
            "closed_at": None,
            "status": None,
            "sent": 0,
        }
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def close_by_server(sock, now):
        entry = state[sock]
        if entry["status"] is None:  # a reset met while sending: the answer may still be there to read
            try:
                data = sock.recv(65536)
                if data.startswith(b"HTTP/"):
                    entry["status"], entry["answered_at"] = int(data.split(b" ", 2)[1]), now
            except OSError:
                pass
        entry["closed_at"] = now
        if entry["stalled_at"] is None:
            entry["stalled_at"] = now  # closed before all of its part was sent
        selector.unregister(sock)
        sock.close()

    next_sample = start
    open_count = connections
    deadline = None
    while True:
        now = time.monotonic()
        if now >= next_sample:
            samples.append((round(now - start, 2), rss_mb(pid)))
            next_sample = now + 0.1
        if deadline is None and all(entry["stalled_at"] is not None for entry in state.values()):
            deadline = now + hold  # every socket has sent what it will send
        if open_count == 0 or (deadline is not None and now >= deadline):
            break
        for handle, events in selector.select(timeout=0.05):
            sock, entry = handle.fileobj, state[handle.fileobj]
            now = time.monotonic()
            if events & selectors.EVENT_READ:
                try:
                    data = sock.recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                if data and entry["status"] is None:
                    entry["status"] = int(data.split(b" ", 2)[1])
                    entry["answered_at"] = now
                if not data:
                    close_by_server(sock, now)
                    open_count -= 1
                    continue
            if events & selectors.EVENT_WRITE:
                try:
                    if entry["out"]:
                        sent = sock.send(entry["out"])
                        entry["out"] = entry["out"][sent:]
                    elif entry["body"]:
                        sent = sock.send(entry["body"][:262144])
                        entry["body"] = entry["body"][sent:]
                        entry["sent"] += sent
                except BlockingIOError:
                    continue
                except OSError as error:
                    if error.errno in (errno.ECONNRESET, errno.EPIPE):
                        close_by_server(sock, now)
                        open_count -= 1
                        continue
                    raise
                if not entry["out"] and not entry["body"]:
                    entry["stalled_at"] = now
                    selector.modify(sock, selectors.EVENT_READ)
    held_until = time.monotonic()
    still_open = [sock for sock in state if state[sock]["closed_at"] is None]
    for sock in still_open:
        selector.unregister(sock)
        sock.close()
    closed = time.monotonic()
    while time.monotonic() < closed + settle:
        samples.append((round(time.monotonic() - start, 2), rss_mb(pid)))
        time.sleep(0.1)
    rss_after = samples[-1][1]
    open_for = sorted(
        entry["closed_at"] - entry["stalled_at"] for entry in state.values() if entry["closed_at"] is not None
    )
    answered_in = sorted(entry["answered_at"] - start for entry in state.values() if entry["answered_at"] is not None)
    peak = max(value for _, value in samples)
    return {
        "connections": connections,
        "key": key is not None,
        "partial_headers": partial_headers,
        "body_bytes_sent_each": len(body),
        "body_bytes_sent_in_all": sum(entry["sent"] for entry in state.values()),
        "rss_before_mb": max(rss_before),
        "rss_peak_mb": peak,
        "rss_peak_growth_mb": round(peak - max(rss_before), 1),
        "rss_after_close_mb": rss_after,
        "rss_kept_after_close_mb": round(rss_after - max(rss_before), 1),
        "answers": dict(Counter(str(entry["status"]) for entry in state.values())),
        "answered_seconds_from_start": (
            {"p50": round(harness.percentile(answered_in, 0.5), 3), "max": round(answered_in[-1], 3)}
            if answered_in
            else None
        ),
        "closed_by_server": len(open_for),
        "seconds_open_after_stalling": (
            {"p50": round(harness.percentile(open_for, 0.5), 3), "max": round(open_for[-1], 3)} if open_for else None
        ),
        "still_open_after_hold": len(still_open),
        "hold_seconds": round(held_until - start, 1),
        "settle_seconds": settle,
        "rss_samples": samples,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument(
        "--hold",
        type=float,
        default=60.0,
        help="seconds to keep the stalled sockets open once all have sent their part",
    )
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to watch memory after closing them")
    parser.add_argument(
        "--variants", default="no-key,key,partial-headers", help="comma-separated: no-key, key, partial-headers"
    )
    parser.add_argument("--body-timeout", type=int, help="the server's MEMORY_BODY_TIMEOUT (default: its own)")
    parser.add_argument("--output", default="benchmarks/results/stalled_bodies.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-stalled-bodies-"))
    db_path = workdir / "memory.db"
    harness.setup(db_path, embedder="hash")
    from django.core.management import call_command
    from django.db import connection

    from memories.services.keys import api_key_create
    from tests.subprocesses import clean_env

    _, key = api_key_create(name="stalled bodies", scopes=["read", "write"], actor="bench", interface="cli")
    call_command("first_run", stdout=open(os.devnull, "w"))
    connection.close()
    env = clean_env(workdir, MEMORY_DB_PATH=str(db_path), MEMORY_LOG_LEVEL="ERROR")
    if args.body_timeout is not None:
        env["MEMORY_BODY_TIMEOUT"] = str(args.body_timeout)
    variants = {
        "no-key": {"key": None, "sent_bytes": 1_000_000},
        "key": {"key": key, "sent_bytes": DECLARED // 2},
        "partial-headers": {"key": None, "sent_bytes": 0, "partial_headers": True},
    }
    results = {}
    for name in args.variants.split(","):
        process, port = start_server(env, workdir, name)
        try:
            warm_up(port, key)
            time.sleep(1)
            results[name] = stall(
                port, process.pid, connections=args.connections, hold=args.hold, settle=args.settle, **variants[name]
            )
        finally:
            stop_server(process)
        figures = {field: value for field, value in results[name].items() if field != "rss_samples"}
        print(name, json.dumps(figures))
    output = {
        "benchmark": "stalled_bodies",
        "command": " ".join(sys.argv),
        "declared_content_length": DECLARED,
        "environment": harness.environment(),
        "load_average": os.getloadavg(),
        "results": results,
    }
    harness.save(output, Path(args.output))


if __name__ == "__main__":
    main()
