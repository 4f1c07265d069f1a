"""memoryproject.wsgibridge: what uvicorn sends for a WSGI application run on the bridge's threads.

Driven with plain asyncio and a recording ``send`` (the real server runs it in
test_serve.py, test_api_server.py and the browser tests).
"""

import asyncio
import threading

import pytest

from memoryproject.wsgibridge import WsgiBridge

SCOPE = {"type": "http", "http_version": "1.1", "method": "GET", "path": "/p", "raw_path": b"/p",
         "query_string": b"q=1", "root_path": "", "scheme": "http", "server": ("127.0.0.1", 8000),
         "client": ("127.0.0.1", 5000), "headers": [(b"content-type", b"text/plain"), (b"x-thing", b"a")]}


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
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  # Django writes cookies with a leading space; h11 refuses one.
                                  ("Set-Cookie", " csrftoken=abc; Path=/")])
        return body

    sent = run(app, messages=[{"type": "http.request", "body": b"he", "more_body": True},
                              {"type": "http.request", "body": b"llo", "more_body": False}])
    assert sent[0] == {"type": "http.response.start", "status": 200,
                       "headers": [(b"content-type", b"text/plain"), (b"set-cookie", b"csrftoken=abc; Path=/")]}
    assert [message.get("body") for message in sent[1:]] == [b"one ", b"two", b""]
    assert [message.get("more_body", False) for message in sent[1:]] == [True, True, False]
    assert body.closed and all(name.startswith("django") for name in body.threads)
    assert seen["body"] == b"hello" and seen["PATH_INFO"] == "/p" and seen["QUERY_STRING"] == "q=1"
    assert seen["CONTENT_TYPE"] == "text/plain" and seen["HTTP_X_THING"] == "a"


def test_an_empty_response_still_starts_and_ends_and_is_closed():
    body = Body([])

    def app(environ, start_response):
        start_response("204 No Content", [])
        return body

    sent = run(app)
    assert sent == [{"type": "http.response.start", "status": 204, "headers": []},
                    {"type": "http.response.body", "body": b""}]
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
    sent = run(lambda environ, start_response: called.append(1),
               messages=[{"type": "http.request", "body": b"part", "more_body": True}, {"type": "http.disconnect"}])
    assert sent == [] and called == []


def test_only_http_is_served():
    with pytest.raises(ValueError, match="HTTP only"):
        run(lambda environ, start_response: [], scope={"type": "lifespan"})
