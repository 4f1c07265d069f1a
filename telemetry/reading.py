"""Text as a lenient reader sees it: the form both the block wrapper and the ingest screen look at.

A language model does not parse markup strictly. ``&lt;/memory-context&gt;``,
``＜/MEMORY-CONTEXT＞`` (full-width) and ``</memory\u200b-context>`` (a zero-width space
inside) all read as the closing tag. So patterns are matched against a *reading* of
the text: HTML entities decoded (repeatedly, for ``&amp;lt;``), compatibility forms
folded (NFKD), invisible format characters and combining marks dropped, case folded. ``reading`` also
says where each character of the reading came from, so a match can be cut out of
the original text.
"""

import html
import re
import unicodedata

# An entity, possibly encoded again as &amp;...; html.unescape knows which names are real.
_ENTITY = re.compile(r"&(?:amp;)*(?:#[0-9]{1,8};?|#[xX][0-9a-fA-F]{1,8};?|[A-Za-z][A-Za-z0-9]{1,31};?)")
# Dropped: format characters (zero-width spaces and joiners, bidi controls, soft hyphen) and
# combining marks, so that "m\u0301emory" reads as "memory".
_INVISIBLE = {"Cf", "Mn", "Me"}
_UNESCAPE_ROUNDS = 4


def _unescape(text: str) -> str:
    for _ in range(_UNESCAPE_ROUNDS):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    return text


def _fold(text: str) -> str:
    # NFKD, not NFKC: decomposing lets the combining marks go; both fold full-width forms.
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if unicodedata.category(ch) not in _INVISIBLE).casefold()


def read(text: str) -> str:
    """Return how a lenient reader sees ``text`` (for matching only, never for display)."""
    return _fold(_unescape(text))


def reading(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Return ``read(text)`` and, for each of its characters, the span of ``text`` it came from."""
    characters: list[str] = []
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(text):
        match = _ENTITY.match(text, index) if text[index] == "&" else None
        end = match.end() if match else index + 1
        piece = _unescape(text[index:end])
        for character in _fold(piece):
            characters.append(character)
            spans.append((index, end))
        index = end
    return "".join(characters), spans
