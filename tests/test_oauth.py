"""OAuth 2.1 for remote MCP clients, in process: discovery, registration, consent, tokens and their refusals.

tests/test_oauth_live.py runs the same flow with the official ``mcp`` client and Chromium against a real server.
"""

import base64
import datetime as dt
import hashlib
import json
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from oauth2_provider.models import AccessToken, Application, RefreshToken

from memories.models import AuditEvent, Memory
from memoryproject import dialect

pytestmark = pytest.mark.django_db

HOST = "localhost"
BASE = f"http://{HOST}"
REDIRECT = "http://127.0.0.1:33418/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@pytest.fixture
def web() -> Client:
    return Client(HTTP_HOST=HOST)


@pytest.fixture
def person(db) -> User:
    return User.objects.create_superuser("ada", "ada@example.com", "pw-ada-12345")


def register(web, **metadata) -> dict:
    body = {"client_name": "Test agent", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **metadata}
    return web.post("/oauth/register/", json.dumps(body), content_type="application/json")


def authorize_query(client_id: str, challenge: str | None, **extra) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "scope": "read write",
        "state": "st-1",
        "resource": f"{BASE}/mcp",
        **({"code_challenge": challenge, "code_challenge_method": "S256"} if challenge else {}),
        **extra,
    }
    return "/oauth/authorize/?" + urlencode({name: value for name, value in query.items() if value is not None})


def consent_form(page) -> dict:
    """The hidden fields the consent page carries, as its form would post them."""
    form = page.context["form"]
    return {field.name: field.value() or "" for field in form.hidden_fields()}


def approve(web, person, client_id: str, challenge: str, *, namespaces=("alpha",), access=("read", "write"), **extra):
    """Sign in, open the consent page and allow; return the redirect's query."""
    web.force_login(person)
    page = web.get(authorize_query(client_id, challenge, **extra))
    assert page.status_code == 200, page.content
    chosen = {**consent_form(page), "new_namespaces": ", ".join(namespaces), "allow": "Allow"}
    chosen.update({scope: "on" for scope in access})
    answer = web.post("/oauth/authorize/", chosen)
    assert answer.status_code == 302, answer.content
    location = urlsplit(answer["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {name: values[0] for name, values in parse_qs(location.query).items()}


def exchange(web, client_id: str, code: str, verifier: str | None, **extra):
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    if verifier is not None:
        body["code_verifier"] = verifier
    body.update({"resource": f"{BASE}/mcp", **extra})
    return web.post("/oauth/token/", body)


def tokens_for(web, person, **consent) -> tuple[str, dict]:
    """Register a client, approve it, exchange the code: (client_id, the token response)."""
    client_id = register(web).json()["client_id"]
    verifier, challenge = pkce()
    code = approve(web, person, client_id, challenge, **consent)["code"]
    answer = exchange(Client(HTTP_HOST=HOST), client_id, code, verifier)
    assert answer.status_code == 200, answer.content
    return client_id, answer.json()


def api(token: str, method: str, path: str, body: dict | None = None):
    client = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {token}")
    if method == "GET":
        return client.get(path, body or {})
    return client.post(path, json.dumps(body or {}), content_type="application/json")


# --- discovery ----------------------------------------------------------------------------------------------


def test_the_server_publishes_its_authorization_server_metadata(web):
    metadata = web.get("/.well-known/oauth-authorization-server").json()
    assert metadata["issuer"] == BASE
    assert metadata["authorization_endpoint"] == f"{BASE}/oauth/authorize/"
    assert metadata["token_endpoint"] == f"{BASE}/oauth/token/"
    assert metadata["registration_endpoint"] == f"{BASE}/oauth/register/"
    assert metadata["revocation_endpoint"] == f"{BASE}/oauth/revoke/"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert metadata["scopes_supported"] == ["read", "write"]


@pytest.mark.parametrize(("path", "resource"), [("/mcp", f"{BASE}/mcp"), ("", BASE)])
def test_each_resource_publishes_its_metadata_naming_this_server_as_its_authorization_server(web, path, resource):
    metadata = web.get(f"/.well-known/oauth-protected-resource{path}").json()
    assert metadata["resource"] == resource
    assert metadata["authorization_servers"] == [BASE]
    assert metadata["scopes_supported"] == ["read", "write"]


def test_a_request_to_mcp_without_a_token_is_told_where_to_discover_the_server(web):
    answer = web.post("/mcp", "{}", content_type="application/json")
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"] == (
        f'Bearer realm="memory", resource_metadata="{BASE}/.well-known/oauth-protected-resource/mcp"'
    )


def test_rest_without_a_token_points_at_the_servers_own_metadata(web):
    answer = web.get("/api/v1/memories/")
    assert answer.status_code == 401
    assert f'resource_metadata="{BASE}/.well-known/oauth-protected-resource"' in answer["WWW-Authenticate"]


def test_oauth_over_plain_http_outside_loopback_is_refused_with_what_to_do():
    answer = Client(HTTP_HOST="testserver").get("/.well-known/oauth-authorization-server")
    assert answer.status_code == 400
    assert "MEMORY_PUBLIC_URL" in answer.json()["error_description"]


def test_a_public_url_names_the_issuer_and_resource_whatever_host_the_request_came_to(settings):
    settings.MEMORY_PUBLIC_URL = "https://memory.example.com"
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": settings.MEMORY_PUBLIC_URL}
    web = Client(HTTP_HOST="testserver")
    assert web.get("/.well-known/oauth-authorization-server").json()["issuer"] == "https://memory.example.com"
    resource = web.get("/.well-known/oauth-protected-resource/mcp").json()
    assert resource["resource"] == "https://memory.example.com/mcp"
    assert resource["authorization_servers"] == ["https://memory.example.com"]


# --- registration -------------------------------------------------------------------------------------------


def test_a_client_registers_itself_as_a_public_client(web):
    answer = register(web)
    assert answer.status_code == 201, answer.content
    registered = answer.json()
    assert registered["redirect_uris"] == [REDIRECT]
    assert registered["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in registered
    assert Application.objects.get(client_id=registered["client_id"]).name == "Test agent"


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": ["http://agent.example.com/callback"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://192.168.1.5/callback"]}, "invalid_redirect_uri"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
    ],
)
def test_a_registration_the_specification_forbids_is_refused_and_nothing_is_stored(web, metadata, error):
    answer = register(web, **metadata)
    assert answer.status_code == 400
    assert answer.json()["error"] == error
    assert not Application.objects.exists()


