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


# The width of each word of an element's text (measured in a no-wrap probe with the element's font), the widest.
WIDEST_WORD = """element => {
    const probe = document.createElement("span");
    probe.style.whiteSpace = "nowrap";
    element.appendChild(probe);
    let widest = 0;
    for (const word of element.textContent.trim().split(/\\s+/)) {
        probe.textContent = word;
        widest = Math.max(widest, probe.getBoundingClientRect().width);
    }
    probe.remove();
    return widest;
}"""
# How many lines each word of an element's text is drawn on: 1 unless the word was broken.
LINES_PER_WORD = """element => {
    const lines = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const match of node.textContent.matchAll(/[^\\s,]+/g)) {
            const range = document.createRange();
            range.setStart(node, match.index);
            range.setEnd(node, match.index + match[0].length);
            lines.push([match[0], range.getClientRects().length]);
        }
    }
    return lines;
}"""


def content_width(locator) -> float:
    """The width of an element's content box: its client width less its padding."""
    return locator.evaluate(
        "e => { const s = getComputedStyle(e); return e.clientWidth - parseFloat(s.paddingLeft) - "
        "parseFloat(s.paddingRight); }"
    )


def fits(locator) -> bool:
    """Whether an input shows its whole value: nothing scrolled out of sight."""
    scroll, client = locator.evaluate("e => [e.scrollWidth, e.clientWidth]")
    return scroll <= client


def test_the_admin_home_review_links_are_never_narrower_than_their_longest_word(page, site, screenshot):
    page.goto(f"{site.base}/admin/")
    cells = page.locator("#review-module th")
    assert cells.count() == 4
    for index in range(cells.count()):
        cell = cells.nth(index)
        assert content_width(cell) >= cell.locator("a").evaluate(WIDEST_WORD), cell.inner_text()
    # The four links and their descriptions stay within the first screen.
    assert page.locator("#review-module").bounding_box()["height"] < 400
    screenshot(page, "admin-home-1366")


def test_the_changelist_breaks_tags_between_words_never_inside_one(page, site, screenshot):
    site.instance.memory(
        "remember",
        "Architecture decisions are recorded in the engineering handbook.",
        "--namespace",
        "admin-tags",
        "--key",
        "decision-records",
        "--tag",
        "architecture",
        "--tag",
        "infrastructure",
        "--tag",
        "documentation",
    )
    page.goto(f"{site.base}{CHANGELIST}")
    cells = page.locator("#result_list td.field-tag_list")
    words = [word for index in range(cells.count()) for word in cells.nth(index).evaluate(LINES_PER_WORD)]
    assert "infrastructure" in {word for word, _ in words}
    assert [word for word, lines in words if lines != 1] == []
    screenshot(page, "admin-changelist-tags-1366")


def test_the_change_form_shows_a_whole_instant_in_its_time_fields(page, site):
    memory = site.remember("The archive room key hangs in reception.", key="archive-key", namespace="admin-times")
    page.goto(f"{site.base}{change_url(memory['id'])}")
    valid_from = page.locator('input[name="valid_from"]')
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", valid_from.input_value())
    assert fits(valid_from)
    valid_to = page.locator('input[name="valid_to"]')
    valid_to.fill(iso(now()))
    assert fits(valid_to)


def test_the_erase_confirmation_help_sits_under_its_field(page, site, screenshot):
    memory = site.remember("The spare badge printer is in room 2.14.", key="badge-printer", namespace="admin-erase")
    page.goto(f"{site.base}{CHANGELIST}?namespace__exact=admin-erase")
    run_action(page, memory["id"], "erase_memories")
    field = page.locator('input[name="reason"]').bounding_box()
    label = page.locator('label[for="id_reason"]').bounding_box()
    # Where the help's words start, not its box (the admin indents the text with padding).
    help_text = page.locator(".form-row .help").evaluate(
        "e => { const range = document.createRange(); range.selectNodeContents(e); "
        "const box = range.getBoundingClientRect(); return {x: box.x, y: box.y}; }"
    )
    assert help_text["x"] == pytest.approx(field["x"], abs=1)
    assert help_text["y"] >= field["y"] + field["height"] - 1  # under the field
    assert label["x"] + label["width"] <= field["x"] and abs(label["y"] - field["y"]) < field["height"]  # beside it
    screenshot(page, "admin-erase-confirmation")
    assert site.instance.memory("get", str(memory["id"]))["id"] == memory["id"]  # nothing erased yet
