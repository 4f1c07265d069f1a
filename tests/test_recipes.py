"""The recipes of integrations/README.md, run as written there: the scripts and the hook configurations are taken
from the page's code blocks, and each configured command is run with the event its harness sends, against a live
server. What a harness sends is taken from its published hook schemas (the page says which)."""

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from tests.subprocesses import BASE_DIR, serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(shutil.which(tool) for tool in ("bash", "curl", "jq")), reason="the recipes need bash, curl and jq"
    ),
]

README = BASE_DIR / "integrations" / "README.md"
# A fenced block whose info string names a file after its language: ```sh memory-hook.sh
_BLOCK = re.compile(r"^```(\w+) ([\w.-]+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> dict[str, str]:
    return {name: body for _, name, body in _BLOCK.findall(README.read_text())}


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> dict:
    """The page's scripts written to files, and its hook configurations pointing at them."""
    folder = tmp_path_factory.mktemp("recipes")
    found = blocks()
    assert {"memory-hook.sh", "memory-loop.sh", "codex-hooks.json", "gemini-settings.json"} <= set(found)
    for name in ("memory-hook.sh", "memory-loop.sh"):
        (folder / name).write_text(found[name])
    configs = {
        name: json.loads(found[name].replace("/path/to/memory-hook.sh", str(folder / "memory-hook.sh")))
        for name in ("codex-hooks.json", "gemini-settings.json")
    }
    return {"folder": folder, **configs}


@pytest.fixture(scope="module")
def live(module_instance):
    key = module_instance.create_api_keys(recipes={"scopes": ["read", "write"]})["recipes"]
    module_instance.run("""
        for namespace in ("codex", "gemini", "loop"):
            services.memory_remember(namespace=namespace, content="Deploys go out on Fridays after the release review.",
                                     title="Deploy day", **ACTOR)
    """)
    with serve(module_instance.env) as url:
        yield module_instance, url, key


def command_for(config: dict, event: str) -> str:
    [group] = config["hooks"][event]
    [hook] = group["hooks"]
    assert hook["type"] == "command"
    return hook["command"]


def run(command: str | list, stdin: str, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        shell=isinstance(command, str),
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=timeout,
    )


def stored(url: str, key: str, namespace: str) -> list[dict]:
    request = urllib.request.Request(
        f"{url}/api/v1/memories/?namespace={namespace}&limit=200", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["items"]


def injections(instance, harness: str) -> list[tuple]:
    return instance.sql(
        "SELECT i.hook, i.session, i.query, i.characters, count(m.id), count(m.used_at) "
        "FROM telemetry_injection i "
        "LEFT JOIN telemetry_injectedmemory m ON m.injection_id = i.id WHERE i.harness = %s "
        "GROUP BY i.id ORDER BY i.id",
        (harness,),
    )


def harness_env(url: str, key: str, harness: str, namespace: str, turns) -> dict:
    return {
        "MEMORY_URL": url,
        "MEMORY_API_KEY": key,
        "MEMORY_HARNESS": harness,
        "MEMORY_NAMESPACE": namespace,
        "MEMORY_TURNS_DIR": str(turns),
    }


def assert_prompt_hook(done: subprocess.CompletedProcess, event: str) -> str:
    assert done.returncode == 0 and done.stderr == "", done.stderr
    output = json.loads(done.stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == event
    assert output["additionalContext"].startswith("<memory-context>")
    assert "Fridays" in output["additionalContext"]
    return output["additionalContext"]


def test_codex_cli_hooks_recall_report_and_capture_before_compaction(recipes, live, tmp_path):
    instance, url, key = live
    env = harness_env(url, key, "codex", "codex", tmp_path)
    base = {
        "session_id": "019a-codex",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": "/work/project",
        "model": "gpt-5",
        "permission_mode": "default",
    }
    hooks = recipes["codex-hooks.json"]

    prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": "When do deploys go out?"}
    block = assert_prompt_hook(run(command_for(hooks, "UserPromptSubmit"), json.dumps(prompt), env), "UserPromptSubmit")
    assert injections(instance, "codex") == [
        ("UserPromptSubmit", "019a-codex", "When do deploys go out?", len(block), 1, 0)
    ]

    stop = {
        **base,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "On Fridays, after the release review.",
    }
    done = run(command_for(hooks, "Stop"), json.dumps(stop), env)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "{}", "")
    assert injections(instance, "codex")[0][-1] == 1, "the answer used the injected memory"

    compact = {**base, "hook_event_name": "PreCompact", "trigger": "auto"}
    done = run(command_for(hooks, "PreCompact"), json.dumps(compact), env)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "{}", "")
    [captured] = [item for item in stored(url, key, "codex") if item["kind"] == "artifact"]
    assert captured["tags"] == ["codex"]
    assert captured["title"] == "codex: When do deploys go out?"
    assert captured["content"] == (
        "codex session 019a-codex, PreCompact: the last requests and answers.\n"
        "Request: When do deploys go out?\nAnswer: On Fridays, after the release review."
    )
    assert list(tmp_path.iterdir()) == [], "the notes are gone once stored"


def test_gemini_cli_hooks_recall_report_and_capture(recipes, live, tmp_path):
    instance, url, key = live
    env = harness_env(url, key, "gemini-cli", "gemini", tmp_path)
    base = {
        "session_id": "gem-1",
        "transcript_path": "/tmp/gemini.json",
        "cwd": "/work/project",
        "timestamp": "2026-12-03T10:00:00Z",
    }
    hooks = recipes["gemini-settings.json"]

    for number, prompt in enumerate(["When do deploys go out?", "On which weekday do deploys go out exactly?"]):
        before = {**base, "hook_event_name": "BeforeAgent", "prompt": prompt}
        assert_prompt_hook(run(command_for(hooks, "BeforeAgent"), json.dumps(before), env), "BeforeAgent")
        after = {
            **base,
            "hook_event_name": "AfterAgent",
            "prompt": prompt,
            "stop_hook_active": False,
            "prompt_response": f"Answer {number}: Fridays.",
        }
        done = run(command_for(hooks, "AfterAgent"), json.dumps(after), env)
        assert (done.returncode, done.stdout.strip()) == (0, "{}")
    # "Fridays" alone is one of the memory's words: not enough to count as used.
    assert [(row[0], row[-1]) for row in injections(instance, "gemini-cli")] == [("BeforeAgent", 0)] * 2

    done = run(
        command_for(hooks, "PreCompress"),
        json.dumps({**base, "hook_event_name": "PreCompress", "trigger": "manual"}),
        env,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "{}", "")
    [captured] = [item for item in stored(url, key, "gemini") if item["kind"] == "artifact"]
    assert captured["tags"] == ["gemini-cli"]
    assert "Request: On which weekday do deploys go out exactly?\nAnswer: Answer 1: Fridays." in captured["content"]
    # Nothing new to keep at the session's end: nothing more is stored.
    done = run(
        command_for(hooks, "SessionEnd"), json.dumps({**base, "hook_event_name": "SessionEnd", "reason": "exit"}), env
    )
    assert (done.returncode, done.stdout.strip()) == (0, "{}")
    assert len([item for item in stored(url, key, "gemini") if item["kind"] == "artifact"]) == 1


def test_the_curl_loop_hands_the_block_to_the_agent_and_stores_the_conversation(recipes, live):
    instance, url, key = live
    env = {"MEMORY_URL": url, "MEMORY_API_KEY": key, "MEMORY_NAMESPACE": "loop"}
    # `cat` as the agent shows exactly what an agent would be given.
    done = run(
        ["bash", str(recipes["folder"] / "memory-loop.sh"), "cat"],
        "When do deploys go out?\n\nWhat is the capital of Peru?\n",
        env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("<memory-context>") and "Fridays" in done.stdout
    assert done.stdout.split("</memory-context>\n\n")[1].startswith("When do deploys go out?\n")
    assert done.stdout.endswith("What is the capital of Peru?\n")
    # `cat` answers the prompt without the block: the memory was not used.
    assert [(row[0], row[2], row[-1]) for row in injections(instance, "shell")] == [
        ("prompt", "When do deploys go out?", 0)
    ]
    [captured] = [item for item in stored(url, key, "loop") if item["kind"] == "artifact"]
    assert captured["tags"] == ["shell"]
    assert captured["content"] == (
        "Request: When do deploys go out?\nAnswer: When do deploys go out?\n"
        "Request: What is the capital of Peru?\nAnswer: What is the capital of Peru?"
    )


def test_a_dead_server_costs_the_hook_nothing(recipes, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = harness_env(f"http://127.0.0.1:{port}", "mk_test", "codex", "codex", tmp_path)
    prompt = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "When?"})
    started = time.monotonic()
    done = run(["bash", str(recipes["folder"] / "memory-hook.sh"), "prompt", "UserPromptSubmit"], prompt, env)
    assert time.monotonic() - started < 5
    assert (done.returncode, done.stdout.strip()) == (0, "{}")
    assert done.stderr == f"memory hook: recall failed (http://127.0.0.1:{port})\n"
    done = run(["bash", str(recipes["folder"] / "memory-hook.sh"), "capture", "PreCompact"], prompt, env)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (
        0,
        "{}",
        f"memory hook: ingest failed (http://127.0.0.1:{port})\n",
    )
    assert len(list(tmp_path.iterdir())) == 1, "the notes are kept for the next capture"
    done = run(["bash", str(recipes["folder"] / "memory-loop.sh"), "cat"], "When?\n", env)
    assert (done.returncode, done.stdout) == (0, "When?\n"), "the agent gets the prompt alone"
