"""A fair wait for SQLite's write lock: writers queue here instead of in SQLite's busy handler.

SQLite's busy handler retries a locked ``BEGIN IMMEDIATE`` after growing sleeps (up to
100 ms each), so a writer that has waited long sleeps long and keeps losing the lock to
writers that arrived after it: under contention its wait grows to seconds. Here the
threads of one process queue on a lock of their own and wake as soon as it is released;
the one at the head of that queue takes a file lock (``flock``) shared with the other
processes, retrying every millisecond. The file sits next to the database and is
released by the kernel when a process dies, so a killed writer never leaves it held.
"""

import errno
import fcntl
import os
import threading
import time

from django.db import OperationalError

# How often the thread at the head of a process's queue retries the file lock that another process holds.
_RETRY_SECONDS = 0.001

_process_locks: dict[str, threading.Lock] = {}
_process_locks_guard = threading.Lock()


def _process_lock(path: str) -> threading.Lock:
    with _process_locks_guard:
        return _process_locks.setdefault(path, threading.Lock())


def open_lock_file(path) -> int | None:
    """Open the lock file at ``path``, made if missing; None where it is missing and cannot be made (a read-only disk).

    A file this process may only read still locks: flock needs no write access.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as error:
        if error.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM):
            raise
        return None


class WriteLock:
    """The lock one connection takes before ``BEGIN IMMEDIATE`` and gives back at commit, rollback or close.

    ``path`` is the lock file. Not shared between threads: each connection has its own, as it has its own file
    descriptor.
    """

    def __init__(self, path: str, *, timeout: float):
        self.path = path
        self.timeout = timeout
        self.process_lock = _process_lock(path)
        self.fd = None
        self.held = False

    def acquire(self) -> bool:
        """Wait for the lock, at most ``timeout`` seconds; raise OperationalError("database is locked") after that.

        Return whether another thread or process held it, so that this one waited in line.
        """
        deadline = time.monotonic() + self.timeout
        waited = not self.process_lock.acquire(blocking=False)
        if waited and not self.process_lock.acquire(timeout=self.timeout):
            raise OperationalError("database is locked")
        try:
            waited = self._lock_file(deadline) or waited
        except BaseException:
            self.process_lock.release()
            raise
        self.held = True
        return waited

    def _lock_file(self, deadline: float) -> bool:
        """Take the file lock; return whether another process held it first."""
        if self.fd is None:
            self.fd = open_lock_file(self.path)
            if self.fd is None:
                # No lock file, and none can be made (a read-only disk, where the write will fail as read-only):
                # SQLite's own lock still keeps writers apart.
                return False
        waited = False
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return waited
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OperationalError("database is locked") from None
                waited = True
                time.sleep(_RETRY_SECONDS)

    def release(self) -> None:
        """Give the lock back; does nothing when it is not held (a rollback after a failed commit)."""
        if not self.held:
            return
        self.held = False
        try:
            if self.fd is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self.process_lock.release()

    def close(self) -> None:
        self.release()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
