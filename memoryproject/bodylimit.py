"""ASGI middleware: refuse request bodies over a limit before Django reads them.

Django's ASGI handler spools the whole body before any view runs, so limits have to sit
in front of it: a declared Content-Length over the limit is answered 413 at once, and a
chunked body is cut off as soon as it passes the limit. Each door words the refusal
its own way (a JSON-RPC error for /mcp, the REST error shape for /api); the views check
the same limits again for WSGI and tests.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """Bodies under ``path`` (the path itself or below it) may have at most ``limit`` bytes."""

    path: str
    limit: int
    refusal: Callable[[int], bytes]  # the 413 body (JSON), given the limit

    def applies(self, path: str) -> bool:
        prefix = self.path.rstrip("/")
        return path == prefix or path.startswith(prefix + "/")


class BodyLimit:
    """Wrap an ASGI app; the longest matching ``Limit`` path decides a request's limit."""

    def __init__(self, app, limits: list[Limit]):
        self.app = app
        self.limits = sorted(limits, key=lambda rule: len(rule.path), reverse=True)

    def _rule(self, scope) -> Limit | None:
        if scope["type"] != "http":
            return None
        path = scope.get("path", "")
        return next((rule for rule in self.limits if rule.applies(path)), None)

    @staticmethod
    async def _refuse(send, rule: Limit) -> None:
        body = rule.refusal(rule.limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        rule = self._rule(scope)
        if rule is None:
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > rule.limit:
                return await self._refuse(send, rule)
        received = 0
        refused = False

        async def limited_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > rule.limit:
                    refused = True
                    await self._refuse(send, rule)
                    # Django stops reading at a disconnect and sends nothing more.
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, limited_receive, send)