def test_https_redirects_are_accepted(web):
    assert register(web, redirect_uris=["https://agent.example.com/oauth/callback"]).status_code == 201


# --- consent and tokens ---------------------------------------------------------------------------------------


def test_a_person_who_is_not_signed_in_is_sent_to_the_admin_sign_in_first(web):
    client_id = register(web).json()["client_id"]
    answer = web.get(authorize_query(client_id, pkce()[1]))
    assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/?next=/oauth/authorize/")


def test_the_consent_page_names_the_client_its_redirect_and_offers_the_namespaces_that_exist(web, person, remember):
    remember(content="Deploys go out on Tuesdays", namespace="alpha")
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    page = web.get(authorize_query(client_id, pkce()[1]))
    text = page.content.decode()
    assert "Connect Test agent?" in text and REDIRECT in text
    assert [value for value, _ in page.context["form"].fields["namespaces"].choices] == ["alpha"]


def test_an_approved_client_gets_tokens_that_read_and_write_its_namespace_only(web, person):
    client_id, tokens = tokens_for(web, person, namespaces=("alpha",))
    assert tokens["scope"] == "read write namespace:alpha"
    assert tokens["token_type"] == "Bearer" and tokens["refresh_token"] and tokens["expires_in"] == 3600
    token = tokens["access_token"]

    written = api(token, "POST", "/api/v1/memories/", {"content": "The build runs on Fridays", "namespace": "alpha"})
    assert written.status_code == 201, written.content
    assert Memory.objects.get(pk=written.json()["id"]).namespace == "alpha"
    listed = api(token, "GET", "/api/v1/memories/", {"namespace": "alpha"})
    assert [item["content"] for item in listed.json()["items"]] == ["The build runs on Fridays"]

    elsewhere = api(token, "POST", "/api/v1/memories/", {"content": "Secret plans", "namespace": "beta"})
    assert elsewhere.status_code == 403 and "not available to this OAuth grant" in elsewhere.json()["error"]["message"]
    assert api(token, "GET", "/api/v1/memories/", {"namespace": "beta"}).status_code == 403
    assert not Memory.objects.filter(namespace="beta").exists()

    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor"))
    assert ("oauth_grant", "user:ada") in actions
    assert ("oauth_token", f"oauth:ada:{client_id[:8]}") in actions
    written_by = AuditEvent.objects.filter(memory_id=written.json()["id"]).values_list("actor", flat=True).first()
    assert written_by == f"oauth:ada:{client_id[:8]}"


