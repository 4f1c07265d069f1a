"""The probes a load balancer or an orchestrator asks, without a key: is the process alive, is it ready for requests.

``health/`` (api.store_views) says more, for people; these say one thing each, cheaply.
"""

from django.db import DatabaseError
from drf_spectacular.utils import extend_schema

import memoryproject
from api.records import Liveness, Readiness
from api.views import KeylessView, answer
from memories.health import unapplied_migrations
from memoryproject.exceptions import MemoryServiceError


class LiveView(KeylessView):
    @extend_schema(
        summary="Liveness",
        operation_id="health_live",
        auth=[],
        responses={200: Liveness},
        description="200 while the process answers requests; the database is not asked, so an outage of the "
        "database never makes it fail. No key needed. For a liveness probe: restart the process when it fails.",
    )
    def get(self, request):
        return answer(Liveness(status="ok", version=memoryproject.__version__))


class ReadyView(KeylessView):
    @extend_schema(
        summary="Readiness",
        operation_id="health_ready",
        auth=[],
        responses={200: Readiness, 503: Readiness},
        description="200 when the database answers and has every migration of this server's code applied; "
        "503 when it cannot be reached (with Retry-After) or its schema is behind the code (naming the unapplied "
        "migrations). Two small queries (is the migrations table there, what it holds). No key needed. "
        "For a readiness probe: send requests only while it answers 200.",
    )
    def get(self, request):
        try:
            unapplied = unapplied_migrations()
        except DatabaseError as error:
            retry = getattr(error, "retry_after_seconds", None)
            return answer(
                Readiness(
                    status="not_ready",
                    database="error",
                    unapplied_migrations=[],
                    message=error.message
                    if isinstance(error, MemoryServiceError)
                    else "The database cannot be read; 'manage.py doctor' says why.",
                ),
                status=503,
                headers={"Retry-After": str(retry)} if retry else None,
            )
        if unapplied:
            message = (
                f"The database's schema is behind this server's code: {len(unapplied)} unapplied migration(s). "
                "Run 'manage.py migrate' (docs/operations.md, Upgrading)."
            )
            return answer(
                Readiness(status="not_ready", database="ok", unapplied_migrations=unapplied, message=message),
                status=503,
            )
        return answer(Readiness(status="ready", database="ok", unapplied_migrations=[]))
