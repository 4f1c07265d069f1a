"""Django's WSGI handler served to an ASGI server (uvicorn) with one thread hop per request.

Django's ASGI handler runs every synchronous middleware hook (all of Django's own
middleware) through its own hop into a thread, twice per middleware per request, and
gives each request a new thread, hence a new SQLite connection with sqlite-vec loaded.
Every view here is synchronous, so this adapter hands each request whole to Django's
WSGI handler on a small pool of long-lived threads: one hop in, one back per response
chunk, and each thread keeps its database connection (``CONN_MAX_AGE``). Measured in
``benchmarks/http_floor.py`` (README, Benchmarks).

Bodies are read before the view runs (``memoryproject.bodylimit`` refuses oversized
ones first); streamed responses go out chunk by chunk; the response is always closed,
which is what fires Django's ``request_finished``.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from tempfile import SpooledTemporaryFile

from asgiref.wsgi import WsgiToAsgiInstance

# Bodies up to this size stay in memory; larger ones (imports) spill to a temporary file.
_IN_MEMORY_BYTES = 1 << 20


class WsgiBridge:
    """An ASGI application running a WSGI application on ``threads`` long-lived threads."""

    def __init__(self, wsgi_application, *, threads: int):
        self.wsgi_application = wsgi_application
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="django")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            # Lifespan and websockets: uvicorn reads this as "not supported", as it does from Django.
            raise ValueError(f"This server speaks HTTP only, not {scope['type']!r}.")
        with SpooledTemporaryFile(max_size=_IN_MEMORY_BYTES) as body:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client left before sending the whole request
                body.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body.seek(0)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self.executor, self._respond, scope, body, send, loop)

    def _respond(self, scope, body, send, loop) -> None:
        """Run the WSGI application in this pool thread and pass its response to ``send`` on the loop."""

        def deliver(message):
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        head = {}

        def start_response(status, headers, exc_info=None):
            if exc_info is not None and head.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            # Django writes Set-Cookie values with a leading space (SimpleCookie.output(header=""));
            # WSGI servers strip it, and h11 refuses it, so it is stripped here too.
            head["start"] = {"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
                             "headers": [(name.lower().encode("latin-1"), value.strip().encode("latin-1"))
                                         for name, value in headers]}

        # asgiref's translation of an ASGI scope into a WSGI environ.
        translation = WsgiToAsgiInstance(self.wsgi_application)
        translation.scope = scope
        try:
            environ = translation.build_environ(scope, body)
        except ValueError as error:  # more repeated headers than asgiref allows
            deliver({"type": "http.response.start", "status": 400,
                     "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            deliver({"type": "http.response.body", "body": f"Bad request: {error}".encode()})
            return
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
            deliver({"type": "http.response.body", "body": b""})
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()  # Django's request_finished: database connections, file handles