def test_a_read_only_grant_cannot_write(web, person):
    _, tokens = tokens_for(web, person, access=("read",))
    answer = api(tokens["access_token"], "POST", "/api/v1/memories/", {"content": "x", "namespace": "alpha"})
    assert answer.status_code == 403
    assert "this OAuth grant has only: read. Authorize the client again" in answer.json()["error"]["message"]


def test_a_person_cannot_grant_more_than_their_own_permissions(web):
    viewer = User.objects.create_user("bo", password="pw-bo-123456", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_memory"))
    _, tokens = tokens_for(web, viewer, access=("read", "write"))
    assert tokens["scope"] == "read namespace:alpha"
    # And a token never does more than its person may do now.
    _, both = tokens_for(web, User.objects.create_superuser("cy", "cy@example.com", "pw-cy-123456"))
    User.objects.filter(username="cy").update(is_superuser=False)
    assert api(both["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 403


def test_consent_needs_a_namespace_and_some_access(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    page = web.get(authorize_query(client_id, pkce()[1]))
    answer = web.post("/oauth/authorize/", {**consent_form(page), "allow": "Allow"})
    assert answer.status_code == 200
    text = answer.content.decode()
    assert "Choose at least one namespace." in text and "Choose read, write or both." in text
    assert "Connect Test agent?" in text


def test_a_new_namespace_can_be_named_and_a_bad_name_is_refused(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    page = web.get(authorize_query(client_id, pkce()[1]))
    form = {**consent_form(page), "allow": "Allow", "read": "on"}
    bad = web.post("/oauth/authorize/", {**form, "new_namespaces": "Not A Namespace!"})
    assert bad.status_code == 200 and "is not a valid namespace" in bad.content.decode()
    good = web.post("/oauth/authorize/", {**form, "new_namespaces": "fresh, other"})
    assert good.status_code == 302 and "code=" in good["Location"]


def test_denying_sends_the_client_access_denied_and_grants_nothing(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    page = web.get(authorize_query(client_id, pkce()[1]))
    answer = web.post("/oauth/authorize/", {**consent_form(page), "new_namespaces": "alpha", "read": "on"})
    assert answer.status_code == 302
    assert parse_qs(urlsplit(answer["Location"]).query)["error"] == ["access_denied"]
    assert not AuditEvent.objects.filter(action="oauth_grant").exists()


# --- what is refused ------------------------------------------------------------------------------------------


def test_an_authorization_request_without_pkce_or_with_plain_pkce_is_refused(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    missing = web.get(authorize_query(client_id, None))
    assert missing.status_code == 302
    assert parse_qs(urlsplit(missing["Location"]).query)["error"] == ["invalid_request"]
    plain = web.get(authorize_query(client_id, None, code_challenge="x" * 43, code_challenge_method="plain"))
    assert parse_qs(urlsplit(plain["Location"]).query)["error"] == ["invalid_request"]


def test_a_redirect_uri_the_client_did_not_register_gets_an_error_page_and_no_redirect(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    answer = web.get(authorize_query(client_id, pkce()[1], redirect_uri="http://127.0.0.1:9/elsewhere"))
    assert answer.status_code == 400 and "Location" not in answer
    assert "This client cannot be connected" in answer.content.decode()


def test_a_resource_this_server_is_not_is_refused_at_consent(web, person):
    client_id = register(web).json()["client_id"]
    web.force_login(person)
    page = web.get(authorize_query(client_id, pkce()[1], resource="https://elsewhere.example.com/mcp"))
    answer = web.post(
        "/oauth/authorize/", {**consent_form(page), "allow": "Allow", "read": "on", "new_namespaces": "a"}
    )
    assert answer.status_code == 200 and "a resource this server is not" in answer.content.decode()


@pytest.mark.parametrize("verifier", ["wrong", None])
def test_a_code_with_a_wrong_or_missing_verifier_is_refused(web, person, verifier):
    client_id = register(web).json()["client_id"]
    code = approve(web, person, client_id, pkce()[1])["code"]
    answer = exchange(web, client_id, code, secrets.token_urlsafe(48) if verifier else None)
    assert answer.status_code in (400, 401)
    assert answer.json()["error"] in ("invalid_grant", "invalid_request")
    assert not AccessToken.objects.filter(user__isnull=False).exists()


def test_a_code_works_once(web, person):
    client_id = register(web).json()["client_id"]
    verifier, challenge = pkce()
    code = approve(web, person, client_id, challenge)["code"]
    assert exchange(web, client_id, code, verifier).status_code == 200
    again = exchange(web, client_id, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_an_expired_token_is_refused_saying_to_refresh(web, person):
    _, tokens = tokens_for(web, person)
    AccessToken.objects.filter(user__isnull=False).update(expires=dialect.now() - dt.timedelta(seconds=1))
    answer = api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"})
    assert answer.status_code == 401 and "expired" in answer.json()["error"]["message"]


def test_a_token_for_another_resource_is_refused_on_both_doors(web, person):
    _, tokens = tokens_for(web, person)
    AccessToken.objects.filter(user__isnull=False).update(resource=["https://elsewhere.example.com/mcp"])
    answer = api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"})
    assert answer.status_code == 401 and "issued for another resource" in answer.json()["error"]["message"]
    mcp = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}").post(
        "/mcp", "{}", content_type="application/json", HTTP_ACCEPT="application/json"
    )
    assert mcp.status_code == 401 and 'error="invalid_token"' in mcp["WWW-Authenticate"]


def test_a_refresh_rotates_the_tokens_and_a_reused_refresh_token_revokes_the_grant(web, person):
    client_id, first = tokens_for(web, person)
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": first["refresh_token"]}
    second = web.post("/oauth/token/", refresh)
    assert second.status_code == 200, second.content
    renewed = second.json()
    assert renewed["refresh_token"] != first["refresh_token"] and renewed["scope"] == first["scope"]
    assert api(renewed["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 200
    assert AuditEvent.objects.filter(action="oauth_refresh").count() == 1

    replayed = web.post("/oauth/token/", refresh)
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
    assert api(renewed["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 401


def test_a_client_revokes_its_token_and_the_next_request_fails(web, person):
    client_id, tokens = tokens_for(web, person)
    answer = web.post("/oauth/revoke/", {"token": tokens["access_token"], "client_id": client_id})
    assert answer.status_code == 200
    assert api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 401
    revoked = AuditEvent.objects.get(action="oauth_revoke")
    assert revoked.detail["by"] == "client" and revoked.detail["user"] == "ada"


def test_api_keys_keep_working_beside_oauth(web):
    from memories.services.keys import api_key_create

    _, key = api_key_create(name="script", scopes=["read"], actor="cli:test", interface="cli")
    assert api(key, "GET", "/api/v1/memories/").status_code == 200
    assert api("mem_00000000_nope", "GET", "/api/v1/memories/").status_code == 401


# --- the admin ----------------------------------------------------------------------------------------------


def test_the_admin_lists_live_grants_and_revoking_one_refuses_the_next_request(web, person):
    client_id, tokens = tokens_for(web, person, namespaces=("alpha",))
    grant = RefreshToken.objects.get(revoked__isnull=True)
    page = web.get("/admin/oauth/grant/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Test agent" in text and "read, write" in text and "alpha" in text

    answer = web.post("/admin/oauth/grant/", {"action": "revoke_grants", "_selected_action": [grant.pk]})
    assert answer.status_code == 302
    assert api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 401
    again = web.post(
        "/oauth/token/",
        {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": tokens["refresh_token"]},
    )
    assert again.status_code == 400
    revoked = AuditEvent.objects.get(action="oauth_revoke")
    assert (revoked.actor, revoked.interface, revoked.detail["by"]) == ("user:ada", "admin", "person")
    assert "Test agent" not in web.get("/admin/oauth/grant/").content.decode()


def test_removing_a_client_in_the_admin_ends_its_tokens(web, person):
    client_id, tokens = tokens_for(web, person)
    application = Application.objects.get(client_id=client_id)
    assert "Test agent" in web.get("/admin/oauth/client/").content.decode()
    web.post("/admin/oauth/client/", {"action": "remove_clients", "_selected_action": [application.pk]})
    assert not Application.objects.filter(client_id=client_id).exists()
    assert api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 401
    assert AuditEvent.objects.filter(action="oauth_client_remove", actor="user:ada").exists()


# --- client ID metadata documents ------------------------------------------------------------------------------

DOCUMENT_URL = "https://agent.example.com/oauth/client.json"


class DocumentFetcher:
    """Stands in for the internet: serves ``documents`` by URL, as the library's fetcher would return them."""

    documents: dict = {}

    def fetch(self, client_id):
        return dict(self.documents[client_id]), 300


@pytest.fixture
def metadata_documents(settings):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_ENABLED": True,
        "CIMD_METADATA_FETCHER": "tests.test_oauth.DocumentFetcher",
    }
    DocumentFetcher.documents = {}
    return DocumentFetcher.documents


def test_a_client_named_by_its_metadata_document_is_approved_without_registering(web, person, metadata_documents):
    metadata_documents[DOCUMENT_URL] = {
        "client_id": DOCUMENT_URL,
        "client_name": "Documented agent",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
    }
    assert web.get("/.well-known/oauth-authorization-server").json()["client_id_metadata_document_supported"]
    verifier, challenge = pkce()
    web.force_login(person)
    page = web.get(authorize_query(DOCUMENT_URL, challenge))
    assert page.status_code == 200 and "Connect Documented agent?" in page.content.decode()
    chosen = {**consent_form(page), "allow": "Allow", "read": "on", "new_namespaces": "alpha"}
    code = parse_qs(urlsplit(web.post("/oauth/authorize/", chosen)["Location"]).query)["code"][0]
    tokens = exchange(web, DOCUMENT_URL, code, verifier)
    assert tokens.status_code == 200, tokens.content
    assert api(tokens.json()["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 200


def test_a_metadata_document_with_a_plain_http_redirect_gets_no_code(web, person, metadata_documents):
    metadata_documents[DOCUMENT_URL] = {
        "client_id": DOCUMENT_URL,
        "client_name": "Careless agent",
        "redirect_uris": ["http://agent.example.com/callback"],
        "token_endpoint_auth_method": "none",
    }
    web.force_login(person)
    answer = web.get(authorize_query(DOCUMENT_URL, pkce()[1], redirect_uri="http://agent.example.com/callback"))
    assert answer.status_code == 400 and "Location" not in answer


def test_metadata_documents_are_off_unless_the_operator_turns_them_on(web):
    assert web.get("/.well-known/oauth-authorization-server").json()["client_id_metadata_document_supported"] is False


def test_with_registration_closed_no_client_can_register_and_the_metadata_says_so(web, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": False}
    assert register(web).status_code == 404
    assert "registration_endpoint" not in web.get("/.well-known/oauth-authorization-server").json()
    assert not Application.objects.exists()


def test_a_client_in_a_browser_may_call_the_cookieless_endpoints_but_not_the_consent_page(web, person):
    preflight = web.options(
        "/oauth/token/", HTTP_ORIGIN="http://localhost:6274", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST"
    )
    assert preflight.status_code == 204 and preflight["Access-Control-Allow-Origin"] == "*"
    assert "Content-Type" in preflight["Access-Control-Allow-Headers"]
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"):
        assert web.get(path)["Access-Control-Allow-Origin"] == "*"
    assert register(web)["Access-Control-Allow-Origin"] == "*"
    web.force_login(person)
    client_id = Application.objects.get().client_id
    assert "Access-Control-Allow-Origin" not in web.get(authorize_query(client_id, pkce()[1]))


def test_a_token_spends_its_grants_rate_limit_and_is_told_so_in_its_own_words(web, person, settings):
    settings.MEMORY_API_READS_PER_MINUTE = 1
    _, tokens = tokens_for(web, person)
    assert api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"}).status_code == 200
    over = api(tokens["access_token"], "GET", "/api/v1/memories/", {"namespace": "alpha"})
    assert over.status_code == 429
    assert over.json()["error"]["message"].startswith("This OAuth grant is over its 1 reads a minute")
