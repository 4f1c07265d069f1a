"""This server as an OAuth protected resource (RFC 9728): its identifiers, its metadata URLs and its 401 challenge.

The resources are the MCP endpoint and the server as a whole; a token issued for either works on
MCP and REST alike, and a token for anything else is refused (RFC 8707 audience).
"""

from django.conf import settings

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"


def public_base(request) -> str:
    """The URL clients reach the server at: MEMORY_PUBLIC_URL, else the request's own scheme and host."""
    return settings.MEMORY_PUBLIC_URL or request.build_absolute_uri("/").rstrip("/")


def scope_base(scope: dict) -> str:
    """``public_base`` of an ASGI request that Django has not seen yet (the body gate answers some)."""
    host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
    return settings.MEMORY_PUBLIC_URL or f"{scope['scheme']}://{host}"


def resources(request) -> set[str]:
    """The resource identifiers a token must name one of to be accepted here."""
    base = public_base(request)
    return {base, base + MCP_PATH}


def challenge(base: str, resource_path: str = "", error: str = "") -> str:
    """The ``WWW-Authenticate`` value of a 401: Bearer, where to discover the server from, and any error.

    ``resource_path`` is ``/mcp`` for the MCP endpoint, "" for the rest of the server.
    """
    value = f'Bearer realm="memory", resource_metadata="{base}{METADATA_PATH}{resource_path}"'
    return value + (f', error="{error}"' if error else "")


def gate_challenge(scope: dict, door_path: str, error: str) -> str:
    """``challenge`` for a 401 the body gate answers at ``door_path``, before Django sees the request."""
    return challenge(scope_base(scope), MCP_PATH if door_path == MCP_PATH else "", error)
