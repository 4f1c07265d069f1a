"""MCP over stdin and stdout: the SDK's stdio transport, with every line checked as ``/mcp`` checks a body.

The SDK's reader parses a line leniently (a repeated key keeps its last value, a request
with a malformed id passes as a notification) and drops what it cannot read without an
answer. Here each line is checked first with ``transport.read_message``, the same check
as over HTTP, and a refusal is written back as a JSON-RPC error line.

At the end of input the SDK cancels the requests still running, though a tool's work in
a worker thread goes on (a write is committed and never acknowledged). So the end of
input is passed on only once every request read has been answered.
"""

import json
import sys
from io import TextIOWrapper

import anyio
from mcp.server.stdio import stdio_server

from mcp_api.transport import Refused, read_message


class _Stdout:
    """stdout, shared by the SDK's writer and the refusals, one line at a time; it counts the requests unanswered."""

    def __init__(self, stream):
        self.stream = anyio.wrap_file(stream)
        self.lock = anyio.Lock()
        self.unanswered = 0
        self.answered = anyio.Condition()

    async def write(self, text: str) -> None:
        """Write a line of the SDK's: an answer to a request passed on, or a notification."""
        async with self.lock:
            await self.stream.write(text)
        message = json.loads(text)
        # An answer carries the id of its request and no method.
        if "id" in message and "method" not in message:
            async with self.answered:
                self.unanswered -= 1
                self.answered.notify_all()

    async def refuse(self, answer: bytes) -> None:
        """Write the answer to a line that was not passed on."""
        async with self.lock:
            await self.stream.write(answer.decode("utf-8") + "\n")
            await self.stream.flush()

    async def flush(self) -> None:
        async with self.lock:
            await self.stream.flush()

    async def all_answered(self) -> None:
        async with self.answered:
            while self.unanswered > 0:
                await self.answered.wait()


async def _checked_lines(stdin, stdout: _Stdout):
    """The lines of ``stdin`` (bytes) that are messages the server can take; the others are answered here.

    Ends once every request passed on has been answered.
    """
    async for line in stdin:
        if not line.strip():
            continue
        try:
            message = read_message(line)
        except Refused as refused:
            await stdout.refuse(refused.answer)
            continue
        if "id" in message:
            stdout.unanswered += 1
        yield line.decode("utf-8")
    await stdout.all_answered()


async def serve(server) -> None:
    """Serve ``server`` (a FastMCP) on this process's stdin and stdout until stdin closes and all is answered."""
    stdout = _Stdout(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    lines = _checked_lines(anyio.wrap_file(sys.stdin.buffer), stdout)
    # What FastMCP.run(transport="stdio") does, with the checked lines as its input.
    async with stdio_server(stdin=lines, stdout=stdout) as (read_stream, write_stream):
        await server._mcp_server.run(read_stream, write_stream, server._mcp_server.create_initialization_options())
