"""Who is calling, and what they may touch: the one place scopes and namespace allow-lists are enforced.

Every interface that acts for an API key (MCP and REST) turns the key into a
``Caller`` once per request and asks it before each call into the services:
``require`` for scopes, ``namespaces_to_read`` / ``home_namespace`` /
``namespace_to_count`` for namespaces, and ``check_memory`` for memory ids.

Existence does not leak: a memory in a namespace the caller may not use is reported
exactly like a memory that does not exist, and a namespace outside the allow-list is
refused with the same words whether or not anything is stored in it.
"""

from dataclasses import dataclass

from django.conf import settings

from memories import validation
from memories.models import Lifecycle, Memory, Scope
from memoryproject.exceptions import InvalidInput, MemoryNotFound, MemoryServiceError


class AuthenticationFailed(MemoryServiceError):
    """No credential, or one that is unknown, malformed or revoked."""

    code = "unauthenticated"


class PermissionDenied(MemoryServiceError):
    """The caller is known but its scopes or namespaces do not allow this."""

    code = "forbidden"


@dataclass(frozen=True)
class Caller:
    """An authenticated principal: the actor name services record, its interface, scopes and namespaces.

    ``namespaces`` is None for a caller that may use every namespace.
    """

    actor: str
    interface: str
    scopes: frozenset[str]
    namespaces: tuple[str, ...] | None = None
    # How refusals name what the caller holds, and how to get more: an API key's words unless told otherwise.
    held_by: str = "this API key"
    wider_access: str = "Ask the operator for a key with the {scope!r} scope."
    # An untrusted caller's new memories are candidates, and it may not promote or archive (ApiKey.trusted).
    trusted: bool = True
    # An API key's calls spend its reads and writes a minute (memories.ratelimit), whatever the door.
    rate_limited: bool = False

    @property
    def new_memory_state(self) -> str:
        """The lifecycle state a memory this caller creates starts in."""
        return Lifecycle.ACTIVE.value if self.trusted else Lifecycle.CANDIDATE.value

    def require_trusted(self, action: str) -> None:
        """Refuse a lifecycle change (``action``: promote, archive, unarchive) to an untrusted caller."""
        if not self.trusted:
            raise PermissionDenied(
                f"{self.held_by[0].upper()}{self.held_by[1:]} is marked untrusted: the memories it "
                f"writes start as candidates, and it may not {action} memories. A person can "
                "promote candidates in the admin."
            )

    @property
    def credit(self) -> dict:
        """The ``actor`` and ``interface`` keyword arguments every service takes."""
        return {"actor": self.actor, "interface": self.interface}

    def has(self, scope: str) -> bool:
        # admin is a superset: an operator's key can do everything a read/write key can.
        return scope in self.scopes or Scope.ADMIN in self.scopes

    def require(self, scope: str) -> None:
        scope = str(scope)  # Scope.WRITE reads as 'write'
        if not self.has(scope):
            held = ", ".join(sorted(self.scopes)) or "none"
            raise PermissionDenied(
                f"This needs the {scope!r} scope, and {self.held_by} has only: {held}. "
                + self.wider_access.format(scope=scope),
            )

    def require_whole_store(self, what: str) -> None:
        """Refuse ``what`` (a check of every namespace at once) to a caller limited to some namespaces."""
        self.require(Scope.ADMIN)
        if self.namespaces is not None:
            raise PermissionDenied(
                f"{what} covers every namespace, and {self.held_by} is limited to "
                f"{', '.join(self.namespaces)}; use a key for every namespace."
            )

    def may_use(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def _allowed(self, namespace) -> str:
        name = validation.namespace(namespace)
        if not self.may_use(name):
            raise PermissionDenied(
                f"namespace: {name!r} is not available to {self.held_by}; it may use {', '.join(self.namespaces)}.",
                field="namespace",
            )
        return name

    def namespaces_to_read(self, requested=None) -> list[str] | None:
        """Return the namespaces a read may search: those requested, else all the caller may use (None = all)."""
        if requested is None or requested == "" or requested == []:
            return None if self.namespaces is None else list(self.namespaces)
        names = [requested] if isinstance(requested, str) else requested
        if not isinstance(names, (list, tuple)):
            raise InvalidInput("namespace: expected a name or a list of names.", field="namespace")
        return [self._allowed(name) for name in names]

    def home_namespace(self, requested=None) -> str:
        """Return the one namespace a call acts in (a write, or a lookup by key): the one requested, else the home.

        The home is the first namespace of the allow-list, or MEMORY_DEFAULT_NAMESPACE
        for a caller that may use every namespace.
        """
        if requested is None or requested == "":
            return self.namespaces[0] if self.namespaces else settings.MEMORY_DEFAULT_NAMESPACE
        return self._allowed(requested)

    def namespace_to_count(self, requested=None) -> str | None:
        """Return the one namespace statistics may cover (None = all), refusing to total several hidden ones."""
        if requested is not None and requested != "":
            return self._allowed(requested)
        if self.namespaces is None:
            return None
        if len(self.namespaces) == 1:
            return self.namespaces[0]
        raise InvalidInput(
            f"namespace: {self.held_by} may use several namespaces ({', '.join(self.namespaces)}); name one.",
            field="namespace",
        )

    def check_memory(self, memory_id) -> None:
        """Refuse a memory id outside the caller's namespaces exactly as a missing one is refused."""
        if self.namespaces is None:
            return  # nothing to enforce; the service reports missing ids itself
        if isinstance(memory_id, bool) or not isinstance(memory_id, int) or memory_id < 1:
            raise InvalidInput(f"id: {memory_id!r} is not a memory id (a positive integer).", field="id")
        namespace = Memory.objects.filter(pk=memory_id).values_list("namespace", flat=True).first()
        if namespace is None or not self.may_use(namespace):
            # Word for word what the selectors say about a memory that does not exist.
            raise MemoryNotFound(memory_id)
