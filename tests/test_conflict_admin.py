"""The conflict review queue and the predicate settings in the admin, through Django's test client."""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages

from knowledge.models import PredicateSetting
from memories import selectors
from memories.models import AuditEvent, Revision

QUEUE = "/admin/memories/memory/conflicts/"


def message_texts(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def pair(remember):
    first = remember(
        "Payments API runs on host-7.", subject="Payments API", predicate="runs on", object="host-7", source="wiki"
    ).memory
    second = remember(
        "Payments API runs on host-9.",
        subject="payments api",
        predicate="runs on",
        object="host-9",
        source="deploy log",
    ).memory
    return first, second


def test_the_admin_index_links_to_the_queue_which_shows_both_sides_with_their_provenance(admin_client, pair):
    first, second = pair

    assert QUEUE in admin_client.get("/admin/").content.decode()
    page = admin_client.get(QUEUE)

    assert page.status_code == 200
    html = page.content.decode()
    assert f'id="conflict-{first.id}-{second.id}"' in html
    for text in (
        "Payments API runs on host-7.",
        "Payments API runs on host-9.",
        "source wiki",
        "source deploy log",
        "author tester (cli)",
        "Keep left",
        "Keep right",
        "Split",
        "Merge",
    ):
        assert text in html, text
    assert page.context["found"].total == 1


def test_keep_left_in_one_click_forgets_the_right_and_is_audited(admin_client, pair):
    first, second = pair

    response = admin_client.post(
        QUEUE,
        {"conflict": f"{first.id}-{second.id}", "resolution": "keep", "keep": first.id, "reason": "checked the host"},
        follow=True,
    )

    assert any("Resolved conflict" in text for text in message_texts(response))
    assert response.context["found"].total == 0 and "No open conflicts." in response.content.decode()
    assert Revision.objects.filter(memory_id=second.id, tombstone=True, reason="checked the host").exists()
    event = AuditEvent.objects.get(action="resolve_conflict", memory_id=second.id)
    assert (event.actor, event.interface) == ("user:admin", "admin")


def test_split_and_merge_from_the_queue(admin_client, remember, pair):
    first, second = pair
    third = remember("Billing is owned by alice.", subject="Billing", predicate="owned by", object="alice").memory
    fourth = remember("Billing is owned by bob.", subject="Billing", predicate="owned by", object="bob").memory

    admin_client.post(QUEUE, {"conflict": f"{first.id}-{second.id}", "resolution": "split", "boundary": "2099-01-01"})
    admin_client.post(
        QUEUE,
        {
            "conflict": f"{third.id}-{fourth.id}",
            "resolution": "merge",
            "keep": fourth.id,
            "content": "Billing moved from alice to bob.",
        },
    )

    assert selectors.memory_get(memory_id=second.id, valid_at="2099-01-01").object == "host-9"
    assert selectors.memory_get(memory_id=first.id).object == "host-7"
    assert selectors.memory_get(memory_id=fourth.id).content == "Billing moved from alice to bob."
    assert admin_client.get(QUEUE).context["found"].total == 0


def test_a_stale_or_bad_resolution_says_why_and_changes_nothing(admin_client, pair):
    first, second = pair
    admin_client.post(QUEUE, {"conflict": f"{first.id}-{second.id}", "resolution": "keep", "keep": first.id})
    count = Revision.objects.count()

    stale = admin_client.post(
        QUEUE, {"conflict": f"{first.id}-{second.id}", "resolution": "keep", "keep": second.id}, follow=True
    )
    bad = admin_client.post(
        QUEUE, {"conflict": f"{first.id}-{second.id}", "resolution": "split", "boundary": "someday"}, follow=True
    )

    assert any("no longer exists" in text for text in message_texts(stale))
    assert any("boundary" in text and "Nothing was changed" in text for text in message_texts(bad))
    assert Revision.objects.count() == count


def test_a_viewer_sees_the_queue_without_buttons_and_may_not_resolve(client, django_user_model, pair):
    first, second = pair
    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_memory"))
    client.force_login(viewer)

    page = client.get(QUEUE)
    refused = client.post(QUEUE, {"conflict": f"{first.id}-{second.id}", "resolution": "keep", "keep": first.id})

    assert page.status_code == 200 and "Keep left" not in page.content.decode()
    assert refused.status_code == 403
    assert not Revision.objects.filter(tombstone=True).exists()


def test_the_change_page_shows_the_memorys_conflicts(admin_client, pair):
    first, second = pair

    html = admin_client.get(f"/admin/memories/memory/{first.id}/change/").content.decode()

    assert 'id="memory-conflicts"' in html and f"Memory {second.id}</a> says" in html
    assert "source deploy log" in html and "source wiki" in html


def test_a_predicate_setting_is_kept_in_normal_form_and_changes_the_queue(admin_client, pair):
    response = admin_client.post(
        "/admin/knowledge/predicatesetting/add/",
        {"namespace": "acme", "predicate": "  Runs_On ", "single_valued": ""},
        follow=True,
    )

    assert response.status_code == 200
    assert list(PredicateSetting.objects.values_list("namespace", "predicate", "single_valued")) == [
        ("acme", "runs on", False)
    ]
    assert admin_client.get(QUEUE).context["found"].total == 0
    refused = admin_client.post(
        "/admin/knowledge/predicatesetting/add/", {"namespace": "Acme", "predicate": "runs on", "single_valued": "on"}
    )
    assert refused.status_code == 200 and "not a valid namespace" in refused.content.decode()
