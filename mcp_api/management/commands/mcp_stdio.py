import anyio
from django.conf import settings

from mcp_api import stdio
from mcp_api.server import DEFAULT_TOOLS, TOOL_SETS, current_tool_set
from mcp_api.tools import current_caller, server  # importing the tools registers them
from memories import validation
from memories.access import Caller
from memories.management.cli import ProjectCommand, cli_actor
from memories.models import Interface, Scope
from memoryproject.sqlite_backend.backup import hold_while_serving
from search.embeddings import warm_up


class Command(ProjectCommand):
    help = "Serve the memory tools over MCP stdio for one namespace, for clients that launch a command."

    def add_arguments(self, parser):
        parser.add_argument("--namespace", required=True, help="the namespace the tools read and write")
        parser.add_argument("--read-only", action="store_true", help="offer only the reading tools")
        parser.add_argument(
            "--tools",
            choices=TOOL_SETS,
            default=DEFAULT_TOOLS,
            help="all: list the opt-in tools (conflicts, stats, route) too",
        )

    def handle(self, *args, namespace: str, read_only: bool, tools: str, **options):
        # No API key here: whoever can start this command can open the database file anyway.
        # The namespace and scopes still go through the same Caller rules as a key's.
        namespace = validation.namespace(namespace)
        # For as long as this serves, `manage.py restore` refuses to replace the database.
        hold_while_serving(settings.DATABASES["default"]["NAME"])
        # Load the embedding model before the first request, not under the first write's lock.
        warm_up()
        scopes = {Scope.READ.value} if read_only else {Scope.READ.value, Scope.WRITE.value}
        actor = "stdio:" + cli_actor().split(":", 1)[1]
        started = f"--namespace {namespace}" + (" --read-only" if read_only else "")
        current_caller.set(
            Caller(
                actor=actor,
                interface=Interface.MCP.value,
                scopes=frozenset(scopes),
                namespaces=(namespace,),
                held_by=f"this mcp_stdio session (started with {started})",
                wider_access="Start mcp_stdio without --read-only to change memories.",
            )
        )
        current_tool_set.set(tools)
        # stdout is the protocol channel from here on; logs go to stderr.
        anyio.run(stdio.serve, server)
