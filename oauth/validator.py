"""django-oauth-toolkit's request validator with this server's rules: redirect URIs, and an audit event per token."""

import hashlib

from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from memoryproject.loopback import https_or_loopback
from oauth import services


class MemoryValidator(OAuth2Validator):
    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        # OAuth 2.1: codes go to https, or to a loopback address on this machine; whatever a client registered.
        return https_or_loopback(redirect_uri) and super().validate_redirect_uri(
            client_id, redirect_uri, request, *args, **kwargs
        )

    def _save_bearer_token(self, token, request, *args, **kwargs):
        saved = super()._save_bearer_token(token, request, *args, **kwargs)
        # In the transaction that stored the token: no token without its audit event.
        services.oauth_token_audit(
            user=request.user,
            application=request.client,
            refreshed=request.grant_type == "refresh_token",
            scope=token.get("scope", ""),
            resource=getattr(request, "resource", []),
        )
        return saved

    def revoke_token(self, token, token_type_hint, request, *args, **kwargs):
        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        held = None
        for model in (get_access_token_model(), get_refresh_token_model()):
            held = (
                held
                or model.objects.filter(token_checksum=checksum, application=request.client, user__isnull=False).first()
            )
        super().revoke_token(token, token_type_hint, request, *args, **kwargs)
        if held is not None:
            services.oauth_revoke_audit(user=held.user, application=request.client, by_client=True)
