"""Imports that have not finished: which batches are still writing, whether their writer is gone, what they wrote.

``memories.services.batches`` writes and publishes batches; ``manage.py doctor`` and ``purge`` read them here.
"""

import datetime as dt
import os
import socket

from memories.models import ImportBatch, Memory, Revision
from memoryproject import dialect

# A batch still writing counts as dead when its process is gone (same host), or when it
# has committed nothing for this long (another host, or a pid reused since).
STALE_AFTER = dt.timedelta(hours=1)


def this_host() -> str:
    return socket.gethostname()[:255]


def is_dead(batch: ImportBatch, *, now: dt.datetime | None = None) -> bool:
    """Whether ``batch``, still writing, has no live writer: its process is gone, or it went quiet too long."""
    if batch.state != ImportBatch.Status.WRITING:
        return False
    now = now or dialect.now()
    if now - batch.progress_at > STALE_AFTER:
        return True
    if batch.host != this_host():
        return False
    try:
        os.kill(batch.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # a process of another user holds the pid: alive
        return False
    return False


def unpublished_batches() -> list[ImportBatch]:
    """Batches still writing, oldest first."""
    return list(ImportBatch.objects.filter(state=ImportBatch.Status.WRITING).order_by("pk"))


def batch_rows(batch: ImportBatch) -> dict:
    """How many memories and revisions ``batch`` has written."""
    return {
        "memories": Memory.all_objects.filter(batch=batch).count(),
        "revisions": Revision.all_objects.filter(batch=batch).count(),
    }
