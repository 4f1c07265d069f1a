"""The documentation: the README stays short, and the links between pages lead somewhere.

Every relative link in README.md, docs/ and benchmarks/README.md must name a file that
exists, and a ``#anchor`` into a Markdown file must name one of its headings, slugged as
GitHub slugs them. Absolute links (``http://127.0.0.1:8000/...`` and the like) are not
followed, and nothing inside code is read as a link.
"""

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_BYTES = 12 * 1024
DOCUMENTS = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(r"\]\(\s*<?([^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r" {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HEADING = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_MARKUP_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HTML_TAG = re.compile(r"<[^>]+>")
# What GitHub drops from a heading's text to make its anchor: anything but letters, digits,
# spaces, hyphens and underscores.
_NOT_SLUG = re.compile(r"[^\w\- ]")


def prose_lines(text: str, *, code_spans: bool = False) -> list[str]:
    """Return the lines of ``text`` outside fenced code blocks, with inline code removed unless ``code_spans``."""
    lines, fence = [], None
    for line in text.splitlines():
        marker = _FENCE.match(line)
        if fence is not None:
            # A closing fence: the same character, at least as long, nothing after it.
            if (
                marker
                and marker.group(1)[0] == fence[0]
                and len(marker.group(1)) >= len(fence)
                and not line.strip().strip(fence[0])
            ):
                fence = None
            continue
        if marker:
            fence = marker.group(1)
            continue
        lines.append(line if code_spans else _CODE_SPAN.sub("", line))
    return lines


def links(text: str) -> list[str]:
    """Return every link target of ``text`` (inline links and reference definitions), outside code."""
    found = []
    for line in prose_lines(text):
        found += _INLINE_LINK.findall(line)
        reference = _REFERENCE.match(line)
        if reference:
            found.append(reference.group(1))
    return found


def slug(heading: str) -> str:
    """Return the anchor GitHub gives a heading's text (before de-duplication)."""
    text = _MARKUP_LINK.sub(r"\1", heading)
    text = _HTML_TAG.sub("", text).replace("`", "").replace("*", "")
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Return the anchors of every heading in ``text``; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for line in prose_lines(text, code_spans=True):  # a heading's code is part of its anchor
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def broken_links(document: Path) -> list[str]:
    """Return a line for each relative link in ``document`` that leads to no file or no heading."""
    problems = []
    for target in links(document.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme or target.startswith("//"):
            continue  # absolute: a URL of a running server or of another site, not followed
        path, fragment = unquote(parts.path), unquote(parts.fragment)
        if not path:
            destination = document
        elif path.startswith("/"):
            destination = ROOT / path.lstrip("/")
        else:
            destination = (document.parent / path).resolve()
        if not destination.exists():
            problems.append(f"{target}: no file {destination}")
        elif (
            fragment
            and destination.suffix == ".md"
            and fragment not in anchors(destination.read_text(encoding="utf-8"))
        ):
            problems.append(f"{target}: no heading with the anchor #{fragment} in {destination}")
    return problems


def test_readme_is_at_most_12_kb():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (limit {README_MAX_BYTES})."


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document):
    assert broken_links(document) == []


def test_readme_links_to_every_page_in_docs():
    linked = {
        (ROOT / unquote(urlsplit(target).path)).resolve()
        for target in links(README.read_text(encoding="utf-8"))
        if not urlsplit(target).scheme and urlsplit(target).path
    }
    pages = {path.resolve() for path in (ROOT / "docs").rglob("*.md")}
    assert pages, "docs/ holds no pages"
    assert sorted(str(page.relative_to(ROOT)) for page in pages - linked) == []


def test_anchors_follow_githubs_slug_rules():
    text = "\n".join(
        [
            "# Forget, erase and purge",
            "## The `memory` command",
            "### `POST hooks/recall/` (read)",
            "## Which revision a read sees",
            "## Notes",
            "## Notes",
            "```",
            "# not a heading",
            "```",
            "## [Linked](other.md) heading_with_underscores",
        ]
    )
    assert anchors(text) == {
        "forget-erase-and-purge",
        "the-memory-command",
        "post-hooksrecall-read",
        "which-revision-a-read-sees",
        "notes",
        "notes-1",
        "linked-heading_with_underscores",
    }


def test_links_in_code_are_not_read_and_absolute_links_are_not_followed(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "\n".join(
            [
                "See [the API](http://127.0.0.1:8000/api/docs/) and `[code](missing.md)`.",
                "```",
                "[also code](missing.md)",
                "```",
                "A [real link](missing.md) and [an anchor](#nowhere).",
                "# Here",
            ]
        ),
        encoding="utf-8",
    )
    assert links(page.read_text(encoding="utf-8")) == ["http://127.0.0.1:8000/api/docs/", "missing.md", "#nowhere"]


def test_a_link_to_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n## Sub part\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#sub-part) [file](gone.md) [heading](a.md#missing) [here](#b-head)\n# B head\n", encoding="utf-8"
    )
    assert broken_links(page) == [
        f"gone.md: no file {tmp_path / 'gone.md'}",
        f"a.md#missing: no heading with the anchor #missing in {tmp_path / 'a.md'}",
    ]
