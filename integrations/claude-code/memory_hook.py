#!/usr/bin/env python3
"""Claude Code hooks for the memory server (Python standard library only).

One script for four hook events; it reads Claude Code's hook input (JSON on stdin)
and acts on its ``hook_event_name``:

- ``UserPromptSubmit``: recall memories for the prompt (``POST /api/v1/hooks/recall/``),
  print the block as ``hookSpecificOutput.additionalContext``, then report what was
  injected (``POST /api/v1/hooks/report/``);
- ``Stop``: hand Claude's answer (``last_assistant_message``, else the transcript's last
  answer) to ``POST /api/v1/hooks/used/``, which marks the injected memories it used;
- ``PreCompact`` and ``SessionEnd``: read the session transcript (``transcript_path``,
  JSON Lines) and store its last requests and answers, the part a compaction
  summarises away (``POST /api/v1/hooks/ingest/``).

It fails open: whatever goes wrong (no server, a slow one, a bad key, odd input) it
exits 0 within about MEMORY_TIMEOUT seconds, prints nothing on stdout and at most one
line on stderr, so a memory server that is down never blocks a session.

Environment: MEMORY_URL (default: the URL in the server's discovery file when a live
server wrote one, else http://127.0.0.1:8000), MEMORY_API_KEY (required),
MEMORY_NAMESPACE (default: the key's first namespace), MEMORY_BUDGET (characters of
recalled context; default: the server's), MEMORY_TIMEOUT (seconds for all requests of
one run together, default 2). The discovery file is MEMORY_DISCOVERY_FILE, else
MEMORY_DB_PATH with ``.server.json`` appended, else the project's ``data/memory.db.server.json``.
"""

import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HARNESS = "claude-code"
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 2.0
TIMEOUT_MAX = 30.0
# The server's recall takes queries up to 2000 characters; a longer prompt is cut.
QUERY_MAX = 2000
SESSION_MAX = 200
# Transcript capture: only the end of a long transcript is read, and what is stored is bounded.
TRANSCRIPT_TAIL_BYTES = 4 * 1024 * 1024
TURNS_KEPT = 6
REQUEST_MAX = 600
ANSWER_MAX = 1200
CAPTURE_MAX = 8000
TITLE_MAX = 120
# hooks/used/ reads at most this much of an answer; its end carries the conclusion.
USED_ANSWER_MAX = 50_000
# Text the harness wraps around turns that is not the conversation itself (and our own block).
_WRAPPED = re.compile(
    r"<(system-reminder|memory-context|user-prompt-submit-hook|command-name|command-message|command-args|"
    r"local-command-stdout|local-command-stderr)>.*?</\1>",
    re.DOTALL | re.IGNORECASE,
)


def discovered_url(environ) -> str | None:
    """The URL a running server wrote to its discovery file, or None when there is none or its server is gone."""
    path = (
        environ.get("MEMORY_DISCOVERY_FILE")
        or (environ["MEMORY_DB_PATH"] + ".server.json" if environ.get("MEMORY_DB_PATH") else None)
        or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "memory.db.server.json")
    )
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
        pid, url = int(found["pid"]), str(found["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)  # signal 0 only asks whether the process exists
    except ProcessLookupError:
        return None  # killed without cleaning up: a stale file
    except PermissionError:
        pass  # alive, owned by another user
    return url


class Failed(Exception):
    """Something prevented the hook from doing its work; the session goes on without it."""


class Client:
    """POSTs JSON to the memory server, all requests of one run sharing one deadline."""

    def __init__(self, environ):
        self.url = (environ.get("MEMORY_URL") or discovered_url(environ) or DEFAULT_URL).strip().rstrip("/")
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise Failed(f"MEMORY_URL={self.url!r} is not an http(s) URL")
        self.key = (environ.get("MEMORY_API_KEY") or "").strip()
        if not self.key:
            raise Failed("MEMORY_API_KEY is not set")
        self.namespace = (environ.get("MEMORY_NAMESPACE") or "").strip() or None
        self.budget = _number(environ, "MEMORY_BUDGET", int, None)
        timeout = _number(environ, "MEMORY_TIMEOUT", float, DEFAULT_TIMEOUT)
        self.deadline = time.monotonic() + min(max(timeout, 0.1), TIMEOUT_MAX)
        # A server on this machine is reached directly, whatever proxy the environment names.
        handlers = [urllib.request.ProxyHandler({})] if parsed.hostname in ("127.0.0.1", "localhost", "::1") else []
        self.opener = urllib.request.build_opener(*handlers)

    def post(self, path: str, payload: dict) -> dict:
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise Failed(f"no time left for {path}")
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(payload).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": "memory-claude-code-hook/1",
            },
        )
        try:
            with self.opener.open(request, timeout=left) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            raise Failed(f"{path}: HTTP {error.code} {_error_message(error)}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise Failed(f"{path}: {getattr(error, 'reason', error)}") from None


def _number(environ, name, kind, default):
    value = (environ.get(name) or "").strip()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        raise Failed(f"{name}={value!r} is not a number") from None


def _error_message(error) -> str:
    try:
        return json.loads(error.read().decode("utf-8"))["error"]["message"]
    except Exception:
        return ""


def _cut(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1].rstrip() + "…"


def _session(event: dict) -> str:
    session = event.get("session_id")
    return session[:SESSION_MAX] if isinstance(session, str) else ""


def on_prompt(event: dict, client: Client, out) -> None:
    """UserPromptSubmit: recall for the prompt, emit the block, report the injection."""
    prompt = event.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return
    query = prompt.strip()[:QUERY_MAX]
    session = _session(event)
    ask = {"query": query, "harness": HARNESS, "hook": "UserPromptSubmit", "session": session}
    if client.namespace:
        ask["namespace"] = client.namespace
    if client.budget is not None:
        ask["budget"] = client.budget
    answer = client.post("/api/v1/hooks/recall/", ask)
    block = answer.get("block") or ""
    if not isinstance(block, str) or not block:
        return
    out.write(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}))
    out.flush()
    memories = [{"memory_id": hit["memory_id"], "revision_id": hit["revision_id"]} for hit in answer.get("hits", [])]
    client.post(
        "/api/v1/hooks/report/",
        {
            "harness": HARNESS,
            "hook": "UserPromptSubmit",
            "query": query,
            "session": session,
            "characters": len(block),
            "memories": memories,
        },
    )


