"""The memories admin through Django's test client: list, recall search, the change page, and every action."""

import datetime as dt
import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import selectors, services, staging
from memories.models import AuditEvent, ErasureReceipt, Memory, Revision, State
from memories.selectors import memory_recall
from memories.services import batches
from memories.validation import QUERY_MAX_CHARS, REASON_MAX, RECALL_LIMIT_MAX
from memoryproject.exceptions import InvalidInput

CHANGELIST = "/admin/memories/memory/"
ADMIN = {"actor": "user:admin", "interface": "admin"}


def change_url(memory_id: int) -> str:
    return f"/admin/memories/memory/{memory_id}/change/"


def row_ids(response) -> list[int]:
    return [memory.pk for memory in response.context["cl"].result_list]


def message_texts(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def form_data(memory: Memory, **changes) -> dict:
    """The change form as the page fills it in, with ``changes`` applied, submitted with Save."""
    page_form = memory_form(memory)
    data = {
        name: ("" if value is None else value) for name, value in page_form.initial.items() if name in page_form.fields
    }
    data.update(ttl_days="", _save="Save")
    data.update(changes)
    return data


def memory_form(memory: Memory):
    from memories.admin.forms import MemoryChangeForm

    return MemoryChangeForm(instance=memory)


def action(client, name: str, ids, *, follow=True, **extra):
    data = {"action": name, "_selected_action": [str(memory_id) for memory_id in ids], **extra}
    if not any(key in extra for key in ("apply", "post")):
        data["index"] = "0"
    return client.post(CHANGELIST, data, follow=follow)


@pytest.fixture
def three(remember):
    """Three memories in two namespaces, one with a tag and a title."""
    tea = remember("Alice drinks green tea every morning.", title="Tea", tags=["drinks"], kind="preference").memory
    deploy = remember("Deploys happen on Tuesdays after the standup.", kind="decision").memory
    other = remember("The office plant is a fern named Gerald.", namespace="home").memory
    return tea, deploy, other


# The list -----------------------------------------------------------------------------------------------------------


def test_changelist_shows_namespace_kind_tags_state_preview_and_revision_count(admin_client, three, actor):
    tea, _, _ = three
    services.memory_revise(memory_id=tea.id, content="Alice drinks green tea twice a day.", **actor)
    response = admin_client.get(CHANGELIST)
    assert response.status_code == 200
    page = response.content.decode()
    assert f'href="{change_url(tea.id)}"' in page
    row = next(memory for memory in response.context["cl"].result_list if memory.pk == tea.id)
    assert (row.namespace, row.kind, row.state, row.revision_count) == ("acme", "preference", "active", 2)
    assert row.last_change == Revision.objects.filter(memory_id=tea.id).latest("known_at").known_at
    assert "Alice drinks green tea twice a day." in page
    assert "<strong>Tea</strong>" in page
    assert "drinks" in page


def test_changelist_query_count_does_not_grow_with_the_rows(admin_client, remember, actor):
    def count_queries():
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(CHANGELIST).status_code == 200
        return len(queries)

    for number in range(3):
        memory_id = remember(f"Small fact number {number} about cabbages.", tags=["veg"]).memory.id
    services.memory_forget(memory_id=memory_id, **actor)  # a hidden row: its text takes one more query
    few = count_queries()
    for number in range(30):
        memory_id = remember(f"Another fact {number} about turnips.", tags=[f"t{number}", "veg"]).memory.id
        services.memory_revise(memory_id=memory_id, content=f"Revised fact {number} about turnips.", **actor)
        if number % 3 == 0:
            services.memory_forget(memory_id=memory_id, **actor)
    many = count_queries()
    assert many == few


def test_changelist_query_count_stays_bounded(admin_client, remember, django_assert_max_num_queries):
    for number in range(40):
        remember(f"Fact {number} about the harbour.", tags=["harbour"])
    # Session, user, the filtered count, the full count, the page, its tags, its visible revisions,
    # the newest text of its hidden rows, the lookups of the namespace and tag filters, and five for the
    # confidence column (the visible rows' records, attribute rows and tags, predicate settings, provenance).
    with django_assert_max_num_queries(15):
        assert admin_client.get(CHANGELIST).status_code == 200


def test_the_changelist_totals_come_from_a_selector_that_a_tag_join_cannot_multiply(
    remember, actor, django_assert_num_queries
):
    tea = remember("Tea is in the left cupboard.", tags=["kitchen", "home"]).memory
    services.memory_revise(memory_id=tea.id, content="Tea is in the right cupboard.", **actor)
    remember("Coffee is on the shelf.", tags=["kitchen"])
    with django_assert_num_queries(2):  # the annotated page, then its tags
        rows = list(
            selectors.memories_with_revision_totals(
                Memory.objects.filter(tags__slug__in=["kitchen", "home"]).order_by("pk")
            )
        )
    first = rows[0]
    assert (first.pk, first.revision_count) == (tea.id, 2)
    assert first.last_change == Revision.objects.filter(memory_id=tea.id).latest("known_at").known_at
    assert [tag.name for tag in first.tags.all()] == ["home", "kitchen"]


def test_filters_by_namespace_kind_tag_and_state(admin_client, three, actor):
    tea, deploy, other = three
    assert row_ids(admin_client.get(CHANGELIST, {"namespace": "home"})) == [other.id]
    assert row_ids(admin_client.get(CHANGELIST, {"kind__exact": "decision"})) == [deploy.id]
    tag_id = Memory.objects.get(pk=tea.id).tags.get().pk
    assert row_ids(admin_client.get(CHANGELIST, {"tags__id__exact": tag_id})) == [tea.id]
    services.memory_forget(memory_id=deploy.id, **actor)
    assert row_ids(admin_client.get(CHANGELIST, {"state": "forgotten"})) == [deploy.id]
    assert row_ids(admin_client.get(CHANGELIST, {"state": "active"})) == [other.id, tea.id]


def test_one_state_filter_offers_every_state_the_column_shows_stale_included(admin_client, remember, actor, settings):
    settings.MEMORY_STALE_AFTER_DAYS = {"note": 0}  # a note learned before now reads stale; other kinds never
    stale = remember("The printer toner is ordered monthly.", kind="note").memory
    active = remember("The printer is on the second floor.", kind="fact").memory
    candidate = remember("The printer needs a badge.", kind="fact", state="candidate").memory
    archived = remember("The old printer was in the basement.", kind="fact").memory
    services.memory_archive(memory_id=archived.id, **actor)
    forgotten = remember("The printer jams on Mondays.", kind="fact").memory
    services.memory_forget(memory_id=forgotten.id, **actor)
    hidden = remember("The printer held a lease in 2020.", kind="fact", valid_from="2020-01-01", valid_to="2021-01-01")

    response = admin_client.get(CHANGELIST)
    specs = [spec for spec in response.context["cl"].filter_specs if "state" in str(spec.title)]
    assert [str(spec.title) for spec in specs] == ["state now"]
    assert [choice["display"] for choice in specs[0].choices(response.context["cl"])][1:] == [
        "candidate",
        "active",
        "stale",
        "archived",
        "forgotten",
    ]
    expected = {
        "candidate": [candidate.id],
        "active": [hidden.memory.id, active.id],  # hidden now: its age says nothing, as in the column
        "stale": [stale.id],
        "archived": [archived.id],
        "forgotten": [forgotten.id],
    }
    for state, ids in expected.items():
        response = admin_client.get(CHANGELIST, {"state": state})
        assert row_ids(response) == ids, state
        # Each row the filter keeps reads that state in the list's state column.
        assert {
            response.context["cl"].model_admin.state_value(memory) for memory in response.context["cl"].result_list
        } == {state}
    assert admin_client.get(CHANGELIST, {"state": "sleepy"})["Location"].endswith("?e=1")


def test_visible_now_and_ttl_filters(admin_client, remember):
    lasting = remember("A fact that lasts.").memory
    expiring = remember("A fact that expires next week.", ttl_days=7).memory
    past = remember("A fact that held only in 2020.", valid_from="2020-01-01", valid_to="2021-01-01").memory
    assert row_ids(admin_client.get(CHANGELIST, {"ttl": "yes"})) == [expiring.id]
    assert row_ids(admin_client.get(CHANGELIST, {"ttl": "no"})) == [past.id, lasting.id]
    assert row_ids(admin_client.get(CHANGELIST, {"visible": "no"})) == [past.id]
    assert row_ids(admin_client.get(CHANGELIST, {"visible": "yes"})) == [expiring.id, lasting.id]
    assert "(hidden now)" in admin_client.get(CHANGELIST, {"visible": "no"}).content.decode()


# Search -------------------------------------------------------------------------------------------------------------


@pytest.fixture
def searchable(remember):
    texts = [
        "The staging database runs PostgreSQL 16 on port 5433.",
        "Production database backups run nightly at 02:00 UTC.",
        "Alice prefers dark mode in every editor.",
        "The database migration for invoices is blocked on review.",
        "Lunch on Fridays is pizza.",
    ]
    return [remember(text).memory.id for text in texts]


def test_search_box_uses_recall_and_keeps_its_order(admin_client, searchable):
    expected = [hit.memory.id for hit in memory_recall(query="database backups", limit=RECALL_LIMIT_MAX).hits]
    assert len(expected) >= 2
    response = admin_client.get(CHANGELIST, {"q": "database backups"})
    assert response.status_code == 200
    assert 'id="searchbar"' in response.content.decode()
    assert row_ids(response) == expected
    # The best match is an older memory: the list's default newest-first order would put it lower.
    assert expected[0] == searchable[1]
    assert expected != sorted(expected, reverse=True)


def test_a_searched_list_takes_as_many_queries_for_many_hits_as_for_few(admin_client, remember):
    def count_queries():
        # Once first: the packed postings a process has read are not read again (search.postings).
        admin_client.get(CHANGELIST, {"q": "harbour crane"})
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(CHANGELIST, {"q": "harbour crane"})
        return len(queries), len(row_ids(response))

    for number in range(5):
        remember(f"Harbour crane {number} was inspected.", tags=[f"crane-{number}"])
    few, few_rows = count_queries()
    for number in range(5, 60):
        remember(f"Harbour crane {number} was inspected.", tags=[f"crane-{number}"])
    many, many_rows = count_queries()
    assert (few_rows, many_rows) == (5, 50)  # a page of the 60 hits
    assert many == few


def test_search_is_not_a_substring_match(admin_client, searchable, remember):
    # "atab" is inside "database", and icontains would find it; recall looks for words and meanings.
    response = admin_client.get(CHANGELIST, {"q": "atab"})
    hits = [hit.memory.id for hit in memory_recall(query="atab", limit=RECALL_LIMIT_MAX).hits]
    assert row_ids(response) == hits


def test_search_with_a_sorted_column_keeps_the_matches_but_sorts_by_the_column(admin_client, searchable):
    expected = {hit.memory.id for hit in memory_recall(query="database", limit=RECALL_LIMIT_MAX).hits}
    response = admin_client.get(CHANGELIST, {"q": "database", "o": "1"})  # column 1: id, ascending
    assert row_ids(response) == sorted(expected)


def test_search_within_a_namespace_filter(admin_client, remember):
    remember("The kettle is descaled monthly.", namespace="home")
    work = remember("The kettle in the office is broken.", namespace="work").memory.id
    response = admin_client.get(CHANGELIST, {"q": "kettle", "namespace": "work"})
    assert row_ids(response) == [work]


@pytest.mark.parametrize("query", ['"', "AND", "NEAR(", "*", "a OR", "'; DROP TABLE memories_memory; --", "\x00"])
def test_hostile_search_queries_answer_a_page(admin_client, searchable, query):
    response = admin_client.get(CHANGELIST, {"q": query})
    assert response.status_code == 200


def test_a_search_the_engine_refuses_shows_a_message_and_no_rows(admin_client, searchable):
    response = admin_client.get(CHANGELIST, {"q": "x" * (QUERY_MAX_CHARS + 1)})
    assert response.status_code == 200
    assert row_ids(response) == []
    assert any(text.startswith("Search failed: query:") for text in message_texts(response))


# The change page ----------------------------------------------------------------------------------------------------


def test_change_page_shows_the_editable_text_and_the_history_newest_first(admin_client, remember, actor):
    memory_id = remember("First <b>version</b> of the note.", title="Note", source="chat 12").memory.id
    services.memory_revise(memory_id=memory_id, content="Second version of the note.", **actor)
    services.memory_forget(memory_id=memory_id, reason="outdated", **actor)
    services.memory_restore(memory_id=memory_id, **actor)
    response = admin_client.get(change_url(memory_id))
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r'<textarea name="content"[^>]*>\s*Second version of the note.</textarea>', page)
    history = page[page.index('id="revision-history"') :]
    revisions = list(Revision.objects.filter(memory_id=memory_id).order_by("-known_at", "-id"))
    positions = [history.index(f'id="revision-{revision.pk}"') for revision in revisions]
    assert positions == sorted(positions)
    assert "Tombstone" in history and "reason outdated" in history
    # Each text revision shows its full content, escaped.
    assert "First &lt;b&gt;version&lt;/b&gt; of the note." in history
    assert history.count("Second version of the note.") >= 2
    assert "author tester (cli)" in history and "source chat 12" in history
    # The diff against the previous revision marks what went and what came.
    assert "<del>First &lt;b&gt;version&lt;/b&gt;</del><ins>Second version</ins>" in history
    assert "<b>version</b>" not in page


