"""One declaration per argument and per record: OpenAPI and the MCP tools say what it says.

For every operation, the arguments each interface takes and the record it answers with
are compared, field by field, with the declarations in ``memories.arguments`` and
``memories.records`` (``telemetry.records`` for the hooks): the same names, descriptions,
bounds, defaults and choices. The expectations are read from the pydantic fields
themselves, not from the JSON schema pydantic writes, so a step that drops or rewrites
a bound on the way to OpenAPI or MCP shows here. OpenAPI is what /api/schema/ serves;
the tools are what the server lists on tools/list.
"""

import ast
import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from rest_framework.test import APIClient

from api.records import ErrorResponse, Health, Liveness, Readiness
from mcp_api.server import ALL_TOOLS, current_tool_set
from mcp_api.tools import STATE_SERVICES, current_caller, server, tool_description
from memories import arguments as declared
from memories.access import Caller
from memories.records import (
    AuditReport,
    ChangeResult,
    ConflictList,
    ExportDocument,
    GraphResult,
    History,
    ImportResult,
    LearnResult,
    MemoryPlus,
    MemoryRecord,
    Page,
    RecallResult,
    Record,
    RememberResult,
    ResolveResult,
    RouteResult,
    Stats,
    StoreStats,
)
from telemetry.records import HookBlock, IngestResult, InjectionRecord, UsedRecord

pytestmark = pytest.mark.django_db

MEMORY = "/api/v1/memories/{id}/"


@dataclass(frozen=True)
class Rest:
    method: str
    path: str
    status: str
    record: type[BaseModel]
    body: bool = False  # the arguments come in the JSON body, else in the query string
    path_arguments: tuple[str, ...] = ()
    leaves_out: tuple[str, ...] = ()  # declared arguments this endpoint does not take


@dataclass(frozen=True)
class Operation:
    arguments: type[declared.Arguments] | None
    rest: list[Rest]
    tool: str | None = None
    tool_record: type[Record] | None = None
    tool_leaves_out: tuple[str, ...] = field(default=())


