"""Every REST handler declares the scope it needs, and a key without it is refused before anything is read."""

import pytest
from django.urls import get_resolver
from rest_framework.test import APIClient

from api.views import ApiView
from memories.models import Memory, Scope
from memories.services.keys import api_key_create
from telemetry.models import HookRecall, Injection
from tests.helpers import error_of

pytestmark = pytest.mark.django_db

# A key holding every scope but the one a handler needs.
KEY_SCOPES_WITHOUT = {Scope.READ: ["write"], Scope.WRITE: ["read"], Scope.ADMIN: ["read", "write"]}


def _handlers() -> list[tuple[str, str, Scope]]:
    """(path, method, scope) of every handler of every keyed REST view, path parameters filled in."""
    found = []
    api = next(pattern for pattern in get_resolver().url_patterns if getattr(pattern, "app_name", "") == "api")
    for pattern in api.url_patterns:
        view = getattr(pattern.callback, "view_class", None)
        if view is None or not issubclass(view, ApiView):
            continue
        path = "/api/" + str(pattern.pattern).replace("<int:id>", "1").replace("<str:id>", "c1")
        found.extend((path, method, scope) for method, scope in view.scopes.items())
    return found


def test_every_keyed_view_declares_a_scope_for_each_of_its_handlers():
    handlers = _handlers()
    assert len(handlers) >= 25
    assert ("/api/v1/memories/", "POST", Scope.WRITE) in handlers
    assert ("/api/v1/hooks/recall/", "POST", Scope.READ) in handlers
    assert ("/api/v1/audit/", "GET", Scope.ADMIN) in handlers

    with pytest.raises(TypeError, match="Undeclared declares no scope for post: add it to scopes."):
        type("Undeclared", (ApiView,), {"post": lambda self, request: None})


@pytest.mark.parametrize(("path", "method", "scope"), _handlers())
def test_a_key_without_the_handlers_scope_is_refused_and_nothing_is_written(path, method, scope):
    _, token = api_key_create(name="narrow", scopes=KEY_SCOPES_WITHOUT[scope], actor="tester", interface="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    answer = client.generic(method, path, '{"content": "x", "text": "x", "query": "x"}', "application/json")

    error = error_of(answer, 403)
    assert error["code"] == "forbidden"
    assert f"This needs the '{scope}' scope" in error["message"]
    assert not Memory.objects.exists() and not HookRecall.objects.exists() and not Injection.objects.exists()
