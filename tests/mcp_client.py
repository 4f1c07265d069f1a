"""The official ``mcp`` client, driven from synchronous tests.

The session lives in an anyio portal (an event loop on its own thread) for as long as
the ``with`` block, so a module can hold one session open across its tests.
"""

import contextlib
import sys
from contextlib import asynccontextmanager

import httpx
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.subprocesses import BASE_DIR


class ToolFailed(Exception):
    """A tool call answered ``isError``; the message is its text."""


class McpClient:
    def __init__(self, portal, session: ClientSession, initialized: types.InitializeResult):
        self.portal = portal
        self.session = session
        self.initialized = initialized

    def list_tools(self) -> list[types.Tool]:
        return self.portal.call(self.session.list_tools).tools

    def call_raw(self, name: str, arguments: dict | None = None) -> types.CallToolResult:
        return self.portal.call(self.session.call_tool, name, arguments or {})

    def call(self, name: str, arguments: dict | None = None) -> dict:
        """Return a tool's structured result, checking its text carries every memory text in it; raise ToolFailed
        on a tool error."""
        result = self.call_raw(name, arguments)
        if result.isError:
            assert len(result.content) == 1 and result.structuredContent is None
            raise ToolFailed(result.content[0].text)
        text = result.content[0].text
        assert not text.startswith("{"), text  # the short form (mcp_api.rendering), not the record's JSON
        for content in memory_texts(result.structuredContent):
            assert content in text, (content, text)
        return result.structuredContent

    def error(self, name: str, arguments: dict | None = None) -> str:
        """Return the text of a call that must fail as a tool error (not a protocol error)."""
        result = self.call_raw(name, arguments)
        assert result.isError, result.structuredContent
        text = result.content[0].text
        assert "Traceback" not in text and "SELECT" not in text and "Error executing tool" not in text, text
        return text


def memory_texts(structured) -> list[str]:
    """Every memory text (a non-empty ``content``) in a tool's structured result."""
    if isinstance(structured, list):
        return [text for item in structured for text in memory_texts(item)]
    if not isinstance(structured, dict):
        return []
    own = [structured["content"]] if isinstance(structured.get("content"), str) and structured["content"] else []
    return own + [text for key, value in structured.items() if key != "content" for text in memory_texts(value)]


@asynccontextmanager
async def _session(streams):
    read, write = streams[0], streams[1]
    async with ClientSession(read, write) as session:
        yield session, await session.initialize()


@asynccontextmanager
async def _http(url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30)) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            async with _session(streams) as opened:
                yield opened


@asynccontextmanager
async def _stdio(args: list[str], env: dict):
    parameters = StdioServerParameters(command=sys.executable, args=["manage.py", *args], env=env, cwd=BASE_DIR)
    async with stdio_client(parameters) as streams:
        async with _session(streams) as opened:
            yield opened


@contextlib.contextmanager
def _connect(opener):
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(opener) as (session, initialized):
            yield McpClient(portal, session, initialized)


def http_client(url: str, token: str | None):
    """Connect over Streamable HTTP with ``Authorization: Bearer <token>``."""
    return _connect(_http(url, token))


def stdio_client_for(*args: str, env: dict):
    """Launch ``manage.py ARGS`` as a stdio MCP server and connect to it."""
    return _connect(_stdio(list(args), env))
