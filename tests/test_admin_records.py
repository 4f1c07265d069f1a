"""The admin's read-only records (revisions, receipts, audit, telemetry), API keys, and who may see any of it."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages

from memories import services
from memories.access import AuthenticationFailed, Caller
from memories.models import ApiKey, AuditEvent, ErasureReceipt, Revision
from memories.services import hooks
from memories.services.keys import api_key_authenticate, api_key_create
from telemetry.models import HookRecall, InjectedMemory, Injection

KEYS = "/admin/memories/apikey/"


def messages_of(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def records(remember, actor):
    """One of each read-only row: revisions, an erasure receipt, audit events and telemetry."""
    kept = remember("The printer on floor 2 jams on A3 paper.", tags=["office"]).memory
    gone = remember("A memory that will be erased.").memory
    receipt = services.memory_erase(memory_id=gone.id, reason="test", **actor)
    caller = Caller(actor="key:test", interface="api", scopes=frozenset({"read", "write"}))
    block = hooks.hook_recall(caller=caller, query="printer paper", harness="claude-code", hook="prompt")
    report = hooks.hook_report(
        caller=caller,
        harness="claude-code",
        hook="prompt",
        query="printer paper",
        characters=120,
        memories=[{"memory_id": kept.id, "revision_id": kept.revision_id}],
    )
    return {
        "memories/revision": Revision.objects.get(memory_id=kept.id).pk,
        "memories/erasurereceipt": receipt.pk,
        "memories/auditevent": AuditEvent.objects.filter(action="erase").get().pk,
        "telemetry/hookrecall": block.recall_id,
        "telemetry/injection": report.id,
        "telemetry/injectedmemory": InjectedMemory.objects.get().pk,
    }


READ_ONLY = [
    "memories/revision",
    "memories/erasurereceipt",
    "memories/auditevent",
    "telemetry/hookrecall",
    "telemetry/injection",
    "telemetry/injectedmemory",
]


@pytest.mark.parametrize("model", READ_ONLY)
def test_read_only_admins_list_and_show_but_refuse_add_change_and_delete(admin_client, records, model):
    row = records[model]
    assert admin_client.get(f"/admin/{model}/").status_code == 200
    page = admin_client.get(f"/admin/{model}/{row}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()  # view only
    assert admin_client.get(f"/admin/{model}/add/").status_code == 403
    assert admin_client.post(f"/admin/{model}/add/", {}).status_code == 403
    assert admin_client.post(f"/admin/{model}/{row}/change/", {}).status_code == 403
    assert admin_client.get(f"/admin/{model}/{row}/delete/").status_code == 403
    assert admin_client.post(f"/admin/{model}/{row}/delete/", {"post": "yes"}).status_code == 403
    listing = admin_client.get(f"/admin/{model}/").content.decode()
    assert 'value="delete_selected"' not in listing


def test_the_injection_page_lists_the_memories_it_carried(admin_client, records):
    injection = Injection.objects.get()
    page = admin_client.get(f"/admin/telemetry/injection/{injection.pk}/change/").content.decode()
    item = InjectedMemory.objects.get()
    assert f"{item.memory_id}" in page and f"{item.revision_id}" in page
    listing = admin_client.get("/admin/telemetry/injection/")
    assert listing.context["cl"].result_list[0].memory_count == 1
    assert HookRecall.objects.get().query in admin_client.get("/admin/telemetry/hookrecall/").content.decode()


def test_an_erasure_receipt_shows_ids_and_hashes_never_text(admin_client, records):
    receipt = ErasureReceipt.objects.get()
    page = admin_client.get(f"/admin/memories/erasurereceipt/{receipt.pk}/change/").content.decode()
    assert receipt.content_hashes[0] in page
    assert "will be erased" not in page


# API keys -------------------------------------------------------------------------------------------------------------


def create_key(client, **fields):
    data = {"name": "laptop agent", "scopes": ["read", "write"], "namespaces": "", "_save": "Save", **fields}
    return client.post(f"{KEYS}add/", data)


def test_creating_a_key_shows_it_once_and_it_authenticates(admin_client):
    response = create_key(admin_client, namespaces="acme, home")
    assert response.status_code == 200
    token = re.search(r'id="api-key" readonly size="80" value="(mem_[^"]+)"', response.content.decode()).group(1)
    key = ApiKey.objects.get()
    assert (key.name, key.scopes, key.namespaces, key.created_by) == (
        "laptop agent",
        ["read", "write"],
        ["acme", "home"],
        "user:admin",
    )
    caller = api_key_authenticate(token, interface="api")
    assert (caller.actor, caller.scopes, caller.namespaces) == (
        f"key:{key.prefix}",
        {"read", "write"},
        ("acme", "home"),
    )
    assert AuditEvent.objects.filter(action="api_key_create", actor="user:admin").exists()
    # Never again: not on the list, not on the key's page, and never its hash.
    for url in (KEYS, f"{KEYS}{key.pk}/change/"):
        page = admin_client.get(url).content.decode()
        assert token not in page and token.split("_", 2)[2] not in page
        assert key.secret_hash not in page
        assert key.prefix in page


def test_the_key_list_shows_scopes_namespaces_created_last_used_and_revoked(admin_client, remember):
    key, token = api_key_create(name="ci", scopes=["read"], namespaces=None, actor="tester", interface="cli")
    api_key_authenticate(token, interface="api")
    page = admin_client.get(KEYS)
    row = page.context["cl"].result_list[0]
    assert row.last_used_at is not None
    text = page.content.decode()
    for column in (
        'field-scope_list">read<',
        'field-namespace_list">all<',
        "field-last_used_at",
        "field-revoked_at",
        "field-created_at",
    ):
        assert column in text


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"scopes": []}, "scopes", "This field is required."),
        ({"scopes": ["root"]}, "scopes", "Select a valid choice"),
        ({"name": ""}, "name", "This field is required."),
        ({"namespaces": "Not Valid"}, "namespaces", "is not a valid namespace"),
    ],
)
def test_bad_key_input_is_a_form_error_and_creates_nothing(admin_client, fields, field, message):
    response = create_key(admin_client, **fields)
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors[field])
    assert not ApiKey.objects.exists()


def test_revoking_keys_stops_them_authenticating(admin_client):
    revoked, token = api_key_create(name="old laptop", scopes=["read"], actor="tester", interface="cli")
    kept, kept_token = api_key_create(name="new laptop", scopes=["read"], actor="tester", interface="cli")
    response = admin_client.post(
        KEYS, {"action": "revoke_keys", "_selected_action": [str(revoked.pk)], "index": "0"}, follow=True
    )
    assert any(text.startswith(f"Revoked 1 API key: {revoked.prefix}.") for text in messages_of(response))
    with pytest.raises(AuthenticationFailed, match="revoked"):
        api_key_authenticate(token, interface="api")
    assert api_key_authenticate(kept_token, interface="api").actor == f"key:{kept.prefix}"
    assert AuditEvent.objects.filter(action="api_key_revoke", actor="user:admin").exists()


def test_keys_are_never_edited_or_deleted(admin_client):
    key, _ = api_key_create(name="ci", scopes=["read"], actor="tester", interface="cli")
    assert admin_client.post(f"{KEYS}{key.pk}/change/", {"name": "renamed"}).status_code == 403
    assert admin_client.post(f"{KEYS}{key.pk}/delete/", {"post": "yes"}).status_code == 403
    key.refresh_from_db()
    assert key.name == "ci"


# Who gets in ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def every_page(records, remember):
    memory_id = remember("A memory to look at.").memory.id
    key, _ = api_key_create(name="ci", scopes=["read"], actor="tester", interface="cli")
    pages = [
        "/admin/",
        "/admin/memories/memory/",
        f"/admin/memories/memory/{memory_id}/change/",
        "/admin/memories/memory/add/",
        KEYS,
        f"{KEYS}add/",
        f"{KEYS}{key.pk}/change/",
    ]
    for model in READ_ONLY:
        pages += [f"/admin/{model}/", f"/admin/{model}/{records[model]}/change/"]
    return pages, memory_id


def test_anonymous_visitors_are_sent_to_the_login_page_everywhere(client, every_page):
    pages, memory_id = every_page
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url
    response = client.post(
        "/admin/memories/memory/",
        {"action": "forget_memories", "apply": "yes", "_selected_action": [str(memory_id)], "index": "0"},
    )
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert not Revision.objects.filter(memory_id=memory_id, tombstone=True).exists()


def test_a_logged_in_user_who_is_not_staff_gets_nothing(client, every_page, django_user_model):
    pages, memory_id = every_page
    client.force_login(django_user_model.objects.create_user("visitor", password="visitor-password"))
    for url in pages:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), url
    client.post(
        "/admin/memories/memory/",
        {"action": "forget_memories", "_selected_action": [str(memory_id)], "index": "0", "apply": "yes"},
    )
    assert not Revision.objects.filter(memory_id=memory_id, tombstone=True).exists()


def test_staff_without_permissions_are_refused_each_model(client, every_page):
    pages, memory_id = every_page
    client.force_login(User.objects.create_user("intern", password="intern-password", is_staff=True))
    assert client.get("/admin/").status_code == 200
    for url in pages[1:]:
        assert client.get(url).status_code == 403, url
    assert (
        client.post(
            "/admin/memories/memory/",
            {"action": "forget_memories", "_selected_action": [str(memory_id)], "index": "0", "apply": "yes"},
        ).status_code
        == 403
    )
    assert not Revision.objects.filter(memory_id=memory_id, tombstone=True).exists()


def test_staff_who_may_only_view_memories_can_export_but_not_change_or_erase(client, remember):
    memory_id = remember("Viewable fact.").memory.id
    viewer = User.objects.create_user("viewer", password="viewer-password", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_memory"))
    client.force_login(viewer)
    page = client.get("/admin/memories/memory/").content.decode()
    assert 'value="export_json"' in page
    for name in ("forget_memories", "erase_memories", "move_namespace"):
        assert f'value="{name}"' not in page
    response = client.post(
        "/admin/memories/memory/", {"action": "erase_memories", "post": "yes", "_selected_action": [str(memory_id)]}
    )
    assert response.status_code == 302  # an unknown action: back to the list, nothing done
    assert not ErasureReceipt.objects.exists()
    page = client.get(f"/admin/memories/memory/{memory_id}/change/").content.decode()
    assert 'name="_save"' not in page and "<textarea" not in page
    assert "Viewable fact." in page[page.index('id="revision-history"') :]
