"""Questions the learned graph answers: the words that ask them, the relations they ask for, the time they name.

``read_question(text, now=...)`` reads "who led Orion in May 2025" as: the entity Orion,
its incoming ``leads`` relations, valid at 1 May 2025. ``QUESTIONS`` holds the shapes a
question may take, tried in order. A shape either names the relations it asks for, or
takes them from the verb it matched: the verbs of ``knowledge.vocabulary.PREDICATES``
(and its ``ROLES``), the words learning reads facts by, so a question is asked with the
words its facts were told in ("The payments team owns the pipeline" is stored as
(pipeline, owned by, payments team); "who owns the pipeline" asks for the pipeline's
outgoing ``owned by``).

The time a question states (``knowledge.dates.stated_time``: "in May 2025", "as of
2026-03-01", "last month", resolved against now) is valid time, as known now: "who led
Orion in May 2025" asks who held the role then, by everything known today, which is what
a person asking means (a correction learned since counts). The instant is the start of the
period the phrase names ("in May 2025" is 1 May 2025), as when learning reads "since May
2025". "now", "currently" and no time at all ask about now. A question about what was
known at a time ("what did we know in March", "as known on 2026-01-15") is no graph
question here: query routing recalls it as known then.
"""

import datetime as dt
import re
from dataclasses import dataclass

from knowledge import clauses, dates, verb_forms, vocabulary

# Relations a question may ask for: (predicate, direction), "out" where the entity named is the fact's subject.
Relation = tuple[str, str]

# Predicates that say one relation from either end: "Lena reports to Sam" is "Sam manages Lena".
INVERSES = {"reports to": "manages", "manages": "reports to"}
# Where someone or something is: "where is X" asks for any of these.
WHERE = tuple((predicate, "out") for predicate in (*vocabulary.PLACES, "works at"))
# Which team someone is on: "what team is Chen on".
TEAM = (("member of", "out"), ("works on", "out"))


@dataclass(frozen=True)
class Question:
    """One shape of question. ``pattern`` is matched against the whole question (its time phrase taken out) and
    holds ``{entity}``, and ``{said}``, ``{base}``, ``{participle}`` or ``{role}`` where the relations come from
    the words matched (``relations`` empty). ``entity_is``: the entity's part in the sentence the question asks
    about ("who leads X": X is its object; "what does X use": its subject)."""

    name: str
    example: str
    pattern: str
    relations: tuple[Relation, ...] = ()
    entity_is: str = "subject"

    @property
    def asking(self) -> str | None:
        """The placeholder whose words say the relations asked for; None where ``relations`` are fixed."""
        return next((name for name in ("said", "base", "participle", "role") if f"{{{name}}}" in self.pattern), None)


_WHICH = r"(?:what|which(?:\s+[\w-]+)?|who|whom)"
# A form of "be", with the space before it: "who is", "who's".
_IS = r"(?:\s+(?:is|are|was|were)|['’]s)"
_DOES = r"(?:does|do|did)"

QUESTIONS = (
    Question(
        "where-is",
        "where is the Berlin office",
        rf"where{_IS}\s+{{entity}}(?:\s+(?:located|based|hosted|deployed|stored|running|living|kept))?",
        relations=WHERE,
    ),
    Question(
        "where-does",
        "where does Lena live",
        rf"where\s+{_DOES}\s+{{entity}}\s+(?:live|work|sit|run|reside)",
        relations=WHERE,
    ),
    Question(
        "what-team",
        "what team is Chen on",
        rf"(?:what|which)\s+(?:team|group|squad|project|org|department)s?{_IS}\s+{{entity}}\s+"
        rf"(?:on|in|part\s+of|a\s+member\s+of|working\s+on)",
        relations=TEAM,
    ),
    Question(
        "role-of",
        "who is the lead of Orion",
        rf"who{_IS}\s+(?:the\s+)?(?:current\s+)?{{role}}\s+(?:of|for|on|at)\s+{{entity}}",
    ),
    Question("whose-role", "who is Lena's manager", rf"who{_IS}\s+{{entity}}['’]s\s+(?:current\s+)?{{role}}"),
    Question("who-verbs", "who leads Atlas", rf"{_WHICH}\s+{{said}}\s+{{entity}}", entity_is="object"),
    Question(
        "who-is-verbed", "what is hosted on host-3", rf"{_WHICH}{_IS}\s+{{participle}}\s+{{entity}}", entity_is="object"
    ),
    Question("what-does-it-verb", "what does Atlas use", rf"(?:{_WHICH}|where)\s+{_DOES}\s+{{entity}}\s+{{base}}"),
    Question(
        "what-is-it-verbed",
        "who is the deploy pipeline owned by",
        rf"(?:{_WHICH}|where){_IS}\s+{{entity}}\s+{{participle}}",
    ),
)


@dataclass(frozen=True)
class Asked:
    """What a question asks of the graph."""

    shape: str  # the name of the ``QUESTIONS`` row that read it
    entity: str  # as the question names it, without determiners
    words: str  # the words that ask (the verb or role matched), "" for a shape with fixed relations
    relations: tuple[Relation, ...]
    when: str  # the time phrase as said, "" when none
    valid_at: dt.datetime | None  # None: now


# Forms of the verbs ------------------------------------------------------------------------------------------------

# Verbs learning reads that no question asks with: modals and negations ("would rather", "don't like").
_NOT_ASKED = ("can't", "cannot", "would", "'d", "don't", "doesn't", "do", "does")


