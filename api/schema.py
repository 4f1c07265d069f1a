"""OpenAPI: the API key, the endpoints listed, and the declared records and arguments as schemas.

Records (``memories.records``) and arguments (``memories.arguments``) are pydantic models;
pydantic writes their JSON schema, adjusted here to OpenAPI 3.0 (``nullable`` rather
than a null type) and without the per-field titles it adds.
"""

from drf_spectacular.drainage import set_override
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter
from pydantic.json_schema import GenerateJsonSchema

REF_TEMPLATE = "#/components/schemas/{model}"


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


class OpenApi30Schema(GenerateJsonSchema):
    def nullable_schema(self, schema):
        inner = self.generate_inner(schema["schema"])
        return {"allOf": [inner], "nullable": True} if "$ref" in inner else {**inner, "nullable": True}

    def field_title_should_be_set(self, schema) -> bool:
        return False


def json_schema(model, *, mode: str = "validation") -> dict:
    return model.model_json_schema(ref_template=REF_TEMPLATE, schema_generator=OpenApi30Schema, mode=mode)


class DeclaredModels(OpenApiSerializerExtension):
    """Records and arguments in the schema: arguments as they are read, records as they are written."""

    target_class = "pydantic.BaseModel"
    match_subclasses = True
    priority = 1  # over drf-spectacular's own pydantic extension, which writes OpenAPI 3.1 nulls

    def get_name(self, auto_schema, direction):
        # Nested models are registered by name below, not through drf-spectacular's collision check.
        set_override(self.target, "suppress_collision_warning", True)
        return self.target.__name__

    def map_serializer(self, auto_schema, direction):
        schema = json_schema(self.target, mode="validation" if direction == "request" else "serialization")
        for name, definition in schema.pop("$defs", {}).items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=definition)
            )
        return schema


def _query_schema(schema: dict) -> dict:
    """A parameter's schema as a query string carries it: never null, and a list where a list is taken."""
    schema = {key: value for key, value in schema.items() if key not in ("nullable", "default", "description")}
    forms = schema.pop("anyOf", None)
    if forms:
        schema = next((form for form in forms if form.get("type") == "array"), forms[0]) | schema
    return schema


def parameters(model, *, path: tuple[str, ...] = (), query: bool = True) -> list[OpenApiParameter]:
    """The OpenAPI parameters of an endpoint that takes ``model``: ``path`` from the path, the rest from the query.

    ``query=False``: the rest come in the JSON body (``body_model``).
    """
    schema = json_schema(model)
    required = set(schema.get("required", ()))
    documented = []
    for name, field in schema["properties"].items():
        if name not in path and not query:
            continue
        typed = _query_schema(field)
        if field.get("default") is not None:
            typed["default"] = field["default"]
        documented.append(
            OpenApiParameter(
                name,
                type=typed,
                location=OpenApiParameter.PATH if name in path else OpenApiParameter.QUERY,
                required=name in required or name in path,
                description=field.get("description", ""),
            )
        )
    return documented


def body_model(model, *, path: tuple[str, ...] = ()):
    """The model of an endpoint's JSON body: ``model`` without the arguments the path gives."""
    return model.without(*path) if path else model
