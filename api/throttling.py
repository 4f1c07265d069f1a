"""Rate limits per API key: one budget for reads, one for writes (README, REST API)."""

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import SimpleRateThrottle

from memories.access import Caller

_RATE_SETTINGS = {"read": "MEMORY_API_READS_PER_MINUTE", "write": "MEMORY_API_WRITES_PER_MINUTE"}


class ApiKeyRateThrottle(SimpleRateThrottle):
    """At most N requests a minute per key and bucket; 0 turns a bucket's limit off.

    A view names its bucket with ``throttle_bucket`` (a POST that only reads, like
    recall, is a read); otherwise safe methods are reads and the rest writes. Counts
    live in Django's cache, so each server process counts on its own.
    """

    def __init__(self):
        # The rate is chosen per request (the bucket depends on the view and method), and read
        # from settings then, not at import as DRF's throttles do.
        pass

    def bucket(self, request, view) -> str:
        return getattr(view, "throttle_bucket", None) or ("read" if request.method in SAFE_METHODS else "write")

    def allow_request(self, request, view) -> bool:
        if not isinstance(request.auth, Caller):
            return True
        bucket = self.bucket(request, view)
        per_minute = getattr(settings, _RATE_SETTINGS[bucket])
        if not per_minute:
            return True
        self.rate = f"{per_minute}/min"
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.scope = bucket
        return super().allow_request(request, view)

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.auth.actor}
