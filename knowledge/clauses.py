"""What one clause states: the facts said with a verb of the table, a copula or a verb no table knows.

``facts_of(claim, context)`` reads a clause (a sentence or part of one, its lead-ins and
stated time already taken out by ``knowledge.extraction``) and returns its facts, or why it gave
none. Names are resolved here: determiners and a type word before an identifier are dropped
("the host pg-3" is pg-3), "I" is the speaker, "he" and "she" the last person named, "it"
the last subject of the line, "which" and "who" the name the clause before ended with
(``Context``). The verb table and roles are ``knowledge.vocabulary``'s, the word lists of names
``knowledge.name_words``', the forms each verb is said in ``knowledge.verb_forms``'; the rules that
read them are here, in order: names, verbs and their objects, clauses.
"""

import datetime as dt
import re
from dataclasses import dataclass, field

from knowledge import name_words, verb_forms, vocabulary
from knowledge.vocabulary import ROLES

# A subject or object longer than this is a clause, not a name.
NAME_WORDS_MAX = 6
# The subject of a first-person fact when no speaker is named.
USER = "user"
VAGUE = "vague: no rule found a fact, decision or skill in it"
VAGUE_NAME = "vague: the {part} ({name!r}) is not a name (a pronoun, filler, or more than {words} words)"

# Names -----------------------------------------------------------------------------------------------------------

# A name: words of letters, digits and the marks names use (Node.js, C#, eu-west-1, @org/pkg, AWS (Ireland)).
_NAME = re.compile(r"[\w][\w .+#/@&'()-]*", re.UNICODE)
DETERMINER = re.compile(rf"^(?:(?:{'|'.join(name_words.DETERMINERS)})\s+)+", re.I)
# Words a name never holds: they make it a clause ("the team that owns billing").
_CLAUSE_WORDS = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "could",
        "should",
        "that",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "because",
        "if",
        "but",
        "not",
        "no",
        "than",
        "so",
        "then",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "it",
        "me",
        "us",
        "him",
        "them",
    }
)
# Words no name holds past its first word: possessives, "to" before a verb, verbs of small talk.
_INSIDE_NO_NAME = frozenset({"my", "your", "our", "his", "her", "their", "to", "sounds", "looks", "seems", "feels"})
# A name never starts with a preposition: "Onboarding notes for Jamal" names no "for Jamal".
_PREPOSITIONS = frozenset(
    {"for", "about", "to", "from", "with", "of", "in", "on", "at", "by", "behind", "into", "than", "as", "via", "like"}
)
# An identifier after a type word: it has a digit or a mark ("pg-3", "eu-west-1", "#ops", "acme/api").
_IDENTIFIER = re.compile(r"^(?=.*[\d_./:#@])\S+$")
# A time of day is when, not what: "The standup moved to 10am".
_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})?\s*(?:am|pm|h)?$", re.I)
_FIRST_PERSON = {"i", "me", "myself"}
_PERSON_PRONOUNS = {"he", "she", "him", "her"}
_PLURAL = {"i", "we", "you", "they"}
# Names for the team speaking: a change said by "we" may end a fact of any subject ("We dropped Redis").
WE = {"we", "team"}


def as_name(text: str) -> str | None:
    """The name ``text`` gives (without determiners or a type word before an identifier), or None when it is none."""
    text = text.strip().strip("\"'`“”‘’*_").rstrip(".,!?:;").strip().strip("\"'`“”‘’*_")
    text = DETERMINER.sub("", text)
    words = text.split()
    if len(words) >= 2 and words[-2].casefold() in name_words.TYPE_WORDS and _IDENTIFIER.match(words[-1]):
        words = words[-1:]  # "host pg-3", "the old VM host-7": the host is pg-3
    text = " ".join(words)
    if not words or len(words) > NAME_WORDS_MAX or not _NAME.fullmatch(text) or _CLOCK.match(text):
        return None
    if text.casefold() in WE:
        return text  # "We use Terraform": the team speaking
    if text.casefold() in name_words.NOT_NAMES_ALONE:
        return None
    if (
        words[0].casefold() in name_words.NOT_NAMES
        or words[0].casefold() in _PREPOSITIONS
        or any(word.casefold() in _CLAUSE_WORDS for word in words)
    ):
        return None
    # A phrase, not a name: "running my biz", "remember to pause", "Small acts of", "representing my".
    inner = [word.casefold() for word in words[1:]]
    if any(word in _INSIDE_NO_NAME for word in inner) or words[-1].casefold() in _PREPOSITIONS:
        return None
    return text