def _said(verb: str) -> list[str]:
    """How "who ... X" says a verb: "leads", "led", "is leading", "has led"; "is in charge of" for "be ..."."""
    head, _, rest = verb.partition(" ")
    tail = f" {rest}" if rest else ""
    if verb in vocabulary.EVENTS:
        return [verb]
    if head == "be":
        return [f"{be}{tail}" for be in ("is", "are", "was", "were")]
    third, past, participle, ing = verb_forms.inflections(head)
    return [f"{third}{tail}", f"{past}{tail}", f"is {ing}{tail}", f"was {ing}{tail}", f"has {participle}{tail}"]


def _verb_forms() -> dict[str, dict[str, list[vocabulary.Predicate]]]:
    """{placeholder: {words: the predicates they may say}} for the placeholders a pattern takes from the verbs."""
    forms: dict[str, dict[str, list[vocabulary.Predicate]]] = {"said": {}, "base": {}, "participle": {}}
    for predicate in vocabulary.PREDICATES:
        for verb in predicate.verbs:
            if verb.partition(" ")[0] in _NOT_ASKED:
                continue
            if predicate.passive:
                found = {"participle": [verb]}
            elif verb.startswith("be ") and len(verb.split()) > 2:  # "what is Mei in charge of"
                found = {"said": _said(verb), "participle": [verb.removeprefix("be ")]}
            elif verb.startswith("be ") or verb in vocabulary.EVENTS:
                found = {"said": _said(verb)}
            else:
                found = {"said": _said(verb), "base": [verb]}
            for placeholder, words in found.items():
                for word in words:
                    forms[placeholder].setdefault(word, []).append(predicate)
    return forms


_FORMS = _verb_forms()


def _alternatives(words) -> str:
    # Longest first, so "depend on" is tried before "depend"; spaces match any run of spaces.
    return "|".join(re.escape(word).replace(r"\ ", r"\s+") for word in sorted(words, key=len, reverse=True))


def _compiled(question: Question) -> re.Pattern:
    fill = {"entity": r"(?P<entity>\S.*?)", "role": rf"(?P<words>{_alternatives(vocabulary.ROLES)})"}
    fill.update({placeholder: rf"(?P<words>{_alternatives(words)})" for placeholder, words in _FORMS.items()})
    return re.compile(rf"^{question.pattern.format(**fill)}$", re.I)


_PATTERNS = [(question, _compiled(question)) for question in QUESTIONS]


# Reading a question ------------------------------------------------------------------------------------------------

# Words that ask about now without a time phrase: "who leads Atlas now".
_NOW = re.compile(
    r"(?<![\w-])(?:right\s+now|now|currently|at\s+the\s+moment|at\s+present|these\s+days|nowadays|"
    r"today)(?![\w-])",
    re.I,
)
# Questions about what was known then, not about what held then: routing recalls them as known then.
_KNOWN_THEN = re.compile(
    r"\b(?:as\s+known|(?:we|you|i)\s+knew|did\s+(?:we|you|i)\s+know|known\s+(?:in|on|at|as\s+of)"
    r"|as\s+we\s+knew)\b",
    re.I,
)


def _relations(question: Question, found: re.Match, entity: str) -> tuple[Relation, ...]:
    """The relations ``question`` asks for, as ``found`` matched it, with their inverses."""
    if question.asking is None:
        asked = list(question.relations)
    elif question.asking == "role":
        predicate, holder_is_subject = clauses.role_of(found["words"])
        # The holder is the one asked for; the entity named is the other end.
        asked = [(predicate, "in" if holder_is_subject else "out")]
    else:
        asked = []
        entity_word = clauses.last_word(entity)
        for predicate in _FORMS[question.asking][" ".join(found["words"].casefold().split())]:
            # A verb that needs a kind of object ("runs the data team") or subject ("alerts go to"): the entity
            # is checked where it stands there; the end asked for cannot be.
            needed = predicate.objects if question.entity_is == "object" else predicate.subjects
            if needed and entity_word not in needed:
                continue
            out = (question.entity_is == "subject") != predicate.reverse
            asked.append((predicate.name, "out" if out else "in"))
    inverses = [
        (INVERSES[predicate], "in" if direction == "out" else "out")
        for predicate, direction in asked
        if predicate in INVERSES
    ]
    return tuple(dict.fromkeys(asked + inverses))


def read_question(text: str, *, now: dt.datetime) -> Asked | None:
    """What ``text`` asks of the graph, read by the first shape of ``QUESTIONS`` it fits; None when none does."""
    text = " ".join(text.split()).rstrip("?!. ")
    if _KNOWN_THEN.search(text):
        return None
    when, valid_at = "", None
    if stated := dates.stated_time(text, now):
        when, valid_at = text[stated.start : stated.end], stated.at
        text = f"{text[: stated.start]} {text[stated.end :]}"
    elif said_now := _NOW.search(text):
        when = said_now[0]
        text = f"{text[: said_now.start()]} {text[said_now.end() :]}"
    text = " ".join(text.split()).strip(" ,")
    for question, pattern in _PATTERNS:
        found = pattern.match(text)
        if found is None:
            continue
        entity = clauses.as_name(found["entity"])
        if entity is None:
            continue
        relations = _relations(question, found, entity)
        if relations:
            words = " ".join(found["words"].split()) if question.asking else ""
            return Asked(
                shape=question.name, entity=entity, words=words, relations=relations, when=when, valid_at=valid_at
            )
    return None