def _text_of(message) -> str:
    """The plain text of a transcript message: a string, or its text parts (tool calls and results left out)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"]
    else:
        return ""
    return _WRAPPED.sub(" ", "\n".join(part for part in parts if isinstance(part, str))).strip()


def read_turns(path: str) -> list[tuple[str, str]]:
    """Return the transcript's (request, answer) pairs, oldest first: each user prompt and Claude's last text."""
    with open(path, "rb") as file:
        file.seek(0, os.SEEK_END)
        size = file.tell()
        file.seek(max(0, size - TRANSCRIPT_TAIL_BYTES))
        data = file.read()
    lines = data.split(b"\n")
    if size > TRANSCRIPT_TAIL_BYTES:
        lines = lines[1:]  # the first line was cut by the seek
    turns: list[list[str]] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("isMeta") or entry.get("isCompactSummary"):
            continue
        text = _text_of(entry.get("message"))
        if not text:
            continue
        if entry.get("type") == "user":
            turns.append([text, ""])
        elif entry.get("type") == "assistant" and turns:
            turns[-1][1] = text  # the last text of the answer is its conclusion
    return [(request, answer) for request, answer in turns]


def transcript_turns(event: dict) -> list[tuple[str, str]]:
    """The turns of the event's transcript (``read_turns``); none when the event names no transcript."""
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        return []
    try:
        return read_turns(os.path.expanduser(path))
    except OSError as error:
        raise Failed(f"cannot read the transcript: {error.strerror or error}") from None


def on_stop(event: dict, client: Client, out) -> None:
    """Stop: hand the answer to the server, which marks the memories of this session's last injection it used."""
    answer = event.get("last_assistant_message")
    if not isinstance(answer, str) or not answer.strip():
        turns = transcript_turns(event)
        answer = turns[-1][1] if turns else ""
    session = _session(event)
    if not answer.strip() or not session:
        return
    client.post("/api/v1/hooks/used/", {"session": session, "answer": answer[-USED_ANSWER_MAX:]})


def capture(event: dict, turns: list[tuple[str, str]]) -> tuple[str, str]:
    """Return the (title, text) to store for these turns: the last few, each bounded, within CAPTURE_MAX."""
    kept = turns[-TURNS_KEPT:]
    trigger = event.get("trigger") or event.get("reason") or ""
    where = event.get("cwd") or ""
    head = f"Claude Code session {_session(event) or '(unknown)'}, {event.get('hook_event_name')}"
    head += f" ({trigger})" if isinstance(trigger, str) and trigger else ""
    head += f", in {where}" if isinstance(where, str) and where else ""
    parts = [head + ": the last requests and answers."]
    for request, answer in kept:
        parts.append("Request: " + _cut(request, REQUEST_MAX))
        if answer:
            parts.append("Answer: " + _cut(answer, ANSWER_MAX))
    text = "\n".join(parts)
    while len(text) > CAPTURE_MAX and len(parts) > 2:
        del parts[1]  # the oldest first
        text = "\n".join(parts)
    title = _cut(f"Claude Code: {kept[-1][0]}", TITLE_MAX)
    return title, text[:CAPTURE_MAX]


def on_transcript(event: dict, client: Client, out) -> None:
    """PreCompact and SessionEnd: store the end of the conversation."""
    turns = transcript_turns(event)
    if not turns:
        return
    title, text = capture(event, turns)
    ingest = {
        "text": text,
        "title": title,
        "tags": [HARNESS],
        "harness": HARNESS,
        "hook": event.get("hook_event_name"),
        "session": _session(event),
    }
    if client.namespace:
        ingest["namespace"] = client.namespace
    client.post("/api/v1/hooks/ingest/", ingest)


HANDLERS = {"UserPromptSubmit": on_prompt, "Stop": on_stop, "PreCompact": on_transcript, "SessionEnd": on_transcript}


def main(stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr, environ=os.environ) -> int:
    try:
        event = json.loads(stdin.read() or "{}")
        handler = HANDLERS.get(event.get("hook_event_name")) if isinstance(event, dict) else None
        if handler is None:
            return 0
        handler(event, Client(environ), stdout)
    except Failed as error:
        stderr.write(f"memory hook: {error}\n")
    except Exception as error:  # fail open, whatever happened
        stderr.write(f"memory hook: {type(error).__name__}: {error}\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
