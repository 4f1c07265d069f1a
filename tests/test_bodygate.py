"""memoryproject.bodygate: the key before the body, a time for the body, one budget for all bodies.

Driven with plain asyncio, a recording ``send`` and an app that reads its body as the bridge
does (the real server runs it in test_body_gate_server.py).
"""

import asyncio
import json
from concurrent.futures import Future

import pytest

from memoryproject import bodygate
from memoryproject.bodygate import BodyBudget, BodyGate, Door
from oauth.resource import gate_challenge

# What a 401 at /api/v1 says: Bearer, and where an OAuth client discovers the server.
CHALLENGE = b'Bearer realm="memory", resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource"'

GOOD_KEY = "mem_0000abcd_secret"


def words(status, code, message) -> bytes:
    return json.dumps({"status": status, "code": code, "message": message}).encode()


def scope(path="/api/v1/memories/", *, headers=(), method="POST"):
    return {
        "type": "http",
        "scheme": "http",
        "method": method,
        "path": path,
        "headers": [(b"host", b"127.0.0.1:8000"), *headers],
    }


def body_of(length: int, key: str | None = None):
    return [(b"content-length", str(length).encode()), *([(b"authorization", f"Bearer {key}".encode())] if key else [])]


class Checks:
    """``check_key`` and ``run_in_thread`` for the gate: accepts GOOD_KEY, counts its calls."""

    def __init__(self):
        self.calls = []

    def check_key(self, token, interface):
        self.calls.append((token, interface))
        return None if token == GOOD_KEY else "The API key is not valid."

    def run_in_thread(self, function, *args):
        future = Future()
        future.set_result(function(*args))
        return future


def gate(app, checks=None, *, buffer_bytes=1000, timeout=5.0):
    checks = checks or Checks()
    return BodyGate(
        app,
        [Door("/", words), Door("/api/v1", words, interface="api"), Door("/api/v1/health", words)],
        check_key=checks.check_key,
        challenge=gate_challenge,
        run_in_thread=checks.run_in_thread,
        buffer_bytes=buffer_bytes,
        timeout=timeout,
    )


class ReadingApp:
    """Read the whole body as the bridge does, then answer 200; record what it read."""

    def __init__(self):
        self.bodies = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.bodies.append(None)
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def run(app, request_scope, messages=(), *, stall=False):
    """Send ``messages`` to ``app`` (then, with ``stall``, nothing more, ever); return what it sent."""
    sent, incoming, received = [], list(messages), []

    async def receive():
        if not incoming and stall:
            await asyncio.Event().wait()
        received.append(incoming[0])
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app(request_scope, receive, send))
    return sent, received


def answer_of(sent) -> tuple[int, dict, dict]:
    start, body = sent
    assert body.get("more_body", False) is False
    return start["status"], dict(start["headers"]), json.loads(body["body"])


def test_a_body_without_a_key_is_answered_401_at_once_and_never_read():
    app = ReadingApp()
    sent, received = run(gate(app), scope(headers=body_of(1_048_000)), stall=True)
    status, headers, body = answer_of(sent)
    assert status == 401 and body["code"] == "unauthenticated" and body["message"] == bodygate.MISSING_KEY
    assert headers[b"connection"] == b"close" and headers[b"www-authenticate"] == CHALLENGE
    assert received == [] and app.bodies == []


def test_a_scheme_other_than_bearer_counts_as_no_key_and_an_unknown_key_is_refused_by_the_check():
    checks = Checks()
    sent, _ = run(gate(ReadingApp(), checks), scope(headers=[*body_of(10), (b"authorization", b"Basic abc")]))
    assert answer_of(sent)[2]["message"] == bodygate.MISSING_KEY and checks.calls == []
    sent, received = run(gate(ReadingApp(), checks), scope(headers=body_of(10, key="mem_1_2")), stall=True)
    status, headers, body = answer_of(sent)
    assert (status, body["message"]) == (401, "The API key is not valid.") and received == []
    assert headers[b"www-authenticate"] == CHALLENGE + b', error="invalid_token"'
    assert checks.calls == [("mem_1_2", "api")]


