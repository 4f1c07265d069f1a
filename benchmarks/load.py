"""Load: clients over REST and MCP against two server processes on one database, plus a CLI writer.

What it does, in order:

1. builds a store of ``--size`` memories in namespace ``bench`` (``history.make_history``
   and ``history.bulk_load``, vectors from ``--embedder``) and creates an API key;
2. starts ``--servers`` processes of ``manage.py serve`` (what ``make run`` starts) on free
   loopback ports, all on that one database file, with the API's rate limits off;
3. runs ``--clients`` clients, half REST (``http.client``, one keep-alive connection
   each), half MCP (the official ``mcp`` client over Streamable HTTP), spread over the
   servers, each mixing 70% recall, 20% remember and 10% update, forget and history of
   the memories it wrote; beside them a CLI writer runs ``manage.py memory remember``, one
   process per write, starting one every ``--cli-interval`` seconds as an operator's
   script would. The REST and the MCP clients run in two processes of their own, so
   neither group's Python waits for the other's;
4. phases: ``warmup`` (not judged), ``closed`` (each client sends its next request when the
   last is answered: the servers saturated, which measures the capacity) and ``open``
   (requests arrive in a Poisson stream whatever the answers; a request's time runs from
   its arrival, so time spent queued for a free client counts). The open phase offers
   ``--open-share`` (70%) of the rate the closed phase answered, a load that travels
   between machines; ``--rate`` names absolute rates instead, once per rate when it lists
   several (``10,20,30``), each phase named ``open-<rate>``;
5. reports throughput, p50/p95/p99/max per operation and every error, then judges each
   open phase: every operation's p99 at most 5x its p50, no error; and checks through the
   database that every acknowledged write is there
   exactly once (each remembered key one memory holding its text once, each update's
   text once, each forget one tombstone) and that the full-text indexes match the store;
   and each server's memory (resident, and its peak) before it stops.

The database is a SQLite file (``--database sqlite``, the default), or PostgreSQL:
``--database postgresql`` starts a throwaway cluster with PostgreSQL's default durability,
and a ``postgresql://`` URL names a server whose user may create databases (``memory_load``
is dropped first and at the end). Two servers on each engine, one run after the other::

    .venv/bin/python benchmarks/load.py --database sqlite --output benchmarks/results/load-sqlite.json
    .venv/bin/python benchmarks/load.py --database postgresql --output benchmarks/results/load-postgresql.json

Run it on an otherwise idle machine; ``--size 5000 --seconds 20`` is a quick check.
"""

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing
import os
import queue
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import harness

OPERATIONS = ("recall", "remember", "update", "forget", "history")
# The share of each operation in a client's requests (issue 26).
MIX = {"recall": 0.70, "remember": 0.20, "update": 0.10 / 3, "forget": 0.10 / 3, "history": 0.10 / 3}
NAMESPACE = "bench"
REQUEST_TIMEOUT = 120
# uvicorn closes a keep-alive connection idle for 5 s; a request sent as it does would fail.
IDLE_RECONNECT_SECONDS = 3.0
# The goals, checked in the saved result for each judged phase: no operation's p99 over this many times its p50.
P99_OVER_P50_MAX = 5.0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store (default 100,000)")
    parser.add_argument("--clients", type=int, default=16, help="client workers, half REST and half MCP")
    parser.add_argument("--servers", type=int, default=2, help="server processes on the one database")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the closed and of the open phase")
    parser.add_argument("--warmup", type=float, default=10.0, help="length of the warm-up phase (not judged)")
    parser.add_argument(
        "--open-share",
        type=float,
        default=0.7,
        help="the open phase offers this share of the closed phase's answered rate (default 0.7)",
    )
    parser.add_argument(
        "--rate",
        type=_rates,
        default=None,
        help="requests a second offered in the open phase instead; several, comma-separated, run one each",
    )
    parser.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument(
        "--no-cli-writer",
        dest="cli_writer",
        action="store_false",
        help="leave out the `manage.py memory remember` loop",
    )
    parser.add_argument(
        "--cli-interval",
        type=float,
        default=5.0,
        help="seconds from one CLI write's start to the next (0: back to back; default 5)",
    )
    parser.add_argument("--phases", default="closed,open", help="which judged phases to run, in order")
    parser.add_argument(
        "--database",
        default="sqlite",
        help="sqlite (the default), postgresql (a throwaway cluster), or a postgresql:// URL whose "
        "user may create databases",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the database and server logs go (default: a new temporary directory)",
    )
    parser.add_argument("--label", default=None, help="a name for this run in the result")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/load.json"))
    return parser.parse_args()


