"""ASGI middleware: what a request must pass before the server reads its body, and how long the body may take.

A client that declares a body and then stalls costs the server whatever it holds for
that body, for as long as the server waits. So, for every request that carries a body:

- at a door that needs an API key, the key is checked before a byte of the body is
  read: a request without one is answered 401 at once, and one with an unknown or
  revoked key 401 as soon as the check (a database read, on a server thread) says so;
- its declared length (for a chunked body, each chunk as it comes) is reserved from
  one budget shared by all connections; a body that does not fit is answered 503
  ``busy`` with ``Retry-After``, unread. The reservation is given back when the response
  is done, so it covers the body wherever the server holds it (uvicorn's buffer, the
  bridge's copy, the view's parse);
- the whole body must arrive within ``timeout`` seconds, or the request is answered 408;
- a second after enough bodies have been let go (answered, or refused), glibc is asked
  to hand the freed heap pages back to the system, which it does not do by itself.

Each of these answers closes the connection, so the rest of the body is never read,
and is worded by the door (``Door.error_body``): the REST error shape under /api, a
JSON-RPC error at /mcp. Requests without a body pass straight through.
"""

import asyncio
import hashlib
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from memoryproject import heap

# A key the check accepted passes again without a database read for this long, so a busy
# client costs one check a minute rather than one per request (and no second wait for a
# server thread). The view still checks every request: a key revoked within the minute
# is refused as before, only its body is read first.
ACCEPTED_KEY_SECONDS = 60.0
# Only keys that passed the check are remembered; past this many, the expired ones are dropped.
ACCEPTED_KEYS_MAX = 10_000
# Most bodies are read in milliseconds, and a stalled one is cut off at the timeout.
RETRY_AFTER_SECONDS = 2
# glibc keeps the heap pages of freed bodies (freed among long-lived objects) until asked to return them: once
# bodies of this many bytes have been let go, it is asked a second later (malloc_trim takes milliseconds, so at most
# once a second; the delay lets a burst end first). benchmarks/stalled_bodies.py measures what it returns.
RETURN_MEMORY_AFTER_BYTES = 16 * 1024 * 1024
RETURN_MEMORY_DELAY_SECONDS = 1.0
MISSING_KEY = "Missing API key: send 'Authorization: Bearer <key>'."
_DISCONNECT = {"type": "http.disconnect"}


@dataclass(frozen=True)
class Door:
    """Requests under ``path`` (the path itself or below it), answered in the door's error shape.

    ``interface`` set: a request with a body needs an API key, checked for that interface.
    """

    path: str
    error_body: Callable[[int, str, str], bytes]  # (HTTP status, error code, message) -> the JSON body
    interface: str | None = None

    def applies(self, path: str) -> bool:
        prefix = self.path.rstrip("/")
        return path == prefix or path.startswith(prefix + "/")


