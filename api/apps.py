from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"
    # The views (api.*_views) import api.schema, which registers the API key's OpenAPI security scheme.