OPERATIONS = {
    "remember": Operation(
        declared.RememberArgs,
        [Rest("post", "/api/v1/memories/", "201", RememberResult, body=True)],
        "memory_remember",
        RememberResult,
    ),
    "recall": Operation(
        declared.RecallArgs,
        [
            Rest("get", "/api/v1/recall/", "200", RecallResult),
            Rest("post", "/api/v1/recall/", "200", RecallResult, body=True),
        ],
        "memory_recall",
        RecallResult,
    ),
    "get": Operation(
        declared.GetArgs,
        [Rest("get", MEMORY, "200", MemoryRecord, path_arguments=("id",), leaves_out=("namespace", "key"))],
        "memory_get",
        MemoryRecord,
    ),
    "update": Operation(
        declared.UpdateArgs,
        [Rest("patch", MEMORY, "200", ChangeResult, body=True, path_arguments=("id",))],
        "memory_update",
        ChangeResult,
    ),
    "forget": Operation(declared.ForgetArgs, [Rest("delete", MEMORY, "200", ChangeResult, path_arguments=("id",))]),
    "restore": Operation(
        declared.RestoreArgs,
        [Rest("post", MEMORY + "restore/", "200", ChangeResult, body=True, path_arguments=("id",))],
    ),
    **{
        action: Operation(
            declared.StateChangeArgs,
            [Rest("post", MEMORY + f"{action}/", "200", ChangeResult, body=True, path_arguments=("id",))],
        )
        for action in ("promote", "archive", "unarchive")
    },
    # One tool makes the five changes of state above; REST has an endpoint for each.
    "set state": Operation(declared.SetStateArgs, [], "memory_set_state", ChangeResult),
    "history": Operation(
        declared.HistoryArgs,
        [Rest("get", MEMORY + "history/", "200", History, path_arguments=("id",))],
        "memory_history",
        History,
    ),
    "learn": Operation(
        declared.LearnArgs, [Rest("post", "/api/v1/learn/", "200", LearnResult, body=True)], "memory_learn", LearnResult
    ),
    "list": Operation(
        declared.ListArgs,
        [Rest("get", "/api/v1/memories/", "200", Page)],
        "memory_list",
        Page,
        tool_leaves_out=("state",),
    ),
    "stats": Operation(declared.StatsArgs, [Rest("get", "/api/v1/stats/", "200", StoreStats)], "memory_stats", Stats),
    "audit": Operation(
        declared.AuditArgs, [Rest("get", "/api/v1/audit/", "200", AuditReport)], "memory_audit", AuditReport
    ),
    "conflicts": Operation(
        declared.ConflictsArgs,
        [Rest("get", "/api/v1/conflicts/", "200", ConflictList)],
        "memory_conflicts",
        ConflictList,
    ),
    "resolve conflict": Operation(
        declared.ResolveConflictArgs,
        [Rest("post", "/api/v1/conflicts/{id}/resolve/", "200", ResolveResult, body=True, path_arguments=("id",))],
        "memory_resolve_conflict",
        ResolveResult,
    ),
    "graph": Operation(
        declared.GraphArgs, [Rest("get", "/api/v1/graph/", "200", GraphResult)], "memory_graph", GraphResult
    ),
    "route": Operation(
        declared.RouteArgs,
        [
            Rest("get", "/api/v1/route/", "200", RouteResult),
            Rest("post", "/api/v1/route/", "200", RouteResult, body=True),
        ],
        "memory_route",
        RouteResult,
    ),
    "export": Operation(declared.ExportArgs, [Rest("get", "/api/v1/export/", "200", ExportDocument)]),
    "import": Operation(declared.ImportArgs, [Rest("post", "/api/v1/import/", "200", ImportResult)]),
    "health": Operation(None, [Rest("get", "/api/v1/health/", "200", Health)]),
    "liveness": Operation(None, [Rest("get", "/api/v1/health/live/", "200", Liveness)]),
    "readiness": Operation(None, [Rest("get", "/api/v1/health/ready/", "200", Readiness)]),
    "hook recall": Operation(
        declared.HookRecallArgs, [Rest("post", "/api/v1/hooks/recall/", "200", HookBlock, body=True)]
    ),
    "hook ingest": Operation(
        declared.HookIngestArgs, [Rest("post", "/api/v1/hooks/ingest/", "201", IngestResult, body=True)]
    ),
    "hook report": Operation(
        declared.HookReportArgs, [Rest("post", "/api/v1/hooks/report/", "201", InjectionRecord, body=True)]
    ),
    "hook used": Operation(declared.HookUsedArgs, [Rest("post", "/api/v1/hooks/used/", "200", UsedRecord, body=True)]),
}
ENDPOINTS = [(name, rest) for name, operation in OPERATIONS.items() for rest in operation.rest]
TOOLS = [(name, operation) for name, operation in OPERATIONS.items() if operation.tool]


@pytest.fixture(scope="module")
def openapi(django_db_blocker) -> dict:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.fixture(scope="module")
def tools() -> dict:
    token = current_caller.set(
        Caller(actor="declarations", interface="mcp", scopes=frozenset({"read", "write", "admin"}), namespaces=None)
    )
    tool_set = current_tool_set.set(ALL_TOOLS)
    try:
        return {tool.name: tool for tool in asyncio.run(server.list_tools())}
    finally:
        current_tool_set.reset(tool_set)
        current_caller.reset(token)


# --- what a declaration says ------------------------------------------------------------------------------------

_BOUNDS = (("min_length", "min"), ("max_length", "max"), ("ge", "minimum"), ("le", "maximum"), ("pattern", "pattern"))
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}


def declared_shape(annotation, metadata=()) -> dict:
    """The JSON shape a Python annotation declares: type, bounds and choices, nulls aside."""
    constraints = list(metadata)
    while get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        constraints += more
    bounds = {}
    for item in constraints:
        for constraint in item.metadata if isinstance(item, FieldInfo) else [item]:
            for attribute, name in _BOUNDS:
                if getattr(constraint, attribute, None) is not None:
                    bounds[name] = getattr(constraint, attribute)
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        forms = [part for part in get_args(annotation) if part is not type(None)]
        if len(forms) == 1:
            return declared_shape(forms[0], constraints)
        return {"anyOf": [declared_shape(form) for form in forms]}
    if origin is Literal:
        return {"enum": list(get_args(annotation))}
    if origin is list:
        return {
            "type": "array",
            **_renamed(bounds, min="minItems", max="maxItems"),
            "items": declared_shape(get_args(annotation)[0]),
        }
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"type": "object"}
    return {"type": _JSON_TYPES[origin or annotation], **_renamed(bounds, min="minLength", max="maxLength")}


