"""Django's WSGI handler served to an ASGI server (uvicorn) with one thread hop per request.

Django's ASGI handler runs every synchronous middleware hook (all of Django's own
middleware) through its own hop into a thread, twice per middleware per request, and
gives each request a new thread, hence a new SQLite connection with sqlite-vec loaded.
Every view here is synchronous, so this adapter hands each request whole to Django's
WSGI handler on a small pool of long-lived threads: one hop in, one back per response
chunk, and each thread keeps its database connection (``CONN_MAX_AGE``). Measured in
``benchmarks/http_floor.py``.

The pool hands a request to the thread that went idle last (``LastIdlePool``), so one
client's requests in a row run on one thread: threads taken in turn, as
``ThreadPoolExecutor`` takes them, made remembers over HTTP slower (``benchmarks/latency.py``),
likely because each connection's page cache goes stale when another connection writes.

Bodies are read before the view runs (``memoryproject.bodylimit`` refuses oversized
ones first, ``memoryproject.bodygate`` those without a key, and bounds how long a body
may take and how many bytes all bodies hold at once), so every request reaches Django
with the ``CONTENT_LENGTH`` of the body it carries, a chunked one included; streamed
responses go out chunk by chunk; the response is always closed, which is what fires
Django's ``request_finished``.
"""

import asyncio
import threading
from collections import deque
from concurrent.futures import Future
from queue import SimpleQueue
from tempfile import SpooledTemporaryFile

from asgiref.wsgi import WsgiToAsgiInstance

# Bodies up to this size stay in memory; larger ones (imports) spill to a temporary file.
_IN_MEMORY_BYTES = 1 << 20


class LastIdlePool:
    """Up to ``threads`` daemon threads, started as needed; work goes to the thread idle most recently.

    A thread is back among the idle before the future of its work completes, so work
    submitted once the previous work's future is done runs on that same thread. Work
    that finds every thread busy waits in order of arrival.
    """

    def __init__(self, threads: int, *, name: str):
        if threads < 1:
            raise ValueError(f"a pool needs at least one thread, not {threads}")
        self.threads, self.name = threads, name
        self._lock = threading.Lock()
        self._idle: list[SimpleQueue] = []  # each idle thread's inbox; the last went idle last
        self._waiting: deque = deque()
        self._started = 0

    def submit(self, function, *args) -> Future:
        future = Future()
        work = (future, function, args)
        with self._lock:
            if self._idle:
                inbox = self._idle.pop()
            elif self._started < self.threads:
                self._started += 1
                inbox = SimpleQueue()
                threading.Thread(
                    target=self._run, args=(inbox,), name=f"{self.name}_{self._started}", daemon=True
                ).start()
            else:
                self._waiting.append(work)
                return future
        inbox.put(work)
        return future

    def _run(self, inbox: SimpleQueue) -> None:
        work = inbox.get()
        while True:
            future, function, args = work
            outcome, failure = None, None
            if future.set_running_or_notify_cancel():
                try:
                    outcome = function(*args)
                except BaseException as error:  # handed to whoever awaits the future
                    failure = error
            with self._lock:
                following = self._waiting.popleft() if self._waiting else None
                if following is None:
                    self._idle.append(inbox)
            if failure is not None:
                future.set_exception(failure)
                failure = None  # no reference cycle through the traceback
            elif not future.cancelled():
                future.set_result(outcome)
            work = following if following is not None else inbox.get()


class WsgiBridge:
    """An ASGI application running a WSGI application on ``threads`` long-lived threads."""

    def __init__(self, wsgi_application, *, threads: int):
        self.wsgi_application = wsgi_application
        self.pool = LastIdlePool(threads, name="django")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            raise ValueError(f"This server speaks HTTP only, not {scope['type']!r}.")
        with SpooledTemporaryFile(max_size=_IN_MEMORY_BYTES) as body:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client left before sending the whole request
                body.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
            size = body.tell()
            body.seek(0)
            loop = asyncio.get_running_loop()
            if await asyncio.wrap_future(self.pool.submit(self._respond, scope, body, size, send, loop)):
                # The last message goes out once the thread is idle again: the client's next
                # request then finds it, warm connection and all.
                await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _lifespan(receive, send) -> None:
        """Answer the ASGI lifespan protocol with nothing to do, so uvicorn logs no "unsupported" at start."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _respond(self, scope, body, size: int, send, loop) -> bool:
        """Run the WSGI application in this pool thread and pass its response to ``send`` on the loop.

        Every message but the last is sent from here; True when the caller is to send the
        last (the end of the response body).
        """

        def deliver(message):
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        head = {}

        def start_response(status, headers, exc_info=None):
            if exc_info is not None and head.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            # Django writes Set-Cookie values with a leading space (SimpleCookie.output(header=""));
            # WSGI servers strip it, and h11 refuses it, so it is stripped here too.
            head["start"] = {
                "type": "http.response.start",
                "status": int(status.split(" ", 1)[0]),
                "headers": [
                    (name.lower().encode("latin-1"), value.strip().encode("latin-1")) for name, value in headers
                ],
            }

        # asgiref's translation of an ASGI scope into a WSGI environ.
        translation = WsgiToAsgiInstance(self.wsgi_application)
        translation.scope = scope
        try:
            environ = translation.build_environ(scope, body)
        except ValueError as error:  # more repeated headers than asgiref allows
            deliver(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                }
            )
            deliver({"type": "http.response.body", "body": f"Bad request: {error}".encode()})
            return False
        # The body is whole: its length is known even when it came chunked, and Django reads
        # no more of wsgi.input than CONTENT_LENGTH says (none, without it).
        environ["CONTENT_LENGTH"] = str(size)
        response = self.wsgi_application(environ, start_response)
        try:
            for chunk in response:
                if not head.get("sent"):
                    deliver(head["start"])
                    head["sent"] = True
                if chunk:
                    deliver({"type": "http.response.body", "body": chunk, "more_body": True})
            if not head.get("sent"):
                deliver(head["start"])
                head["sent"] = True
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()  # Django's request_finished: database connections, file handles
        return True
