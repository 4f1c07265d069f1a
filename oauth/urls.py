"""The OAuth endpoints, at the paths clients discover them by; named as django-oauth-toolkit reverses them."""

from django.urls import path
from oauth2_provider import views as provider

from oauth import views
from oauth.views import from_any_origin, over_https

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        over_https(from_any_origin(provider.OAuthServerMetadataView.as_view())),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        over_https(from_any_origin(views.ResourceMetadataView.as_view())),
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp",
        over_https(from_any_origin(views.ResourceMetadataView.as_view())),
        name="oauth-resource-metadata-mcp",
    ),
    path("oauth/authorize/", over_https(views.ConsentView.as_view()), name="authorize"),
    path("oauth/token/", over_https(from_any_origin(provider.TokenView.as_view())), name="token"),
    path("oauth/revoke/", over_https(from_any_origin(provider.RevokeTokenView.as_view())), name="revoke-token"),
    path("oauth/register/", over_https(from_any_origin(views.RegistrationView.as_view())), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        over_https(from_any_origin(provider.DynamicClientRegistrationManagementView.as_view())),
        name="dcr-register-management",
    ),
]