def looks_proper(name: str) -> bool:
    """Whether a name looks like a proper name or an identifier, not a common noun ("Alice", "pg-3", "AWS")."""
    return any(word[0].isupper() or _IDENTIFIER.match(word) for word in name.split())


# Verbs and their objects -----------------------------------------------------------------------------------------


# Where a fact's object ends: a new clause, or a reason.
_CLAUSE_END = re.compile(
    r"\s*(?:[;:]|\s[-–—]\s|,\s*(?:which|who|where|but|so|as|because|since|while|though|"
    r"although|when|['’]cause|cuz|coz)\b|\s+(?:because|since|so that|but|although|though|while|"
    r"whereas|which|who|where|when|['’]cause|cuz|coz)\b)",
    re.I,
)
# Between two objects (or two claims): "Redis and Postgres", "Redis, Kafka, and Postgres".
_LIST = re.compile(r"\s*,\s*(?:and\s+|as well as\s+)?|\s+(?:and|as well as|plus)\s+|\s*&\s*", re.I)
# A qualifier after the name: "Kubernetes in production", "Redis for caching", "email to Slack".
QUALIFIER = re.compile(
    r"\s+(?:over|rather than|than|instead of|in|for|since|during|from|until|via|through|with|"
    r"when|where|while|after|before|as of|at|on|to|by|as|of(?!\s+(?:the\s+)?[A-Z])|every|each|"
    r"these days|"
    r"most of the time|at the moment|right now|these|now)(?![\w-]).*$",
    re.I,
)
_TO_USE = re.compile(r"^(?:to use|using)\s+", re.I)
# The data a list item carries before its place: "... and metadata in DynamoDB" is about DynamoDB.
_DATA_THEN = re.compile(
    rf"^\s*(?:(?:the|all|its|our|raw|audit|access|error|usage|app|daily|nightly)\s+)?"
    rf"(?:{'|'.join(vocabulary.DATA_WORDS)})\s+(?:in|to|into|on|from)\s+(?=\S)",
    re.I,
)


def last_word(text: str) -> str:
    return text.strip().rstrip(".!").split()[-1].casefold() if text.strip() else ""


def _predicate_for(form: str, object_text: str, subject_text: str) -> vocabulary.Predicate | None:
    """The predicate a verb form says with this object and subject: the first of the table whose words fit."""
    for predicate in verb_forms.VERB_FORMS[" ".join(form.casefold().split())]:
        if (not predicate.objects or last_word(object_text) in predicate.objects) and (
            not predicate.subjects or last_word(subject_text) in predicate.subjects
        ):
            return predicate
    return None


# Clauses ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    subject: str
    predicate: str
    object: str
    said: str  # the clause it came from, as a clean sentence
    # Which name is the value the sentence gives: "X uses A" gives A, "A is our broker" and "A is the lead of X" A.
    value: str = "object"
    # Which name the sentence says first, as its grammatical subject: "Team A owns X" is (X, owned by, Team A).
    actor: str = "subject"


@dataclass
class Context:
    """What reading a clause needs from the text around it: who speaks, and who the last person named was."""

    speaker: str = ""  # "" when no one is named
    assistant: bool = False  # the agent speaks: "you" is the user, "I" the agent
    person: str = ""  # the last person a fact named as its subject, for "she" and "he"
    thing: str = ""  # the subject of the last fact on this line, for "it"
    last: str = ""  # the name the last clause ended with, for "which" and "who" after it
    said: Fact | None = None  # the last fact a clause said (or ended), for "X does now" after it
    now: dt.datetime | None = None


@dataclass
class Parsed:
    """What the fact rules made of a clause: the facts, or why the clause gave none."""

    facts: list[Fact] = field(default_factory=list)
    vague: str = ""  # why a name was refused
    past: bool = False  # the verb speaks of the past


def _person(text: str, context: Context, *, part: str) -> str | None:
    """A pronoun or first-person word resolved to who it names, or None when ``text`` is none."""
    word = text.strip().casefold()
    if word in _FIRST_PERSON or word in ("my", "mine"):
        if context.assistant:
            return ""  # the agent speaking of itself: nothing to learn about the user
        return context.speaker or USER
    if word in ("you", "your") and context.assistant:
        return USER
    if word in _PERSON_PRONOUNS and part == "subject":
        return context.person or ""
    if word == "it" and part == "subject":
        return context.thing or ""
    if word in ("which", "who") and part == "subject":
        return context.last or ""
    return None