def _rates(text: str) -> list[float]:
    return [float(part) for part in text.split(",")]


# ---- the store and the servers (the parent process) ----


def build_store(db_path: Path, database_url: str | None, args) -> tuple[str, list[str], list[int], dict]:
    """Build the store; return an API key, recall queries, some memory ids, and how the load went."""
    # With MiniLM, the store's vectors are the hash embedder's, relabelled (as latency.py does at 100k):
    # embedding 100k texts would take most of an hour; the servers embed every query and write for real.
    harness.setup(db_path, embedder="hash", database_url=database_url)
    from corpus import Corpus
    from django.core.management import call_command
    from django.db import connection, connections
    from history import bulk_load, make_history
    from latency import make_queries

    from memories.models import Memory
    from memories.services.keys import api_key_create

    corpus = Corpus(args.seed)
    memories = make_history(corpus, args.size, now=dt.datetime.now(dt.timezone.utc), namespace=NAMESPACE)
    started = time.perf_counter()
    revisions = bulk_load(memories)
    from memoryproject import dialect

    load = {
        "memories": args.size,
        "revisions": revisions,
        "seconds": round(time.perf_counter() - started, 1),
        "how": "history.bulk_load",
        "embedder": args.embedder,
        "engine": dialect.engine(),
        "database_mb": round(dialect.size_bytes() / 2**20, 1),
    }
    if args.embedder == "minilm":
        from latency import MINILM_NAME

        with connection.cursor() as cursor:
            cursor.execute("UPDATE search_embedding_space SET embedder = %s WHERE id = 1", [MINILM_NAME])
        load["note"] = "stored vectors are hash-embedder vectors relabelled as MiniLM's; every query and write embeds"
    # Once here, so that the servers' own first_run finds a login and does nothing.
    call_command("first_run", stdout=open(os.devnull, "w"))
    _, token = api_key_create(name="load", scopes=["read", "write"], actor="bench", interface="cli")
    queries = make_queries(corpus, memories, 500, random.Random(args.seed))
    ids = list(Memory.objects.filter(namespace=NAMESPACE).order_by("?").values_list("pk", flat=True)[:500])
    connections.close_all()
    return token, queries, ids, load


