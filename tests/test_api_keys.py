"""API keys (hashed at rest, shown once, revocable) and the access rules every interface applies to callers."""

import datetime as dt
import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.access import AuthenticationFailed, Caller, PermissionDenied
from memories.models import ApiKey, AuditEvent
from memories.services.keys import api_key_authenticate, api_key_create, api_key_revoke
from memoryproject.exceptions import InvalidInput, NotFound

CLI = {"actor": "tester", "interface": "cli"}


def create(**fields):
    return api_key_create(**{"name": "agent", "scopes": ["read", "write"], **fields}, **CLI)


def test_a_key_is_shown_once_and_only_its_sha256_is_stored(db):
    key, token = create(name="laptop", namespaces=["acme", "ops", "acme"])

    assert token.startswith(f"mem_{key.prefix}_") and len(token) >= 50
    stored = ApiKey.objects.get()
    assert stored.secret_hash == hashlib.sha256(token.encode()).hexdigest()
    assert (stored.name, stored.scopes, stored.namespaces) == ("laptop", ["read", "write"], ["acme", "ops"])
    assert stored.last_used_at is None and stored.revoked_at is None
    secret = token.split("_", 2)[2]
    for model in (ApiKey, AuditEvent):
        for row in model.objects.values():
            assert not any(secret in str(value) for value in row.values())
    assert AuditEvent.objects.get().action == "api_key_create"
    assert create()[1] != token


def test_authenticate_returns_the_caller_the_key_stands_for(db):
    key, token = create(scopes=["read"], namespaces=["acme"])

    caller = api_key_authenticate(token, interface="mcp")

    assert caller == Caller(
        actor=f"key:{key.prefix}", interface="mcp", scopes=frozenset({"read"}), namespaces=("acme",), rate_limited=True
    )
    assert api_key_authenticate(create()[1], interface="api").namespaces is None


@pytest.mark.parametrize(
    "mangle",
    [
        lambda token: token[:-1] + ("x" if token[-1] != "x" else "y"),  # right prefix, wrong secret
        lambda token: token.replace(token.split("_")[1], "00000000"),  # unknown prefix
        lambda token: token.split("_", 2)[2],  # the secret alone
        lambda token: "",
        lambda token: "mem__",
        lambda token: None,
        lambda token: 12345,
    ],
)
def test_anything_but_the_whole_key_is_refused(db, mangle):
    _, token = create()
    with pytest.raises(AuthenticationFailed, match="The API key is not valid"):
        api_key_authenticate(mangle(token), interface="mcp")


def test_a_revoked_key_fails_at_once_and_revoking_twice_changes_nothing(db):
    key, token = create()
    api_key_authenticate(token, interface="mcp")

    revoked = api_key_revoke(prefix=key.prefix, **CLI)
    again = api_key_revoke(prefix=key.prefix, **CLI)

    with pytest.raises(AuthenticationFailed, match="This API key was revoked"):
        api_key_authenticate(token, interface="mcp")
    assert again.revoked_at == revoked.revoked_at
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "api_key_create",
        "api_key_revoke",
    ]
    with pytest.raises(NotFound):
        api_key_revoke(prefix="ffffffff", **CLI)


def test_last_used_is_written_at_most_once_a_minute(db):
    key, token = create()

    with CaptureQueriesContext(connection) as first:
        api_key_authenticate(token, interface="mcp")
    used = ApiKey.objects.get().last_used_at
    with CaptureQueriesContext(connection) as second:
        api_key_authenticate(token, interface="mcp")

    assert used is not None
    assert [query["sql"].split()[0] for query in first] == ["SELECT", "UPDATE"]
    assert [query["sql"].split()[0] for query in second] == ["SELECT"]
    assert ApiKey.objects.get().last_used_at == used
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=used - dt.timedelta(seconds=61))
    api_key_authenticate(token, interface="mcp")
    assert ApiKey.objects.get().last_used_at > used


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scopes": []}, "scopes"),
        ({"scopes": "read"}, "scopes"),
        ({"scopes": ["read", "delete"]}, "scopes"),
        ({"namespaces": []}, "namespaces"),
        ({"namespaces": "acme"}, "namespaces"),
        ({"namespaces": ["Acme Corp"]}, "namespace"),
        ({"name": "  "}, "name"),
        ({"name": "n" * 101}, "name"),
    ],
)
def test_bad_key_settings_are_refused_naming_the_field(db, fields, field):
    with pytest.raises(InvalidInput) as refused:
        create(**fields)
    assert refused.value.field == field
    assert not ApiKey.objects.exists()


# --- Caller: the access rules --------------------------------------------------------------------------------------


