"""API keys: create (the key is shown once), revoke, and authenticate a presented key.

A key reads ``mem_<prefix>_<secret>``. The prefix (8 hex digits) is stored as is and
finds the row; only the SHA-256 of the whole key is kept. The secret carries 256 bits
of randomness, so an unsalted fast hash is enough: nobody can guess their way back to
a key from its hash, and checking a request costs one hash.
"""

import datetime as dt
import hashlib
import hmac
import json
import re
import secrets

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from memories import validation
from memories.access import AuthenticationFailed, Caller
from memories.models import ApiKey, Scope
from memories.services.revisions import audit, check_interface
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, NotFound
from memoryproject.storage import SIDE_WRITE_SKIPPED
from memoryproject.timeparse import stored_instant

KEY_PREFIX = "mem"
NAME_MAX = 100
# last_used_at is a hint for people, not an audit trail: at most one write a minute per key
# keeps a busy agent from turning every read into a write under SQLite's single write lock.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)
# Compared against when the prefix is unknown, so that case costs the same hash and compare.
_NO_KEY_HASH = "0" * 64
# A key an operator brings (MEMORY_FIRST_API_KEY) carries at least the randomness of a drawn one: 43 URL-safe
# characters are 256 bits.
_GIVEN_KEY = re.compile(rf"{KEY_PREFIX}_([0-9a-f]{{8}})_[A-Za-z0-9_-]{{43,}}")
DRAW_A_KEY = "python3 -c \"import secrets; print(f'mem_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}')\""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _scopes(values) -> list[str]:
    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)) or not values:
        raise InvalidInput(f"scopes: give one or more of {', '.join(Scope.values)}.", field="scopes")
    unknown = [value for value in values if value not in Scope.values]
    if unknown:
        raise InvalidInput(f"scopes: {unknown[0]!r} is not a scope. Use {', '.join(Scope.values)}.", field="scopes")
    return [scope for scope in Scope.values if scope in values]


def _namespaces(values) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not values:
        raise InvalidInput("namespaces: give a non-empty list of namespaces, or none for all.", field="namespaces")
    names = []
    for value in values:
        name = validation.namespace(value)
        if name not in names:
            names.append(name)
    return names


def api_key_create(
    *, name: str, scopes, namespaces=None, trusted: bool = True, token: str | None = None, actor: str, interface: str
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is not stored and cannot be shown again.

    ``trusted`` False: the memories the key creates start as candidates (``memories.states``). ``token``: the
    plaintext to store instead of a drawn one.
    """
    check_interface(interface)
    name = validation.short_text(name, field="name", limit=NAME_MAX)
    if not name:
        raise InvalidInput("name: give the key a name that says who or what uses it.", field="name")
    scope_list = _scopes(scopes)
    namespace_list = _namespaces(namespaces)
    if not isinstance(trusted, bool):
        raise InvalidInput("trusted: expected true or false.", field="trusted")
    given = _given_key(token) if token is not None else None
    for _ in range(1 if given else 5):
        prefix = given or secrets.token_hex(4)
        token = token if given else f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                now = dialect.now()
                key = ApiKey.objects.create(
                    name=name,
                    prefix=prefix,
                    secret_hash=_digest(token),
                    scopes=scope_list,
                    namespaces=namespace_list,
                    trusted=trusted,
                    created_at=now,
                    created_by=actor,
                )
                audit(
                    actor=actor,
                    interface=interface,
                    action="api_key_create",
                    memory_id=None,
                    at=now,
                    prefix=prefix,
                    name=name,
                    scopes=scope_list,
                    namespaces=namespace_list,
                    trusted=trusted,
                )
            return key, token
        except IntegrityError:  # two keys drew the same 32-bit prefix; draw again
            continue
    if given:
        raise InvalidInput(f"token: a key with the prefix {given} exists already; draw another: {DRAW_A_KEY}")
    raise RuntimeError("could not draw an unused API key prefix")


def _given_key(token) -> str:
    """Return the prefix of a key given whole, or refuse it (without repeating it: it is a secret)."""
    found = _GIVEN_KEY.fullmatch(token) if isinstance(token, str) else None
    if found is None:
        raise InvalidInput(
            f"token: expected {KEY_PREFIX}_<8 lower-case hex digits>_<43 or more letters, digits, - or _>; draw one "
            f"with {DRAW_A_KEY}",
            field="token",
        )
    return found.group(1)


def api_key_revoke(*, prefix: str, actor: str, interface: str) -> ApiKey:
    """Revoke the key with this prefix from now on; revoking a revoked key changes nothing."""
    check_interface(interface)
    with transaction.atomic():
        key = ApiKey.objects.filter(prefix=prefix).first() if isinstance(prefix, str) else None
        if key is None:
            raise NotFound(f"No API key has the prefix {prefix!r}.", field="prefix")
        if key.revoked_at is None:
            key.revoked_at = dialect.now()
            key.save(update_fields=["revoked_at"])
            audit(
                actor=actor,
                interface=interface,
                action="api_key_revoke",
                memory_id=None,
                at=key.revoked_at,
                prefix=key.prefix,
                name=key.name,
            )
        return key


def api_key_authenticate(token, *, interface: str) -> Caller:
    """Return the Caller a presented key stands for, or raise AuthenticationFailed.

    Every call reads the key's row, so a revocation takes effect on the next request.
    """
    check_interface(interface)
    invalid = AuthenticationFailed("The API key is not valid. Check it was copied whole, or create a new one.")
    parts = token.split("_", 2) if isinstance(token, str) else []
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        raise invalid
    # One primary-key-like lookup on the unique prefix, without the ORM: every request pays for it. It reads
    # the clock too, so that the last-used stamp costs no round trip of its own on PostgreSQL.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, secret_hash, scopes, namespaces, last_used_at, revoked_at, trusted, "
            f"{dialect.clock_column()} FROM memories_apikey WHERE prefix = %s",
            [parts[1]],
        )
        row = cursor.fetchone()
    if not hmac.compare_digest(_digest(token), row[1] if row is not None else _NO_KEY_HASH) or row is None:
        raise invalid
    key_id, _, scopes, namespaces, last_used_at, revoked_at, trusted, clock = row
    if revoked_at is not None:
        raise AuthenticationFailed("This API key was revoked. Ask the operator for a new one.")
    now = dialect.clock_value(clock)
    if last_used_at is None or now - stored_instant(last_used_at) >= LAST_USED_RESOLUTION:
        # The condition is repeated in the UPDATE so that of two requests racing here only one writes.
        stale = now - LAST_USED_RESOLUTION
        try:
            ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale), pk=key_id).update(
                last_used_at=now
            )
        except SIDE_WRITE_SKIPPED:
            pass  # only a hint: a full, read-only or busy database still answers reads
    namespaces = json.loads(namespaces) if namespaces is not None else None
    return Caller(
        actor=f"key:{parts[1]}",
        interface=interface,
        scopes=frozenset(json.loads(scopes)),
        namespaces=tuple(namespaces) if namespaces is not None else None,
        trusted=bool(trusted),
        rate_limited=True,
    )
