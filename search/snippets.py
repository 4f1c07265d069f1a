"""Snippets: a short window of a hit's content with the matched words in [brackets]."""

import re

from search import text

WORD = re.compile(r"[^\W_]+")
WINDOW_CHARS = 240
# Word -> stem, for the words of hits shown lately. Tokenizing every hit's words through the
# scratch FTS5 table took 2.2 ms for 10 hits, 0.5 ms with this cache (storage_micro.py); the
# mapping never changes, and a hit's words are mostly ones seen before. Cleared when full.
_STEMS_MAX = 100_000
_stems: dict[str, str] = {}


def highlight(content: str, terms) -> str:
    """Return about WINDOW_CHARS of ``content`` around its first matched word, matched words bracketed.

    A word matches a query term the way the keyword channel does: same porter stem, or
    a stem that starts with the term's light root.
    """
    if not terms:
        return _cut(content, 0)
    distinct = dict.fromkeys(WORD.findall(content))
    if not distinct:
        return _cut(content, 0)
    global _stems
    stems = _stems
    unseen = [word for word in distinct if word not in stems]
    if unseen:
        if len(stems) + len(unseen) > _STEMS_MAX:
            # A new mapping, not the old one cleared: another thread may be reading that one.
            stems = _stems = {}
            unseen = list(distinct)  # this content's words seen before went with the rest
        # One batch through FTS5's own tokenizer gives every new word's stem.
        for word, (counts, _) in zip(unseen, text.documents_terms(unseen)):
            # A word FTS5 splits differently (rare: it is a run of letters and digits) is compared folded.
            stems[word] = next(iter(counts)) if len(counts) == 1 else word.casefold()
    # Each distinct word is tested once, not once per occurrence: the same stem, or a stem
    # that starts with a term's light root.
    exact = {term.stem for term in terms}
    prefixes = tuple(term.prefix for term in terms if term.prefix)
    hit_words = {word for word in distinct if (stem := stems[word]) in exact
                 or (prefixes and stem.startswith(prefixes))}
    if not hit_words:
        return _cut(content, 0)
    first = min(next(_whole(content, word, 0, len(content)), len(content)) for word in hit_words)
    start = max(0, first - WINDOW_CHARS // 3)
    # Start at a word boundary so the window does not open mid-word: at the next word's start.
    if start:
        following = WORD.search(content, start)
        if following and following.start() == start and content[start - 1].isalnum():
            following = WORD.search(content, following.end())  # start fell inside a word: the one after it
        start = following.start() if following else start
    end = min(len(content), start + WINDOW_CHARS)
    # Matched words wholly inside the window, in order (one cut at its end is left as it is).
    found = sorted((at, word) for word in hit_words for at in _whole(content, word, start, end))
    pieces, position = [], start
    for at, word in found:
        pieces.append(content[position:at])
        pieces.append(f"[{word}]")
        position = at + len(word)
    pieces.append(content[position:end])
    body = "".join(pieces)
    return ("…" if start else "") + body.strip() + ("…" if end < len(content) else "")


def _whole(content: str, word: str, start: int, end: int):
    """Yield where ``word`` occurs in ``content[start:end]`` as a whole word (no letter or digit beside it).

    ``str.find`` and a look at the two characters beside: a word's occurrences are few,
    and a regex walk over every word of the window cost most of a snippet's time.
    """
    size = len(word)
    at = content.find(word, start, end)
    while at >= 0:
        # A WORD character is a letter or digit: exactly what str.isalnum() says of one character.
        if not (at and content[at - 1].isalnum()) and not (at + size < len(content) and content[at + size].isalnum()):
            yield at
        at = content.find(word, at + 1, end)


def _cut(content: str, start: int) -> str:
    end = min(len(content), start + WINDOW_CHARS)
    return content[start:end].strip() + ("…" if end < len(content) else "")
