from django.apps import AppConfig


class McpApiConfig(AppConfig):
    name = "mcp_api"
    verbose_name = "MCP"

    def ready(self):
        # Registered here rather than by installing django-mcp-server's own app, whose ready()
        # also publishes the package's model-query tools on its global server.
        from mcp_api.server import server
        from mcp_api.tools import MemoryTools

        server.register_mcptoolset(MemoryTools())