def caller(scopes=("read", "write"), namespaces=None) -> Caller:
    return Caller(actor="key:test", interface="mcp", scopes=frozenset(scopes), namespaces=namespaces)


def test_scopes_are_required_one_by_one_and_admin_holds_them_all():
    caller(["read"]).require("read")
    with pytest.raises(PermissionDenied, match="This needs the 'write' scope, and this API key has only: read"):
        caller(["read"]).require("write")
    with pytest.raises(PermissionDenied):
        caller(["write"]).require("read")
    for scope in ("read", "write", "admin"):
        caller(["admin"]).require(scope)


def test_reads_without_a_namespace_cover_only_the_callers_namespaces():
    assert caller().namespaces_to_read(None) is None
    assert caller(namespaces=("acme", "ops")).namespaces_to_read(None) == ["acme", "ops"]
    assert caller(namespaces=("acme", "ops")).namespaces_to_read([]) == ["acme", "ops"]
    assert caller(namespaces=("acme", "ops")).namespaces_to_read("ops") == ["ops"]
    assert caller().namespaces_to_read(["x", "y"]) == ["x", "y"]


def test_a_namespace_outside_the_list_is_refused_in_the_same_words_whatever_it_holds(remember):
    remember("Something secret.", namespace="hr")
    restricted = caller(namespaces=("acme",))
    messages = []
    for name in ("hr", "nothing-here"):
        for ask in (restricted.namespaces_to_read, restricted.home_namespace, restricted.namespace_to_count):
            with pytest.raises(PermissionDenied) as refused:
                ask(name)
            assert refused.value.field == "namespace"
            messages.append(refused.value.message.replace(name, "NAME"))
    assert set(messages) == {"namespace: 'NAME' is not available to this API key; it may use acme."}
    with pytest.raises(PermissionDenied):
        restricted.namespaces_to_read(["acme", "hr"])
    with pytest.raises(InvalidInput):
        restricted.namespaces_to_read("Not A Slug")


def test_writes_default_to_the_first_allowed_namespace_and_stats_need_one(settings):
    settings.MEMORY_DEFAULT_NAMESPACE = "general"
    assert caller().home_namespace(None) == "general"
    assert caller(namespaces=("acme", "ops")).home_namespace(None) == "acme"
    assert caller(namespaces=("acme",)).namespace_to_count(None) == "acme"
    assert caller().namespace_to_count(None) is None
    with pytest.raises(InvalidInput, match="this API key may use several namespaces"):
        caller(namespaces=("acme", "ops")).namespace_to_count(None)


def test_a_memory_in_another_namespace_is_refused_exactly_like_a_missing_one(remember):
    theirs = remember("HR only.", namespace="hr").memory
    ours = remember("Acme note.", namespace="acme").memory
    restricted = caller(namespaces=("acme",))

    restricted.check_memory(ours.id)
    caller().check_memory(theirs.id)
    with pytest.raises(NotFound) as hidden:
        restricted.check_memory(theirs.id)
    with pytest.raises(NotFound) as missing:
        restricted.check_memory(theirs.id + 1000)
    assert hidden.value.message == missing.value.message.replace(str(theirs.id + 1000), str(theirs.id))
    assert hidden.value.message.startswith(f"Memory {theirs.id} not found")


# --- commands --------------------------------------------------------------------------------------------------


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_api_key_prints_the_key_alone_on_stdout(db):
    out, err = run("create_api_key", "--name", "ci bot", "--scopes", "read", "--namespaces", "acme, ops")

    token = out.strip()
    key = ApiKey.objects.get()
    assert out == token + "\n" and token.startswith(f"mem_{key.prefix}_")
    assert err == f"Created API key {key.prefix} 'ci bot' (read; acme, ops). It is shown only this once:\n"
    assert (key.scopes, key.namespaces) == (["read"], ["acme", "ops"])
    assert api_key_authenticate(token, interface="api").namespaces == ("acme", "ops")


def test_create_api_key_defaults_to_read_write_on_all_namespaces_and_refuses_bad_scopes(db):
    run("create_api_key", "--name", "agent")
    assert ApiKey.objects.values_list("scopes", "namespaces").get() == (["read", "write"], None)
    with pytest.raises(CommandError, match="'delete' is not a scope"):
        run("create_api_key", "--name", "x", "--scopes", "read,delete")


def test_revoke_api_key_stops_the_key(db):
    key, token = create()
    out, _ = run("revoke_api_key", key.prefix)
    assert out.startswith(f"Revoked API key {key.prefix} 'agent'")
    with pytest.raises(AuthenticationFailed):
        api_key_authenticate(token, interface="mcp")
    with pytest.raises(CommandError, match="No API key has the prefix"):
        run("revoke_api_key", "nope")
