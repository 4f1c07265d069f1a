import contextlib
import fcntl
import json
import logging
import os
import sys
import threading
from pathlib import Path

import uvicorn
from django.conf import settings
from django.core.management import CommandError, call_command

from memories.management.cli import ProjectCommand
from memoryproject import dialect
from memoryproject.env import unknown_variables
from memoryproject.exceptions import ReadOnlyStorage
from search.embeddings import warm_up

# The line a parent process waits for; the JSON after it is the discovery file's content.
LISTENING = "MEMORY_SERVER_LISTENING"
logger = logging.getLogger("memory.serve")


class Command(ProjectCommand):
    help = (
        "Serve over HTTP with uvicorn (what `make run` runs). Once the port accepts connections, print the URLs "
        f"and one '{LISTENING} {{json}}' line, and write the same JSON to the discovery file "
        "(MEMORY_DISCOVERY_FILE) unless a server started earlier still owns it; remove it on a graceful stop."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.MEMORY_HOST, help="default: MEMORY_HOST (127.0.0.1)")
        parser.add_argument(
            "--port",
            type=int,
            default=settings.MEMORY_PORT,
            help="default: MEMORY_PORT (8000); 0: any free port (the URLs name it)",
        )

    def handle(self, *args, host, port, **options):
        # A misspelt name would otherwise leave its default on without a word.
        for warning in unknown_variables():
            logger.warning(warning)
        try:
            call_command("first_run", stdout=self.stdout)
        except CommandError as error:
            if not isinstance(error.__cause__, ReadOnlyStorage):
                raise
            # A store on a read-only disk still answers reads (health says read-only).
            self.stderr.write(f"{error} No first admin login or API key was made; serving reads only.")
        check_connection_budget()
        self.discovery = Discovery(Path(settings.MEMORY_DISCOVERY_FILE))
        command = self

        class Server(uvicorn.Server):
            async def startup(self, sockets=None):
                await super().startup(sockets)
                if self.started:  # listening: a client that reads the URLs can connect at once
                    command.listening(host, self.servers[0].sockets[0].getsockname()[1])

            async def shutdown(self, sockets=None):
                command.stopping()  # first, so no new client is sent to a server on its way out
                await super().shutdown(sockets)

            @contextlib.contextmanager
            def capture_signals(self):
                with super().capture_signals():
                    yield
                    # Stopped gracefully: exit 0 rather than die of the signal uvicorn would raise again,
                    # which `make run` reports as "make: *** [run] Interrupt" (or "Terminated").
                    self._captured_signals.clear()

        # JSON logs: uvicorn's own lines go through the project's handler too (settings.LOGGING), so every line is JSON.
        logs = {"log_config": None} if settings.MEMORY_LOG_FORMAT == "json" else {}
        # By name, as uvicorn's command line takes it: the entry point sits above every app.
        Server(
            uvicorn.Config(
                "memoryproject.asgi:application",
                host=host,
                port=port,
                access_log=False,
                http="memoryproject.httpprotocol:HttpProtocol",
                lifespan="off",  # nothing to start or stop: no lifespan lines in the log
                **logs,
            )
        ).run()

    def listening(self, host: str, port: int) -> None:
        # A server bound to every address is reached on loopback from this machine.
        reachable = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
        base = f"http://{reachable}:{port}"
        urls = {
            "Dashboard": f"{base}/",
            "Admin": f"{base}/admin/",
            "REST docs": f"{base}/api/docs/",
            "MCP": f"{base}/mcp",
        }
        if settings.MEMORY_LOG_FORMAT == "json":
            fields = {name.lower().replace(" ", "_") + "_url": url for name, url in urls.items()}
            logger.info("Listening on %s", base, extra={"fields": {**fields, "port": port, "pid": os.getpid()}})
        else:
            for name, url in urls.items():
                self.stdout.write(f"{name + ':':10} {url}")
        found = {"url": base, "mcp_url": f"{base}/mcp", "port": port, "pid": os.getpid()}
        try:
            owner = self.discovery.claim(found)
        except OSError as error:  # a read-only disk: the server answers reads all the same
            self.warn(
                f"Cannot write the discovery file {self.discovery.path}: {error.strerror}. "
                "Local clients must be given this server's URL (MEMORY_URL)."
            )
        else:
            if owner is not None:
                self.warn(
                    f"The discovery file {self.discovery.path} names {owner}, started first on "
                    "this database; it stays that server's, and passes to this one when that one stops. "
                    f"Until then local clients reach this server with MEMORY_URL={base}."
                )
        # The line a parent process waits for, in both log formats (its JSON is the discovery file's).
        self.stdout.write(f"{LISTENING} {json.dumps(found)}")
        self.stdout.flush()
        # The model loads beside the first requests, not under the first write's lock.
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()

    def warn(self, message: str) -> None:
        """A notice to the operator: a line on stderr, or a JSON log line with JSON logs on."""
        if settings.MEMORY_LOG_FORMAT == "json":
            logger.warning(message)
        else:
            self.stderr.write(message)

    def stopping(self) -> None:
        self.discovery.give_up()