def resolve(text: str, context: Context, *, part: str) -> str | None:
    """The name a subject or object names (a pronoun resolved), or None when it is no name."""
    text = text.strip()
    if part == "subject" and "," in text:
        text = text.rsplit(",", 1)[1]  # "In production, the API", "Noted, you": the subject follows the lead clause
    person = _person(text, context, part=part)
    if person is not None:
        return person or None
    return as_name(text)


def _objects(text: str) -> list[str]:
    """The objects a list names: "Redis, Kafka and Postgres" gives three, "both the SRE and the data teams" two."""
    text = re.sub(r"^\s*(?:both|either)\s+", "", text, flags=re.I)
    return [part for part in _LIST.split(text) if part.strip()]


def _subjects(text: str, context: Context) -> list[str | None]:
    """The subjects before a verb: one name, or a list joined by "and" ("Alice and Bob work on billing")."""
    if re.search(r"\s(?:and|&)\s", text):
        named = [resolve(part, context, part="subject") for part in _objects(text)]
        if None not in named:
            return named
    return [resolve(text, context, part="subject")]


def _svo(claim: str, context: Context) -> Parsed:
    """Facts said with a verb of the table: "X leads Y", "X uses A and B", "X runs on A and uses B"."""
    parsed = Parsed()
    for match in verb_forms.verb_patterns().at.finditer(claim):
        subject_text, form = claim[: match.start()], match["verb"]
        rest = claim[match.end() :]
        if not subject_text.strip():
            continue
        subjects = _subjects(subject_text, context) if len(subject_text.split()) <= 2 * NAME_WORDS_MAX else [None]
        if None in subjects:
            if not parsed.vague:
                parsed.vague = VAGUE_NAME.format(part="subject", name=subject_text.strip(), words=NAME_WORDS_MAX)
            continue
        # "likes X but hates Y": a second verb about the same subject, joined by "but".
        rest = verb_forms.verb_patterns().but.sub(" and ", rest)
        object_text = _CLAUSE_END.split(rest.rstrip(" .!"), maxsplit=1)[0]
        if form.casefold() in verb_forms.PAST_FORMS:
            parsed.past = True
            continue
        if form.casefold() == "own" and re.search(r"\b(?:my|your|our|his|her|their|its)\s*$", subject_text, re.I):
            continue  # "Congrats on opening your own shop": "own" after a possessive is no verb
        if form.casefold() == "like" and len(subjects) == 1 and subject_text.strip().casefold() not in _PLURAL:
            continue  # "Themes like sisterhood": "like" is a verb after I, we, you, they or a list only
        facts = _object_facts(subject_text, subjects, form, object_text, claim, context)
        if isinstance(facts, str):
            parsed.vague = facts
            continue
        if facts:
            parsed.facts, parsed.vague = facts, ""
            return parsed
    return parsed


def _clause_facts(part: str, subjects: list[str], context: Context) -> list[Fact]:
    """The facts of a list part that is a clause of its own; "it" and "its" there are the list's subject."""
    thing, context.thing = context.thing, subjects[0]
    try:
        # A verb of the table or a copula: an open verb is too loose a reading for a list's tail.
        return _svo(part, context).facts or _copula(part, context).facts
    finally:
        context.thing = thing


def _object_facts(
    subject_text: str, subjects: list[str], form: str, object_text: str, claim: str, context: Context
) -> list[Fact] | str:
    """The facts of one verb and its objects; a second verb in the list starts a second claim about the subjects."""
    facts = []
    parts = _objects(object_text)
    whole = clean(claim) if len(parts) == 1 and len(subjects) == 1 else ""
    for number, part in enumerate(parts):
        again = verb_forms.verb_patterns().first.match(part.strip())
        if again:  # "... and uses Redis": a second claim about the same subject
            form, part = again["verb"], again["object"]
            if form.casefold() in verb_forms.PAST_FORMS:
                continue
        elif number and len(part.split()) > 2 and (own := _clause_facts(part.strip(), subjects, context)):
            facts += own  # "..., and Omar leads Orion", "..., and Farid is its tech lead": a claim of its own
            continue
        part = _DATA_THEN.sub("", part)  # "stores raw events in S3 and metadata in DynamoDB"
        predicate = _predicate_for(form, QUALIFIER.sub("", part), subject_text)
        written = _TO_USE.sub("", part.strip()) if predicate and predicate.name == "prefers" else part.strip()
        name = resolve(QUALIFIER.sub("", written), context, part="object") if predicate else None
        if name is None:
            # A list that trails off into something else keeps what came before it.
            return facts or (
                VAGUE_NAME.format(part="object", name=written, words=NAME_WORDS_MAX) if predicate else VAGUE
            )
        for subject in subjects:
            subject_of, object_of = (name, subject) if predicate.reverse else (subject, name)
            # Several facts in one clause: each says its own, so no two share a content.
            said = whole or clean(f"{subject if len(subjects) > 1 else subject_text.strip()} {form} {written}")
            facts.append(
                Fact(subject_of, predicate.name, object_of, said, actor="object" if predicate.reverse else "subject")
            )
    return facts