def test_the_change_page_links_to_the_memory_timeline_for_a_user_who_may_open_it(client, django_user_model, remember):
    memory = remember("Deploys happen on Tuesdays.").memory
    timeline = f'href="/memories/{memory.id}/timeline/"'
    editor = django_user_model.objects.create_user("editor", password="pw", is_staff=True)
    editor.user_permissions.add(Permission.objects.get(codename="change_memory"))
    client.force_login(editor)
    # The admin lets a change permission view the page; the dashboard's timeline needs view_memory itself.
    page = client.get(change_url(memory.id))
    assert page.status_code == 200 and timeline not in page.content.decode()
    assert client.get(f"/memories/{memory.id}/timeline/").status_code == 403

    editor.user_permissions.add(Permission.objects.get(codename="view_memory"))
    page = client.get(change_url(memory.id)).content.decode()
    assert timeline in page
    assert client.get(f"/memories/{memory.id}/timeline/").status_code == 200


def test_saving_the_change_page_appends_a_revision_by_the_admin(admin_client, remember):
    memory = Memory.objects.get(pk=remember("The build takes ten minutes.").memory.id)
    response = admin_client.post(
        change_url(memory.pk), form_data(memory, content="The build takes four minutes.", title="Build time")
    )
    assert response.status_code == 302
    newest = Revision.objects.filter(memory=memory).latest_known().first()
    assert (newest.content, newest.title, newest.author, newest.interface) == (
        "The build takes four minutes.",
        "Build time",
        "user:admin",
        "admin",
    )
    assert Revision.objects.filter(memory=memory).count() == 2
    assert AuditEvent.objects.filter(memory_id=memory.pk, action="revise", actor="user:admin").exists()
    page = admin_client.get(change_url(memory.pk)).content.decode()
    history = page[page.index('id="revision-history"') :]
    assert history.index("The build takes four minutes.") < history.index("The build takes ten minutes.")


