"""A person adds the server by URL to an OAuth-capable MCP client, end to end.

The official ``mcp`` client's OAuth support against a real server: it discovers the
authorization server from the 401, registers itself, sends the person to the consent
page (driven here in Debian's Chromium), exchanges the code and calls tools with the
token; a refresh renews it, and a revocation in the admin is seen on the next call.
"""

import time
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

from tests.browser import CHROMIUM, CHROMIUM_ARGS, requires_chromium
from tests.oauth_flow import REDIRECT, create_person
from tests.subprocesses import serve

pytestmark = [pytest.mark.slow, requires_chromium]

USERNAME, PASSWORD = "grace", "a-long-live-oauth-password"


class MemoryStorage:
    """Where the client keeps its registration and tokens: in memory, for one test."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


class Person:
    """The person at the browser: signs in and approves the client for ``namespaces``, once."""

    def __init__(self, namespaces: str):
        self.namespaces = namespaces
        self.callbacks: list[str] = []
        self.asked = 0

    async def redirect_handler(self, url: str) -> None:
        self.asked += 1
        if self.asked > 1:
            raise PermissionError("the client asked the person to authorize it again")
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = await browser.new_page()
            # Nothing listens at the client's loopback redirect here: the browser hands the address over instead.
            await page.route(f"{REDIRECT}**", lambda route: route.fulfill(body="You can close this window."))
            await page.goto(url)
            await page.fill("#id_username", USERNAME)
            await page.fill("#id_password", PASSWORD)
            await page.click("input[type=submit]")
            await page.wait_for_selector("#consent-form")
            assert "Connect Live agent?" in await page.inner_text("h1")
            await page.check("#id_read")
            await page.check("#id_write")
            await page.fill("#id_new_namespaces", self.namespaces)
            async with page.expect_request(f"{REDIRECT}**") as sent_back:
                await page.click("#consent-allow")
            self.callbacks.append((await sent_back.value).url)
            await browser.close()

    async def callback_handler(self) -> tuple[str, str | None]:
        query = parse_qs(urlsplit(self.callbacks[-1]).query)
        return query["code"][0], query.get("state", [None])[0]


async def call(session: ClientSession, name: str, arguments: dict):
    result = await session.call_tool(name, arguments)
    return result.isError, result.content[0].text


async def agent_session(base: str, person: Person, storage: MemoryStorage, work):
    provider = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Live agent",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )
    async with httpx.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session, provider)


@pytest.fixture
def server(instance):
    create_person(instance, USERNAME, PASSWORD)
    with serve(instance.env) as base:
        yield base, instance


def audit_actions(instance) -> list[str]:
    return [row[0] for row in instance.sql("SELECT action FROM memories_auditevent ORDER BY id")]


def test_a_person_approves_a_client_by_url_and_it_works_with_exactly_that_access(server):
    base, instance = server
    person, storage = Person("alpha"), MemoryStorage()

    async def work(session, provider):
        stored = await call(session, "memory_remember", {"content": "Releases ship on Thursdays", "namespace": "alpha"})
        refused = await call(session, "memory_remember", {"content": "Other team's plans", "namespace": "beta"})
        recalled = await call(session, "memory_recall", {"query": "when do releases ship", "namespace": "alpha"})
        # The token runs out: the client refreshes it before its next call and goes on.
        provider.context.token_expiry_time = time.time() - 1
        after_refresh = await call(session, "memory_recall", {"query": "releases", "namespace": "alpha"})
        return stored, refused, recalled, after_refresh

    stored, refused, recalled, after_refresh = anyio.run(agent_session, base, person, storage, work)
    assert stored[0] is False, stored
    assert refused[0] is True and "'beta' is not available to this OAuth grant" in refused[1]
    assert "Releases ship on Thursdays" in recalled[1] and "Releases ship on Thursdays" in after_refresh[1]
    assert person.asked == 1
    assert storage.tokens.scope == "read write namespace:alpha"
    assert [row[0] for row in instance.sql("SELECT DISTINCT namespace FROM memories_memory")] == ["alpha"]
    actions = audit_actions(instance)
    assert actions.count("oauth_grant") == 1 and actions.count("oauth_token") == 1
    assert actions.count("oauth_refresh") == 1


def test_a_grant_revoked_in_the_admin_is_refused_on_the_clients_next_call(server):
    base, instance = server
    person, storage = Person("alpha"), MemoryStorage()

    async def first(session, provider):
        return await call(session, "memory_remember", {"content": "The office opens at 8", "namespace": "alpha"})

    assert anyio.run(agent_session, base, person, storage, first)[0] is False
    token = storage.tokens.access_token

    async def revoke_in_the_admin():
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = await browser.new_page()
            await page.goto(f"{base}/admin/oauth/grant/")
            await page.fill("#id_username", USERNAME)
            await page.fill("#id_password", PASSWORD)
            await page.click("input[type=submit]")
            await page.check("input[name=_selected_action]")
            await page.select_option("select[name=action]", "revoke_grants")
            await page.click("button[name=index]")
            text = await page.inner_text("ul.messagelist")
            await browser.close()
            return text

    assert "Revoked 1 grant" in anyio.run(revoke_in_the_admin)
    refused = httpx.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["WWW-Authenticate"]

    async def again(session, provider):
        return await call(session, "memory_recall", {"query": "office", "namespace": "alpha"})

    # Its stored token is refused: the client can only send the person to approve it again (who does not, here).
    with pytest.raises(BaseException):  # noqa: PT011 - the SDK wraps the handler's refusal in task groups
        anyio.run(agent_session, base, person, storage, again)
    assert person.asked == 2
    assert audit_actions(instance).count("oauth_revoke") == 1