# Copulas: (pattern, how its parts make a triple). "x" holds the role, "y" is the other party.
_ROLE = r"(?:new\s+|current\s+)?(?P<role>[\w][\w -]{0,40}?)"
COPULAS = (
    # "Bob is the tech lead of Payments", "Ravi is the product owner for Checkout", "Paris is the capital of France"
    (
        "role of",
        re.compile(
            rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:the|our|their|its)\s+{_ROLE}\s+"
            rf"(?:of|for|on|at)\s+(?P<y>.+)$",
            re.I,
        ),
    ),
    # "Olga's manager is Pieter", "The API's database is Postgres"
    ("'s role", re.compile(rf"^(?P<y>.+?)['’]s\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
    # "The default region for staging is us-east-2", "The lead of Orion is Kenji"
    (
        "role of is",
        re.compile(rf"^(?:the\s+)?{_ROLE}\s+(?:of|for)\s+(?P<y>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I),
    ),
    # "Beatriz is a staff engineer on the payments team", "Dana is a designer at Acme"
    (
        "member role",
        re.compile(
            rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:a|an)\s+{_ROLE}\s+(?P<at>on|in|at|with)\s+"
            rf"(?P<y>.+)$",
            re.I,
        ),
    ),
    # "The CTO is Maria", "The tech lead is Bob": a known role, held by a proper name
    ("the role is", re.compile(rf"^the\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
    # "Farid is its tech lead", "Ana is his manager": the role of the thing or person just named
    ("its role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<whose>its|their|his|her)\s+{_ROLE}$", re.I)),
    # "Declan is my brother", "Pieter is my manager"
    ("my role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<whose>my)\s+{_ROLE}$", re.I)),
    # "Kafka is our message broker", "Bob is our tech lead"
    (
        "our role",
        re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:our|the team's|the company's)\s+{_ROLE}$", re.I),
    ),
    # "Our message broker is Kafka", "My preferred editor is Neovim", "My manager is Pieter"
    ("role is", re.compile(rf"^(?P<whose>our|my)\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
)


def role_of(role: str) -> tuple[str, bool] | None:
    """(predicate, the holder is its subject) for a role ("tech lead" -> leads), or None for any other noun."""
    words = role.casefold().split()
    for size in (2, 1):
        if len(words) >= size and " ".join(words[-size:]) in ROLES:
            return ROLES[" ".join(words[-size:])]
    return None


def _copula(claim: str, context: Context) -> Parsed:
    parsed = Parsed()
    claim = claim.rstrip(" .!")
    for rule, pattern in COPULAS:
        match = pattern.match(claim)
        if not match:
            continue
        groups = match.groupdict()
        role = " ".join(groups["role"].split())
        x_text = _CLAUSE_END.split(groups["x"].rstrip(" .!"), maxsplit=1)[0]
        whose = (groups.get("whose") or "").casefold()
        if whose in ("its", "their", "his", "her"):
            y = context.thing if whose in ("its", "their") else context.person
            if not y:
                continue
        elif whose:
            y = context.speaker or USER if whose == "my" else ""
            if whose == "my" and context.assistant:
                continue
        else:
            y_text = _CLAUSE_END.split((groups.get("y") or "").rstrip(" .!"), maxsplit=1)[0]
            y = resolve(QUALIFIER.sub("", y_text), context, part="object") if groups.get("y") else ""
            if y is None:
                parsed.vague = VAGUE_NAME.format(part="object", name=y_text.strip(), words=NAME_WORDS_MAX)
                continue
        x = resolve(
            QUALIFIER.sub("", x_text) if rule in ("'s role", "role of is", "role is", "the role is") else x_text,
            context,
            part="subject",
        )
        if rule == "my role":  # "Declan is my brother" says what "My brother is Declan" says
            rule = "role is"
        if rule == "the role is" and (x is None or role_of(role) is None or not looks_proper(x)):
            continue
        preference = role.split()[0].casefold() in vocabulary.PREFERENCE_WORDS
        if rule in ("our role", "role is") and x is not None and not (looks_proper(x) or preference):
            continue  # "Our on-call rotation is weekly": no name holds the role
        if x is None or len(role.split()) > 4:
            parsed.vague = VAGUE_NAME.format(part="subject", name=x_text.strip(), words=NAME_WORDS_MAX)
            continue
        if (
            not _noun_phrase(role)
            or role.split()[-1].casefold() in name_words.NOT_NAMES
            or (role_of(role) is None and not preference and not looks_proper(x))
        ):
            continue  # "Hiking is an awesome way to bond with nature", "That sense of accomplishment is awesome"
        if rule == "member role" and not (looks_proper(y) or last_word(y) in vocabulary.GROUP_WORDS):
            continue
        parsed.facts = [role_fact(rule, role, x, y, groups.get("at"), clean(claim))]
        return parsed
    return parsed


def _noun_phrase(words: str) -> bool:
    """Whether a role reads as a noun phrase: no pronoun, verb of a clause or preposition in it."""
    return not any(word.casefold() in _CLAUSE_WORDS or word.casefold() in _PREPOSITIONS for word in words.split())


def role_fact(rule: str, role: str, x: str, y: str, at: str | None, said: str) -> Fact:
    """The triple a copula gives: a role's predicate, a preference, membership, or the role noun itself."""
    words = role.split()
    if words[0].casefold() in vocabulary.PREFERENCE_WORDS and y:
        return Fact(y, "prefers", x, said)
    known = role_of(role)
    if y and known is not None:
        predicate, holder_first = known
        return Fact(x, predicate, y, said, value="subject") if holder_first else Fact(y, predicate, x, said)
    if rule == "member role":
        return Fact(x, "works at" if at and at.casefold() == "at" else "member of", y, said)
    if not y:  # "Kafka is our message broker"
        return Fact(x, "is", role, said, value="subject")
    return Fact(y, role.casefold(), x, said)


# A verb said between two names that no table knows: "Alice speaks Portuguese" is in the table, "The scheduler
# triggers the export" is not. Kept as said, when one of the names is a proper name.
_OPEN_VERB = re.compile(
    r"^(?P<subject>.+?)\s+(?P<verb>[a-z]{3,}(?:s|es))(?:\s+(?P<particle>to|on|in|with|from|"
    r"into|at|by|over|under|against|through|behind|inside|within|via|around|across|"
    r"alongside|beside|near))?\s+(?P<object>.+)$"
)
_NOT_VERBS = frozenset(
    {
        "is",
        "was",
        "has",
        "does",
        "this",
        "its",
        "his",
        "hers",
        "yours",
        "ours",
        "theirs",
        "us",
        "always",
        "sometimes",
        "perhaps",
        "always",
        "less",
        "unless",
        "across",
        "towards",
        "afterwards",
        "news",
        "status",
        "series",
        "analysis",
        "basis",
        "access",
        "process",
        "class",
        "address",
        "business",
        "success",
        "progress",
        "yes",
        "thanks",
        "ops",
        "devops",
        "sometimes",
    }
)


def _open_verb(claim: str, context: Context) -> Parsed:
    match = _OPEN_VERB.match(claim)
    if not match or match["verb"] in _NOT_VERBS or match["verb"].endswith(("ss", "ous", "ics", "us")):
        return Parsed()
    subject = resolve(match["subject"], context, part="subject")
    object_text = _CLAUSE_END.split(match["object"].rstrip(" .!"), maxsplit=1)[0]
    # Named as written: "Blue calms me" or "The pendant reminds me of her" say nothing lasting of the speaker.
    object_ = as_name(QUALIFIER.sub("", object_text))
    # The object, which no sentence starts with, must look like a proper name: "Alice speaks Portuguese", not
    # "The meeting takes an hour".
    if subject is None or object_ is None or not looks_proper(object_) or not _noun_phrase(subject):
        return Parsed()
    predicate = match["verb"] + (f" {match['particle']}" if match["particle"] else "")
    return Parsed(facts=[Fact(subject, predicate.casefold(), object_, clean(claim))])


def facts_of(claim: str, context: Context) -> Parsed:
    """The facts a clause states, by the verb table, then a copula, then an open verb."""
    parsed = _svo(claim, context)
    if parsed.facts:
        return parsed
    copula = _copula(claim, context)
    if copula.facts:
        return copula
    opened = _open_verb(claim, context)
    if opened.facts:
        return opened
    return Parsed(vague=parsed.vague or copula.vague, past=parsed.past)


def clean(text: str) -> str:
    """One sentence: spaces collapsed, the first letter upper case, a full stop at the end."""
    text = " ".join(text.split()).strip(" ,;:-–—")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."
