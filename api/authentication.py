"""Bearer authentication for the REST API: an API key or an OAuth access token becomes a ``Caller``."""

from dataclasses import dataclass

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from memories.access import AuthenticationFailed, Caller
from oauth.resource import challenge, public_base
from oauth.tokens import bearer_authenticate


@dataclass(frozen=True)
class KeyUser:
    """``request.user`` for a request made with an API key (the key itself is ``request.auth``)."""

    actor: str
    is_authenticated = True
    is_anonymous = False

    def __str__(self) -> str:
        return self.actor


class ApiKeyAuthentication(BaseAuthentication):
    """Put the key's ``Caller`` on ``request.auth``; a missing header leaves the request anonymous."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        if not header:
            return None
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer":
            raise exceptions.AuthenticationFailed("Send the API key as 'Authorization: Bearer <key>'.")
        try:
            caller = bearer_authenticate(token.strip().decode("latin-1"), interface="api", request=request)
        except AuthenticationFailed as error:
            raise exceptions.AuthenticationFailed(error.message) from None
        return KeyUser(caller.actor), caller

    def authenticate_header(self, request) -> str:
        # Also what makes DRF answer 401, not 403, to a request without a key.
        return challenge(public_base(request))


class HasApiKey(BasePermission):
    message = "Missing API key: send 'Authorization: Bearer <key>'."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, Caller)