def _renamed(bounds: dict, **names) -> dict:
    return {names.get(key, key): value for key, value in bounds.items()}


def declared_argument(info: FieldInfo, *, tool: bool = False) -> dict:
    """What a declared argument says; a ``tool`` says a time's forms once, in the server's instructions."""
    facts = {
        "shape": declared_shape(info.annotation, info.metadata),
        "description": tool_description(info) if tool else info.description,
        "required": info.is_required(),
    }
    if info.default not in (None, PydanticUndefined):
        facts["default"] = info.default
    return facts


def _spread(record: type[BaseModel], name: str) -> bool:
    return issubclass(record, MemoryPlus) and name == "memory"


def declared_outputs(record: type[BaseModel]) -> dict[str, str | None]:
    """The keys a record's output has, in order, with their descriptions (a MemoryPlus's memory first)."""
    keys = {}
    for name, info in record.model_fields.items():
        if info.exclude:
            continue
        if _spread(record, name):
            keys.update(declared_outputs(info.annotation))
        else:
            keys[info.alias or name] = info.description
    return keys


# --- what a JSON schema says ------------------------------------------------------------------------------------


def resolve(schema: dict, node: dict) -> dict:
    while True:
        if "$ref" in node:
            defs = schema.get("$defs") or schema["components"]["schemas"]
            node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
        elif len(node.get("allOf", ())) == 1:
            node = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
        else:
            return node


def documented_shape(schema: dict, node: dict) -> dict:
    node = resolve(schema, node)
    forms = node.get("anyOf") or node.get("oneOf")
    if forms:
        forms = [form for form in forms if form.get("type") != "null"]
        if len(forms) == 1:
            return documented_shape(schema, forms[0])
        return {"anyOf": [documented_shape(schema, form) for form in forms]}
    if "enum" in node:
        return {"enum": [value for value in node["enum"] if value is not None]}
    bounds = {
        key: node[key]
        for key in ("minLength", "maxLength", "minimum", "maximum", "pattern", "minItems", "maxItems")
        if key in node
    }
    if node.get("type") == "array":
        return {"type": "array", **bounds, "items": documented_shape(schema, node["items"])}
    return {"type": node["type"], **bounds}


def documented_argument(schema: dict, node: dict, *, description, required: bool) -> dict:
    node = resolve(schema, node)
    facts = {"shape": documented_shape(schema, node), "description": description, "required": required}
    if node.get("default") is not None:
        facts["default"] = node["default"]
    return facts


def as_query(facts: dict) -> dict:
    """A declared argument as a query string takes it: of several forms, the list (a parameter given again)."""
    forms = facts["shape"].get("anyOf")
    if forms:
        facts = {**facts, "shape": next(form for form in forms if form.get("type") == "array")}
    return facts


def documented_outputs(schema: dict, node: dict) -> dict[str, str | None]:
    node = resolve(schema, node)
    return {name: resolve(schema, value).get("description") for name, value in node["properties"].items()}


def assert_same_records(schema: dict, node: dict, record: type[BaseModel], where: str):
    """The schema's object has the record's keys, in order, described alike, and so do the records inside it."""
    assert documented_outputs(schema, node) == declared_outputs(record), where
    node = resolve(schema, node)
    if issubclass(record, Record):
        optional = record.optional_keys()
        assert node["required"] == [key for key in declared_outputs(record) if key not in optional], where
    for name, info in record.model_fields.items():
        inner = info.annotation
        many = get_origin(inner) is list
        inner = get_args(inner)[0] if many else inner
        inner = next((part for part in get_args(inner) if part is not type(None)), inner)
        if isinstance(inner, type) and issubclass(inner, BaseModel) and not _spread(record, name):
            nested = resolve(schema, resolve(schema, node["properties"][info.alias or name]))
            nested = nested.get("items", nested) if many else nested
            forms = [form for form in nested.get("anyOf", [nested]) if form.get("type") != "null"]
            assert_same_records(schema, forms[0], inner, f"{where}.{name}")


# --- the comparisons --------------------------------------------------------------------------------------------


def test_every_rest_operation_and_every_tool_is_compared(openapi, tools):
    documented = {
        (method, path)
        for path, item in openapi["paths"].items()
        for method in item
        if method in ("get", "post", "patch", "delete", "put")
    }
    assert documented == {(rest.method, rest.path) for _, rest in ENDPOINTS}
    assert set(tools) == {operation.tool for _, operation in TOOLS}


