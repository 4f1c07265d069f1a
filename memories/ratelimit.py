"""Rate limits per API key: a budget of reads and one of writes a minute, shared by every door that takes a key.

A REST request and an MCP tool call over HTTP spend the same budget, so a key throttled on
one door is throttled on the other. Counts live in Django's cache over a sliding minute:
each server process counts on its own, and they start again when it restarts.
"""

import math
import threading
import time

from django.conf import settings
from django.core.cache import cache

from memoryproject.exceptions import RateLimited

RATE_SETTINGS = {"read": "MEMORY_API_READS_PER_MINUTE", "write": "MEMORY_API_WRITES_PER_MINUTE"}
WINDOW_SECONDS = 60

# Reading and writing a key's count is one step for the threads of a process (the cache's get and set are two).
_counting = threading.Lock()


def charge(caller, bucket: str) -> None:
    """Count one request of ``caller`` against its ``bucket`` ("read" or "write"), or raise RateLimited.

    Callers without a key (``caller.rate_limited`` false: mcp_stdio, whose user can open the
    database anyway) are not counted; nor is anything while the bucket's setting is 0.
    """
    setting = RATE_SETTINGS[bucket]
    per_minute = getattr(settings, setting)
    if not caller.rate_limited or not per_minute:
        return
    key = f"ratelimit:{bucket}:{caller.actor}"
    with _counting:
        now = time.time()
        recent = [moment for moment in cache.get(key, []) if moment > now - WINDOW_SECONDS]
        if len(recent) >= per_minute:
            # Free again when the request that filled the budget leaves the window.
            wait = recent[-per_minute] + WINDOW_SECONDS - now
            raise RateLimited(
                f"This API key is over its {per_minute} {bucket}s a minute ({setting}), counted "
                f"across REST and MCP; nothing was done. Retry in {math.ceil(wait)} s.",
                retry_after_seconds=max(1, math.ceil(wait)),
            )
        recent.append(now)
        cache.set(key, recent, WINDOW_SECONDS)