class BodyBudget:
    """Bytes of request bodies held at once, across all connections: at most ``limit``."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; False, and nothing reserved, when they do not fit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


class MemoryReturn:
    """Ask the C library to hand freed heap pages back to the system once enough bodies have been let go."""

    def __init__(self):
        self.let_go_bytes = 0
        self.asked = False  # a request is scheduled
        self._malloc_trim = heap.MALLOC_TRIM  # None where the C library is not glibc

    def let_go(self, size: int) -> None:
        """Count a body the server no longer holds (or never read, though uvicorn may have buffered some of it)."""
        self.let_go_bytes += size
        if self.let_go_bytes >= RETURN_MEMORY_AFTER_BYTES and not self.asked and self._malloc_trim is not None:
            self.asked = True
            asyncio.get_running_loop().call_later(RETURN_MEMORY_DELAY_SECONDS, self._return)

    def _return(self) -> None:
        self.asked, self.let_go_bytes = False, 0
        self._malloc_trim(0)


class BodyGate:
    """Wrap an ASGI app. The longest matching ``Door`` path decides a request's door; give one for "/".

    ``check_key(token, interface)`` returns why a key is refused, or None for a valid key, and
    ``challenge(scope, door path, error)`` the WWW-Authenticate of a refusal. ``check_key``
    reads the database, so it runs through ``run_in_thread`` (a function that returns a Future).
    """

    def __init__(
        self,
        app,
        doors: list[Door],
        *,
        check_key: Callable[[str, str], str | None],
        challenge: Callable[[dict, str, str], str],
        run_in_thread: Callable[..., Future],
        buffer_bytes: int,
        timeout: float,
    ):
        self.app = app
        self.doors = sorted(doors, key=lambda door: len(door.path), reverse=True)
        self.check_key = check_key
        self.challenge = challenge
        self.run_in_thread = run_in_thread
        self.budget = BodyBudget(buffer_bytes)
        self.memory = MemoryReturn()
        self.timeout = timeout
        self._accepted: dict[bytes, float] = {}  # SHA-256 of an accepted key -> when to check it again

    def door(self, path: str) -> Door:
        return next(door for door in self.doors if door.applies(path))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared, chunked, authorization = 0, False, None
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit():
                declared = int(value)
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"authorization":
                authorization = value
        if not declared and not chunked:
            return await self.app(scope, receive, send)
        door = self.door(scope["path"])
        reserved = 0 if chunked else declared
        refusal = await self._refusal(scope, door, authorization, reserved)
        if refusal is not None:
            self.memory.let_go(declared)
            return await answer(send, door, *refusal)
        reading = BodyReading(self, receive, send, door, reserved=reserved, chunked=chunked)
        try:
            await self.app(scope, reading.receive, reading.send)
        finally:
            self.budget.give_back(reading.reserved)
            self.memory.let_go(reading.reserved)

    async def _refusal(self, scope, door: Door, authorization: bytes | None, reserved: int) -> tuple | None:
        """Status, code, message and headers of the answer to a request whose body is not to be read; None, with
        ``reserved`` bytes taken from the budget, for one whose body is."""
        if door.interface is not None:
            refusal = await self._key_refusal(authorization, door.interface)
            if refusal is not None:
                challenge = self.challenge(scope, door.path, "" if refusal == MISSING_KEY else "invalid_token")
                return 401, "unauthenticated", refusal, [(b"www-authenticate", challenge.encode())]
        if reserved > self.budget.limit:  # only at a door without a body limit of its own: it could never fit
            return (
                413,
                "too_large",
                f"The request body is over the {self.budget.limit} bytes the server holds for "
                "all bodies at once (MEMORY_BODY_BUFFER_BYTES).",
                [],
            )
        if not self.budget.take(reserved):
            return self.full()
        return None

    def full(self) -> tuple:
        """The 503 for a body that does not fit in the budget: status, code, message, headers."""
        return (
            503,
            "busy",
            "The server holds as many request bodies as it may at once (MEMORY_BODY_BUFFER_BYTES), "
            "so this one was not read. Retry after the seconds in Retry-After.",
            [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())],
        )

    async def _key_refusal(self, authorization: bytes | None, interface: str) -> str | None:
        """Why the request's key is refused, or None for a key the check accepts."""
        scheme, _, token = (authorization or b"").partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return MISSING_KEY
        digest = hashlib.sha256(token).digest()
        if self._accepted.get(digest, 0.0) > time.monotonic():
            return None
        try:
            refusal = await asyncio.wrap_future(self.run_in_thread(self.check_key, token.decode("latin-1"), interface))
        except Exception:  # noqa: BLE001
            # Not this gate's to answer (a database that cannot be opened, say): the view checks the key
            # again and answers in its own words.
            return None
        if refusal is None:
            now = time.monotonic()
            if len(self._accepted) >= ACCEPTED_KEYS_MAX:
                self._accepted = {key: until for key, until in self._accepted.items() if until > now}
            self._accepted[digest] = now + ACCEPTED_KEY_SECONDS
        return refusal


class BodyReading:
    """One admitted request's ``receive`` and ``send``: its body within the gate's timeout, a chunked one within
    the budget."""

    def __init__(self, gate: BodyGate, receive, send, door: Door, *, reserved: int, chunked: bool):
        self.gate, self._receive, self._send, self.door = gate, receive, send, door
        self.reserved, self.chunked = reserved, chunked
        self.deadline = asyncio.get_running_loop().time() + gate.timeout
        self.whole = False  # the last part of the body has been received
        self.started = False  # a response has started, the app's or a refusal
        self.refused = False

    async def receive(self):
        if self.refused:
            return _DISCONNECT
        if self.whole:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            return await self._refuse(
                408,
                "timeout",
                f"The request body did not arrive within "
                f"{self.gate.timeout:g} seconds (MEMORY_BODY_TIMEOUT), so nothing was done. "
                "Send the whole body without pausing, then retry.",
            )
        if message["type"] == "http.request":
            if self.chunked:
                size = len(message.get("body", b""))
                if not self.gate.budget.take(size):
                    return await self._refuse(*self.gate.full())
                self.reserved += size
            self.whole = not message.get("more_body", False)
        return message

    async def send(self, message):
        if self.refused:
            return  # the client has its answer; the app learns of it from the disconnect it received
        self.started = True
        await self._send(message)

    async def _refuse(self, status: int, code: str, message: str, headers=()):
        """Answer in the door's words (unless a response has started) and tell the app the client is gone."""
        self.refused = True
        if not self.started:
            await answer(self._send, self.door, status, code, message, headers)
        return _DISCONNECT


async def answer(send, door: Door, status: int, code: str, message: str, headers=()) -> None:
    """Send a whole JSON response that closes the connection, so the rest of the body is never read."""
    body = door.error_body(status, code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