@pytest.mark.parametrize(("name", "rest"), ENDPOINTS, ids=[f"{rest.method} {rest.path}" for _, rest in ENDPOINTS])
def test_rest_takes_the_declared_arguments(openapi, name, rest):
    operation = openapi["paths"][rest.path][rest.method]
    model = OPERATIONS[name].arguments
    declared_fields = (
        {}
        if model is None
        else {argument: info for argument, info in model.model_fields.items() if argument not in rest.leaves_out}
    )
    parameters = {parameter["name"]: parameter for parameter in operation.get("parameters", [])}
    in_path = {argument for argument, parameter in parameters.items() if parameter["in"] == "path"}
    assert in_path == set(rest.path_arguments)

    taken = {}
    for argument, parameter in parameters.items():
        taken[argument] = documented_argument(
            openapi,
            parameter["schema"],
            description=parameter.get("description"),
            required=parameter.get("required", False),
        )
    if rest.body:
        body = resolve(openapi, operation["requestBody"]["content"]["application/json"]["schema"])
        assert body["additionalProperties"] is False
        for argument, node in body["properties"].items():
            taken[argument] = documented_argument(
                openapi,
                node,
                description=resolve(openapi, node).get("description"),
                required=argument in body.get("required", ()),
            )

    expected = {}
    for argument, info in declared_fields.items():
        facts = declared_argument(info)
        if argument in rest.path_arguments:
            facts["required"] = True
        expected[argument] = facts if rest.body or argument in rest.path_arguments else as_query(facts)
    assert taken == expected


@pytest.mark.parametrize(("name", "operation"), TOOLS, ids=[operation.tool for _, operation in TOOLS])
def test_each_tool_takes_the_declared_arguments(tools, name, operation):
    schema = tools[operation.tool].inputSchema
    expected = {
        argument: declared_argument(info, tool=True)
        for argument, info in operation.arguments.model_fields.items()
        if argument not in operation.tool_leaves_out
    }
    assert list(schema["properties"]) == list(expected)
    documented = {
        argument: documented_argument(
            schema, node, description=node.get("description"), required=argument in schema.get("required", ())
        )
        for argument, node in schema["properties"].items()
    }
    assert documented == expected


@pytest.mark.parametrize(("name", "rest"), ENDPOINTS, ids=[f"{rest.method} {rest.path}" for _, rest in ENDPOINTS])
def test_rest_answers_with_the_declared_record(openapi, name, rest):
    responses = openapi["paths"][rest.path][rest.method]["responses"]
    answer = responses[rest.status]["content"]["application/json"]["schema"]
    assert_same_records(openapi, answer, rest.record, f"{rest.method} {rest.path}")
    for status, response in responses.items():
        if status.startswith("4"):
            assert_same_records(openapi, response["content"]["application/json"]["schema"], ErrorResponse, status)


@pytest.mark.parametrize(("name", "operation"), TOOLS, ids=[operation.tool for _, operation in TOOLS])
def test_each_tool_answers_with_the_declared_record(tools, name, operation):
    schema = tools[operation.tool].outputSchema
    assert_same_records(schema, schema, operation.tool_record, operation.tool)


def test_each_description_is_written_once():
    """No module repeats a declared description as a string of its own: a copy would drift."""
    root = Path(__file__).resolve().parent.parent
    texts = Counter()
    for folder in ("api", "mcp_api", "memories", "memoryproject", "telemetry"):
        for path in (root / folder).rglob("*.py"):
            # The parser joins adjacent literals, so a text split over lines counts as one string.
            texts.update(
                node.value.strip()
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
            )
    models = [
        *(operation.arguments for operation in OPERATIONS.values() if operation.arguments),
        *(rest.record for _, rest in ENDPOINTS),
    ]
    descriptions = {
        info.description.removesuffix(declared.INSTANT_HELP).strip()
        for model in models
        for info in model.model_fields.values()
        if info.description
    }
    assert texts[declared.INSTANT_HELP] == 1
    for description in descriptions:
        assert texts[description] <= 1, description


def test_set_state_takes_exactly_the_actions_it_has_a_service_for():
    assert tuple(STATE_SERVICES) == declared.STATE_ACTIONS
