"""memoryproject.wsgibridge: what uvicorn sends for a WSGI application run on the bridge's threads.

Driven with plain asyncio and a recording ``send`` (the real server runs it in
test_serve.py, test_api_server.py and the browser tests).
"""

import asyncio
import threading
from concurrent.futures import wait

import pytest
from django.core.handlers.wsgi import WSGIRequest

from memoryproject.wsgibridge import LastIdlePool, WsgiBridge

SCOPE = {
    "type": "http",
    "http_version": "1.1",
    "method": "GET",
    "path": "/p",
    "raw_path": b"/p",
    "query_string": b"q=1",
    "root_path": "",
    "scheme": "http",
    "server": ("127.0.0.1", 8000),
    "client": ("127.0.0.1", 5000),
    "headers": [(b"content-type", b"text/plain"), (b"x-thing", b"a")],
}


class Body:
    """A WSGI response iterable that records when it was closed and by which thread it was run."""

    def __init__(self, chunks):
        self.chunks = chunks
        self.closed = False
        self.threads = set()

    def __iter__(self):
        for chunk in self.chunks:
            self.threads.add(threading.current_thread().name)
            yield chunk

    def close(self):
        self.closed = True


def run(app, messages=({"type": "http.request", "body": b"", "more_body": False},), scope=SCOPE):
    sent, incoming = [], list(messages)

    async def receive():
        return incoming.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(WsgiBridge(app, threads=2)(scope, receive, send))
    return sent


def test_a_streamed_response_goes_out_chunk_by_chunk_on_a_pool_thread_and_is_closed():
    body, seen = Body([b"one ", b"", b"two"]), {}

    def app(environ, start_response):
        seen.update(environ)
        seen["body"] = environ["wsgi.input"].read()
        start_response(
            "200 OK",
            [
                ("Content-Type", "text/plain"),
                # Django writes cookies with a leading space; h11 refuses one.
                ("Set-Cookie", " csrftoken=abc; Path=/"),
            ],
        )
        return body

    sent = run(
        app,
        messages=[
            {"type": "http.request", "body": b"he", "more_body": True},
            {"type": "http.request", "body": b"llo", "more_body": False},
        ],
    )
    assert sent[0] == {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"content-type", b"text/plain"), (b"set-cookie", b"csrftoken=abc; Path=/")],
    }
    assert [message.get("body") for message in sent[1:]] == [b"one ", b"two", b""]
    assert [message.get("more_body", False) for message in sent[1:]] == [True, True, False]
    assert body.closed and all(name.startswith("django") for name in body.threads)
    assert seen["body"] == b"hello" and seen["PATH_INFO"] == "/p" and seen["QUERY_STRING"] == "q=1"
    assert seen["CONTENT_TYPE"] == "text/plain" and seen["HTTP_X_THING"] == "a"


def test_a_body_sent_in_chunks_reaches_django_whole_with_its_length():
    # A chunked request has no Content-Length header, and Django reads no body without CONTENT_LENGTH.
    seen = {}

    def app(environ, start_response):
        seen["length"], seen["body"] = environ["CONTENT_LENGTH"], WSGIRequest(environ).body
        start_response("200 OK", [])
        return [b"ok"]

    chunked = {
        **SCOPE,
        "method": "POST",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
    }
    run(
        app,
        messages=[
            {"type": "http.request", "body": b'{"jsonrpc": ', "more_body": True},
            {"type": "http.request", "body": b'"2.0"}', "more_body": False},
        ],
        scope=chunked,
    )
    assert seen == {"length": "18", "body": b'{"jsonrpc": "2.0"}'}
    run(app, scope=chunked)  # no body at all: zero, not absent
    assert seen == {"length": "0", "body": b""}


def test_an_empty_response_still_starts_and_ends_and_is_closed():
    body = Body([])

    def app(environ, start_response):
        start_response("204 No Content", [])
        return body

    sent = run(app)
    assert sent == [
        {"type": "http.response.start", "status": 204, "headers": []},
        {"type": "http.response.body", "body": b""},
    ]
    assert body.closed


