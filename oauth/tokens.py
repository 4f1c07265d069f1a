"""The bearer credential of a request, an API key or an OAuth access token, as the ``Caller`` it stands for.

Both doors that take a bearer (MCP and REST) call ``bearer_authenticate``: API keys keep their own
path untouched, and a token acts exactly like a key with the scopes and namespaces its grant holds.
"""

import hashlib

from oauth2_provider.models import get_access_token_model

from memories.access import AuthenticationFailed, Caller
from memories.services.keys import KEY_PREFIX, api_key_authenticate
from memoryproject import dialect
from oauth.resource import resources
from oauth.scopes import person_access, read_scope
from oauth.services import oauth_actor


def bearer_authenticate(token: str, *, interface: str, request) -> Caller:
    """Return the Caller an API key or an OAuth access token stands for, or raise AuthenticationFailed.

    A token must be for one of this server's resources as ``request`` reaches it; ``request`` None
    leaves that to a later check (the body gate has no request yet; the view checks again).
    """
    if token.startswith(f"{KEY_PREFIX}_"):
        return api_key_authenticate(token, interface=interface)
    accepted = resources(request) if request is not None else None
    return oauth_token_authenticate(token, interface=interface, accepted=accepted)


def oauth_token_authenticate(token: str, *, interface: str, accepted: set[str] | None) -> Caller:
    """Return the Caller of an OAuth access token, issued for one of the ``accepted`` resources unless None.

    Every call reads the token's row, so a revocation takes effect on the next request.
    """
    checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
    access = get_access_token_model().objects.select_related("application", "user").filter(token_checksum=checksum)
    access = access.first()
    if access is None or access.user is None or access.application is None or not access.user.is_active:
        raise AuthenticationFailed(
            "The token is not valid: it was revoked, or this server did not issue it. Authorize the client "
            "again, or send an API key."
        )
    if access.expires <= dialect.now():
        raise AuthenticationFailed("The access token expired: refresh it, or authorize the client again.")
    if accepted is not None and not any(resource.rstrip("/") in accepted for resource in access.resource):
        raise AuthenticationFailed(
            f"The access token was issued for another resource ({', '.join(access.resource) or 'none named'}); "
            f"ask for one for {' or '.join(sorted(accepted))}."
        )
    scopes, namespaces = read_scope(access.scope)
    if not namespaces:
        raise AuthenticationFailed("The access token names no namespace: authorize the client again.")
    return Caller(
        actor=oauth_actor(access.user, access.application),
        interface=interface,
        # Never more than the person who approved it may do now.
        scopes=scopes & person_access(access.user),
        namespaces=namespaces,
        held_by="this OAuth grant",
        wider_access="Authorize the client again and grant the {scope!r} scope.",
        rate_limited=True,
    )
