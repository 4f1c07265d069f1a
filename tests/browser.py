"""Shared set-up of the browser tests: a real server, a staff login, headless Chromium driven by Playwright.

The browser is Debian's ``chromium`` at /usr/bin/chromium (``.ci/run`` installs it);
Playwright never downloads one. The server is ``serve()``'s uvicorn subprocess over
its own data directory, with the demo loaded, a staff user, and telemetry recorded
through the hook services. Test modules import the fixtures they use.
"""

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.subprocesses import BASE_DIR, Instance, clean_env, copy_migrated, serve

CHROMIUM = Path("/usr/bin/chromium")
# The closed network refuses background connections, and a container has no GPU or sandbox.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A laptop screen.
VIEWPORT = {"width": 1366, "height": 768}
USERNAME = "curator"
PASSWORD = "a-long-browser-test-password"
# test-artifacts/ is ignored by git; CI keeps what lands there.
ARTIFACTS = BASE_DIR / "test-artifacts" / "screenshots"

requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does)",
)


@dataclass
class Site:
    base: str
    instance: Instance

    def remember(self, content: str, *, key: str, namespace: str = "browser") -> dict:
        """Remember through the CLI (a separate process, like any other writer); return the memory."""
        return self.instance.memory("remember", content, "--namespace", namespace, "--key", key)


def now() -> dt.datetime:
    """The clock the server stamps revisions with (the same machine)."""
    return dt.datetime.now(dt.timezone.utc)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _record_telemetry(instance: Instance) -> None:
    """Two hook recalls and their injection reports, through the services the REST hooks call."""
    instance.run("""
        from memories.access import Caller
        from memories.services import hooks
        caller = Caller(actor="key:hooks", interface="api", scopes=frozenset({"read", "write"}))
        for harness, hook, query in [("claude-code", "UserPromptSubmit", "how do I reset a stuck picker"),
                                     ("codex", "SessionStart", "battery supplier")]:
            block = hooks.hook_recall(caller=caller, query=query, namespace="demo", harness=harness, hook=hook)
            hooks.hook_report(caller=caller, harness=harness, hook=hook, query=query, characters=block.characters,
                              memories=[{"memory_id": hit.memory_id, "revision_id": hit.revision_id}
                                        for hit in block.hits])
    """)


@pytest.fixture(scope="module")
def site(browser_instance):
    instance = browser_instance
    done = instance.manage("createsuperuser", "--noinput", "--username", USERNAME, "--email", "curator@example.com")
    assert done.returncode == 0, done.stderr
    done = instance.manage("load_demo")
    assert done.returncode == 0, done.stderr
    _record_telemetry(instance)
    with serve(instance.env) as base:
        yield Site(base=base, instance=instance)


@pytest.fixture(scope="module")
def browser_instance(tmp_path_factory, migrated_db) -> Instance:
    data_dir = tmp_path_factory.mktemp("browser")
    copy_migrated(migrated_db, data_dir)
    return Instance(data_dir=data_dir, env=clean_env(data_dir, DJANGO_SUPERUSER_PASSWORD=PASSWORD))


@pytest.fixture(scope="module")
def chromium():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def log_in(page, base: str, *, next_path: str = "/") -> None:
    page.goto(f"{base}/admin/login/?next={next_path}")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


@pytest.fixture
def page(chromium, site):
    """A fresh browser context, logged in as the staff user, with the dashboard open."""
    context = chromium.new_context(viewport=VIEWPORT)
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, site.base)
    yield page
    context.close()


@pytest.fixture
def screenshot(tmp_path):
    """Save a full-page screenshot under the test's tmp dir and test-artifacts/screenshots/; return its path."""

    def _screenshot(page, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, ARTIFACTS / path.name)
        return path

    return _screenshot


def drawn(locator) -> list[dict]:
    """Return the bounding boxes of the elements ``locator`` matches, asserting each has a visible area."""
    boxes = [locator.nth(index).bounding_box() for index in range(locator.count())]
    for box in boxes:
        assert box is not None and box["width"] > 0 and box["height"] > 0, box
    return boxes
