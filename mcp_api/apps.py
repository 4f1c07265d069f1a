from django.apps import AppConfig


class McpApiConfig(AppConfig):
    name = "mcp_api"
    verbose_name = "MCP"
    # The tools are registered when mcp_api.tools is imported (by the /mcp view and mcp_stdio),
    # not here: the MCP SDK takes most of a second to import, which every other command would pay.
