"""The dashboard in headless Chromium against a real server: log in, charts drawn, time travel, timelines."""

import re

import pytest

from tests.browser import CHROMIUM_ARGS, VIEWPORT, drawn, iso, log_in, now, requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]


def test_logging_in_opens_the_overview_with_its_activity_chart_drawn(page, site, screenshot):
    assert page.url == f"{site.base}/"
    assert page.locator("h1").inner_text() == "Overview"
    stats = site.instance.memory("stats")
    page.reload()
    assert page.locator("#total-memories").inner_text() == str(stats["memories"])
    assert page.locator("#total-forgotten").inner_text() == str(stats["forgotten"]) != "0"
    chart = page.locator("#activity svg.chart")
    assert chart.count() == 1
    assert drawn(chart)[0]["width"] >= 600
    # The demo's memories were learned on several days of 2025; each bucket with any is a bar with area.
    assert len(drawn(chart.locator("rect.bar"))) >= 5
    assert page.locator("#index-health").inner_text().count("In step") == 1
    assert "demo" in page.locator("#namespaces").inner_text()
    # Usable on a laptop screen: nothing wider than the window.
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    screenshot(page, "dashboard-overview")


def test_the_telemetry_page_draws_its_charts_from_the_hook_reports(page, site, screenshot):
    page.click("nav >> text=Telemetry")
    page.wait_for_url(f"{site.base}/telemetry/")
    assert page.locator("#total-recalls").inner_text() == "2"
    assert page.locator("#total-injections").inner_text() == "2"
    assert len(drawn(page.locator("#over-time svg.chart rect.bar"))) == 2  # today's recalls and injections
    assert len(drawn(page.locator("#per-hook svg.chart rect.bar"))) >= 2
    hooks = page.locator("#per-hook table").inner_text()
    assert "claude-code" in hooks and "UserPromptSubmit" in hooks and "codex" in hooks
    assert page.locator("#latest li").count() >= 2
    screenshot(page, "dashboard-telemetry")


def test_time_travel_to_before_an_edit_shows_the_old_text(page, site, screenshot):
    memory = site.remember("The release train leaves every second Tuesday.", key="release-train")
    before_edit = now()
    site.remember("The release train leaves every Thursday.", key="release-train")

    page.goto(f"{site.base}/search/")
    page.fill("input[name=query]", "release train")
    page.fill("input[name=namespace]", "browser")
    page.fill("input[name=as_of]", iso(before_edit))
    page.click("#recall")
    hit = page.locator(f'li.hit[data-memory-id="{memory["id"]}"]')
    assert "second Tuesday" in hit.inner_text()
    assert "Thursday" not in page.locator("#results").inner_text()
    assert page.locator("#result-as-of").inner_text() == iso(before_edit)
    screenshot(page, "dashboard-time-travel")

    page.fill("input[name=as_of]", "")
    page.click("#recall")
    assert "every Thursday" in hit.inner_text()
    assert "second Tuesday" not in page.locator("#results").inner_text()


def test_the_time_travel_form_reads_in_two_rows_with_nothing_cut(page, site, screenshot):
    memory = site.remember("The parts cage is locked after 18:00.", key="parts-cage")
    page.goto(f"{site.base}/search/")
    page.fill("input[name=query]", "parts cage locked")
    page.fill("input[name=namespace]", "browser")
    page.fill("input[name=as_of]", iso(now()))
    page.click("#recall")
    # Hits are labelled by id, as every other page labels memories.
    hit = page.locator(f'li.hit[data-memory-id="{memory["id"]}"] h3')
    assert hit.inner_text().startswith(f"#{memory['id']}") and memory["key"] not in hit.inner_text()
    # Row one: what to recall and the button; row two: the two times side by side.
    first = drawn(
        page.locator(".search-form .row").first.locator("input[name=query], input[name=namespace], select, #recall")
    )
    assert len(first) == 4 and max(box["y"] for box in first) < min(box["y"] + box["height"] for box in first)
    times = drawn(page.locator(".search-form fieldset"))
    assert len(times) == 2 and times[0]["y"] == times[1]["y"] and times[0]["x"] + times[0]["width"] < times[1]["x"]
    assert min(box["y"] for box in times) > max(box["y"] + box["height"] for box in first)
    # Each typed time shows a whole instant, and its placeholder, without scrolling.
    for name in ("as_of", "valid_at"):
        field = page.locator(f"input[name={name}]")
        field.fill(iso(now()))
        assert field.evaluate("e => e.scrollWidth <= e.clientWidth"), name
        shown = field.evaluate(
            "e => { e.value = ''; const inner = e.clientWidth - parseFloat(getComputedStyle(e).paddingLeft)"
            " - parseFloat(getComputedStyle(e).paddingRight); const probe = document.createElement('span');"
            " probe.style.font = getComputedStyle(e).font; probe.style.whiteSpace = 'pre';"
            " probe.textContent = e.placeholder; document.body.appendChild(probe);"
            " const width = probe.getBoundingClientRect().width; probe.remove(); return [width, inner]; }"
        )
        assert shown[0] <= shown[1], (name, shown)
    form = page.locator(".search-form").evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert form[0] <= form[1], form
    screenshot(page, "dashboard-time-travel-form")


