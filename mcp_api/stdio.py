"""MCP over stdin and stdout: the SDK's stdio transport, with every line checked as ``/mcp`` checks a body.

The SDK's reader parses a line leniently (a repeated key keeps its last value, a request
with a malformed id passes as a notification) and drops what it cannot read without an
answer. Here each line is checked first with ``transport.read_message``, the same check
as over HTTP, and a refusal is written back as a JSON-RPC error line.
"""

import sys
from io import TextIOWrapper

import anyio
from mcp.server.stdio import stdio_server

from mcp_api.transport import Refused, read_message


class _LineWriter:
    """stdout, shared by the SDK's writer and the refusals: one write at a time."""

    def __init__(self, stream):
        self.stream = anyio.wrap_file(stream)
        self.lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self.lock:
            await self.stream.write(text)

    async def flush(self) -> None:
        async with self.lock:
            await self.stream.flush()


async def _checked_lines(stdin, stdout: _LineWriter):
    """The lines of ``stdin`` (bytes) that are messages the server can take; the others are answered here."""
    async for line in stdin:
        if not line.strip():
            continue
        try:
            read_message(line)
        except Refused as refused:
            await stdout.write(refused.answer.decode("utf-8") + "\n")
            await stdout.flush()
            continue
        yield line.decode("utf-8")


async def serve(server) -> None:
    """Serve ``server`` (a FastMCP) on this process's stdin and stdout until stdin closes."""
    stdout = _LineWriter(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    lines = _checked_lines(anyio.wrap_file(sys.stdin.buffer), stdout)
    # What FastMCP.run(transport="stdio") does, with the checked lines as its input.
    async with stdio_server(stdin=lines, stdout=stdout) as (read_stream, write_stream):
        await server._mcp_server.run(read_stream, write_stream, server._mcp_server.create_initialization_options())
