"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) against a live server.

The suite is pinned in ``tests/conformance/package.json`` (``npm ci --prefix tests/conformance
--ignore-scripts`` installs it; ``.ci/run`` does). It sends no credentials, so it talks to
a proxy that adds the bearer token (``tests.bearer_proxy``), and the proxy to the server.
Each scenario the suite lists is either run here and must pass, or named with the reason
it does not apply to a stateless, tools-only server.
"""

import json
import re
import shutil
import subprocess

import pytest

from mcp_api.transport import UNAUTHORIZED
from tests.bearer_proxy import bearer_proxy
from tests.oauth_flow import create_person, obtain_token
from tests.subprocesses import BASE_DIR, serve

pytestmark = pytest.mark.slow

SUITE_DIR = BASE_DIR / "tests" / "conformance"
PACKAGE_DIR = SUITE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance"
INSTALL = "npm ci --prefix tests/conformance --ignore-scripts --no-audit --no-fund"

APPLICABLE = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
]

_FIXTURE_TOOL = "calls one of the suite's own fixture tools, which a memory server does not have"
_VACUOUS = "; the unknown-tool answer (a tool error with text) satisfies its check, so a pass proves nothing"
_STREAM = "sends the client a request over an event stream in a session; this server is stateless and answers JSON"
_FIXTURE_RESOURCE = "reads one of the suite's fixture resources; this server offers no resources"
_FIXTURE_PROMPT = "gets one of the suite's fixture prompts; this server offers no prompts"

NOT_APPLICABLE = {
    "logging-set-level": "the server declares no logging capability: a JSON answer carries no log notifications",
    "completion-complete": "the server declares no completions capability: it has no prompts or resource templates",
    "tools-call-simple-text": _FIXTURE_TOOL + _VACUOUS,
    "tools-call-image": _FIXTURE_TOOL,
    "tools-call-audio": _FIXTURE_TOOL,
    "tools-call-embedded-resource": _FIXTURE_TOOL,
    "tools-call-mixed-content": _FIXTURE_TOOL,
    "tools-call-with-logging": _FIXTURE_TOOL + ", and sends log notifications over an event stream",
    "tools-call-error": _FIXTURE_TOOL + _VACUOUS,
    "tools-call-with-progress": _FIXTURE_TOOL + ", and sends progress notifications over an event stream",
    "tools-call-sampling": _STREAM,
    "tools-call-elicitation": _STREAM,
    "elicitation-sep1034-defaults": _STREAM,
    "elicitation-sep1330-enums": _STREAM,
    "json-schema-2020-12": _FIXTURE_TOOL,
    "server-sse-polling": "polls an event stream with a session id; this server has neither (it records no check)",
    "server-sse-multiple-streams": "opens event streams in a session; this server has neither (it records no check)",
    "resources-read-text": _FIXTURE_RESOURCE,
    "resources-read-binary": _FIXTURE_RESOURCE,
    "resources-templates-read": _FIXTURE_RESOURCE,
    "resources-subscribe": "subscriptions need a session to notify; this server offers no resources",
    "resources-unsubscribe": "subscriptions need a session to notify; this server offers no resources",
    "prompts-get-simple": _FIXTURE_PROMPT,
    "prompts-get-with-args": _FIXTURE_PROMPT,
    "prompts-get-embedded-resource": _FIXTURE_PROMPT,
    "prompts-get-with-image": _FIXTURE_PROMPT,
}

requires_suite = pytest.mark.skipif(
    shutil.which("node") is None or not (PACKAGE_DIR / "dist" / "index.js").exists(),
    reason=f"the MCP conformance suite needs Node 20 and its pinned package: {INSTALL} (.ci/run does)",
)


def conformance(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["node", str(PACKAGE_DIR / "dist" / "index.js"), *args],
        cwd=SUITE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_scenario(url: str, scenario: str, output_dir) -> list[dict]:
    """Run one server scenario against ``url``; return the checks it recorded."""
    done = conformance("server", "--url", url, "--scenario", scenario, "--output-dir", str(output_dir))
    results = list(output_dir.glob(f"server-{scenario}-*/checks.json"))
    assert len(results) == 1, done.stdout + done.stderr
    return json.loads(results[0].read_text())


def bearer_token(instance, server: str) -> str:
    """The token the proxy adds to every request, chosen here only: an OAuth access token a person approved for one
    namespace, read and write, obtained through the whole flow (registration, sign-in, consent, code exchange)."""
    create_person(instance, "conformance", "a-long-conformance-password")
    return obtain_token(server, "conformance", "a-long-conformance-password", namespaces="conformance")["access_token"]


@pytest.fixture(scope="module")
def server(module_instance):
    with serve(module_instance.env) as base:
        yield base


@pytest.fixture(scope="module")
def proxy(server, module_instance):
    with bearer_proxy(server, bearer_token(module_instance, server)) as base:
        yield base


@requires_suite
def test_the_installed_suite_is_the_pinned_version():
    package = json.loads((SUITE_DIR / "package.json").read_text())
    pinned = package["devDependencies"]["@modelcontextprotocol/conformance"]
    installed = json.loads((PACKAGE_DIR / "package.json").read_text())["version"]
    assert installed == pinned, f"tests/conformance holds {installed}, not the pinned {pinned}: {INSTALL}"


@requires_suite
def test_every_server_scenario_of_the_suite_is_either_run_or_named_with_why_it_does_not_apply():
    done = conformance("list", "--server")
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^  - (\S+)$", done.stdout, flags=re.MULTILINE)
    assert sorted(listed) == sorted([*APPLICABLE, *NOT_APPLICABLE])
    assert not set(APPLICABLE) & set(NOT_APPLICABLE)


@requires_suite
@pytest.mark.parametrize("scenario", APPLICABLE)
def test_the_server_passes_the_scenario_through_a_proxy_that_adds_the_token(proxy, scenario, tmp_path):
    checks = run_scenario(f"{proxy}/mcp", scenario, tmp_path)
    judged = [check for check in checks if check["status"] != "INFO"]
    assert judged, f"{scenario} recorded no check"
    failed = [check for check in judged if check["status"] != "SUCCESS"]
    assert not failed, json.dumps(failed, indent=2)


@requires_suite
def test_without_the_proxy_the_suite_is_refused_for_it_sends_no_credentials(server, tmp_path):
    checks = run_scenario(f"{server}/mcp", "server-initialize", tmp_path)
    assert [check["status"] for check in checks] == ["FAILURE"]
    assert f'"code": {UNAUTHORIZED}' in checks[0]["errorMessage"], checks[0]
