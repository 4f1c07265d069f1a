"""Odd values in every field of every REST request body and of the MCP JSON-RPC envelope: never a 500.

Deterministic and in-process, through Django's test client: every field gets the odd
values that matter most (a lone surrogate, NUL, 1 MB, nesting near and past the bound,
wrong types) and a few others drawn for it by a seeded generator (strings of odd
characters among them). The fields come from the declarations themselves: the
OpenAPI schema for REST (every operation with a JSON body, and its query parameters),
the tools' input schemas for MCP, so a field added later is fuzzed too.

Every answer must be a success or a refusal in the door's own shape: REST's
``{"error": {"code", "message", "field"?}}``, a JSON-RPC error or a tool error for MCP,
with messages that encode as UTF-8.
"""

import asyncio
import json
import random
from urllib.parse import urlencode

import pytest
from django.test import Client

from api.docs import openapi_schema
from mcp_api.server import ALL_TOOLS, current_tool_set
from mcp_api.tools import current_caller, server
from memories.access import Caller
from memories.services.keys import api_key_create
from memoryproject.jsontext import MAX_DEPTH

pytestmark = pytest.mark.django_db

SEED = 26
DEEP = 100_000
# A JSON text nested far past the parser's bound, put in place of a value.
TOO_DEEP = "[" * DEEP + "]" * DEEP


def _nested(depth: int):
    value = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _drawn(rng: random.Random, count: int) -> list[str]:
    """Strings of odd characters: surrogates, NUL and controls, bidi marks, combining marks, quotes, emoji."""
    alphabet = [
        "\ud800",
        "\udfff",
        "\x00",
        "\x1b",
        "\x7f",
        "\u202e",
        "\u2028",
        "\ufeff",
        "\u0301",
        "\U0001f9e0",
        '"',
        "\\",
        "'",
        "%",
        "*",
        "NEAR(",
        "AND",
        "a",
        " ",
        "\n",
    ]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(count)]


# Every field gets these, and a few of the others, drawn per field.
ODD_ALWAYS = ["\ud800", "nul\x00inside", "x" * 1_000_000, None, 1.5, [], {"\ud800": "\x00"}, _nested(MAX_DEPTH - 4)]
ODD_SOMETIMES = [
    "a\udfffz",
    "\x00",
    "",
    " ",
    "\u202e\u2028\ufeff",
    True,
    -1,
    2**70,
    {},
    ["\ud800", "\x00"],
    *_drawn(random.Random(SEED), 4),
]
ODD_VALUES = ODD_ALWAYS + ODD_SOMETIMES


def odd_values(field: str) -> list:
    """The values a field is tried with: the same for a field on every run (seeded by its name)."""
    return ODD_ALWAYS + random.Random(f"{SEED}:{field}").sample(ODD_SOMETIMES, 4)


# A text value for a query string: what a URL can carry (surrogates cannot be percent-encoded in UTF-8).
ODD_QUERY_VALUES = [
    "\x00",
    "nul\x00inside",
    "x" * 100_000,
    "",
    "\u202e\u2028\ufeff",
    "%ff",
    "1.5",
    "-1",
    str(2**70),
    *(text.encode("utf-8", "replace").decode() for text in _drawn(random.Random(SEED + 1), 3)),
]


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node or len(node.get("allOf", ())) == 1:
        if "$ref" in node:
            definitions = schema.get("$defs") or schema["components"]["schemas"]  # a tool's schema, or OpenAPI's
            node = {
                **definitions[node["$ref"].rsplit("/", 1)[-1]],
                **{key: value for key, value in node.items() if key != "$ref"},
            }
        else:
            node = {**node["allOf"][0], **{key: value for key, value in node.items() if key != "allOf"}}
    return node


