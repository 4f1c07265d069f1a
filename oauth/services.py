"""Writes about OAuth grants: revoking them from the admin, and the audit events of grants, tokens and revocations.

django-oauth-toolkit stores the clients, codes and tokens; these functions add what this server
records about them, in the audit trail every other write uses.
"""

from django.db import transaction
from oauth2_provider.models import get_application_model, get_refresh_token_model

from memories.models import Interface
from memories.services.revisions import audit, check_interface
from memoryproject import dialect
from memoryproject.exceptions import NotFound
from oauth.scopes import read_scope


def oauth_actor(user, application) -> str:
    """The actor an OAuth token's calls are recorded as: the person, and the client acting for them."""
    return f"oauth:{user.get_username()}:{application.client_id[:8]}"


def _client(application) -> dict:
    return {"client_id": application.client_id, "client_name": application.name}


def oauth_consent_audit(*, user, application, scope: str, redirect_uri: str) -> None:
    """Record that a person approved a client for ``scope`` on the consent page."""
    access, namespaces = read_scope(scope)
    audit(
        actor=f"user:{user.get_username()}",
        interface=Interface.OAUTH,
        action="oauth_grant",
        memory_id=None,
        at=dialect.now(),
        **_client(application),
        scopes=sorted(access),
        namespaces=list(namespaces),
        redirect_uri=redirect_uri,
    )


def oauth_token_audit(*, user, application, refreshed: bool, scope: str, resource) -> None:
    """Record a token issued for a code (``oauth_token``) or for a refresh token (``oauth_refresh``)."""
    access, namespaces = read_scope(scope)
    audit(
        actor=oauth_actor(user, application),
        interface=Interface.OAUTH,
        action="oauth_refresh" if refreshed else "oauth_token",
        memory_id=None,
        at=dialect.now(),
        **_client(application),
        scopes=sorted(access),
        namespaces=list(namespaces),
        resource=list(resource or []),
    )


def oauth_revoke_audit(*, user, application, by_client: bool, actor: str | None = None, interface=None) -> None:
    """Record a revocation: by the client at the revocation endpoint, or by a person in the admin."""
    audit(
        actor=actor or oauth_actor(user, application),
        interface=interface or Interface.OAUTH,
        action="oauth_revoke",
        memory_id=None,
        at=dialect.now(),
        **_client(application),
        user=user.get_username(),
        by="client" if by_client else "person",
    )


def oauth_grant_revoke(*, refresh_token_id: int, actor: str, interface: str) -> None:
    """Revoke a live grant (its refresh token and the access token issued with it): refused on the next request."""
    check_interface(interface)
    with transaction.atomic():
        grant = (
            get_refresh_token_model()
            .objects.select_related("user", "application")
            .filter(pk=refresh_token_id, revoked__isnull=True)
            .first()
        )
        if grant is None:
            raise NotFound(f"No live OAuth grant has the id {refresh_token_id}.")
        grant.revoke()
        oauth_revoke_audit(
            user=grant.user, application=grant.application, by_client=False, actor=actor, interface=interface
        )


def oauth_client_remove(*, application_id: int, actor: str, interface: str) -> None:
    """Remove a client with every code and token it holds; it must register and be approved again."""
    check_interface(interface)
    with transaction.atomic():
        application = get_application_model().objects.filter(pk=application_id).first()
        if application is None:
            raise NotFound(f"No OAuth client has the id {application_id}.")
        audit(
            actor=actor,
            interface=interface,
            action="oauth_client_remove",
            memory_id=None,
            at=dialect.now(),
            **_client(application),
        )
        application.delete()
