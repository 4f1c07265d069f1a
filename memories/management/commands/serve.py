import contextlib
import json
import os
import threading

import uvicorn
from django.conf import settings
from django.core.management import CommandError, call_command

from memories.management.cli import ProjectCommand
from memoryproject.exceptions import ReadOnlyStorage
from search.embeddings import warm_up

# The line a parent process waits for; the JSON after it is the discovery file's content.
LISTENING = "MEMORY_SERVER_LISTENING"


class Command(ProjectCommand):
    help = (
        "Serve over HTTP with uvicorn (what `make run` runs). Once the port accepts connections, print the URLs "
        f"and one '{LISTENING} {{json}}' line, and write the same JSON to the discovery file "
        "(MEMORY_DISCOVERY_FILE), removed again on a graceful stop."
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
        try:
            call_command("first_run", stdout=self.stdout)
        except CommandError as error:
            if not isinstance(error.__cause__, ReadOnlyStorage):
                raise
            # A store on a read-only disk still answers reads (health says read-only).
            self.stderr.write(f"{error} No first admin login or API key was made; serving reads only.")
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
        self.stdout.write(f"Dashboard: {base}/")
        self.stdout.write(f"Admin:     {base}/admin/")
        self.stdout.write(f"REST docs: {base}/api/docs/")
        self.stdout.write(f"MCP:       {base}/mcp")
        found = {"url": base, "mcp_url": f"{base}/mcp", "port": port, "pid": os.getpid()}
        try:
            _write_discovery(found)
        except OSError as error:  # a read-only disk: the server answers reads all the same
            self.stderr.write(
                f"Cannot write the discovery file {settings.MEMORY_DISCOVERY_FILE}: {error.strerror}. "
                "Local clients must be given this server's URL (MEMORY_URL)."
            )
        self.stdout.write(f"{LISTENING} {json.dumps(found)}")
        self.stdout.flush()
        # The model loads beside the first requests, not under the first write's lock.
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()

    def stopping(self) -> None:
        path = settings.MEMORY_DISCOVERY_FILE
        try:
            ours = json.loads(path.read_text()).get("pid") == os.getpid()
        except (OSError, ValueError, AttributeError):
            return
        if ours:  # a server started later on the same file owns it now
            path.unlink(missing_ok=True)


def _write_discovery(found: dict) -> None:
    """Write the discovery file whole (a reader never sees half of it); the newest server on a database wins."""
    path = settings.MEMORY_DISCOVERY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(found) + "\n")
    os.replace(partial, path)
