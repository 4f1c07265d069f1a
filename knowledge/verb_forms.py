"""The verb table said every way English says it: each predicate's verbs inflected into the forms that speak of
the present (and of the past, which learning skips), and the patterns that find them in a clause.

``knowledge.clauses`` reads facts with them; the table itself is ``knowledge.vocabulary.PREDICATES``.
"""

import functools
import re
from typing import NamedTuple

from knowledge import name_words, vocabulary
from knowledge.vocabulary import PREDICATES


def inflections(base: str) -> tuple[str, str, str, str]:
    """(third person, past, past participle, -ing) of a verb in its base form."""
    if base in vocabulary.IRREGULAR:
        return vocabulary.IRREGULAR[base]
    if re.search(r"[^aeiou]y$", base):
        third, past = base[:-1] + "ies", base[:-1] + "ied"
    elif base.endswith(("s", "sh", "ch", "x", "z", "o")):
        third, past = base + "es", base + "ed"
    else:
        third, past = base + "s", base + ("d" if base.endswith("e") else "ed")
    ing = base[:-1] + "ing" if base.endswith("e") and not base.endswith("ee") else base + "ing"
    return third, past, past, ing


_BE = ("is", "are", "am", "'s", "'re", "'m", "has been", "have been")
_HAVE = ("has", "have", "'s", "'ve")
# Participles that stay true of a thing once made: "The recommender was built with PyTorch".
_MADE = ("built with", "built on", "built using", "written in", "implemented in")


def _surface_forms(verb: str, passive: bool) -> tuple[list[str], list[str]]:
    """The ways a verb phrase is said of the present (and of the past, which is skipped), e.g. "work on":
    works on, work on, is working on, has worked on, has been working on; worked on."""
    if passive:
        now = [f"{be} {verb}" for be in _BE] + ([f"{be} {verb}" for be in ("was", "were")] if verb in _MADE else [])
        return now, [f"{be} {verb}" for be in ("was", "were") if verb not in _MADE]
    head, _, rest = verb.partition(" ")
    tail = f" {rest}" if rest else ""
    if head in ("can't", "cannot", "would", "'d", "don't", "doesn't", "do", "does") or verb in vocabulary.EVENTS:
        return [verb], []
    if head == "be":
        return [f"{be}{tail}" for be in _BE], [f"{be}{tail}" for be in ("was", "were")]
    third, past, participle, ing = inflections(head)
    now = (
        [f"{third}{tail}", f"{head}{tail}"]
        + [f"{be} {ing}{tail}" for be in _BE[:6]]
        + [f"{have} {participle}{tail}" for have in _HAVE]
        + [f"{have} been {ing}{tail}" for have in _HAVE]
    )
    return now, [f"{past}{tail}"]


def _verb_table() -> tuple[dict[str, list[vocabulary.Predicate]], set[str]]:
    """{surface form: the predicates it may say, in table order}, and the forms that speak of the past."""
    said: dict[str, list[vocabulary.Predicate]] = {}
    before: dict[str, list[vocabulary.Predicate]] = {}
    for predicate in PREDICATES:
        for verb in predicate.verbs:
            now, past = _surface_forms(verb, predicate.passive)
            for form in now:
                said.setdefault(form, []).append(predicate)
            for form in past:
                before.setdefault(form, []).append(predicate)
    # A form that says the present for one verb ("joined" for join-as-event) is not read as the past of another.
    past_only = {form: predicates for form, predicates in before.items() if form not in said}
    return {**said, **past_only}, set(past_only)


VERB_FORMS, PAST_FORMS = _verb_table()
_ADVERB = "|".join(name_words.ADVERBS + ("now",))


class VerbPatterns(NamedTuple):
    """Where a verb of the table may stand: between a subject and an object (``at``), first in a clause
    (``first``), or after "but" joining two clauses of one subject (``but``); adverbs allowed before it."""

    at: re.Pattern
    first: re.Pattern
    but: re.Pattern


@functools.cache
def verb_patterns() -> VerbPatterns:
    """The patterns of every verb form of the table, compiled on first use: the alternation of every form is
    44 KB, and compiling it took 0.3 s of every process start, most of which never learns."""
    verb = "|".join(re.escape(form) for form in sorted(VERB_FORMS, key=len, reverse=True))
    return VerbPatterns(
        at=re.compile(rf"(?<![\w'-])(?:(?:{_ADVERB})\s+)*(?P<verb>{verb})\s+(?=\S)", re.I),
        first=re.compile(rf"^(?:(?:{_ADVERB})\s+)*(?P<verb>{verb})\s+(?P<object>.+)$", re.I),
        but=re.compile(rf"\s*,?\s+(?:but|while|whereas|yet)\s+(?=(?:{verb})\s)", re.I),
    )