def test_saving_an_untouched_form_writes_nothing(admin_client, remember):
    memory = Memory.objects.get(pk=remember("Line one.\nLine two.", tags=["a"]).memory.id)
    data = form_data(memory)
    data["content"] = data["content"].replace("\n", "\r\n")  # as a browser sends a textarea
    assert admin_client.post(change_url(memory.pk), data).status_code == 302
    assert Revision.objects.filter(memory=memory).count() == 1
    assert not AuditEvent.objects.filter(memory_id=memory.pk, actor="user:admin").exists()


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"content": "   "}, "content", "This field is required."),
        ({"valid_from": "yesterday"}, "valid_from", "valid_from"),
        ({"valid_from": "2030-01-01", "valid_to": "2020-01-01"}, "valid_to", "valid_to must be later than valid_from"),
        ({"ttl_days": "-3"}, "ttl_days", "greater than or equal to 0"),
        ({"tags": "bad tag!"}, "tags", "is not a valid tag"),
        ({"title": "x" * 301}, "title", "over the limit of 300"),
        ({"content": "x" * 40_000}, "content", "over the limit"),
        ({"kind": "opinion"}, "kind", "Select a valid choice"),
    ],
)
def test_bad_input_on_the_change_page_is_a_form_error_and_writes_nothing(
    admin_client, remember, changes, field, message
):
    memory = Memory.objects.get(pk=remember("The build takes ten minutes.", tags=["ci"]).memory.id)
    response = admin_client.post(change_url(memory.pk), form_data(memory, **changes))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert Revision.objects.filter(memory=memory).count() == 1
    assert list(memory.tags.values_list("name", flat=True)) == ["ci"]