def check_connection_budget() -> None:
    """Refuse a process that would hold more PostgreSQL connections than the server accepts at all."""
    limit = dialect.connection_limit()
    if limit is None:
        return
    allowed, reserved = limit
    if settings.MEMORY_DB_POOL_SIZE:
        wanted, setting = settings.MEMORY_DB_POOL_SIZE, f"MEMORY_DB_POOL_SIZE={settings.MEMORY_DB_POOL_SIZE}"
    else:  # no pool: every request thread keeps a connection of its own
        wanted = settings.MEMORY_SERVER_THREADS
        setting = f"MEMORY_SERVER_THREADS={wanted} (a connection each, as MEMORY_DB_POOL_SIZE=0)"
    if wanted > allowed - reserved:
        raise CommandError(
            f"{setting} asks for more connections than the PostgreSQL server at {dialect.location()} accepts: its "
            f"max_connections is {allowed}, {reserved} of them reserved, so {allowed - reserved} at most for all "
            "clients together. Lower the setting, or raise max_connections on the server."
        )


class Discovery:
    """The discovery file: the first server to listen on a database writes it and keeps it until it stops.

    Owning it is holding ``<file>.lock`` (flock), which the kernel frees when its server dies, even by
    SIGKILL. A later server on the same file leaves it alone and waits in a thread for the lock, so the
    file passes to it when the owner stops, instead of being taken and then removed under a live owner.
    """

    def __init__(self, path: Path):
        self.path = path
        self._found: dict | None = None
        self._owned_fd: int | None = None  # the lock's descriptor, once this server owns the file
        self._turns = threading.Lock()  # the waiting thread and the stopping server take turns
        self._stopped = False

    def claim(self, found: dict) -> str | None:
        """Write ``found`` if no live server owns the file, and return None; else return who owns it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._found = found
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            threading.Thread(target=self._wait_for_owner, args=(fd,), name="discovery", daemon=True).start()
            return _owner(self.path)
        self._owned_fd = fd
        self._write()
        return None

    def _wait_for_owner(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the owner stops or dies
        with self._turns:
            if self._stopped:
                os.close(fd)  # on its way out too: the next server in line takes it
                return
            self._owned_fd = fd
            try:
                self._write()
            except OSError as error:
                sys.stderr.write(f"Cannot take over the discovery file {self.path}: {error.strerror}.\n")

    def _write(self) -> None:
        """Write the file whole: a reader never sees half of it."""
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(self._found) + "\n")
        os.replace(partial, self.path)

    def give_up(self) -> None:
        """Remove the file if this server owns it, then free the lock for a server waiting for it."""
        with self._turns:
            self._stopped = True
            if self._owned_fd is None:
                return
            try:
                ours = json.loads(self.path.read_text()).get("pid") == os.getpid()
            except (OSError, ValueError, AttributeError):
                ours = False
            if ours:  # not rewritten by hand or by a server from before the lock
                self.path.unlink(missing_ok=True)
            os.close(self._owned_fd)
            self._owned_fd = None


def _owner(path: Path) -> str:
    """The server the file names; its lock's holder while two servers start at once and it is not written yet."""
    try:
        return f"the server at {json.loads(path.read_text())['url']}"
    except (OSError, ValueError, KeyError, TypeError):
        return f"the server holding {path}.lock"