def test_a_response_is_closed_even_when_its_iteration_fails():
    class Failing(Body):
        def __iter__(self):
            raise RuntimeError("the view's stream broke")
            yield b""

    body = Failing([])

    def app(environ, start_response):
        start_response("200 OK", [])
        return body

    with pytest.raises(RuntimeError, match="stream broke"):
        run(app)
    assert body.closed


def test_a_client_gone_before_its_body_arrived_runs_nothing():
    called = []
    sent = run(
        lambda environ, start_response: called.append(1),
        messages=[{"type": "http.request", "body": b"part", "more_body": True}, {"type": "http.disconnect"}],
    )
    assert sent == [] and called == []


def test_only_http_is_served():
    with pytest.raises(ValueError, match="HTTP only"):
        run(lambda environ, start_response: [], scope={"type": "websocket"})


def test_the_lifespan_protocol_completes_with_nothing_to_do():
    sent = run(
        lambda environ, start_response: [],
        messages=[{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}],
        scope={"type": "lifespan"},
    )
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


def test_requests_one_after_another_run_on_one_thread():
    # Each pool thread keeps its own database connection, whose cache another connection's write
    # makes stale: a client's requests in a row must find the same one, even after a burst
    # of requests at once has started several threads.
    threads, burst = [], threading.Barrier(4)

    def app(environ, start_response):
        if environ["QUERY_STRING"] == "burst":
            burst.wait(5)
        threads.append(threading.current_thread().name)
        start_response("200 OK", [])
        return [b"ok"]

    async def request(bridge, query):
        incoming, sent = [{"type": "http.request", "body": b"", "more_body": False}], []

        async def receive():
            return incoming.pop(0)

        async def send(message):
            sent.append(message)

        await bridge({**SCOPE, "query_string": query}, receive, send)
        assert [message.get("body") for message in sent[1:]] == [b"ok", b""]

    async def burst_then_a_row(bridge):
        await asyncio.gather(*(request(bridge, b"burst") for _ in range(4)))
        for _ in range(20):
            await request(bridge, b"row")

    asyncio.run(burst_then_a_row(WsgiBridge(app, threads=8)))
    assert len(set(threads[:4])) == 4
    assert len(set(threads[4:])) == 1


def test_the_pool_starts_threads_up_to_its_limit_then_queues_work_in_order():
    pool = LastIdlePool(2, name="t")
    release, started, order = threading.Event(), threading.Semaphore(0), []

    def blocked(number):
        order.append(number)
        started.release()
        release.wait(5)
        return threading.current_thread().name

    first = [pool.submit(blocked, number) for number in (1, 2)]
    assert started.acquire(timeout=5) and started.acquire(timeout=5)  # both threads are busy
    third = pool.submit(blocked, 3)
    assert not started.acquire(timeout=0.2) and not third.running()  # no third thread: it waits
    release.set()
    assert {future.result(timeout=5) for future in (*first, third)} == {"t_1", "t_2"}

    single, release = LastIdlePool(1, name="s"), threading.Event()
    order.clear()
    queued = [single.submit(blocked, number) for number in range(5)]
    release.set()
    wait(queued, timeout=5)
    assert order == [0, 1, 2, 3, 4]


def test_the_pool_hands_work_to_the_thread_idle_most_recently_and_passes_failures_on():
    pool = LastIdlePool(3, name="t")
    hold = threading.Event()
    busy = [pool.submit(hold.wait, 5) for _ in range(3)]  # three threads started
    hold.set()
    wait(busy, timeout=5)
    last = pool.submit(lambda: threading.current_thread().name).result(timeout=5)
    assert [pool.submit(lambda: threading.current_thread().name).result(timeout=5) for _ in range(5)] == [last] * 5

    def fails():
        raise KeyError("no such thing")

    with pytest.raises(KeyError, match="no such thing"):
        pool.submit(fails).result(timeout=5)
    assert pool.submit(lambda: 42).result(timeout=5) == 42  # the thread lives on


def test_queued_work_cancelled_before_it_starts_never_runs():
    pool = LastIdlePool(1, name="t")
    hold, ran = threading.Event(), []
    running = pool.submit(hold.wait, 5)
    queued = pool.submit(ran.append, 1)
    assert queued.cancel()
    hold.set()
    assert running.result(timeout=5) and pool.submit(lambda: 7).result(timeout=5) == 7
    assert ran == [] and queued.cancelled()