def test_editing_into_another_memorys_text_names_the_twin(admin_client, remember):
    twin = remember("The VPN needs a hardware key.").memory
    memory = Memory.objects.get(pk=remember("The VPN needs a password.").memory.id)
    response = admin_client.post(
        change_url(memory.pk), form_data(memory, content="The VPN needs a hardware key.", tags="vpn")
    )
    assert response.status_code == 200
    error = " ".join(response.context["adminform"].form.errors["content"])
    assert f"Memory {twin.id} (acme/{twin.key}) already holds exactly this content" in error
    assert Revision.objects.filter(memory=memory).count() == 1
    assert not memory.tags.exists()  # the retag in the same save rolled back too


def test_editing_a_forgotten_memory_says_to_restore_it(admin_client, remember, actor):
    memory_id = remember("An old fact.").memory.id
    services.memory_forget(memory_id=memory_id, **actor)
    memory = Memory.objects.get(pk=memory_id)
    response = admin_client.post(change_url(memory_id), form_data(memory, content="A new fact."))
    assert response.status_code == 200
    assert "is forgotten. Restore it first" in str(response.context["adminform"].form.non_field_errors())
    assert Revision.objects.filter(memory_id=memory_id).count() == 2


def test_the_change_page_edits_tags_ttl_kind_and_a_bounded_correction(admin_client, remember):
    memory = Memory.objects.get(pk=remember("Rent is 900 a month.", tags=["home", "money"]).memory.id)
    before = timezone.now()
    response = admin_client.post(
        change_url(memory.pk), form_data(memory, tags="money, Bills", ttl_days="3", kind="fact")
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    assert sorted(memory.tags.values_list("name", flat=True)) == ["Bills", "money"]
    assert memory.kind == "fact"
    newest = Revision.objects.filter(memory=memory).latest_known().first()
    assert before + dt.timedelta(days=3) <= newest.expires_at <= timezone.now() + dt.timedelta(days=3)

    response = admin_client.post(
        change_url(memory.pk),
        form_data(memory, content="Rent was 850 a month in 2024.", valid_from="2024-01-01", valid_to="2025-01-01"),
    )
    assert response.status_code == 302
    correction = Revision.objects.filter(memory=memory).latest_known().first()
    assert (correction.valid_from, correction.valid_to) == (
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
        dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc),
    )
    # A bounded correction overlays only its interval: today the page still shows 900.
    page_form = admin_client.get(change_url(memory.pk)).context["adminform"].form
    assert page_form["content"].value() == "Rent is 900 a month."


