"""Snippets: a short window of a hit's content with the matched words in [brackets]."""

import re

from search import text

WORD = re.compile(r"[^\W_]+")
WINDOW_CHARS = 240


def _matches(stem: str, terms) -> bool:
    return any(stem == term.stem or (term.prefix and stem.startswith(term.prefix)) for term in terms)


def highlight(content: str, terms) -> str:
    """Return about WINDOW_CHARS of ``content`` around its first matched word, matched words bracketed.

    A word matches a query term the way the keyword channel does: same porter stem, or
    a stem that starts with the term's light root.
    """
    words = list(WORD.finditer(content))
    if not terms or not words:
        return _cut(content, 0)
    distinct = list(dict.fromkeys(match.group(0) for match in words))
    # One batch through FTS5's own tokenizer gives every distinct word's stem.
    stems = {}
    for word, (counts, _) in zip(distinct, text.documents_terms(distinct)):
        # A word FTS5 splits differently (rare: it is a run of letters and digits) is compared folded.
        stems[word] = next(iter(counts)) if len(counts) == 1 else word.casefold()
    hits = [match for match in words if _matches(stems[match.group(0)], terms)]
    if not hits:
        return _cut(content, 0)
    start = max(0, hits[0].start() - WINDOW_CHARS // 3)
    # Start at a word boundary so the window does not open mid-word.
    if start:
        following = WORD.search(content, start)
        start = following.start() if following else start
    end = min(len(content), start + WINDOW_CHARS)
    pieces, position = [], start
    for match in hits:
        if match.start() < start or match.end() > end:
            continue
        pieces.append(content[position:match.start()])
        pieces.append(f"[{match.group(0)}]")
        position = match.end()
    pieces.append(content[position:end])
    body = "".join(pieces)
    return ("…" if start else "") + body.strip() + ("…" if end < len(content) else "")


def _cut(content: str, start: int) -> str:
    end = min(len(content), start + WINDOW_CHARS)
    return content[start:end].strip() + ("…" if end < len(content) else "")
