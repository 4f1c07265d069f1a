from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"
    # api.views imports api.schema, which registers the API key's OpenAPI security scheme.
