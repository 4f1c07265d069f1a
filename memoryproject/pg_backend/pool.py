"""The pool of PostgreSQL connections a server process shares among its request threads (MEMORY_DB_POOL_SIZE).

psycopg_pool's pool, changed for a database that goes away. Its own would keep a request
waiting for a connection the whole busy timeout while the server is down or refuses the
password, and after a restart would test the dead connections it holds one by one, backing
off longer after each, and retry connecting minutes apart. Here:

- a connection attempt that fails ends the wait of every request waiting for one, with the
  attempt's reason (connection refused, password authentication failed, ...);
- a connection that fails its check before use empties the pool of the others: they were
  opened to the same server, and after a restart they are as dead;
- a connection the pool could not open is not retried in the background: the next request
  that finds no free connection opens one at once, so each request while the database is
  down fails in the time of one attempt, and the first one after it is back is served.

A wait for a free connection while the database answers is still bounded by the busy timeout.
"""

import psycopg
import psycopg_pool

# How long psycopg_pool retries a failed connect in the background: not past its one immediate retry, since a retry
# backing off would keep the next request waiting for it, and that request opens a connection of its own anyway.
RECONNECT_SECONDS = 0.0


class ConnectionPool(psycopg_pool.ConnectionPool):
    def __init__(self, *args, check: bool, **kwargs):
        kwargs.setdefault("reconnect_timeout", RECONNECT_SECONDS)
        super().__init__(*args, check=self._check_or_empty if check else None, **kwargs)

    def _check_or_empty(self, connection: psycopg.Connection) -> None:
        try:
            self.check_connection(connection)
        except Exception:
            self.drain()
            raise

    def _connect(self, timeout: float | None = None) -> psycopg.Connection:
        try:
            return super()._connect(timeout)
        except Exception as error:
            self._fail_waiting(error)
            raise

    def _fail_waiting(self, error: Exception) -> None:
        """End the wait of every request waiting for a connection with ``error``: one would not come in time."""
        with self._lock:
            waiting = list(self._waiting)
            self._waiting.clear()
        for client in waiting:
            # One exception each: the requests raise it in their own threads.
            failed = psycopg.OperationalError(str(error))
            failed.__cause__ = error
            client.fail(failed)