def test_the_valid_time_picker_answers_for_that_moment(page, site):
    # The demo's lab moved to Harbor Street for June 2025 only (a bounded correction).
    page.goto(f"{site.base}/search/")
    page.fill("input[name=query]", "customer demo lab")
    page.fill("input[name=valid_at_picker]", "2025-06-15T12:00")
    page.click("#recall")
    results = page.locator("#results").inner_text()
    assert "Harbor Street" in results and "14 Mill Road" not in results
    page.fill("input[name=valid_at_picker]", "2025-08-01T12:00")
    page.click("#recall")
    results = page.locator("#results").inner_text()
    assert "14 Mill Road" in results and "Harbor Street" not in results


def test_bad_time_travel_input_shows_a_message_on_the_page(page, site):
    page.goto(f"{site.base}/search/")
    page.fill("input[name=query]", "battery")
    page.fill("input[name=as_of]", "last tuesday")
    page.click("#recall")
    alert = page.locator('[role="alert"]')
    assert "as_of: 'last tuesday' is not a date or a time with a timezone" in alert.inner_text()
    assert page.locator("#results").count() == 0
    # The form keeps what was typed, so it can be corrected.
    assert page.input_value("input[name=as_of]") == "last tuesday"


def test_a_hit_links_to_its_timeline_where_revisions_are_drawn(page, site, screenshot):
    page.goto(f"{site.base}/search/?query=battery+supplier&namespace=demo")
    page.locator("li.hit").first.locator("text=Timeline").click()
    assert re.fullmatch(rf"{re.escape(site.base)}/memories/\d+/timeline/", page.url)
    # The battery supplier was revised once: two revisions, two validity bars, two dots.
    assert len(drawn(page.locator("svg.chart rect.validity"))) == 2
    assert len(drawn(page.locator("svg.chart circle.known"))) == 2
    revisions = page.locator("#revisions article")
    assert revisions.count() == 2
    assert "Helio Power" in revisions.nth(0).inner_text() and "shown now" in revisions.nth(0).inner_text()
    assert "Voltaic Cells" in revisions.nth(1).inner_text()
    screenshot(page, "dashboard-timeline")


def test_a_forgotten_memory_timeline_marks_the_tombstone(page, site):
    page.goto(f"{site.base}/search/?query=vpn1+gateway&namespace=demo&as_of=2025-02-01")
    page.locator("li.hit").first.locator("text=Timeline").click()
    assert page.locator("#memory-state").inner_text() == "forgotten"
    assert len(drawn(page.locator("svg.chart rect.tombstone"))) == 1
    assert "decommissioned" in page.locator("#revisions").inner_text()


def right(box: dict) -> float:
    return box["x"] + box["width"]


def middle(box: dict) -> float:
    return box["x"] + box["width"] / 2


def test_a_revised_forgotten_and_restored_memory_timeline_ends_each_bar_where_the_next_takes_over(
    page, site, screenshot
):
    memory = site.remember("The canteen opens at 07:00.", key="canteen")
    site.remember("The canteen opens at 07:30.", key="canteen")
    site.instance.memory("forget", str(memory["id"]), "--reason", "canteen closed for works")
    site.instance.memory("restore", str(memory["id"]), "--reason", "canteen reopened")
    # The admin's page of the memory links to its timeline.
    page.goto(f"{site.base}/admin/memories/memory/{memory['id']}/change/")
    page.click("a.timelinelink")
    page.wait_for_url(f"{site.base}/memories/{memory['id']}/timeline/")

    chart = page.locator("svg.chart")
    # Lanes, oldest first: 07:00, 07:30, the forget, the restore.
    dots = drawn(chart.locator("circle.known"))
    assert len(dots) == 4
    superseded = drawn(chart.locator("rect.validity.superseded"))
    assert len(superseded) == 2
    # 07:00 ends where 07:30 was learned; 07:30 ends at the forget; neither runs on to the open edge.
    assert right(superseded[0]) == pytest.approx(middle(dots[1]), abs=1)
    assert right(superseded[1]) == pytest.approx(middle(dots[2]), abs=1)
    open_bar = drawn(chart.locator("rect.validity.open"))
    assert len(open_bar) == 1 and right(superseded[1]) < right(open_bar[0]) - 5
    # The red band stops at the restore, short of now.
    band = drawn(chart.locator("rect.tombstone"))[0]
    assert right(band) == pytest.approx(middle(dots[3]), abs=1)
    assert right(band) < middle(chart.locator("line.now").bounding_box())
    # The restore is labelled, in the chart and in the list.
    label = chart.locator("text.restore-label")
    assert label.text_content() == "restored" and drawn(label)
    assert "(restored)" in chart.locator("text.lane-label").nth(3).text_content()
    newest = page.locator("#revisions article").first.inner_text()
    assert "restored (brings back revision" in newest and "shown now" in newest
    assert "07:30" in newest
    screenshot(page, "dashboard-timeline-restored")


def test_time_travel_works_without_javascript(chromium, site):
    context = chromium.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, site.base)
        page.goto(f"{site.base}/search/")
        page.fill("input[name=query]", "reset stuck picker")
        page.click("#recall")
        assert "E-stop" in page.locator("#results").inner_text()
        assert len(drawn(page.locator("#results li.hit"))) >= 1
        page.goto(f"{site.base}/")
        assert len(drawn(page.locator("#activity svg.chart rect.bar"))) >= 5
    finally:
        context.close()


def test_the_dashboard_needs_a_staff_login(chromium, site):
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(f"{site.base}/telemetry/")
        assert page.url.startswith(f"{site.base}/admin/login/")
        assert page.locator("input[name=username]").count() == 1
    finally:
        context.close()


def test_the_browser_is_debian_chromium_with_the_offline_flags(chromium):
    assert "--disable-background-networking" in CHROMIUM_ARGS
    assert chromium.version  # the real browser answered
