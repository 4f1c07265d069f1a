"""Curating memories in the Django admin with headless Chromium against a real server.

Find a memory with the search box (recall), edit it and see the new revision in the
history, forget and restore it from the changelist, and time-travel on the dashboard to
before the edit. Each test writes its own memory through the CLI, in its own namespace.
"""

import re

import pytest

from tests.browser import iso, now, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]

CHANGELIST = "/admin/memories/memory/"


def change_url(memory_id: int) -> str:
    return f"{CHANGELIST}{memory_id}/change/"


def row_of(page, memory_id: int):
    """The changelist row whose link opens this memory (the admin may append ?_changelist_filters=...)."""
    return page.locator("#result_list tbody tr").filter(has=page.locator(f'a[href^="{change_url(memory_id)}"]'))


def run_action(page, memory_id: int, action: str) -> None:
    page.check(f'input[name="_selected_action"][value="{memory_id}"]')
    page.select_option('select[name="action"]', action)
    page.click('button[name="index"]')
    page.wait_for_load_state()


def test_the_admin_search_box_finds_a_memory_by_recall(page, site, screenshot):
    memory = site.remember(
        "Forklift batteries are swapped at the north charging bay.", key="forklift-bay", namespace="admin-search"
    )
    site.remember("The cafeteria closes at three on Fridays.", key="cafeteria", namespace="admin-search")
    page.goto(f"{site.base}{CHANGELIST}")
    # Words of the memory in another form and order: recall, not a substring filter, finds it.
    page.fill("#searchbar", "battery swap charging")
    page.press("#searchbar", "Enter")
    page.wait_for_url(re.compile(r".*\?q=battery.*"))
    assert row_of(page, memory["id"]).count() == 1
    assert "cafeteria" not in page.locator("#result_list").inner_text()
    screenshot(page, "admin-changelist-search")
    row_of(page, memory["id"]).locator(f'a[href^="{change_url(memory["id"])}"]').first.click()
    page.wait_for_url(f"{site.base}{change_url(memory['id'])}**")
    assert page.input_value('textarea[name="content"]') == memory["content"]


def test_editing_a_memory_appends_a_revision_shown_first_in_the_history(page, site, screenshot):
    old = "The loading dock opens at 06:00."
    new = "The loading dock opens at 05:30 from March on."
    memory = site.remember(old, key="loading-dock", namespace="admin-edit")
    page.goto(f"{site.base}{change_url(memory['id'])}")
    page.fill('textarea[name="content"]', new)
    page.click('input[name="_save"]')
    page.wait_for_url(f"{site.base}{CHANGELIST}**")
    assert page.locator(".messagelist .success").count() == 1

    page.goto(f"{site.base}{change_url(memory['id'])}")
    assert page.input_value('textarea[name="content"]') == new
    history = page.locator("#revision-history").inner_text()
    assert new in history and old in history
    assert history.index(new) < history.index(old)  # newest first
    screenshot(page, "admin-change-history")
    # The service recorded the edit as a new revision, by the admin user.
    revisions = site.instance.memory("history", str(memory["id"]))["revisions"]
    assert [revision["content"] for revision in revisions] == [old, new]
    assert revisions[-1]["interface"] == "admin" and "curator" in revisions[-1]["author"]


def test_forget_and_restore_from_the_changelist(page, site, screenshot):
    memory = site.remember("Visitors sign in at the east gate.", key="visitors", namespace="admin-forget")
    page.goto(f"{site.base}{CHANGELIST}?namespace__exact=admin-forget")
    assert "active" in row_of(page, memory["id"]).inner_text()

    run_action(page, memory["id"], "forget_memories")
    # Forget asks why first, on a page of its own, as delete does.
    assert site.instance.memory("get", str(memory["id"]))["state"] == "active"
    page.fill('input[name="reason"]', "The east gate closed for works")
    screenshot(page, "admin-forget-reason")
    page.click('input[type="submit"][value="Yes, forget them"]')
    page.wait_for_load_state()
    assert page.locator(".messagelist .success").count() == 1
    revisions = site.instance.memory("history", str(memory["id"]))["revisions"]
    assert revisions[-1]["tombstone"] and revisions[-1]["reason"] == "The east gate closed for works"
    page.goto(f"{site.base}{CHANGELIST}?namespace__exact=admin-forget")
    assert "forgotten" in row_of(page, memory["id"]).inner_text()
    assert site.instance.memory_error("get", str(memory["id"]))["code"] == "not_found"

    run_action(page, memory["id"], "restore_memories")
    assert page.locator(".messagelist .success").count() == 1
    page.goto(f"{site.base}{CHANGELIST}?namespace__exact=admin-forget")
    assert "active" in row_of(page, memory["id"]).inner_text()
    assert "forgotten" not in row_of(page, memory["id"]).inner_text()


def test_time_travel_to_before_an_admin_edit_shows_the_old_text(page, site, screenshot):
    memory = site.remember(
        "Night shift handover happens at 22:00 in the control room.", key="handover", namespace="admin-time"
    )
    before_edit = now()
    page.goto(f"{site.base}{change_url(memory['id'])}")
    page.fill('textarea[name="content"]', "Night shift handover happens at 21:30 on the shop floor.")
    page.click('input[name="_save"]')
    page.wait_for_url(f"{site.base}{CHANGELIST}**")

    page.goto(f"{site.base}/search/")
    page.fill("input[name=query]", "night shift handover")
    page.fill("input[name=namespace]", "admin-time")
    page.fill("input[name=as_of]", iso(before_edit))
    page.click("#recall")
    results = page.locator("#results").inner_text()
    # Whole phrases: the page also shows the clock time of the search, which may read 21:30 or 22:00.
    assert "22:00 in the control room" in results and "21:30 on the shop floor" not in results
    screenshot(page, "dashboard-time-travel-before-admin-edit")

    page.fill("input[name=as_of]", "")
    page.click("#recall")
    results = page.locator("#results").inner_text()
    assert "21:30 on the shop floor" in results and "22:00 in the control room" not in results


def test_the_changelist_reads_on_a_laptop_screen(page, site, screenshot):
    long_text = (
        "The quarterly safety audit covers the loading docks, the cold store, the forklift charging "
        "bays and the mezzanine racking; findings go to the site lead within five working days. "
    ) * 2
    memory = site.remember(
        long_text,
        key="a-rather-long-key-for-the-quarterly-safety-audit",
        namespace="admin-layout-with-a-long-namespace",
    )
    site.remember(
        "Safety audit findings are filed under the site lead's name.",
        key="a-rather-long-key-for-the-quarterly-safety-audit",
        namespace="admin-layout-with-a-long-namespace",
    )
    page.goto(f"{site.base}{CHANGELIST}")
    row = row_of(page, memory["id"])
    text = row.locator("td.field-preview").bounding_box()
    count = row.locator("td.field-revision_count").bounding_box()
    results = page.locator("#changelist .results")
    widths = results.evaluate("element => [element.scrollWidth, element.clientWidth]")
    screenshot(page, "admin-changelist-1366")
    # The text column gets the room, and the revision count is on screen without scrolling sideways.
    assert text["width"] >= 300, text
    assert widths[0] <= widths[1], widths
    assert count["x"] + count["width"] <= page.viewport_size["width"], count
    assert row.locator("td.field-revision_count").inner_text() == "2"
