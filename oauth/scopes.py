"""What an OAuth token may do, written in its scope: ``read``, ``write`` and ``namespace:<name>`` for each namespace.

A person picks the namespaces on the consent page, so they travel with the grant, every token
issued from it and every refresh, and a client sees in the token response exactly what it got.
"""

from oauth2_provider.scopes import SettingsScopes

from memories import validation

ACCESS_SCOPES = ("read", "write")
NAMESPACE_PREFIX = "namespace:"


def namespace_in(scope: str) -> str | None:
    """The namespace a ``namespace:<name>`` scope names, or None for any other scope or a name that is not valid."""
    if not scope.startswith(NAMESPACE_PREFIX):
        return None
    name = scope[len(NAMESPACE_PREFIX) :]
    return name if validation.NAMESPACE_RE.fullmatch(name) else None


def scope_string(access, namespaces) -> str:
    """The scope of a grant of ``access`` (read, write) to ``namespaces``, in a fixed order."""
    chosen = [scope for scope in ACCESS_SCOPES if scope in access]
    return " ".join(chosen + [NAMESPACE_PREFIX + name for name in namespaces])


def read_scope(scope: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The access scopes and the namespaces a token's scope string grants."""
    words = scope.split()
    access = frozenset(word for word in words if word in ACCESS_SCOPES)
    namespaces = tuple(dict.fromkeys(name for name in map(namespace_in, words) if name))
    return access, namespaces


class _Descriptions(dict):
    """The words the consent page shows for each scope, a namespace scope included."""

    def __missing__(self, scope):
        name = namespace_in(scope)
        if name is None:
            raise KeyError(scope)
        return f"The namespace {name}"


class NamespaceScopes(SettingsScopes):
    """read and write from settings, plus any valid ``namespace:<name>`` the request carries."""

    def get_all_scopes(self):
        return _Descriptions(super().get_all_scopes())

    def get_available_scopes(self, application=None, request=None, *args, **kwargs):
        requested = getattr(request, "scopes", None) or []
        return list(super().get_available_scopes()) + [scope for scope in requested if namespace_in(scope)]


def person_access(user) -> frozenset[str]:
    """The access a person may grant, and a token of theirs use: their own permissions on memories."""
    access = set()
    if user.has_perm("memories.view_memory"):
        access.add("read")
    if user.has_perms(["memories.add_memory", "memories.change_memory"]):
        access.add("write")
    return frozenset(access)
