"""How a fact's names compare: one normal form for entities and one for predicates.

"Payments API", "payments  api" and "the Payments API" name one entity in a namespace;
"Runs on" and "runs  on" one predicate. The stored triple keeps the writer's spelling;
the graph, the conflict check and learn compare normal forms only.
"""

import re
import unicodedata

_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = "\"'`“”‘’«».,;:!?()[]{}<>"
_ARTICLES = ("the ", "a ", "an ")


def _folded(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip().strip(_EDGE_PUNCTUATION).strip()


def entity_name(text: str) -> str:
    """An entity name's normal form: NFKC, case-folded, spaces collapsed, quotes and a leading article dropped."""
    name = _folded(text)
    for article in _ARTICLES:
        if name.startswith(article) and len(name) > len(article):
            name = name[len(article) :].lstrip()
            break
    return name


def predicate_name(text: str) -> str:
    """The normal form of a predicate: NFKC, case-folded, spaces, hyphens and underscores as one space."""
    return _SPACE.sub(" ", _folded(text).replace("_", " ").replace("-", " ")).strip()
