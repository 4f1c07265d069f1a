"""Tool output size: characters of text content a model reads per character of memory text, per MCP tool.
And what the tool list costs before the first call.

    .venv/bin/python benchmarks/tool_output.py ../shared/bench-data/recall-dev/recall_dev.json \
        [--output benchmarks/results/tool_output.json] [--embedder minilm]

The short facts of recall-dev are remembered through the MCP server's own tool call
(``mcp_api.server``, in process, as an agent with a read and write key would call it,
without keys), then each is read back with memory_get and memory_history, the namespace
is paged with memory_list, and every question is recalled with memory_recall. For each
tool the ratio is the text content's characters over the characters of memory text it
carries (the facts it shows), summed over its calls; the structured content's JSON,
indented as the text content was before, is measured beside it. Issue 29's goal: at
most 2x for each tool.

Beside it, the tool list a model reads before its first call, as ``tools/list`` gives it
to a key with every scope: each tool's name, description and input schema (compact
JSON; output schemas left out), summed, for the default set and for ``?tools=all``.
Issue 41's goal: the default set at most 12,000 characters.
"""

import argparse
import asyncio
import json
import time

import pydantic_core
from harness import environment
from store import RESULTS, open_store, save

NAMESPACE = "recall-dev"
TOOLS = ("memory_remember", "memory_recall", "memory_get", "memory_history", "memory_list")


def carried(name: str, structured: dict) -> int:
    """Characters of memory text in a tool's answer."""
    if name == "memory_recall":
        return sum(len(hit["content"]) for hit in structured["hits"])
    if name == "memory_list":
        return sum(len(item["content"]) for item in structured["items"])
    if name == "memory_history":
        return sum(len(revision["content"]) for revision in structured["revisions"])
    return len(structured["content"])


def tool_chars(tool) -> int:
    """Characters of a listed tool's name, description and input schema (compact JSON)."""
    return (
        len(tool.name)
        + len(tool.description)
        + len(json.dumps(tool.inputSchema, separators=(",", ":"), ensure_ascii=False))
    )


async def measure_tool_lists() -> dict:
    from mcp_api.server import ALL_TOOLS, DEFAULT_TOOLS, current_tool_set
    from mcp_api.tools import current_caller, server
    from memories.access import Caller

    current_caller.set(Caller(actor="benchmark", interface="mcp", scopes=frozenset({"read", "write", "admin"})))
    lists = {}
    for tool_set in (DEFAULT_TOOLS, ALL_TOOLS):
        current_tool_set.set(tool_set)
        tools = await server.list_tools()
        sizes = {tool.name: tool_chars(tool) for tool in tools}
        lists[tool_set] = {"tools": len(tools), "characters": sum(sizes.values()), "per_tool": sizes}
    current_tool_set.set(DEFAULT_TOOLS)
    return lists


async def measure(facts: dict[str, str], queries: list[str]) -> dict:
    from mcp_api.tools import current_caller, server
    from memories.access import Caller

    current_caller.set(Caller(actor="benchmark", interface="mcp", scopes=frozenset({"read", "write"})))
    sizes = {
        name: {"calls": 0, "text": 0, "memory_text": 0, "structured_json": 0, "largest_ratio": 0.0} for name in TOOLS
    }
    examples = {}

    async def call(name: str, arguments: dict) -> dict:
        result = await server.call_tool(name, arguments)
        assert not result.isError, result.content[0].text
        text, structured = result.content[0].text, result.structuredContent
        size = sizes[name]
        memory_text = carried(name, structured)
        size["calls"] += 1
        size["text"] += len(text)
        size["memory_text"] += memory_text
        size["structured_json"] += len(pydantic_core.to_json(structured, indent=2).decode())
        if memory_text:
            size["largest_ratio"] = max(size["largest_ratio"], round(len(text) / memory_text, 3))
        examples.setdefault(name, text)
        return structured

    ids = [(await call("memory_remember", {"content": fact, "namespace": NAMESPACE}))["id"] for fact in facts.values()]
    for memory_id in ids:
        await call("memory_get", {"id": memory_id})
        await call("memory_history", {"id": memory_id})
    cursor = None
    while True:
        page = await call("memory_list", {"namespace": NAMESPACE, **({"cursor": cursor} if cursor else {})})
        cursor = page["next_cursor"]
        if cursor is None:
            break
    for query in queries:
        await call("memory_recall", {"query": query, "namespace": NAMESPACE})
    for size in sizes.values():
        size["ratio"] = round(size["text"] / size["memory_text"], 3)
        size["structured_json_ratio"] = round(size["structured_json"] / size["memory_text"], 3)
    return {"tools": sizes, "examples": examples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="path to recall_dev.json")
    parser.add_argument("--output", default=str(RESULTS / "tool_output.json"))
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hash")
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        data = json.load(handle)
    open_store(db_path=None, embedder=args.embedder)
    started = time.perf_counter()
    report = asyncio.run(measure(data["facts"], [query["q"] for query in data["queries"]]))
    report["tool_list"] = asyncio.run(measure_tool_lists())
    for name, size in report["tools"].items():
        print(
            f"{name:16} text {size['ratio']:.2f}x memory text (largest {size['largest_ratio']:.2f}x), "
            f"structured JSON {size['structured_json_ratio']:.2f}x, {size['calls']} calls"
        )
    for tool_set, listed in report["tool_list"].items():
        print(
            f"tool list ({tool_set}): {listed['tools']} tools, {listed['characters']} characters of names, "
            "descriptions and input schemas"
        )
    save(
        {
            "benchmark": "tool_output",
            "command": f"benchmarks/tool_output.py {args.data} --embedder {args.embedder}",
            "data": args.data,
            "facts": len(data["facts"]),
            "queries": len(data["queries"]),
            "seconds": round(time.perf_counter() - started, 2),
            "environment": environment(),
            **report,
            "targets": {"ratio": "<= 2 for each tool", "tool_list": "default <= 12000 characters"},
        },
        args.output,
    )


if __name__ == "__main__":
    main()
