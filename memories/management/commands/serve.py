import threading

import uvicorn
from django.conf import settings
from django.core.management import call_command

from memories.management.cli import ProjectCommand
from search.embeddings import warm_up


class Command(ProjectCommand):
    help = "Serve over HTTP with uvicorn (what `make run` runs); print the URLs once the port accepts connections."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000, help="0: any free port (the URLs name it)")

    def handle(self, *args, host, port, **options):
        call_command("first_run", stdout=self.stdout)
        command = self

        class Server(uvicorn.Server):
            async def startup(self, sockets=None):
                await super().startup(sockets)
                if self.started:  # listening: a client that reads the URLs can connect at once
                    command.listening(host, self.servers[0].sockets[0].getsockname()[1])

        # JSON logs: uvicorn's own lines go through the project's handler too (settings.LOGGING), so every line is JSON.
        logs = {"log_config": None} if settings.MEMORY_LOG_FORMAT == "json" else {}
        # By name, as uvicorn's command line takes it: the entry point sits above every app.
        Server(uvicorn.Config("memoryproject.asgi:application", host=host, port=port, access_log=False,
                              **logs)).run()

    def listening(self, host: str, port: int) -> None:
        base = f"http://{host}:{port}"
        self.stdout.write(f"Dashboard: {base}/")
        self.stdout.write(f"Admin:     {base}/admin/")
        self.stdout.write(f"REST docs: {base}/api/docs/")
        self.stdout.write(f"MCP:       {base}/mcp")
        self.stdout.flush()
        # The model loads beside the first requests, not under the first write's lock.
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