def test_a_valid_key_is_checked_once_a_minute_not_once_a_request(monkeypatch):
    checks, app = Checks(), ReadingApp()
    guarded = gate(app, checks)
    for _ in range(3):
        sent, _ = run(guarded, scope(headers=body_of(2, key=GOOD_KEY)), [{"type": "http.request", "body": b"{}"}])
        assert sent[0]["status"] == 200
    assert app.bodies == [b"{}"] * 3 and len(checks.calls) == 1
    now = bodygate.time.monotonic()
    monkeypatch.setattr(bodygate.time, "monotonic", lambda: now + bodygate.ACCEPTED_KEY_SECONDS + 1)
    run(guarded, scope(headers=body_of(2, key=GOOD_KEY)), [{"type": "http.request", "body": b"{}"}])
    assert len(checks.calls) == 2


def test_a_check_that_fails_leaves_the_key_to_the_view():
    def broken(function, *args):
        raise RuntimeError("the database cannot be opened")

    app = ReadingApp()
    guarded = BodyGate(
        app,
        [Door("/", words, interface="api")],
        check_key=Checks().check_key,
        challenge=gate_challenge,
        run_in_thread=broken,
        buffer_bytes=100,
        timeout=5,
    )
    sent, _ = run(guarded, scope(headers=body_of(2, key="mem_1_2")), [{"type": "http.request", "body": b"{}"}])
    assert sent[0]["status"] == 200 and app.bodies == [b"{}"]


@pytest.mark.parametrize("path", ["/api/v1/health/", "/admin/login/", "/api/docs/"])
def test_doors_that_need_no_key_read_bodies_without_one(path):
    app = ReadingApp()
    sent, _ = run(gate(app), scope(path, headers=body_of(2)), [{"type": "http.request", "body": b"{}"}])
    assert sent[0]["status"] == 200 and app.bodies == [b"{}"]


def test_a_request_without_a_body_passes_untouched_without_a_key():
    app = ReadingApp()
    sent, _ = run(gate(app), scope(method="GET"), [{"type": "http.request", "body": b""}])
    assert sent[0]["status"] == 200 and app.bodies == [b""]


def test_a_stalled_body_is_answered_408_after_the_timeout_and_its_reservation_given_back():
    app = ReadingApp()
    guarded = gate(app, timeout=0.2)
    sent, received = run(
        guarded,
        scope("/admin/login/", headers=body_of(500)),
        [{"type": "http.request", "body": b"x" * 100, "more_body": True}],
        stall=True,
    )
    status, headers, body = answer_of(sent)
    assert (status, body["code"]) == (408, "timeout") and headers[b"connection"] == b"close"
    assert "MEMORY_BODY_TIMEOUT" in body["message"]
    assert len(received) == 1 and app.bodies == [None]  # the app was told the client is gone
    assert guarded.budget.held == 0


def test_bodies_that_do_not_fit_in_the_budget_are_answered_503_unread_until_it_frees():
    async def two_at_once():
        first_in, release = asyncio.Event(), asyncio.Event()

        async def slow_app(scope, receive, send):
            await receive()
            first_in.set()
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        guarded = gate(slow_app, buffer_bytes=1000)
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b"x" * 600}

        async def never():
            raise AssertionError("a body that did not fit was read")

        first = asyncio.create_task(guarded(scope("/admin/", headers=body_of(600)), receive, send))
        await first_in.wait()
        assert guarded.budget.held == 600
        await guarded(scope("/admin/", headers=body_of(600)), never, send)
        release.set()
        await first
        assert guarded.budget.held == 0
        await guarded(scope("/admin/", headers=body_of(600)), receive, send)
        return sent

    sent = asyncio.run(two_at_once())
    refused = sent[:2]
    status, headers, body = answer_of(refused)
    assert (status, body["code"]) == (503, "busy") and headers[b"retry-after"] == b"2"
    assert "MEMORY_BODY_BUFFER_BYTES" in body["message"]
    assert [message["status"] for message in sent if message["type"] == "http.response.start"] == [503, 200, 200]


