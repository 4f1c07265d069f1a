"""The knowledge layer in the admin: learn from a pasted paragraph, then ask the graph now and as of a time."""

import datetime as dt

import pytest
from django.contrib.auth.models import Permission

from memories.models import Memory

pytestmark = pytest.mark.django_db

PARAGRAPH = "The billing API runs on host-7. Host-7 is hosted on rack-9. Thanks, sounds good! Should we add Kafka?"


def test_a_person_learns_a_paragraph_and_asks_how_two_entities_connect(admin_client):
    page = admin_client.post(
        "/admin/memories/memory/learn/", {"namespace": "ops", "text": PARAGRAPH, "source": "standup"}
    )
    html = page.content.decode()
    assert page.status_code == 200 and "Stored (2)" in html and "Skipped (2)" in html
    facts = list(Memory.objects.filter(namespace="ops").order_by("pk"))
    assert [memory.kind for memory in facts] == ["fact", "fact"]
    first_known = facts[0].revisions.get().known_at

    paths = admin_client.get(
        "/admin/memories/memory/graph/", {"namespace": "ops", "source": "billing API", "target": "rack-9"}
    ).content.decode()
    assert "Paths from billing API to rack-9 (1)" in paths
    assert all(f"#{memory.pk}" in paths for memory in facts)
    # One learn call is one instant: just before it, nothing linked them.
    assert facts[1].revisions.get().known_at == first_known
    then = admin_client.get(
        "/admin/memories/memory/graph/",
        {
            "namespace": "ops",
            "source": "billing API",
            "target": "rack-9",
            "as_of": (first_known - dt.timedelta(microseconds=1)).isoformat(),
        },
    ).content.decode()
    assert "No path of at most four hops." in then

    relations = admin_client.get("/admin/memories/memory/graph/", {"namespace": "ops", "entity": "host-7"})
    assert "billing API runs on Host-7" in relations.content.decode()


def test_asking_needs_the_view_permission_and_learning_the_add_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_memory"))
    client.force_login(viewer)
    assert client.get("/admin/memories/memory/graph/", {"namespace": "ops", "entity": "x"}).status_code == 200
    assert client.post("/admin/memories/memory/learn/", {"namespace": "ops", "text": PARAGRAPH}).status_code == 403
    assert not Memory.objects.exists()


def test_a_bad_question_is_a_message_not_an_error_page(admin_client):
    page = admin_client.get("/admin/memories/memory/graph/", {"namespace": "ops", "entity": "x", "query": "y"})
    assert page.status_code == 200 and "ask one at a time" in page.content.decode()


def test_the_learn_page_lists_what_a_stated_change_ended(admin_client):
    admin_client.post("/admin/memories/memory/learn/", {"namespace": "ops", "text": "The ledger uses Oracle."})
    page = admin_client.post(
        "/admin/memories/memory/learn/",
        {"namespace": "ops", "text": "The ledger switched from Oracle to Postgres. Hugo no longer works on billing."},
    )
    html = page.content.decode()
    assert "Ended (1)" in html and "<code>(ledger | uses | Oracle)</code> holds until" in html
    assert "no current fact matches &#x27;Hugo works on" in html
