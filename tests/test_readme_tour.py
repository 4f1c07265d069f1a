"""The README's five-minute tour, run as written against a real server after ``make demo``.

Each shell block of the tour runs in bash, in the checkout, against a server on a fresh
data directory. Only what a reader pastes is filled in: the key ``make run`` printed, the
``known_at`` the tour asks for, the server's port and the virtualenv's interpreter. The
``claude`` commands register the server with a client this machine lacks, so they are
left out. curl fails on an HTTP error status, so every command must succeed.
"""

import re
import subprocess
import sys

import pytest

from tests.subprocesses import BASE_DIR, serve

pytestmark = pytest.mark.slow

README = BASE_DIR / "README.md"
_SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_KNOWN_AT = (
    'T=$(curl -s "$API/memories/$ID/history/" -H "Authorization: Bearer $KEY" '
    '| .venv/bin/python -c \'import json, sys; print(json.load(sys.stdin)["revisions"][0]["known_at"])\')'
)


def tour_blocks() -> list[str]:
    """The shell blocks of the README's tour, in order."""
    text = README.read_text(encoding="utf-8")
    tour = text.split("\n## A five-minute tour\n", 1)[1].split("\n## ", 1)[0]
    return _SHELL_BLOCK.findall(tour)


def fill_in(block: str, *, key: str, base: str) -> str:
    """The block with what a reader pastes filled in, each placeholder as the README writes it."""
    block = re.sub(r"^export KEY=mem_\.\.\..*$", f"export KEY={key}", block, flags=re.MULTILINE)
    block = re.sub(r"^T=\.\.\..*$", lambda _: _KNOWN_AT, block, flags=re.MULTILINE)
    block = block.replace("http://127.0.0.1:8000", base)
    return block.replace(".venv/bin/python", sys.executable)


def test_the_readme_tour_runs_as_written_and_works_on_the_memories_it_made(instance):
    blocks = tour_blocks()
    left_out = [block for block in blocks if block.startswith("claude ")]
    assert len(left_out) == 2 and all("claude mcp add" in block for block in left_out), left_out
    run = [block for block in blocks if block not in left_out]
    assert any(re.search(r"^T=\.\.\.", block, re.MULTILINE) for block in run), "the tour no longer asks for known_at"

    # `make demo` comes before the tour in the README: its memories take the first ids.
    assert instance.manage("load_demo").returncode == 0
    key = instance.create_api_keys(tour={})["tour"]
    with serve(instance.env) as base:
        # Each block, then the ID it left, between markers that split the output.
        script = 'set -euo pipefail\ncurl() { command curl --fail-with-body "$@"; }\n' + "".join(
            f"{fill_in(block, key=key, base=base)}\necho\necho '@@ block {number}' \"${{ID:-}}\"\n"
            for number, block in enumerate(run)
        )
        done = subprocess.run(
            ["bash", "-c", script], cwd=BASE_DIR, env=instance.env, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, (done.stdout, done.stderr)
    outputs = re.split(r"^@@ block \d+ .*$", done.stdout, flags=re.MULTILINE)
    ids = re.findall(r"^@@ block \d+ (\d*)$", done.stdout, flags=re.MULTILINE)
    assert len(ids) == len(run), done.stdout

    rest_id, cli_id = int(next(found for found in ids if found)), int(ids[-1])
    demo = instance.memory("list", "--namespace", "demo")["items"]
    assert rest_id not in {memory["id"] for memory in demo} and rest_id != cli_id
    # The demo's first memory is as the demo wrote it: the tour edited and forgot its own.
    assert len(instance.memory("history", "1")["revisions"]) == 1
    revisions = instance.memory("history", str(rest_id))["revisions"]
    assert [(revision["content"], revision["tombstone"]) for revision in revisions] == [
        ("Deploys go out on Tuesdays.", False),
        ("Deploys go out on Wednesdays.", False),
        ("", True),
    ]
    # "The second call shows Tuesdays": the read as of the first revision's known_at.
    as_of_block = next(index for index, block in enumerate(run) if "as_of=$T" in block)
    # curl ends no answer with a newline: the read is the block's last JSON object.
    as_of_answer = "{" + outputs[as_of_block].strip().rsplit("}{", 1)[-1]
    assert re.search(r'"content": ?"Deploys go out on Tuesdays\."', as_of_answer), as_of_answer
    assert instance.memory("get", str(cli_id))["content"] == "The VPN config lives in the ops wiki."
