"""The OAuth pages and endpoints django-oauth-toolkit serves, with this server's rules added.

- ``ConsentView``: the person signs in with their Django account and picks what the client gets.
- ``RegistrationView``: RFC 7591 registration, for clients whose redirects are https or loopback.
- ``ResourceMetadataView``: RFC 9728 metadata, naming the resource at MEMORY_PUBLIC_URL when set.
- ``over_https``: every one of them refuses plain http outside loopback.
"""

import json
from functools import wraps
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView, DynamicClientRegistrationView, OAuthProtectedResourceMetadataView
from oauthlib.oauth2.rfc6749.errors import InvalidRequestError

from memories import validation
from memories.admin.forms import split_names
from memories.selectors.stats import namespace_names
from memoryproject.exceptions import InvalidInput
from memoryproject.loopback import https_or_loopback, is_loopback
from oauth import services
from oauth.resource import MCP_PATH, METADATA_PATH, public_base, resources
from oauth.scopes import ACCESS_SCOPES, person_access, read_scope, scope_string

REGISTRABLE_GRANTS = {"authorization_code", "refresh_token"}


def over_https(view):
    """Refuse a request over plain http to a host outside loopback: codes and tokens must not cross a network bare."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        host = urlsplit(f"//{request.get_host()}").hostname
        if settings.MEMORY_PUBLIC_URL or request.is_secure() or is_loopback(host):
            return view(request, *args, **kwargs)
        return JsonResponse(
            {
                "error": "invalid_request",
                "error_description": "OAuth needs HTTPS outside loopback: serve the server behind a TLS proxy "
                "and set MEMORY_PUBLIC_URL to its https:// address.",
            },
            status=400,
        )

    return guarded


def from_any_origin(view):
    """Let a client running in a browser call an endpoint that takes no cookies (metadata, registration, token).

    Answers the CORS preflight itself; ``*`` is safe because these endpoints never read a session.
    """

    @wraps(view)
    def shared(request, *args, **kwargs):
        if request.method == "OPTIONS" and "HTTP_ACCESS_CONTROL_REQUEST_METHOD" in request.META:
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = "Authorization, Content-Type, MCP-Protocol-Version"
            response["Access-Control-Max-Age"] = "86400"
        else:
            response = view(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        return response

    return shared


class ConsentForm(AllowForm):
    read = forms.BooleanField(required=False, label="Read memories (recall, list, history)")
    write = forms.BooleanField(required=False, label="Write memories (remember, learn, update, forget)")
    namespaces = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    new_namespaces = forms.CharField(
        required=False, max_length=500, label="Other namespaces", help_text="Comma-separated; created on first write."
    )


class ConsentView(AuthorizationView):
    """The consent page: which namespaces and which of read and write the client gets, never more than the person's."""

    template_name = "oauth/consent.html"
    form_class = ConsentForm

    def validate_authorization_request(self, request):
        scopes, credentials = super().validate_authorization_request(request)
        # OAuth 2.1: S256 only, refused here before the person is asked anything (the library refuses only later).
        if credentials.get("code_challenge_method") != "S256":
            error = InvalidRequestError(
                description="code_challenge_method must be S256: this server takes no other PKCE method.",
                state=credentials.get("state"),
            )
            error.redirect_uri = credentials["redirect_uri"]
            raise OAuthToolkitError(error=error)
        return scopes, credentials

    def get_initial(self):
        initial = super().get_initial()
        access, requested = read_scope(initial.get("scope") or "")
        allowed = person_access(self.request.user)
        initial.update({scope: scope in access and scope in allowed for scope in ACCESS_SCOPES})
        initial["namespaces"] = list(requested)
        return initial

    def get_form(self, form_class=None):
        form = super().get_form(form_class)
        offered = dict.fromkeys(namespace_names() + list(form.initial.get("namespaces", [])))
        form.fields["namespaces"].choices = [(name, name) for name in offered]
        allowed = person_access(self.request.user)
        for scope in ACCESS_SCOPES:
            if scope not in allowed:
                form.fields[scope].disabled = True
                form.fields[scope].help_text = "Your account may not grant this."
        return form

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if "application" not in context:  # a form sent back with errors: the GET's details are not kept
            form = context["form"]
            client_id = form.data.get("client_id") if form.is_bound else None
            context["application"] = get_application_model().objects.filter(client_id=client_id).first()
            context["redirect_uri"] = form.data.get("redirect_uri") if form.is_bound else None
        return context

    def form_valid(self, form):
        if form.cleaned_data.get("allow"):
            if not self._choose(form):
                return self.form_invalid(form)
        response = super().form_valid(form)
        if form.cleaned_data.get("allow") and "code=" in response.get("Location", ""):
            services.oauth_consent_audit(
                user=self.request.user,
                application=get_application_model().objects.get(client_id=form.cleaned_data["client_id"]),
                scope=form.cleaned_data["scope"],
                redirect_uri=form.cleaned_data["redirect_uri"],
            )
        return response

    def _choose(self, form) -> bool:
        """Turn the choices into the grant's scope and resource; False, with errors on the form, if they can't be."""
        data = form.cleaned_data
        access = [scope for scope in ACCESS_SCOPES if data.get(scope)]
        if not access:
            form.add_error(None, "Choose read, write or both.")
        names = list(data.get("namespaces") or [])
        for name in split_names(data.get("new_namespaces") or ""):
            try:
                names.append(validation.namespace(name))
            except InvalidInput as error:
                form.add_error("new_namespaces", error.message)
        if not names:
            form.add_error("namespaces", "Choose at least one namespace.")
        ours = resources(self.request)
        asked = (data.get("resource") or "").split() or [public_base(self.request) + MCP_PATH]
        for resource in asked:
            if resource.rstrip("/") not in ours:
                form.add_error(None, f"The client asked for a resource this server is not ({resource}).")
        if form.errors:
            return False
        data["scope"] = scope_string(access, dict.fromkeys(names))
        data["resource"] = " ".join(asked)
        return True


def _registration_problem(body: bytes) -> tuple[str, str] | None:
    """What this server refuses in a registration that the library would take: (error, description), or None."""
    try:
        metadata = json.loads(body)
    except ValueError:
        return None  # the library answers that itself
    if not isinstance(metadata, dict):
        return None
    uris = metadata.get("redirect_uris")
    for uri in uris if isinstance(uris, list) else []:
        if isinstance(uri, str) and not https_or_loopback(uri):
            return "invalid_redirect_uri", f"{uri!r}: a redirect URI must be https, or http on localhost or 127.0.0.1."
    grants = metadata.get("grant_types", ["authorization_code"])
    if isinstance(grants, list) and not set(grants) <= REGISTRABLE_GRANTS:
        return (
            "invalid_client_metadata",
            "grant_types: this server issues tokens for authorization_code and refresh_token only.",
        )
    responses = metadata.get("response_types", ["code"])
    if isinstance(responses, list) and responses != ["code"]:
        return "invalid_client_metadata", "response_types: this server answers the code response type only."
    return None


class RegistrationView(DynamicClientRegistrationView):
    def post(self, request, *args, **kwargs):
        problem = _registration_problem(request.body)
        if problem is not None:
            return JsonResponse({"error": problem[0], "error_description": problem[1]}, status=400)
        return super().post(request, *args, **kwargs)


class ResourceMetadataView(OAuthProtectedResourceMetadataView):
    def get_resource(self, request):
        suffix = request.path[len(METADATA_PATH) :].rstrip("/")
        return public_base(request) + suffix