def server_env(db_path: Path, database_url: str | None, embedder: str) -> dict:
    env = dict(os.environ)
    if database_url:
        env["MEMORY_DATABASE_URL"] = database_url
    env.update(
        MEMORY_DB_PATH=str(db_path),
        MEMORY_EMBEDDER=embedder,
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        # One key drives many clients here: the per-key request limits would refuse most requests.
        MEMORY_API_READS_PER_MINUTE="0",
        MEMORY_API_WRITES_PER_MINUTE="0",
        MEMORY_LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_servers(count: int, env: dict, workdir: Path) -> tuple[list[subprocess.Popen], list[str]]:
    """Start ``manage.py serve`` ``count`` times on free ports; return the processes and base URLs once all answer."""
    processes, bases = [], []
    for number in range(count):
        port = free_port()
        log = open(workdir / f"server-{number}.log", "w")
        processes.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "serve", "--port", str(port)],
                cwd=harness.ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        bases.append(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 120
    for process, base in zip(processes, bases):
        while not _answers(base):
            if process.poll() is not None:
                raise SystemExit(f"a server exited at start; see {workdir}/server-*.log")
            if time.monotonic() > deadline:
                raise SystemExit(f"{base} did not answer within 120 seconds")
            time.sleep(0.2)
    return processes, bases


def _answers(base: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/api/v1/health/", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def server_memory(processes: list[subprocess.Popen]) -> list[dict]:
    """Each server's resident memory and its peak, in MB (Linux's /proc)."""
    found = []
    for process in processes:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{process.pid}/status").read_text().splitlines())
        found.append(
            {
                name: round(int(fields[field].split()[0]) / 1024, 1)
                for name, field in (("rss_mb", "VmRSS"), ("peak_rss_mb", "VmHWM"))
            }
        )
    return found


def stop_servers(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---- what a client does (the client processes) ----


class Plan:
    """One client's requests: the operation mix, and the memories it wrote, which its updates and forgets touch."""

    def __init__(self, name: str, seed: str, queries: list[str], texts: list[str], store_ids: list[int]):
        self.name = name
        self.rng = random.Random(seed)
        self.queries, self.texts, self.store_ids = queries, texts, store_ids
        self.written: list[int] = []  # ids of this client's memories that are not forgotten
        self.count = 0

    def next(self) -> tuple[str, dict]:
        operation = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if operation in ("update", "forget") and not self.written:
            operation = "remember"
        self.count += 1
        if operation == "recall":
            return operation, {"query": self.rng.choice(self.queries), "namespace": NAMESPACE, "limit": 10}
        if operation == "remember":
            key = f"{self.name}-{self.count}"
            return operation, {"namespace": NAMESPACE, "key": key, "content": self._text(key)}
        if operation == "update":
            memory_id = self.rng.choice(self.written)
            return operation, {"id": memory_id, "content": self._text(f"{self.name}-{self.count} update")}
        if operation == "forget":
            return operation, {"id": self.written.pop(self.rng.randrange(len(self.written)))}
        pool = self.written if self.written and self.rng.random() < 0.5 else self.store_ids
        return operation, {"id": self.rng.choice(pool)}

    def _text(self, mark: str) -> str:
        # The mark makes every text unique, so no write is an exact duplicate of another.
        return f"{self.rng.choice(self.texts)} (load {mark})"

    def acknowledged(self, operation: str, arguments: dict, answer: dict) -> dict | None:
        """Note a write's answer; return what must then be in the store."""
        if operation == "remember":
            memory_id = answer["id"]
            self.written.append(memory_id)
            return {"operation": operation, "id": memory_id, "key": arguments["key"], "content": arguments["content"]}
        if operation == "update":
            return {"operation": operation, "id": arguments["id"], "content": arguments["content"]}
        if operation == "forget":
            return {"operation": operation, "id": arguments["id"]}
        return None


def rest_request(connection, token: str, operation: str, arguments: dict) -> dict:
    """Send one operation over REST on a keep-alive connection; return the JSON answer or raise with the status."""
    path, method, body = {
        "recall": (f"/api/v1/recall/?{urllib.parse.urlencode(arguments)}", "GET", None),
        "remember": ("/api/v1/memories/", "POST", arguments),
        "update": (f"/api/v1/memories/{arguments.get('id')}/", "PATCH", {"content": arguments.get("content")}),
        "forget": (f"/api/v1/memories/{arguments.get('id')}/", "DELETE", None),
        "history": (f"/api/v1/memories/{arguments.get('id')}/history/", "GET", None),
    }[operation]
    headers = {"Authorization": f"Bearer {token}"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection.request(method, path, body=payload, headers=headers)
    response = connection.getresponse()
    data = response.read()
    if response.status not in (200, 201):
        raise RuntimeError(f"HTTP {response.status}: {data[:300].decode(errors='replace')}")
    return json.loads(data)


class Recorder:
    """Latencies and errors by operation, and the acknowledged writes, of one client group in one phase."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seconds = {operation: [] for operation in (*OPERATIONS, "cli_remember")}
        self.errors: list[dict] = []
        self.writes: list[dict] = []
        # (arrival as Unix time, seconds, operation) of each answer: when the slow ones came (the phase's timeline).
        self.timeline: list[tuple[float, float, str]] = []

    def done(self, operation: str, started: float, *, write: dict | None = None, error: str | None = None):
        elapsed = time.perf_counter() - started
        with self.lock:
            if error is not None:
                self.errors.append({"operation": operation, "error": error[:500]})
                return
            self.seconds[operation].append(elapsed)
            self.timeline.append((round(time.time() - elapsed, 3), round(elapsed, 4), operation))
            if write is not None:
                self.writes.append(write)

    def as_dict(self) -> dict:
        # CPU this client process spent: when it is near the phase's length, the clients were the bottleneck.
        return {
            "seconds": self.seconds,
            "errors": self.errors,
            "writes": self.writes,
            "timeline": self.timeline,
            "client_cpu_seconds": round(time.process_time(), 2),
        }


def arrivals(rate: float, start: float, end: float, seed: str):
    """Poisson arrival times (perf_counter seconds) from ``start`` to ``end`` at ``rate`` a second."""
    rng = random.Random(seed)
    moment = start
    while True:
        moment += rng.expovariate(rate)
        if moment >= end:
            return
        yield moment


def run_rest_group(config: dict, output: str) -> None:
    """The REST clients of one phase, in threads: closed loop, or serving the arrivals of an open loop."""
    import http.client

    recorder = Recorder()
    plans = [
        Plan(**spec, queries=config["queries"], texts=config["texts"], store_ids=config["store_ids"])
        for spec in config["plans"]
    ]
    start, end = _phase_clock(config)
    inbox: queue.Queue = queue.Queue()

    def client(plan: Plan, base: str):
        connection = http.client.HTTPConnection(urllib.parse.urlsplit(base).netloc, timeout=REQUEST_TIMEOUT)
        last_answer = time.perf_counter()
        while True:
            if config["open_rate"]:
                arrived = inbox.get()
                if arrived is None:
                    return
            else:
                arrived = time.perf_counter()
                if arrived >= end:
                    return
            operation, arguments = plan.next()
            if time.perf_counter() - last_answer > IDLE_RECONNECT_SECONDS:
                connection.close()  # the server may be closing it; http.client opens a new one
            try:
                answer = rest_request(connection, config["token"], operation, arguments)
            except Exception as error:  # every failure is reported, none stops the client
                connection.close()
                recorder.done(operation, arrived, error=f"{type(error).__name__}: {error}")
                continue
            finally:
                last_answer = time.perf_counter()
            recorder.done(operation, arrived, write=plan.acknowledged(operation, arguments, answer))

    threads = [
        threading.Thread(target=client, args=(plan, config["bases"][number % len(config["bases"])]))
        for number, plan in enumerate(plans)
    ]
    _sleep_until(start)
    for thread in threads:
        thread.start()
    if config["open_rate"]:
        for moment in arrivals(config["open_rate"], start, end, config["seed"]):
            _sleep_until(moment)
            inbox.put(moment)
        for _ in threads:
            inbox.put(None)
    for thread in threads:
        thread.join()
    Path(output).write_text(json.dumps(recorder.as_dict()))


def run_mcp_group(config: dict, output: str) -> None:
    """The MCP clients of one phase: one session each, over Streamable HTTP, in one event loop."""
    _validate_with_cached_validators()
    asyncio.run(_mcp_group(config, output))


def _validate_with_cached_validators() -> None:
    """Make ``jsonschema.validate`` check each schema once, then reuse its validator.

    The official client validates every tool result with ``jsonschema.validate``, which
    first checks the tool's output schema itself, on every call: for a recall that costs
    the client far more CPU than the server spends answering, and the MCP figures would
    measure the client. Results are still validated, against the same schemas.
    """
    import jsonschema

    validators = {}

    def validate(instance, schema, *args, **kwargs):
        if id(schema) not in validators:
            validator_class = jsonschema.validators.validator_for(schema)
            validator_class.check_schema(schema)
            # The schema is kept with its validator, so its id is not reused by another object.
            validators[id(schema)] = (schema, validator_class(schema, *args, **kwargs))
        validators[id(schema)][1].validate(instance)

    jsonschema.validate = validate


async def _mcp_group(config: dict, output: str) -> None:
    from contextlib import AsyncExitStack

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    recorder = Recorder()
    plans = [
        Plan(**spec, queries=config["queries"], texts=config["texts"], store_ids=config["store_ids"])
        for spec in config["plans"]
    ]
    start, end = _phase_clock(config)
    inbox: asyncio.Queue = asyncio.Queue()
    # Each operation as an MCP call: a tool, and how its arguments differ from the plan's.
    calls = {operation: (f"memory_{operation}", lambda arguments: arguments) for operation in OPERATIONS}
    calls["forget"] = ("memory_set_state", lambda arguments: {**arguments, "action": "forget"})

    async with AsyncExitStack() as stack:
        sessions = []
        for number in range(len(plans)):
            base = config["bases"][number % len(config["bases"])]
            http = await stack.enter_async_context(
                httpx.AsyncClient(
                    headers={"Authorization": f"Bearer {config['token']}"}, timeout=httpx.Timeout(REQUEST_TIMEOUT)
                )
            )
            read, write, _ = await stack.enter_async_context(streamable_http_client(f"{base}/mcp", http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)

        async def client(plan: Plan, session):
            while True:
                if config["open_rate"]:
                    arrived = await inbox.get()
                    if arrived is None:
                        return
                else:
                    arrived = time.perf_counter()
                    if arrived >= end:
                        return
                operation, arguments = plan.next()
                try:
                    tool, shaped = calls[operation]
                    result = await session.call_tool(tool, shaped(arguments))
                except Exception as error:
                    recorder.done(operation, arrived, error=f"{type(error).__name__}: {error}")
                    continue
                if result.isError:
                    recorder.done(operation, arrived, error=result.content[0].text if result.content else "isError")
                    continue
                recorder.done(
                    operation, arrived, write=plan.acknowledged(operation, arguments, result.structuredContent)
                )

        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        tasks = [asyncio.create_task(client(plan, session)) for plan, session in zip(plans, sessions)]
        if config["open_rate"]:
            for moment in arrivals(config["open_rate"], start, end, config["seed"]):
                await asyncio.sleep(max(0.0, moment - time.perf_counter()))
                inbox.put_nowait(moment)
            for _ in tasks:
                inbox.put_nowait(None)
        await asyncio.gather(*tasks)
    Path(output).write_text(json.dumps(recorder.as_dict()))


def _phase_clock(config: dict) -> tuple[float, float]:
    """The phase's start and end on this process's perf_counter, from the wall-clock start all groups share."""
    start = time.perf_counter() + (config["start_at"] - time.time())
    return start, start + config["seconds"]


def _sleep_until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


# ---- a phase (the parent process) ----


def cli_writer(
    env: dict, start_at: float, seconds: float, interval: float, run: str, texts: list[str], recorder: Recorder
) -> None:
    """Remember through ``manage.py memory remember``, one process per write started every ``interval`` seconds."""
    rng = random.Random(run)
    time.sleep(max(0.0, start_at - time.time()))
    end = time.perf_counter() + seconds
    number, started = 0, 0.0  # started: when the last process was started
    while time.perf_counter() < end:
        if number:
            _sleep_until(started + interval)
        number += 1
        key = f"{run}-cli-{number}"
        content = f"{rng.choice(texts)} (load {key})"
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "manage.py", "memory", "remember", content, "--namespace", NAMESPACE, "--key", key],
            cwd=harness.ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            recorder.done("cli_remember", started, error=done.stderr.strip() or f"exit status {done.returncode}")
            continue
        memory_id = json.loads(done.stdout)["id"]
        recorder.done(
            "cli_remember", started, write={"operation": "remember", "id": memory_id, "key": key, "content": content}
        )


def run_phase(
    name: str,
    *,
    args,
    run: str,
    bases: list[str],
    token: str,
    queries: list[str],
    texts: list[str],
    store_ids: list[int],
    env: dict,
    workdir: Path,
    open_rate: float | None,
    seconds: float,
) -> tuple[dict, list[dict]]:
    """Run one phase with every client group and the CLI writer; return its figures and the acknowledged writes."""
    rest_clients = args.clients // 2
    groups = {"rest": (run_rest_group, rest_clients), "mcp": (run_mcp_group, args.clients - rest_clients)}
    start_at = time.time() + 10  # time for the group processes to start and open their sessions
    context = multiprocessing.get_context("spawn")
    processes, outputs = [], {}
    for group, (target, clients) in groups.items():
        if not clients:
            continue
        plans = [
            {"name": f"{run}-{name}-{group}{number}", "seed": f"{args.seed}-{name}-{group}{number}"}
            for number in range(clients)
        ]
        # The open rate is shared out by the groups' client counts.
        config = {
            "plans": plans,
            "queries": queries,
            "texts": texts,
            "store_ids": store_ids,
            "bases": bases,
            "token": token,
            "start_at": start_at,
            "seconds": seconds,
            "open_rate": open_rate * clients / args.clients if open_rate else None,
            "seed": f"{args.seed}-{name}-{group}",
        }
        outputs[group] = workdir / f"{name}-{group}.json"
        process = context.Process(target=target, args=(config, str(outputs[group])), name=f"{name}-{group}")
        process.start()
        processes.append(process)
    cli = Recorder()
    writer = None
    if args.cli_writer:
        writer = threading.Thread(
            target=cli_writer, args=(env, start_at, seconds, args.cli_interval, f"{run}-{name}", texts, cli)
        )
        writer.start()
    for process in processes:
        process.join(timeout=seconds + 600)
        if process.exitcode != 0:  # None: still running long after the phase should have ended
            raise SystemExit(f"client group {process.name} failed (exit status {process.exitcode})")
    if writer is not None:
        writer.join()

    seconds_by_operation = {operation: [] for operation in (*OPERATIONS, "cli_remember")}
    errors, writes = list(cli.errors), list(cli.writes)
    timeline = [(*moment, "cli") for moment in cli.timeline]
    seconds_by_operation["cli_remember"] = cli.seconds.get("cli_remember", [])
    by_group = {}
    for group, path in outputs.items():
        recorded = json.loads(path.read_text())
        for operation, values in recorded["seconds"].items():
            seconds_by_operation[operation].extend(values)
        by_group[group] = {
            operation: _percentiles(values) for operation, values in recorded["seconds"].items() if values
        }
        by_group[group]["client_cpu_seconds"] = recorded["client_cpu_seconds"]
        errors.extend(dict(error, group=group) for error in recorded["errors"])
        writes.extend(recorded["writes"])
        timeline.extend((*moment, group) for moment in recorded["timeline"])
    # Every answer by arrival, beside the servers' logs in the working directory, to see when the slow ones came.
    (workdir / f"{name}-timeline.json").write_text(json.dumps(sorted(timeline)))
    answered = sum(len(values) for operation, values in seconds_by_operation.items() if operation != "cli_remember")
    result = {
        "loop": "open" if open_rate else "closed",
        "seconds": seconds,
        "offered_per_s": open_rate,
        "answered_per_s": round(answered / seconds, 2),
        "errors": len(errors),
        "error_samples": errors[:20],
        "operations": {operation: _percentiles(values) for operation, values in seconds_by_operation.items() if values},
        # The same by client group: a group's own process can be what is slow.
        "by_group": by_group,
    }
    return result, writes


def _percentiles(seconds: list[float]) -> dict:
    ms = [value * 1000.0 for value in seconds]
    return {
        "n": len(ms),
        **{f"p{round(q * 100)}_ms": round(harness.percentile(ms, q), 2) for q in (0.5, 0.95, 0.99)},
        "max_ms": round(max(ms), 2),
    }


# ---- checking the store (the parent process) ----


def verify(writes: list[dict]) -> dict:
    """Check that every acknowledged write is in the store exactly once, and that the indexes match the store."""
    from memories import validation
    from memories.models import Memory, Revision
    from search.indexing import index_drift

    problems = []
    for write in writes:
        memory_id = write["id"]
        if write["operation"] == "remember":
            found = list(Memory.objects.filter(namespace=NAMESPACE, key=write["key"]).values_list("pk", flat=True))
            if found != [memory_id]:
                problems.append(f"key {write['key']}: memories {found}, acknowledged as {memory_id}")
                continue
        if write["operation"] in ("remember", "update"):
            copies = Revision.objects.filter(
                memory_id=memory_id, tombstone=False, content_hash=validation.content_hash(write["content"])
            ).count()
        else:
            copies = Revision.objects.filter(memory_id=memory_id, tombstone=True).count()
        if copies != 1:
            problems.append(f"{write['operation']} of memory {memory_id}: {copies} revisions, not 1")
    drift = index_drift(full=True)
    return {
        "acknowledged_writes": len(writes),
        "by_operation": {
            name: sum(write["operation"] == name for write in writes) for name in ("remember", "update", "forget")
        },
        "problems": problems[:50],
        "problem_count": len(problems),
        "index_drift": drift,
        "ok": not problems and not drift,
    }


def goals(phases: dict, verified: dict) -> dict:
    """The goals, each with the figures it was judged on: in an open phase, every operation's p99 within 5x its
    p50 (the closed phase's ratios are reported beside them: a saturated server queues by design)."""
    checked = {
        "no_errors": all(phase["errors"] == 0 for phase in phases.values()),
        "every_acknowledged_write_once": verified["ok"],
    }
    for name, phase in phases.items():
        # The CLI writer starts a process per write: its time is Python's start-up, not the server's.
        ratios = {
            operation: round(figures["p99_ms"] / figures["p50_ms"], 1)
            for operation, figures in phase["operations"].items()
            if operation != "cli_remember" and figures["p50_ms"] > 0
        }
        checked[f"{name}_p99_over_p50"] = ratios
        if phase["loop"] == "open":
            checked[f"{name}_p99_within_{P99_OVER_P50_MAX:g}x_p50"] = all(
                ratio <= P99_OVER_P50_MAX for ratio in ratios.values()
            )
    return checked


def main():
    args = parse_args()
    names = args.phases.split(",")
    if "open" in names and not args.rate and "closed" not in names[: names.index("open")]:
        sys.exit("--phases: the open phase offers a share of the closed phase's rate: run closed first, or give --rate")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db_path = workdir / "load.db"
    cluster, server_url, database_url = None, None, None
    if args.database == "postgresql":
        from tests.postgres import Cluster, missing

        if missing():
            sys.exit(f"--database postgresql: {missing()}; install Debian's postgresql package")
        cluster = Cluster(durable=True)
        server_url = cluster.url()
    elif args.database.startswith(("postgresql://", "postgres://")):
        server_url = args.database
    elif args.database != "sqlite":
        sys.exit(f"--database {args.database!r}: give sqlite, postgresql, or a postgresql:// URL")
    if server_url:
        from latency import fresh_database

        database_url = fresh_database(server_url, "memory_load")
    print(f"building a store of {args.size:,} memories in {database_url or db_path} ...", flush=True)
    token, queries, store_ids, load = build_store(db_path, database_url, args)
    from corpus import Corpus

    corpus = Corpus(args.seed + 1)
    texts = [corpus.text() for _ in range(2000)]
    env = server_env(db_path, database_url, args.embedder)
    run = f"load{int(time.time())}"
    processes, bases = start_servers(args.servers, env, workdir)
    phases, writes = {}, []
    try:
        plan = [("warmup", None, args.warmup)] if args.warmup > 0 else []
        for name in args.phases.split(","):
            if name == "open" and args.rate:
                plan.extend((f"open-{rate:g}", rate, args.seconds) for rate in args.rate)
            elif name == "open":
                plan.append(("open", "share", args.seconds))
            else:
                plan.append((name, None, args.seconds))
        for name, rate, seconds in plan:
            if rate == "share":  # known once the closed phase has run
                rate = round(args.open_share * phases["closed"]["answered_per_s"], 1)
            print(f"phase {name}: {seconds:g} s" + (f" at {rate:g} requests/s" if rate else " closed loop"), flush=True)
            phases[name], acknowledged = run_phase(
                name,
                args=args,
                run=run,
                bases=bases,
                token=token,
                queries=queries,
                texts=texts,
                store_ids=store_ids,
                env=env,
                workdir=workdir,
                open_rate=rate,
                seconds=seconds,
            )
            writes.extend(acknowledged)
            print(json.dumps(phases[name], indent=1), flush=True)
        memory = server_memory(processes)
    finally:
        stop_servers(processes)
    verified = verify(writes)
    from django.db import connections

    connections.close_all()
    if server_url:
        fresh_database(server_url, "memory_load", drop_only=True)
    if cluster is not None:
        cluster.stop()
    judged = {name: phase for name, phase in phases.items() if name != "warmup"}
    result = {
        "label": args.label,
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "environment": harness.environment(),
        "config": {
            "size": args.size,
            "clients": args.clients,
            "servers": args.servers,
            "seconds": args.seconds,
            "rate": args.rate,
            "open_share": None if args.rate else args.open_share,
            "embedder": args.embedder,
            "cli_writer": args.cli_writer,
            "cli_interval": args.cli_interval,
            "mix": MIX,
            "server_threads": os.environ.get("MEMORY_SERVER_THREADS", "default"),
        },
        "load": load,
        "server_memory": memory,
        "phases": phases,
        "verify": verified,
        "goals": goals(judged, verified),
    }
    path = harness.save(result, args.output)
    print(json.dumps({"verify": verified, "goals": result["goals"]}, indent=1))
    print(f"saved {path}")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