def test_the_ttl_can_be_removed_with_zero(admin_client, remember):
    memory = Memory.objects.get(pk=remember("Expiring note.", ttl_days=5).memory.id)
    assert admin_client.post(change_url(memory.pk), form_data(memory, ttl_days="0")).status_code == 302
    assert Revision.objects.filter(memory=memory).latest_known().first().expires_at is None


# Adding -------------------------------------------------------------------------------------------------------------


def test_adding_a_memory_goes_through_remember(admin_client):
    response = admin_client.post(
        "/admin/memories/memory/add/",
        {
            "namespace": "acme",
            "key": "",
            "kind": "fact",
            "title": "",
            "content": "The lobby door code is 4411.",
            "tags": "doors, codes",
            "source": "",
            "ttl_days": "",
            "valid_from": "",
            "valid_to": "",
            "_save": "Save",
        },
    )
    assert response.status_code == 302
    memory = Memory.objects.get()
    revision = memory.revisions.get()
    assert (memory.namespace, memory.kind, revision.content, revision.author, revision.interface) == (
        "acme",
        "fact",
        "The lobby door code is 4411.",
        "user:admin",
        "admin",
    )
    assert sorted(memory.tags.values_list("name", flat=True)) == ["codes", "doors"]


def test_adding_text_already_stored_points_at_the_existing_memory(admin_client, remember):
    existing = remember("The lobby door code is 4411.").memory.id
    response = admin_client.post(
        "/admin/memories/memory/add/",
        {
            "namespace": "acme",
            "kind": "note",
            "content": "The lobby door code is 4411.",
            "_continue": "1",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert Memory.objects.count() == 1
    assert response.redirect_chain[-1][0] == change_url(existing)
    assert any("already holds this text" in text for text in message_texts(response))


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"namespace": "Not A Slug"}, "namespace"),
        ({"content": ""}, "content"),
        ({"valid_to": "2020-13-45"}, "valid_to"),
    ],
)
def test_adding_bad_input_is_a_form_error(admin_client, fields, field):
    data = {"namespace": "acme", "kind": "note", "content": "Some text.", "_save": "Save", **fields}
    response = admin_client.post("/admin/memories/memory/add/", data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors[field]
    assert not Memory.objects.exists()


# Actions ------------------------------------------------------------------------------------------------------------


def test_the_action_menu_offers_the_curation_actions_and_not_delete(admin_client, three):
    page = admin_client.get(CHANGELIST).content.decode()
    select = page[page.index('<select name="action"') :]
    select = select[: select.index("</select>")]
    for name in (
        "forget_memories",
        "restore_memories",
        "add_tag",
        "remove_tag",
        "move_namespace",
        "export_json",
        "erase_memories",
    ):
        assert f'value="{name}"' in select
    assert "delete_selected" not in select


def test_forget_and_restore_actions_show_the_state_in_the_list(admin_client, three):
    tea, deploy, _ = three
    response = action(admin_client, "forget_memories", [tea.id, deploy.id], apply="yes")
    assert "Forgot 2 memories." in message_texts(response)
    assert {Memory.objects.get(pk=pk).state for pk in (tea.id, deploy.id)} == {State.FORGOTTEN}
    assert Revision.objects.filter(memory_id=tea.id, tombstone=True, author="user:admin").exists()
    page = response.content.decode()
    assert '<td class="field-state_value">forgotten</td>' in page

    response = action(admin_client, "restore_memories", [tea.id])
    assert "Restored 1 memory." in message_texts(response)
    assert Memory.objects.get(pk=tea.id).state == State.ACTIVE
    row_states = {memory.pk: memory.state for memory in response.context["cl"].result_list}
    assert (row_states[tea.id], row_states[deploy.id]) == ("active", "forgotten")


def test_forget_asks_for_a_reason_then_passes_it_to_the_service(admin_client, three):
    tea, deploy, _ = three
    response = action(admin_client, "forget_memories", [tea.id, deploy.id])
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="reason"' in page and "Forget memories" in page
    assert {Memory.objects.get(pk=pk).state for pk in (tea.id, deploy.id)} == {State.ACTIVE}  # nothing yet

    response = action(
        admin_client, "forget_memories", [tea.id, deploy.id], apply="yes", reason="Superseded by the new handbook"
    )
    assert "Forgot 2 memories." in message_texts(response)
    tombstones = Revision.objects.filter(memory_id__in=[tea.id, deploy.id], tombstone=True)
    assert [(t.reason, t.author, t.interface) for t in tombstones] == [
        ("Superseded by the new handbook", "user:admin", "admin")
    ] * 2


def test_a_forget_reason_over_the_bound_shows_the_form_again_and_forgets_nothing(admin_client, three):
    tea, _, _ = three
    response = action(admin_client, "forget_memories", [tea.id], apply="yes", reason="x" * (REASON_MAX + 1))
    assert response.status_code == 200
    assert response.context["form"].errors["reason"]
    assert Memory.objects.get(pk=tea.id).state == State.ACTIVE


def test_forgetting_a_memory_that_is_not_visible_changes_nothing_in_the_batch(admin_client, remember):
    visible = remember("Visible fact.").memory.id
    past = remember("Past fact.", valid_from="2020-01-01", valid_to="2021-01-01").memory.id
    response = action(admin_client, "forget_memories", [visible, past], apply="yes", reason="stale")
    assert any(
        text.startswith(f"Nothing was changed: Memory {past} is not visible now") for text in message_texts(response)
    )
    assert Memory.objects.get(pk=visible).state == State.ACTIVE


def test_add_tag_asks_for_the_tag_then_applies_it(admin_client, three):
    tea, deploy, _ = three
    page = action(admin_client, "add_tag", [tea.id, deploy.id])
    assert page.status_code == 200
    assert 'name="tags"' in page.content.decode() and f"acme/{deploy.key}" in page.content.decode()
    assert not Memory.objects.get(pk=deploy.id).tags.exists()

    response = action(admin_client, "add_tag", [tea.id, deploy.id], apply="yes", tags="work, Q3")
    assert "Tagged 2 memories." in message_texts(response)
    assert sorted(Memory.objects.get(pk=deploy.id).tags.values_list("name", flat=True)) == ["Q3", "work"]
    assert list(Memory.objects.get(pk=tea.id).tags.values_list("name", flat=True)) == ["drinks", "Q3", "work"]

    response = action(admin_client, "remove_tag", [tea.id, deploy.id], apply="yes", tags="q3")
    assert "Untagged 2 memories." in message_texts(response)
    assert list(Memory.objects.get(pk=deploy.id).tags.values_list("name", flat=True)) == ["work"]


def test_a_bad_tag_shows_the_form_again_with_the_error(admin_client, three):
    tea, _, _ = three
    response = action(admin_client, "add_tag", [tea.id], apply="yes", tags="no good!")
    assert response.status_code == 200
    assert any("is not a valid tag" in text for text in message_texts(response))
    assert list(Memory.objects.get(pk=tea.id).tags.values_list("name", flat=True)) == ["drinks"]


def test_move_namespace_asks_for_the_namespace_then_moves_with_history(admin_client, three, actor):
    tea, deploy, _ = three
    services.memory_revise(memory_id=tea.id, content="Alice drinks green tea twice a day.", **actor)
    page = action(admin_client, "move_namespace", [tea.id, deploy.id])
    assert page.status_code == 200 and 'name="namespace"' in page.content.decode()

    response = action(admin_client, "move_namespace", [tea.id, deploy.id], apply="yes", namespace="archive")
    assert any(text.startswith("Moved to 'archive': 2 memories.") for text in message_texts(response))
    assert set(Memory.objects.filter(namespace="archive").values_list("pk", flat=True)) == {tea.id, deploy.id}
    assert Revision.objects.filter(memory_id=tea.id).count() == 2
    assert AuditEvent.objects.filter(
        action="move", memory_id=tea.id, detail={"from_namespace": "acme", "to_namespace": "archive"}
    ).exists()
    hits = memory_recall(query="green tea", namespace="archive").hits
    assert [hit.memory.id for hit in hits][:1] == [tea.id]
    assert not memory_recall(query="green tea", namespace="acme").hits


def test_a_move_the_target_refuses_moves_nothing(admin_client, remember):
    mover = remember("The fridge is empty.", key="fridge").memory.id
    other = remember("The car needs petrol.").memory.id
    remember("Something else entirely.", key="fridge", namespace="home")
    response = action(admin_client, "move_namespace", [mover, other], apply="yes", namespace="home")
    assert any("already has the key 'fridge'" in text for text in message_texts(response))
    assert set(Memory.objects.filter(pk__in=[mover, other]).values_list("namespace", flat=True)) == {"acme"}

    remember("The car needs petrol.", namespace="home")
    response = action(admin_client, "move_namespace", [other], apply="yes", namespace="home")
    assert any("already holds exactly this content there" in text for text in message_texts(response))

    response = action(admin_client, "move_namespace", [other], apply="yes", namespace="Bad Name")
    assert any("is not a valid namespace" in text for text in message_texts(response))
    assert Memory.objects.get(pk=other).namespace == "acme"


def test_a_move_into_a_key_an_unfinished_import_holds_moves_nothing_and_says_why(admin_client, remember):
    batch = batches.batch_begin(trusted=False, actor="importer", interface="cli")
    with staging.writing(batch.pk):
        remember("Theirs.", key="fridge", namespace="home")
    mover = remember("The fridge is empty.", key="fridge").memory.id
    other = remember("The car needs petrol.").memory.id

    response = action(admin_client, "move_namespace", [mover, other], apply="yes", namespace="home")

    assert response.status_code == 200
    assert any(
        "its key 'fridge' there belongs to an import that has not finished" in text for text in message_texts(response)
    )
    assert set(Memory.objects.filter(pk__in=[mover, other]).values_list("namespace", flat=True)) == {"acme"}


def test_export_json_downloads_the_selected_memories_in_the_import_format(admin_client, three, actor):
    tea, deploy, other = three
    services.memory_forget(memory_id=deploy.id, **actor)
    response = action(admin_client, "export_json", [tea.id, deploy.id], follow=False)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="memories-')
    document = json.loads(b"".join(response.streaming_content))
    assert document["format"] == "memory-export"
    assert [(entry["namespace"], entry["key"], entry["state"]) for entry in document["memories"]] == [
        ("acme", tea.key, "active"),
        ("acme", deploy.key, "forgotten"),
    ]
    assert document["memories"][0]["tags"] == ["drinks"]
    assert [revision["tombstone"] for revision in document["memories"][1]["revisions"]] == [False, True]
    report = services.memories_import(document=document, trusted=True, dry_run=True, **actor)
    assert report.unchanged == 2


def test_erase_confirmation_lists_what_goes_and_confirming_leaves_receipts(admin_client, three, actor):
    tea, deploy, other = three
    services.memory_revise(memory_id=tea.id, content="Alice drinks green tea twice a day.", **actor)
    page = action(admin_client, "erase_memories", [tea.id, deploy.id])
    assert page.status_code == 200
    listing = page.content.decode()
    table = listing[listing.index('id="erase-list"') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3  # header and the two memories
    for memory, revisions in ((tea, 2), (deploy, 1)):
        assert f"<td>{memory.namespace}</td>" in table and f"<td>{memory.key}</td>" in table
        assert re.search(rf'{memory.key}</td>.*?<td class="revision-count">{revisions}</td>', table, re.S)
    assert Memory.objects.filter(pk__in=[tea.id, deploy.id]).count() == 2

    response = action(admin_client, "erase_memories", [tea.id, deploy.id], post="yes", reason="asked to")
    receipts = list(ErasureReceipt.objects.order_by("pk"))
    assert [(receipt.memory_id, receipt.actor, receipt.reason, len(receipt.revision_ids)) for receipt in receipts] == [
        (tea.id, "user:admin", "asked to", 2),
        (deploy.id, "user:admin", "asked to", 1),
    ]
    text = " ".join(message_texts(response))
    assert f"receipt {receipts[0].pk} (memory {tea.id} in acme)" in text
    assert f"receipt {receipts[1].pk} (memory {deploy.id} in acme)" in text
    assert list(Memory.objects.values_list("pk", flat=True)) == [other.id]
    assert not Revision.objects.filter(memory_id__in=[tea.id, deploy.id]).exists()


def test_delete_is_not_offered_anywhere(admin_client, three):
    tea, _, _ = three
    assert admin_client.get(f"/admin/memories/memory/{tea.id}/delete/").status_code == 403
    assert admin_client.post(f"/admin/memories/memory/{tea.id}/delete/", {"post": "yes"}).status_code == 403
    assert Memory.objects.filter(pk=tea.id).exists()


def test_delete_model_and_queryset_go_through_erase(rf, admin_user, three):
    from django.contrib.admin.sites import site

    tea, deploy, other = three
    request = rf.post("/")
    request.user = admin_user
    memory_admin = site._registry[Memory]
    memory_admin.delete_model(request, Memory.objects.get(pk=tea.id))
    memory_admin.delete_queryset(request, Memory.objects.filter(pk__in=[deploy.id]))
    assert sorted(ErasureReceipt.objects.values_list("memory_id", flat=True)) == sorted([tea.id, deploy.id])
    assert list(Memory.objects.values_list("pk", flat=True)) == [other.id]


# The curation services the actions call -----------------------------------------------------------------------------


def test_moving_to_the_same_namespace_changes_nothing(remember):
    memory_id = remember("Stays put.").memory.id
    result = services.memory_move(memory_id=memory_id, namespace="acme", **ADMIN)
    assert not result.changed
    assert not AuditEvent.objects.filter(action="move").exists()


def test_a_forgotten_memory_moves_and_stays_forgotten_with_its_history(remember, actor):
    memory_id = remember("Forgotten but movable.").memory.id
    services.memory_forget(memory_id=memory_id, **actor)
    result = services.memory_move(memory_id=memory_id, namespace="attic", **ADMIN)
    assert result.changed and result.memory.namespace == "attic" and result.memory.state == "forgotten"
    services.memory_restore(memory_id=memory_id, **actor)
    assert [hit.memory.id for hit in memory_recall(query="movable", namespace="attic").hits] == [memory_id]


@pytest.mark.parametrize("memory_ids", ["1,2", [0], [True], ["3"], 7])
def test_exporting_a_selection_refuses_anything_but_ids(db, memory_ids):
    with pytest.raises(InvalidInput, match="memory_ids"):
        services.memories_export(memory_ids=memory_ids)


# Names --------------------------------------------------------------------------------------------------------------


def english_plural(name: str) -> str:
    if re.search(r"[^aeiou]y$", name):
        return name[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", name):
        return name + "es"
    return name + "s"


def test_every_model_of_the_project_is_named_in_the_plural_as_english_does():
    from django.apps import apps
    from django.conf import settings

    models = [
        model
        for config in apps.get_app_configs()
        if config.path.startswith(str(settings.BASE_DIR))
        for model in config.get_models()
    ]
    assert {model._meta.model_name for model in models} >= {"memory", "injectedmemory", "importbatch"}
    for model in models:
        assert str(model._meta.verbose_name_plural) == english_plural(str(model._meta.verbose_name)), model


def test_the_admin_sidebar_says_injected_memories(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "Injected memories" in page and "memorys" not in page
