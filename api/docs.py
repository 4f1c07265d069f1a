"""``/api/docs/``: the API reference, rendered on the server from the OpenAPI schema.

drf-spectacular's Swagger UI and Redoc pages load their scripts from a CDN, and the
server runs offline (its sidecar package, which bundles them, is not installed). This
page needs nothing from outside: each endpoint with its parameters, body fields and
responses, and a small console that sends requests with an API key.
"""

import functools
import json

from django.shortcuts import render
from drf_spectacular.generators import SchemaGenerator

METHODS = ("get", "post", "patch", "put", "delete")


@functools.cache
def openapi_schema() -> dict:
    """The schema /api/schema/ serves; it only changes with the code, so it is built once per process."""
    return SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict, node: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node or {}


def _type(schema: dict, node: dict) -> str:
    node = _resolve(schema, node)
    if len(node.get("allOf", ())) == 1:
        node = {**_resolve(schema, node["allOf"][0]), **{key: value for key, value in node.items() if key != "allOf"}}
    forms = node.get("oneOf") or node.get("anyOf")
    if forms:
        return " or ".join(_type(schema, option) for option in forms)
    if "enum" in node:
        return " | ".join(str(value) for value in node["enum"] if value is not None)
    if node.get("type") == "array":
        return f"list of {_type(schema, node.get('items', {}))}"
    kind = node.get("type", "object")
    bounds = [
        f"{name} {node[key]}"
        for key, name in (("minimum", "min"), ("maximum", "max"), ("maxLength", "max length"))
        if key in node
    ]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _fields(schema: dict, node: dict) -> list[dict]:
    node = _resolve(schema, node)
    required = set(node.get("required", []))
    return [
        {
            "name": name,
            "type": _type(schema, field),
            "required": name in required,
            "description": _resolve(schema, field).get("description", ""),
        }
        for name, field in node.get("properties", {}).items()
    ]


def _operations(schema: dict) -> list[dict]:
    operations = []
    for path, item in schema["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            operations.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "anchor": f"{method}-{path}".replace("/", "-").replace("{", "").replace("}", "").strip("-"),
                    "summary": operation.get("summary", ""),
                    "description": operation.get("description", ""),
                    "keyed": operation.get("security") != [{}] and operation.get("security") != [],
                    "parameters": [
                        {
                            "name": parameter["name"],
                            "in": parameter["in"],
                            "type": _type(schema, parameter.get("schema", {})),
                            "required": parameter.get("required", False),
                            "description": parameter.get("description", ""),
                        }
                        for parameter in operation.get("parameters", [])
                    ],
                    "body": _fields(schema, body) if body else None,
                    "responses": [
                        {"status": code, "description": response.get("description", "")}
                        for code, response in operation.get("responses", {}).items()
                    ],
                }
            )
    return operations


def docs(request):
    schema = openapi_schema()
    return render(
        request,
        "api/docs.html",
        {
            "info": schema["info"],
            "operations": _operations(schema),
            "paths_json": json.dumps(sorted(schema["paths"])),
        },
    )
