"""One record per HTTP request: its id, door, route, status and duration, counted in the metrics and logged.

``RequestLog`` is the first middleware, so it sees every request Django answers, static
files and errors included (bodies refused for size before Django, in
``memoryproject.bodylimit``, are not seen). Each request gets an id: the caller's
``X-Request-Id`` when it is a sane one, else a new one; the response carries it, and so
does every log line written while the request runs (``JsonFormatter``).

The request line names the route pattern, never the path or the query string (which
carry recall queries), the client's address, and the API key's public prefix, never the key: memory text and
keys stay out of the log at INFO. With ``MEMORY_LOG_FORMAT=json`` it is logged at INFO;
in the plain format at DEBUG, so the terminal of ``make run`` stays as quiet as before.
"""

import contextvars
import datetime as dt
import json
import logging
import re
import time
import uuid

from django.conf import settings

from memoryproject.metrics import HTTP_REQUESTS, HTTP_SECONDS

logger = logging.getLogger("memory.request")

REQUEST_ID = contextvars.ContextVar("request_id", default=None)
# What a caller's own request id may be: short, and nothing a log reader could mistake for structure.
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_KEY_PREFIX = re.compile(r"Bearer\s+mem_([0-9a-f]{8})_", re.IGNORECASE)
# Other methods are counted as "other": a label value per made-up method would grow without bound.
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
# The door of a path, the longest prefix first.
_DOORS = (
    ("/api/v1/hooks/", "hooks"),
    ("/api/", "rest"),
    ("/mcp", "mcp"),
    ("/admin/", "admin"),
    ("/metrics", "metrics"),
    (settings.STATIC_URL if settings.STATIC_URL.startswith("/") else "/" + settings.STATIC_URL, "static"),
)


def door_of(path: str) -> str:
    """Return which door a path belongs to: rest, hooks, mcp, admin, metrics, static, or dashboard."""
    return next((door for prefix, door in _DOORS if path.startswith(prefix)), "dashboard")


def request_id_for(given: str | None) -> str:
    """Return the caller's request id when it is sane, else a new one."""
    if given and _SANE_ID.fullmatch(given):
        return given
    return uuid.uuid4().hex


def key_prefix(authorization: str) -> str | None:
    """The public prefix of the API key in an Authorization header (``mem_<prefix>_...``), never the key."""
    found = _KEY_PREFIX.match(authorization)
    return found.group(1) if found else None


class RequestLog:
    """Middleware: give each request its id, then count, time and log its answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_for(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = request_id
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            seconds = time.perf_counter() - started
            response["X-Request-Id"] = request_id
            self.record(request, response, seconds)
            return response
        finally:
            REQUEST_ID.reset(token)

    @staticmethod
    def record(request, response, seconds: float) -> None:
        door = door_of(request.path)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None else ("static" if door == "static" else "unmatched")
        method = request.method if request.method in _METHODS else "other"
        HTTP_REQUESTS.labels(door=door, route=route, method=method, status=str(response.status_code)).inc()
        HTTP_SECONDS.labels(door=door, route=route).observe(seconds)
        level = logging.INFO if settings.MEMORY_LOG_FORMAT == "json" else logging.DEBUG
        if logger.isEnabledFor(level):
            fields = {
                "request_id": request.request_id,
                "door": door,
                "route": route,
                "method": method,
                "status": response.status_code,
                "duration_ms": round(seconds * 1000, 2),
                "key_prefix": key_prefix(request.META.get("HTTP_AUTHORIZATION", "")),
                # The peer, or behind a proxy uvicorn trusts (FORWARDED_ALLOW_IPS) the client its X-Forwarded-For names.
                "client": request.META.get("REMOTE_ADDR") or None,
            }
            logger.log(
                level,
                "%s %s %s %s %.1f ms from %s",
                door,
                method,
                route,
                response.status_code,
                seconds * 1000,
                fields["client"],
                extra={"http": fields},
            )


class ClientErrorsWithoutTraceback(logging.Filter):
    """Django logs a refused request (403, 404, 400) with the exception that refused it: the line is enough, the
    traceback is noise. Server errors keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request id while a request runs, and the
    fields of the request line or of the command that logged it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Django logs a 4xx or 5xx answer once the middleware has returned, with the request attached.
        request_id = REQUEST_ID.get() or getattr(getattr(record, "request", None), "request_id", None)
        if request_id is not None:
            entry["request_id"] = request_id
        entry.update(getattr(record, "http", {}))
        entry.update(getattr(record, "fields", {}))  # a command's own fields (serve's URLs, a migration applied)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
