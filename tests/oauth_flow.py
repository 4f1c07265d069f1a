"""The OAuth flow against a live server, step by step over HTTP, as a client and a person in a browser would take it.

``obtain_token`` registers a client, signs a person in through the admin's sign-in form,
approves the client on the consent page and exchanges the code with its PKCE verifier.
tests/test_oauth_live.py drives the same pages in Chromium; the conformance test's proxy
adds a token made here.
"""

import base64
import hashlib
import re
import secrets
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

REDIRECT = "http://127.0.0.1:33419/callback"


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def create_person(instance, username: str, password: str) -> None:
    """A superuser who signs in to approve clients."""
    instance.run(
        """
        import sys
        from django.contrib.auth.models import User
        User.objects.create_superuser(sys.argv[1], "", sys.argv[2])
        """,
        username,
        password,
    )


class _Inputs(HTMLParser):
    """The name and value of every input of a page's forms."""

    def __init__(self):
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "input" and attributes.get("name") and attributes.get("type") in ("hidden", None):
            self.values[attributes["name"]] = attributes.get("value") or ""


def hidden_inputs(html: str) -> dict[str, str]:
    parser = _Inputs()
    parser.feed(html)
    return parser.values


def authorization_url(base: str, client_id: str, challenge: str, *, state: str = "state-1") -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "scope": "read write",
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": f"{base}/mcp",
    }
    return f"{base}/oauth/authorize/?{urlencode(query)}"


def approve(base: str, url: str, username: str, password: str, *, namespaces: str, access=("read", "write")) -> str:
    """Sign in, allow on the consent page; return the URL the browser is sent back to."""
    with httpx.Client(base_url=base, timeout=30) as browser:
        sign_in = browser.get(url, follow_redirects=True)
        assert "/admin/login/" in str(sign_in.url), sign_in.url
        consent = browser.post(
            str(sign_in.url),
            data={**hidden_inputs(sign_in.text), "username": username, "password": password},
            headers={"Referer": str(sign_in.url)},
            follow_redirects=True,
        )
        assert "/oauth/authorize/" in str(consent.url), consent.text[:2000]
        choices = {**hidden_inputs(consent.text), "allow": "Allow", "new_namespaces": namespaces}
        choices.update({scope: "on" for scope in access})
        allowed = browser.post("/oauth/authorize/", data=choices, headers={"Referer": str(consent.url)})
        assert allowed.status_code == 302, allowed.text[:2000]
        return allowed.headers["Location"]


def code_of(callback: str) -> str:
    query = parse_qs(urlsplit(callback).query)
    assert "code" in query, callback
    return query["code"][0]


def obtain_token(base: str, username: str, password: str, *, namespaces: str) -> dict:
    """Register a client, have the person approve it for ``namespaces``, exchange the code: the token response."""
    registered = httpx.post(
        f"{base}/oauth/register/",
        json={"client_name": "Test client", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"},
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce()
    callback = approve(base, authorization_url(base, client_id, challenge), username, password, namespaces=namespaces)
    tokens = httpx.post(
        f"{base}/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": code_of(callback),
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": f"{base}/mcp",
        },
    )
    assert tokens.status_code == 200, tokens.text
    assert re.fullmatch(r"read write( namespace:[a-z0-9_-]+)+", tokens.json()["scope"]), tokens.text
    return {**tokens.json(), "client_id": client_id}