def _example(schema: dict, node: dict):
    """A valid-looking value for a schema node, so that one odd field is the only odd thing in a request."""
    node = _resolve(schema, node)
    forms = [form for form in node.get("anyOf", node.get("oneOf", [])) if form.get("type") != "null"]
    if forms:
        return _example(schema, forms[0])
    if node.get("enum"):
        return next(value for value in node["enum"] if value is not None)
    kind = node.get("type")
    if kind == "integer":
        return max(node.get("minimum", 1), 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {
            name: _example(schema, field)
            for name, field in node.get("properties", {}).items()
            if name in node.get("required", ())
        }
    return "fuzz"


def _rest_cases() -> list[tuple[str, str, str, str]]:
    """(method, path, where, field) for every body field and query parameter of every REST operation."""
    schema = openapi_schema()
    cases = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "patch", "put", "delete"):
                continue
            for parameter in operation.get("parameters", ()):
                if parameter["in"] == "query":
                    cases.append((method, path, "query", parameter["name"]))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for name in _resolve(schema, body["schema"]).get("properties", {}):
                    cases.append((method, path, "body", name))
    return cases


REST_CASES = _rest_cases()


@pytest.fixture
def rest(settings):
    """A test client with a key for everything, throttling off; an existing memory for paths with an id."""
    settings.MEMORY_API_READS_PER_MINUTE = settings.MEMORY_API_WRITES_PER_MINUTE = 0
    _, token = api_key_create(name="fuzzer", scopes=["read", "write", "admin"], actor="tester", interface="cli")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    created = client.post(
        "/api/v1/memories/", {"content": "Fuzzing needs one memory to aim at."}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    return client, created.json()["id"]


def check_rest_answer(response, what: str) -> None:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code < 500, (what, response.status_code, content[:500])
    body = json.loads(content)
    if response.status_code >= 400:
        assert set(body) == {"error"}, what
        assert {"code", "message"} <= set(body["error"]) <= {"code", "message", "field", "memory_id"}, what
        body["error"]["message"].encode("utf-8")  # a message that echoes a surrogate escapes it
        (body["error"].get("field") or "").encode("utf-8")


def test_every_rest_operation_with_a_body_and_every_field_are_fuzzed():
    # The cases come from the schema: it must hold the write endpoints, hooks included, with their fields.
    fields = {(method, path): set() for method, path, _, _ in REST_CASES}
    for method, path, where, name in REST_CASES:
        fields[method, path].add(name)
    assert {"content", "kind", "tags", "subject", "valid_to"} <= fields["post", "/api/v1/memories/"]
    assert {"query", "mode", "match", "kinds", "namespace"} <= fields["post", "/api/v1/recall/"]
    assert {"harness", "memories", "characters"} <= fields["post", "/api/v1/hooks/report/"]
    assert {"text", "kind"} <= fields["post", "/api/v1/hooks/ingest/"]
    assert {"add_tags", "ttl_days"} <= fields["patch", "/api/v1/memories/{id}/"]
    assert "memories" in fields["post", "/api/v1/import/"]


@pytest.mark.parametrize(
    "method, path, where, field",
    REST_CASES,
    ids=[f"{method}-{path}-{where}-{field}" for method, path, where, field in REST_CASES],
)
def test_odd_values_in_any_rest_field_are_refused_or_taken_never_a_500(rest, method, path, where, field):
    client, memory_id = rest
    schema = openapi_schema()
    url = path.replace("{id}", str(memory_id))
    operation = schema["paths"][path][method]
    if where == "query":
        for value in ODD_QUERY_VALUES:
            response = getattr(client, method)(f"{url}?{urlencode({field: value})}")
            check_rest_answer(response, f"{field}={value[:40]!r}")
        return
    base = _example(schema, operation["requestBody"]["content"]["application/json"]["schema"])
    for value in odd_values(f"{path}.{field}"):
        body = json.dumps({**base, field: value})
        check_rest_answer(
            getattr(client, method)(url, body, content_type="application/json"), f"{field}: {str(value)[:40]!r}"
        )
    deep = json.dumps({**base, field: None}).replace("null", TOO_DEEP, 1)
    check_rest_answer(getattr(client, method)(url, deep, content_type="application/json"), f"{field}: too deep")


BODY_OPERATIONS = sorted({(method, path) for method, path, where, _ in REST_CASES if where == "body"})


@pytest.mark.parametrize("method, path", BODY_OPERATIONS, ids=[f"{method}-{path}" for method, path in BODY_OPERATIONS])
def test_odd_field_names_in_any_rest_body_are_refused_never_a_500(rest, method, path):
    client, memory_id = rest
    schema = openapi_schema()
    base = _example(schema, schema["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"])
    for name in ["\ud800", "\x00", "", "x" * 100_000, *_drawn(random.Random(f"{SEED}:{path}"), 3)]:
        response = getattr(client, method)(
            path.replace("{id}", str(memory_id)), json.dumps({**base, name: 1}), content_type="application/json"
        )
        check_rest_answer(response, f"field name {name[:40]!r}")


# --- MCP --------------------------------------------------------------------------------------------------------


@pytest.fixture
def mcp(settings):
    _, token = api_key_create(name="mcp-fuzzer", scopes=["read", "write"], actor="tester", interface="cli")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT="application/json, text/event-stream")

    def post(body: str):
        return client.post("/mcp", body, content_type="application/json")

    return post


