"""OpenAPI: how the API key appears in the schema, and which endpoints the schema lists."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (manage.py create_api_key, or the admin): Authorization: Bearer mem_...",
        }


def only_rest_api(endpoints, **kwargs):
    """Keep the /api/v1/ endpoints (drf-spectacular would also list /mcp, a DRF view of its own)."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith("/api/v1/")]