def test_a_chunked_body_is_counted_chunk_by_chunk_and_cut_off_when_it_no_longer_fits():
    app = ReadingApp()
    guarded = gate(app, buffer_bytes=1000)
    chunked = [(b"transfer-encoding", b"chunked")]
    chunks = [{"type": "http.request", "body": b"x" * 400, "more_body": True}] * 3
    sent, received = run(guarded, scope("/admin/", headers=chunked), chunks)
    assert answer_of(sent)[0] == 503 and len(received) == 3 and app.bodies == [None]
    assert guarded.budget.held == 0
    sent, _ = run(guarded, scope("/admin/", headers=chunked), [*chunks[:2], {"type": "http.request", "body": b"y"}])
    assert sent[0]["status"] == 200 and app.bodies[-1] == b"x" * 800 + b"y"


def test_the_budget_reserves_only_what_fits():
    budget = BodyBudget(1000)
    assert budget.take(600) and not budget.take(401) and budget.take(400) and budget.held == 1000
    budget.give_back(600)
    budget.give_back(400)
    assert budget.held == 0


def test_freed_memory_is_handed_back_a_second_after_enough_bodies_were_let_go_at_most_once_a_second(monkeypatch):
    monkeypatch.setattr(bodygate, "RETURN_MEMORY_DELAY_SECONDS", 0.05)
    trims = []
    memory = bodygate.MemoryReturn()
    memory._malloc_trim = trims.append
    enough = bodygate.RETURN_MEMORY_AFTER_BYTES

    async def let_go_then_wait():
        memory.let_go(enough - 1)
        await asyncio.sleep(0.1)
        assert trims == []  # not enough yet
        memory.let_go(1)
        memory.let_go(enough)  # within the same second: one request covers both
        assert trims == []  # not at once: a burst of refusals ends first
        await asyncio.sleep(0.1)
        assert trims == [0]
        memory.let_go(enough)
        await asyncio.sleep(0.1)

    asyncio.run(let_go_then_wait())
    assert trims == [0, 0]


def test_refused_and_answered_bodies_both_count_as_let_go():
    guarded = gate(ReadingApp(), buffer_bytes=1000)
    run(guarded, scope(headers=body_of(700)))  # no key: refused unread
    run(guarded, scope("/admin/", headers=body_of(200)), [{"type": "http.request", "body": b"x" * 200}])
    assert guarded.memory.let_go_bytes == 900 and guarded.budget.held == 0


def test_answers_at_each_door_are_in_its_own_words():
    def mcp_words(status, code, message):
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}).encode()

    guarded = BodyGate(
        ReadingApp(),
        [Door("/", words), Door("/mcp", mcp_words, interface="mcp")],
        check_key=Checks().check_key,
        challenge=gate_challenge,
        run_in_thread=Checks().run_in_thread,
        buffer_bytes=100,
        timeout=5,
    )
    sent, _ = run(guarded, scope("/mcp", headers=body_of(10)))
    assert answer_of(sent)[2]["error"] == {"code": -32001, "message": bodygate.MISSING_KEY}


def test_a_body_larger_than_the_whole_budget_is_too_large_not_busy():
    sent, received = run(gate(ReadingApp(), buffer_bytes=1000), scope("/admin/", headers=body_of(1001)), stall=True)
    status, _, body = answer_of(sent)
    assert (status, body["code"]) == (413, "too_large") and "MEMORY_BODY_BUFFER_BYTES" in body["message"]
    assert received == []