def check_mcp_answer(response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code, response.content[:500])
    if response.status_code == 202:  # a notification: nothing to answer
        assert response.content == b"", what
        return
    body = json.loads(response.content)
    assert body["jsonrpc"] == "2.0", what
    if "error" in body:
        assert set(body["error"]) <= {"code", "message", "data"} and isinstance(body["error"]["code"], int), what
        body["error"]["message"].encode("utf-8")
        assert "pydantic" not in body["error"]["message"] and "validation error" not in body["error"]["message"]
        if response.status_code == 400:
            assert body["id"] is None, what
    else:
        assert response.status_code == 200, what
        for item in body["result"].get("content", ()):
            item["text"].encode("utf-8")


ENVELOPE = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
MISSING = object()


@pytest.mark.parametrize("member", list(ENVELOPE))
def test_odd_values_in_any_json_rpc_envelope_member_never_give_a_500(mcp, member):
    for value in [*ODD_VALUES, MISSING]:
        message = {**ENVELOPE, member: value}
        if value is MISSING:
            del message[member]
        check_mcp_answer(mcp(json.dumps(message)), f"{member}: {str(value)[:40]!r}")
    deep = json.dumps({**ENVELOPE, member: None}).replace("null", TOO_DEEP, 1)
    check_mcp_answer(mcp(deep), f"{member}: too deep")


def _tools() -> dict:
    everything = Caller(actor="fuzz", interface="mcp", scopes=frozenset({"read", "write"}), namespaces=None)
    token, tool_set = current_caller.set(everything), current_tool_set.set(ALL_TOOLS)
    try:
        return {tool.name: tool.inputSchema for tool in asyncio.run(server.list_tools())}
    finally:
        current_tool_set.reset(tool_set)
        current_caller.reset(token)


TOOLS = _tools()


def test_odd_tool_names_and_arguments_objects_never_give_a_500(mcp):
    for name, arguments in [*((value, {}) for value in ODD_VALUES), *(("memory_stats", value) for value in ODD_VALUES)]:
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        check_mcp_answer(mcp(json.dumps(message)), f"name {str(name)[:40]!r}, arguments {str(arguments)[:40]!r}")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_odd_values_in_any_tool_argument_are_tool_errors_never_a_500(mcp, tool):
    schema = TOOLS[tool]
    base = {name: _example(schema, schema["properties"][name]) for name in schema.get("required", ())}
    for name in schema["properties"]:
        for value in odd_values(f"{tool}.{name}"):
            arguments = {**base, name: value}
            message = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            check_mcp_answer(mcp(json.dumps(message)), f"{tool}.{name}: {str(value)[:40]!r}")


def test_more_query_parameters_than_django_reads_never_give_a_500(mcp, rest, settings):
    query = "&".join(f"p{index}=1" for index in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    client, _ = rest
    check_rest_answer(client.get(f"/api/v1/memories/?{query}"), "REST")
    response = client.post(
        f"/mcp?{query}",
        json.dumps(ENVELOPE),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    check_mcp_answer(response, "MCP")
