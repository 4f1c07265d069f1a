"""Learning from text: facts, decisions, skills and stated changes found by rules, in English, with no network.

``extract(text, now=...)`` reads the text top-down and returns what it found and what it passed over:

1. Speakers. A prefix ("Alice:", "[10:42] mei:", "User:") names who speaks on its line and
   on the lines after it; "I", "me" and "my" are then that speaker ("user" for User or Human,
   and when no one is named). A label ("Summary:", "Notes:") is dropped (``vocabulary.LABELS``).
2. Skills: a goal ("To deploy the API:", "How to rotate keys:") followed by two or more
   numbered or bulleted steps, on its lines or inline, wherever the goal starts a sentence;
   or "To <goal>, <step>, then <step>".
3. The rest is cut into sentences (at a line's end, and after . ! or ? and a space) and
   clauses (at ";"). A leading bullet and a lead-in ("OK, ", "Plus, ") are dropped, and a
   stated time ("since March", "last month") is taken out of the clause (``knowledge.dates``).
4. Each clause meets the rules below in order, and the first that applies decides:
   a question is skipped; a hypothetical, plan, wish or guess is skipped; a decision
   ("we decided to X over Z because Y") is taken; a stated change ("moved from A to B",
   "replaced X as lead of Y", "no longer", "left X", "now ... instead of A") is taken as an
   ending of the facts it names and the fact it states; a negation or a statement about the
   past is skipped; a fact is taken; anything else is skipped as a pleasantry or as too vague.
   The skip rules read the claim only, not its reason ("We chose Go because it might scale").
5. Facts come from a verb of ``vocabulary.PREDICATES`` ("X leads Y", "Y is maintained by X"),
   a copula ("X is the lead of Y", "Y's manager is X", "X is our message broker", "X is a
   staff engineer on Y"), or, failing both, a verb said between two names, kept as said.
   A subject and object must be names: at most ``NAME_WORDS_MAX`` words, no pronoun or
   filler; a type word before an identifier is dropped ("host pg-3" is pg-3).

Decisions and skills carry no triple. Every item keeps the span of the input it came from.
What an ending ends is decided by the store (``memories.services.learn``): the current facts
that match it.
"""

import datetime as dt
import re
from dataclasses import dataclass, field

from knowledge import dates, vocabulary
from knowledge.vocabulary import PREDICATES, ROLES

FACT = "fact"
DECISION = "decision"
SKILL = "skill"

# The longest text one call reads; longer is refused as a whole (memories.services.learn).
TEXT_MAX_CHARS = 20_000
# A subject or object longer than this is a clause, not a name.
NAME_WORDS_MAX = 6
# The subject of a first-person fact when no speaker is named.
USER = "user"


@dataclass(frozen=True)
class Item:
    """One thing learned: its kind, a clean sentence to store, and where in the input it came from."""

    kind: str
    content: str
    start: int  # character offsets in the input, end exclusive
    end: int
    subject: str = ""
    predicate: str = ""
    object: str = ""
    title: str = ""
    choice: str = ""  # decisions: what was chosen
    alternatives: tuple[str, ...] = ()  # decisions: what it was chosen over, when named
    reason: str = ""  # decisions: the "because" part
    steps: tuple[str, ...] = ()  # skills
    valid_from: dt.datetime | None = None  # a stated time the fact holds from
    valid_to: dt.datetime | None = None  # a stated time it holds until


@dataclass(frozen=True)
class Ending:
    """A stated change: which current facts it ends, and what takes their place.

    A current fact matches when its subject, predicate and object match the ones given
    (None or empty: any), names compared in normal form; with ``either_way`` the two names
    may stand either way round. Each fact it ends is restated with ``becomes`` in place of
    its ``replaced`` name ("subject" or "object"), when ``becomes`` is given. When no
    current fact matches, the facts of ``otherwise`` are stored instead.
    """

    rule: str  # which change rule found it (docs/learning.md)
    content: str
    start: int
    end: int
    subject: str | None
    predicates: tuple[str, ...]
    object: str | None
    either_way: bool = False
    becomes: str = ""
    replaced: str = ""
    at: dt.datetime | None = None  # when it changed; None: at the time of the call
    otherwise: tuple[Item, ...] = ()

    def describe(self) -> str:
        """The facts it ends, in words: "ledger uses Oracle", "Pieter (any relation) billing service"."""
        first, *others = self.predicates or ("(any relation)",)
        predicate = f"{first} (or {', '.join(others)})" if others else first
        return f"{self.subject or '(anyone)'} {predicate} {self.object or '(anything)'}"


@dataclass(frozen=True)
class Skipped:
    """A sentence that taught nothing, and why."""

    text: str
    start: int
    end: int
    reason: str


@dataclass(frozen=True)
class Extraction:
    items: tuple[Item, ...]
    skipped: tuple[Skipped, ...]
    endings: tuple[Ending, ...] = ()


# Skip rules ------------------------------------------------------------------------------------------------------

# (reason, pattern), tried in this order; see the module's docstring for when each applies.
QUESTION = ("question", re.compile(
    r"\?\s*$|^(?:who|whom|whose|what|when|where|why|which|how|should|shall|could|would|can|do|does|did|is|are|"
    r"will|won't|isn't|aren't|doesn't|don't|am|was|were|has|have|anyone|anybody)\b(?!\s*:)", re.I))
HYPOTHETICAL = ("hypothetical: a possibility, plan, wish or guess, not something that holds", re.compile(
    r"\b(?:if|unless|might|may|could|would(?!\s+rather)|should|shall|will|maybe|perhaps|possibly|probably|suppose|"
    r"supposing|"
    r"assuming|whether|hopefully|wish|wishes|consider|considering|let's|let us|ought|eventually|someday|"
    r"think|believe|guess|seems?|apparently|must|soon|tomorrow|later|once|"
    r"next\s+(?:week|month|quarter|year|sprint|release|time)|"
    r"(?:plan|plans|planning|want|wants|wanted|going|intend|intends|hope|hopes|need|needs|have|has|try|trying|"
    r"would like|'d like) to|\w+'ll|\w+'d(?!\s+rather))\b", re.I))
NEGATION = ("negation: says what does not hold", re.compile(
    r"\b(?:not|no|never|none|nor|neither|cannot|nobody|nothing)\b|n't\b", re.I))
PAST = ("past: says what held before, not what holds", re.compile(
    r"\b(?:used to|formerly|previously|in the past|back then|at the time|anymore|any more)\b", re.I))
PLEASANTRY = ("pleasantry: nothing to learn", re.compile(
    r"^(?:thanks|thank you|thx|ty|cheers|great|good|nice|cool|awesome|perfect|ok|okay|sure|yes|yep|yeah|no problem|"
    r"got it|sounds good|lgtm|hello|hi|hey|good morning|good night|bye|see you|welcome|you're welcome|will do|"
    r"done|noted|understood|agreed|right|indeed|exactly|haha|lol|wow|oops|sorry|congrats|congratulations)\b", re.I))
VAGUE = "vague: no rule found a fact, decision or skill in it"
VAGUE_NAME = "vague: the {part} ({name!r}) is not a name (a pronoun, filler, or more than {words} words)"
FUTURE = "hypothetical: the time it states ({when}) is still to come"

# Names -----------------------------------------------------------------------------------------------------------

# A name: words of letters, digits and the marks names use (Node.js, C#, eu-west-1, @org/pkg, AWS (Ireland)).
_NAME = re.compile(r"[\w][\w .+#/@&'()-]*", re.UNICODE)
_DETERMINER = re.compile(rf"^(?:(?:{'|'.join(vocabulary.DETERMINERS)})\s+)+", re.I)
# Words a name never holds: they make it a clause ("the team that owns billing").
_CLAUSE_WORDS = frozenset({"is", "are", "was", "were", "be", "been", "being", "has", "have", "had", "do", "does",
                           "did", "will", "would", "can", "could", "should", "that", "which", "who", "whom",
                           "whose", "when", "where", "because", "if", "but", "not", "no", "than", "so", "then",
                           "i", "we", "you", "he", "she", "they", "it", "me", "us", "him", "them"})
# Words no name holds past its first word: possessives, "to" before a verb, verbs of small talk.
_INSIDE_NO_NAME = frozenset({"my", "your", "our", "his", "her", "their", "to", "sounds", "looks", "seems", "feels"})
# A name never starts with a preposition: "Onboarding notes for Jamal" names no "for Jamal".
_PREPOSITIONS = frozenset({"for", "about", "to", "from", "with", "of", "in", "on", "at", "by", "behind", "into",
                           "than", "as", "via", "like"})
# An identifier after a type word: it has a digit or a mark ("pg-3", "eu-west-1", "#ops", "acme/api").
_IDENTIFIER = re.compile(r"^(?=.*[\d_./:#@])\S+$")
# A time of day is when, not what: "The standup moved to 10am".
_CLOCK = re.compile(r"^\d{1,2}(?::\d{2})?\s*(?:am|pm|h)?$", re.I)
_FIRST_PERSON = {"i", "me", "myself"}
_PERSON_PRONOUNS = {"he", "she", "him", "her"}
_PLURAL = {"i", "we", "you", "they"}
# Names for the team speaking: a change said by "we" may end a fact of any subject ("We dropped Redis").
_WE = {"we", "team"}


def _name(text: str) -> str | None:
    """The name ``text`` gives (without determiners or a type word before an identifier), or None when it is none."""
    text = text.strip().strip("\"'`“”‘’*_").rstrip(".,!?:;").strip().strip("\"'`“”‘’*_")
    text = _DETERMINER.sub("", text)
    words = text.split()
    if len(words) >= 2 and words[-2].casefold() in vocabulary.TYPE_WORDS and _IDENTIFIER.match(words[-1]):
        words = words[-1:]  # "host pg-3", "the old VM host-7": the host is pg-3
    text = " ".join(words)
    if not words or len(words) > NAME_WORDS_MAX or not _NAME.fullmatch(text) or _CLOCK.match(text):
        return None
    if text.casefold() in _WE:
        return text  # "We use Terraform": the team speaking
    if text.casefold() in vocabulary.NOT_NAMES_ALONE:
        return None
    if words[0].casefold() in vocabulary.NOT_NAMES or words[0].casefold() in _PREPOSITIONS or any(
            word.casefold() in _CLAUSE_WORDS for word in words):
        return None
    # A phrase, not a name: "running my biz", "remember to pause", "Small acts of", "representing my".
    inner = [word.casefold() for word in words[1:]]
    if any(word in _INSIDE_NO_NAME for word in inner) or words[-1].casefold() in _PREPOSITIONS:
        return None
    return text


def _proper(name: str) -> bool:
    """Whether a name looks like a proper name or an identifier, not a common noun ("Alice", "pg-3", "AWS")."""
    return any(word[0].isupper() or _IDENTIFIER.match(word) for word in name.split())


# Verbs -----------------------------------------------------------------------------------------------------------


def _inflections(base: str) -> tuple[str, str, str, str]:
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
    third, past, participle, ing = _inflections(head)
    now = [f"{third}{tail}", f"{head}{tail}"] + [f"{be} {ing}{tail}" for be in _BE[:6]] + \
        [f"{have} {participle}{tail}" for have in _HAVE] + [f"{have} been {ing}{tail}" for have in _HAVE]
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


_VERBS, _PAST_FORMS = _verb_table()
_ADVERB = "|".join(vocabulary.ADVERBS + ("now",))
_VERB = "|".join(re.escape(form) for form in sorted(_VERBS, key=len, reverse=True))
# Where a verb of the table may stand: between a subject and an object, adverbs allowed before it.
_VERB_AT = re.compile(rf"(?<![\w'-])(?:(?:{_ADVERB})\s+)*(?P<verb>{_VERB})\s+(?=\S)", re.I)
_VERB_FIRST = re.compile(rf"^(?:(?:{_ADVERB})\s+)*(?P<verb>{_VERB})\s+(?P<object>.+)$", re.I)
_NOW = re.compile(r"\bnow\b", re.I)
_BUT_VERB = re.compile(rf"\s*,?\s+(?:but|while|whereas|yet)\s+(?=(?:{_VERB})\s)", re.I)
# Where a fact's object ends: a new clause, or a reason.
_CLAUSE_END = re.compile(r"\s*(?:[;:]|\s[-–—]\s|,\s*(?:which|who|where|but|so|as|because|since|while|though|"
                         r"although|when|['’]cause|cuz|coz)\b|\s+(?:because|since|so that|but|although|though|while|"
                         r"whereas|which|who|where|when|['’]cause|cuz|coz)\b)", re.I)
# Between two objects (or two claims): "Redis and Postgres", "Redis, Kafka, and Postgres".
_LIST = re.compile(r"\s*,\s*(?:and\s+|as well as\s+)?|\s+(?:and|as well as|plus)\s+|\s*&\s*", re.I)
# A qualifier after the name: "Kubernetes in production", "Redis for caching", "email to Slack".
_QUALIFIER = re.compile(r"\s+(?:over|rather than|than|instead of|in|for|since|during|from|until|via|through|with|"
                        r"when|where|while|after|before|as of|at|on|to|by|as|of(?!\s+(?:the\s+)?[A-Z])|every|each|"
                        r"these days|"
                        r"most of the time|at the moment|right now|these|now)(?![\w-]).*$", re.I)
_TO_USE = re.compile(r"^(?:to use|using)\s+", re.I)
# The data a list item carries before its place: "... and metadata in DynamoDB" is about DynamoDB.
_DATA_THEN = re.compile(rf"^\s*(?:(?:the|all|its|our|raw|audit|access|error|usage|app|daily|nightly)\s+)?"
                        rf"(?:{'|'.join(vocabulary.DATA_WORDS)})\s+(?:in|to|into|on|from)\s+(?=\S)", re.I)


def _last_word(text: str) -> str:
    return text.strip().rstrip(".!").split()[-1].casefold() if text.strip() else ""


def _predicate_for(form: str, object_text: str, subject_text: str) -> vocabulary.Predicate | None:
    """The predicate a verb form says with this object and subject: the first of the table whose words fit."""
    for predicate in _VERBS[" ".join(form.casefold().split())]:
        if (not predicate.objects or _last_word(object_text) in predicate.objects) and (
                not predicate.subjects or _last_word(subject_text) in predicate.subjects):
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


def _resolve(text: str, context: Context, *, part: str) -> str | None:
    """The name a subject or object names (a pronoun resolved), or None when it is no name."""
    person = _person(text, context, part=part)
    if person is not None:
        return person or None
    text = text.strip()
    if part == "subject" and "," in text:
        text = text.rsplit(",", 1)[1]  # "In production, the API": the subject follows the lead clause
    return _name(text)


def _objects(text: str) -> list[str]:
    """The objects a list names: "Redis, Kafka and Postgres" gives three, "both the SRE and the data teams" two."""
    text = re.sub(r"^\s*(?:both|either)\s+", "", text, flags=re.I)
    return [part for part in _LIST.split(text) if part.strip()]


def _subjects(text: str, context: Context) -> list[str | None]:
    """The subjects before a verb: one name, or a list joined by "and" ("Alice and Bob work on billing")."""
    if re.search(r"\s(?:and|&)\s", text):
        named = [_resolve(part, context, part="subject") for part in _objects(text)]
        if None not in named:
            return named
    return [_resolve(text, context, part="subject")]


def _svo(claim: str, context: Context) -> Parsed:
    """Facts said with a verb of the table: "X leads Y", "X uses A and B", "X runs on A and uses B"."""
    parsed = Parsed()
    for match in _VERB_AT.finditer(claim):
        subject_text, form = claim[:match.start()], match["verb"]
        rest = claim[match.end():]
        if not subject_text.strip():
            continue
        subjects = _subjects(subject_text, context) if len(subject_text.split()) <= 2 * NAME_WORDS_MAX else [None]
        if None in subjects:
            if not parsed.vague:
                parsed.vague = VAGUE_NAME.format(part="subject", name=subject_text.strip(), words=NAME_WORDS_MAX)
            continue
        # "likes X but hates Y": a second verb about the same subject, joined by "but".
        rest = _BUT_VERB.sub(" and ", rest)
        object_text = _CLAUSE_END.split(rest.rstrip(" .!"), maxsplit=1)[0]
        if form.casefold() in _PAST_FORMS:
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


def _object_facts(subject_text: str, subjects: list[str], form: str, object_text: str, claim: str,
                  context: Context) -> list[Fact] | str:
    """The facts of one verb and its objects; a second verb in the list starts a second claim about the subjects."""
    facts = []
    parts = _objects(object_text)
    whole = _clean(claim) if len(parts) == 1 and len(subjects) == 1 else ""
    for number, part in enumerate(parts):
        again = _VERB_FIRST.match(part.strip())
        if again:  # "... and uses Redis": a second claim about the same subject
            form, part = again["verb"], again["object"]
            if form.casefold() in _PAST_FORMS:
                continue
        elif number and len(part.split()) > 2 and (own := _clause_facts(part.strip(), subjects, context)):
            facts += own  # "..., and Omar leads Orion", "..., and Farid is its tech lead": a claim of its own
            continue
        part = _DATA_THEN.sub("", part)  # "stores raw events in S3 and metadata in DynamoDB"
        predicate = _predicate_for(form, _QUALIFIER.sub("", part), subject_text)
        written = _TO_USE.sub("", part.strip()) if predicate and predicate.name == "prefers" else part.strip()
        name = _resolve(_QUALIFIER.sub("", written), context, part="object") if predicate else None
        if name is None:
            # A list that trails off into something else keeps what came before it.
            return facts or (VAGUE_NAME.format(part="object", name=written, words=NAME_WORDS_MAX) if predicate
                             else VAGUE)
        for subject in subjects:
            subject_of, object_of = (name, subject) if predicate.reverse else (subject, name)
            # Several facts in one clause: each says its own, so no two share a content.
            said = whole or _clean(f"{subject if len(subjects) > 1 else subject_text.strip()} {form} {written}")
            facts.append(Fact(subject_of, predicate.name, object_of, said,
                              actor="object" if predicate.reverse else "subject"))
    return facts


# Copulas: (pattern, how its parts make a triple). "x" holds the role, "y" is the other party.
_ROLE = r"(?:new\s+|current\s+)?(?P<role>[\w][\w -]{0,40}?)"
COPULAS = (
    # "Bob is the tech lead of Payments", "Ravi is the product owner for Checkout", "Paris is the capital of France"
    ("role of", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:the|our|their|its)\s+{_ROLE}\s+(?:of|for|on|at)\s+"
                           rf"(?P<y>.+)$", re.I)),
    # "Olga's manager is Pieter", "The API's database is Postgres"
    ("'s role", re.compile(rf"^(?P<y>.+?)['’]s\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
    # "The default region for staging is us-east-2", "The lead of Orion is Kenji"
    ("role of is", re.compile(rf"^(?:the\s+)?{_ROLE}\s+(?:of|for)\s+(?P<y>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$",
                              re.I)),
    # "Beatriz is a staff engineer on the payments team", "Dana is a designer at Acme"
    ("member role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:a|an)\s+{_ROLE}\s+(?P<at>on|in|at|with)\s+"
                               rf"(?P<y>.+)$", re.I)),
    # "The CTO is Maria", "The tech lead is Bob": a known role, held by a proper name
    ("the role is", re.compile(rf"^the\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
    # "Farid is its tech lead", "Ana is his manager": the role of the thing or person just named
    ("its role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<whose>its|their|his|her)\s+{_ROLE}$", re.I)),
    # "Declan is my brother", "Pieter is my manager"
    ("my role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?P<whose>my)\s+{_ROLE}$", re.I)),
    # "Kafka is our message broker", "Bob is our tech lead"
    ("our role", re.compile(rf"^(?P<x>.+?)\s+(?:is|are)\s+(?:now\s+)?(?:our|the team's|the company's)\s+{_ROLE}$",
                            re.I)),
    # "Our message broker is Kafka", "My preferred editor is Neovim", "My manager is Pieter"
    ("role is", re.compile(rf"^(?P<whose>our|my)\s+{_ROLE}\s+(?:is|are)\s+(?:now\s+)?(?P<x>.+)$", re.I)),
)


def _role(role: str) -> tuple[str, bool] | None:
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
            y = _resolve(_QUALIFIER.sub("", y_text), context, part="object") if groups.get("y") else ""
            if y is None:
                parsed.vague = VAGUE_NAME.format(part="object", name=y_text.strip(), words=NAME_WORDS_MAX)
                continue
        x = _resolve(_QUALIFIER.sub("", x_text) if rule in ("'s role", "role of is", "role is", "the role is")
                     else x_text, context, part="subject")
        if rule == "my role":  # "Declan is my brother" says what "My brother is Declan" says
            rule = "role is"
        if rule == "the role is" and (x is None or _role(role) is None or not _proper(x)):
            continue
        preference = role.split()[0].casefold() in vocabulary.PREFERENCE_WORDS
        if rule in ("our role", "role is") and x is not None and not (_proper(x) or preference):
            continue  # "Our on-call rotation is weekly": no name holds the role
        if x is None or len(role.split()) > 4:
            parsed.vague = VAGUE_NAME.format(part="subject", name=x_text.strip(), words=NAME_WORDS_MAX)
            continue
        if not _noun_phrase(role) or role.split()[-1].casefold() in vocabulary.NOT_NAMES or (
                _role(role) is None and not preference and not _proper(x)):
            continue  # "Hiking is an awesome way to bond with nature", "That sense of accomplishment is awesome"
        if rule == "member role" and not (_proper(y) or _last_word(y) in vocabulary.GROUP_WORDS):
            continue
        parsed.facts = [_role_fact(rule, role, x, y, groups.get("at"), _clean(claim))]
        return parsed
    return parsed


def _noun_phrase(words: str) -> bool:
    """Whether a role reads as a noun phrase: no pronoun, verb of a clause or preposition in it."""
    return not any(word.casefold() in _CLAUSE_WORDS or word.casefold() in _PREPOSITIONS for word in words.split())


def _role_fact(rule: str, role: str, x: str, y: str, at: str | None, said: str) -> Fact:
    """The triple a copula gives: a role's predicate, a preference, membership, or the role noun itself."""
    words = role.split()
    if words[0].casefold() in vocabulary.PREFERENCE_WORDS and y:
        return Fact(y, "prefers", x, said)
    known = _role(role)
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
_OPEN_VERB = re.compile(r"^(?P<subject>.+?)\s+(?P<verb>[a-z]{3,}(?:s|es))(?:\s+(?P<particle>to|on|in|with|from|"
                        r"into|at|by|over|under|against|through|behind|inside|within|via|around|across|"
                        r"alongside|beside|near))?\s+(?P<object>.+)$")
_NOT_VERBS = frozenset({"is", "was", "has", "does", "this", "its", "his", "hers", "yours", "ours", "theirs", "us",
                        "always", "sometimes", "perhaps", "always", "less", "unless", "across", "towards", "afterwards",
                        "news", "status", "series", "analysis", "basis", "access", "process", "class", "address",
                        "business", "success", "progress", "yes", "thanks", "ops", "devops", "sometimes"})


def _open_verb(claim: str, context: Context) -> Parsed:
    match = _OPEN_VERB.match(claim)
    if not match or match["verb"] in _NOT_VERBS or match["verb"].endswith(("ss", "ous", "ics", "us")):
        return Parsed()
    subject = _resolve(match["subject"], context, part="subject")
    object_text = _CLAUSE_END.split(match["object"].rstrip(" .!"), maxsplit=1)[0]
    # Named as written: "Blue calms me" or "The pendant reminds me of her" say nothing lasting of the speaker.
    object_ = _name(_QUALIFIER.sub("", object_text))
    # The object, which no sentence starts with, must look like a proper name: "Alice speaks Portuguese", not
    # "The meeting takes an hour".
    if subject is None or object_ is None or not _proper(object_) or not _noun_phrase(subject):
        return Parsed()
    predicate = match["verb"] + (f" {match['particle']}" if match["particle"] else "")
    return Parsed(facts=[Fact(subject, predicate.casefold(), object_, _clean(claim))])


def _facts(claim: str, context: Context) -> Parsed:
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


# Changes ---------------------------------------------------------------------------------------------------------

_CHANGED = "|".join(re.escape(verb) for verb in vocabulary.CHANGE_VERBS)
_TO = r"(?:to|over\s+to|onto|into|for)"
# "The ledger switched from Oracle to Postgres", "We moved the wiki from Confluence to Notion", "X moved to B from A"
_FROM = r"(?:from|off(?:\s+of)?)"
FROM_TO = (
    re.compile(rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+|was\s+|were\s+|has\s+been\s+|have\s+been\s+|got\s+)?"
               rf"(?:(?:just|recently|finally)\s+)?(?P<verb>{_CHANGED})"
               rf"(?:\s+(?:over|back))?(?:\s+(?P<what>.+?))?\s+{_FROM}\s+(?P<old>.+?)\s+{_TO}\s+(?P<new>.+)$", re.I),
    re.compile(rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?P<verb>{_CHANGED})"
               rf"(?:\s+(?:over|back))?(?:\s+(?P<what>.+?))?\s+{_TO}\s+(?P<new>.+?)\s+{_FROM}\s+(?P<old>.+)$", re.I),
)
_MOVED = r"(?:moved|relocated|switched|migrated|transitioned|upgraded|ported|converted)"
# "Kai moved to Amsterdam", "The API switched to ECS": the subject's one-valued facts take the new value.
MOVED_TO = re.compile(rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?P<verb>{_MOVED})"
                      rf"(?:\s+over)?(?:\s+(?P<what>.+?))?\s+(?:to|over\s+to|onto|into)\s+(?P<new>.+)$", re.I)
_SUCCEEDED = r"(?:replaced|succeeded|took\s+over\s+from|has\s+taken\s+over\s+from|have\s+taken\s+over\s+from)"
# "Kenji replaced Nadia as lead of Orion", "Tariq took over from Ines as lead of the mobile team",
# "Pulsar replaced Kafka", "Kenji took over Orion from Nadia", "We replaced Jenkins with GitHub Actions",
# "Kafka was replaced by Pulsar".
REPLACED = (
    ("with", re.compile(r"^(?P<who>.+?)\s+(?:has\s+|have\s+)?(?:replaced|swapped(?:\s+out)?|substituted)\s+"
                        r"(?P<old>.+?)\s+(?:with|for|by)\s+(?P<new>.+)$", re.I)),
    ("as", re.compile(rf"^(?P<new>.+?)\s+(?:has\s+|have\s+)?{_SUCCEEDED}\s+(?P<old>.+?)(?:\s+as\s+(?:the\s+|our\s+)?"
                      rf"(?:new\s+)?(?P<role>[\w -]+?)(?:\s+(?:of|for|on|at)\s+(?P<of>.+))?)?$", re.I)),
    ("took over", re.compile(r"^(?P<new>.+?)\s+(?:has\s+|have\s+)?(?:took|taken)\s+over\s+(?:as\s+(?:the\s+)?"
                             r"(?:new\s+)?(?P<role>[\w -]+?)\s+(?:of|for)\s+)?(?P<of>.+?)(?:\s+from\s+(?P<old>.+))?$",
                             re.I)),
    # "Hugo handed the test automation team over to Esther"
    ("handed", re.compile(rf"^(?P<old>.+?)\s+(?:{'|'.join(vocabulary.HANDING_VERBS)})\s+(?:over\s+)?(?P<of>.+?)\s+"
                          r"(?:over\s+)?to\s+(?P<new>.+)$", re.I)),
    ("by", re.compile(r"^(?P<old>.+?)\s+(?:was|were|has\s+been|have\s+been|got|is|are)\s+(?:now\s+)?"
                      r"(?:replaced|succeeded|superseded)\s+(?:by|with)\s+(?P<new>.+?)(?:\s+as\s+(?:the\s+)?"
                      r"(?P<role>[\w -]+?)(?:\s+(?:of|for)\s+(?P<of>.+))?)?$", re.I)),
)
_LEFT = "|".join(re.escape(verb) for verb in sorted(vocabulary.LEAVING_VERBS, key=len, reverse=True))
# "Nadia stepped down as lead of Orion"
STEPPED_DOWN = re.compile(r"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:stepped\s+down|resigned|stepped\s+away)\s+as\s+"
                          r"(?:the\s+|our\s+)?(?P<role>[\w -]+?)(?:\s+(?:of|for|on)\s+(?P<of>.+))?$", re.I)
# "Pieter left the billing service", "Hugo has left"
LEFT = re.compile(rf"^(?P<subject>.+?)\s+(?:(?:just|recently|finally)\s+)?(?:{_LEFT})(?:\s+(?P<object>.+))?$", re.I)
_DROPPED = "|".join(re.escape(verb) for verb in sorted(vocabulary.DROPPING_VERBS, key=len, reverse=True))
# "We dropped Redis", "The API stopped using Memcached", "host-7 was decommissioned"
DROPPED = (
    re.compile(rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?:{_DROPPED})\s+"
               rf"(?P<object>.+)$", re.I),
    re.compile(rf"^(?P<object>.+?)\s+(?:was|were|has\s+been|have\s+been|got|is|are)\s+(?:now\s+)?(?:{_DROPPED})$",
               re.I),
)
# "no longer", "doesn't ... anymore": the rest of the clause is the fact that ends.
_NO_LONGER = re.compile(r"\b(?:no\s+longer|not\s+any\s*(?:more|longer)|any\s*(?:more|longer))\b", re.I)
_NOT = re.compile(r"\b(?:does\s+not|do\s+not|did\s+not|doesn't|don't|didn't|won't|isn't|aren't|is\s+not|are\s+not|"
                  r"not|never)\b", re.I)
_BE_KEPT = {"isn't": "is", "aren't": "are", "is not": "is", "are not": "are"}
# "now ... instead of A", "..., not A", "rather than A": the fact that ends has A in the place of the new object.
_INSTEAD = re.compile(r"(?:,\s*|\s+)(?:not|instead\s+of|rather\s+than|in\s+place\s+of|in\s+favou?r\s+of)\s+"
                      r"(?P<old>[^,;]+?)\s*(?:any\s*more|anymore)?$", re.I)
# Predicates a change whose subject is "we" or no one never touches: a taste is a person's own.
TASTES = ("prefers", "likes", "dislikes")
# Predicates of a family whose names stand the other way round in some of its members: (X, owned by, Imani) and
# (Imani, manages, X).
_REVERSIBLE = ("owned by", "leads", "manages")
# What "X left" ends when it names no object.
MEMBERSHIP = ("works at", "member of", "works on", "leads", "manages", "reports to")


def _anyone(subject: str | None) -> bool:
    return subject is None or subject.casefold() in _WE


def _change(claim: str, said: str, start: int, end: int, context: Context, at: dt.datetime | None, *,
            said_now: bool) -> tuple[list[Ending], list[Fact]] | None:
    """The endings a clause states, and the facts it states beside them; None when it states no change.
    ``said``: the clause as written, what an ending and the facts it stores keep as their content."""

    def ending(rule, subject, predicates, object_, **options) -> Ending:
        return Ending(rule=rule, content=said, start=start, end=end, subject=subject, predicates=tuple(predicates),
                      object=object_, at=at, **options)

    def fact_item(fact: Fact) -> Item:
        return Item(kind=FACT, content=said, start=start, end=end, subject=fact.subject, predicate=fact.predicate,
                    object=fact.object, valid_from=at)

    for pattern in FROM_TO:
        match = pattern.match(claim)
        if not match:
            continue
        who = _resolve(match["subject"], context, part="subject")
        what = _resolve(match["what"], context, part="subject") if match["what"] else None
        subject = what or who
        old, new = _name(_QUALIFIER.sub("", match["old"])), _name(_QUALIFIER.sub("", match["new"]))
        if subject is None or old is None or new is None:
            continue
        anyone = _anyone(subject)
        default = vocabulary.CHANGE_VERBS[match["verb"].casefold()] or f"{match['verb'].casefold()} to"
        otherwise = (fact_item(Fact(subject, default, new, said)),)
        return [ending("moved from", None if anyone else subject, () if not anyone else (), old, becomes=new,
                       replaced="object", otherwise=otherwise, either_way=False)], []
    match = MOVED_TO.match(claim)
    if match:
        who = _resolve(match["subject"], context, part="subject")
        what = _resolve(match["what"], context, part="subject") if match["what"] else None
        subject, new = what or who, _name(_QUALIFIER.sub("", match["new"]))
        if subject is not None and new is not None:
            default = vocabulary.CHANGE_VERBS.get(match["verb"].casefold()) or f"{match['verb'].casefold()} to"
            otherwise = (fact_item(Fact(subject, default, new, said)),)
            if _anyone(subject):  # "We switched to Linear": nothing says which of anyone's facts ends
                return [], [Fact(subject, default, new, said)]
            return [ending("moved to", subject, vocabulary.PLACES, None, becomes=new, replaced="object",
                           otherwise=otherwise)], []
    for rule, pattern in REPLACED:
        match = pattern.match(claim)
        if not match:
            continue
        groups = match.groupdict()
        new = _resolve(groups["new"], context, part="subject")
        old = _resolve(groups["old"], context, part="subject") if groups.get("old") else None
        of = _name(_QUALIFIER.sub("", groups["of"])) if groups.get("of") else None
        role = " ".join((groups.get("role") or "").split())
        if new is None or (groups.get("old") and old is None) or (groups.get("of") and of is None):
            continue
        if old is None and of is None:
            continue
        known = _role(role) if role else None
        if known is not None:
            predicate, holder_first = known
            if not holder_first:  # "X replaced Y as owner of Z": (Z, owned by, Y) becomes (Z, owned by, X)
                return [ending(rule, of, (predicate,), old, becomes=new, replaced="object",
                               otherwise=(fact_item(Fact(of, predicate, new, said)),) if of else ())], []
            return [ending(rule, old, (predicate,), of, becomes=new, replaced="subject",
                           otherwise=(fact_item(Fact(new, predicate, of, said)),) if of else ())], []
        if role:  # "Pulsar replaced Kafka as our message broker"
            return [ending(rule, old, ("is",), role.casefold(), becomes=new, replaced="subject",
                           otherwise=(fact_item(Fact(new, "is", role.casefold(), said)),))], []
        if old is None:  # "Kenji took over Orion": whoever leads Orion now no longer does
            return [ending(rule, None, vocabulary.ONE_HOLDER, of, becomes=new, replaced="subject",
                           otherwise=(fact_item(_taken_over(new, of, said)),))], []
        if of is not None:  # "Ines took over the mobile team from Tariq", "Sunniva took over the pipeline from Kofi"
            return [ending(rule, old, (), of, either_way=True, becomes=new, replaced="subject",
                           otherwise=(fact_item(_taken_over(new, of, said)),))], []
        who = _resolve(groups["who"], context, part="subject") if groups.get("who") else None
        scope = None if _anyone(who) else who
        return [ending(rule, scope, (), old, becomes=new, replaced="object")], []
    match = STEPPED_DOWN.match(claim)
    if match:
        subject = _resolve(match["subject"], context, part="subject")
        known = _role(match["role"])
        of = _name(_QUALIFIER.sub("", match["of"])) if match["of"] else None
        if subject is not None and known is not None:
            predicate, holder_first = known
            if holder_first:
                return [ending("left", subject, (predicate,), of)], []
            return [ending("left", of, (predicate,), subject)], []
    match = LEFT.match(claim)
    if match:
        subject = _resolve(match["subject"], context, part="subject")
        left, _, joined = (match["object"] or "").partition(" to join ")
        object_ = _name(_QUALIFIER.sub("", left)) if left else None
        if subject is not None and (object_ is not None or not left):
            # "Viktor left the data team to join Security": he is a member of Security now.
            facts = _facts(f"{match['subject']} joined {joined}", context).facts if joined else []
            generic = object_ is None or object_.casefold() in ("company", "team", "project", "group")
            if generic:
                return [ending("left", subject, MEMBERSHIP, None)], facts
            return [ending("left", subject, (), object_, either_way=True)], facts
    for pattern in DROPPED:
        match = pattern.match(claim)
        if match:
            subject = _resolve(match["subject"], context, part="subject") if "subject" in match.groupdict() else None
            object_ = _name(_QUALIFIER.sub("", match["object"]))
            if object_ is not None and (subject is not None or "subject" not in match.groupdict()):
                anyone = _anyone(subject)
                return [ending("dropped", None if anyone else subject, (), object_,
                               either_way=subject is None)], []
    if _NO_LONGER.search(claim):
        return _no_longer(claim, context, ending)
    instead = _INSTEAD.search(claim)
    if instead and not _NOT.search(claim[:instead.start()]):
        parsed = _facts(claim[:instead.start()], context)
        old = _name(instead["old"])
        if parsed.facts and old is not None:
            fact = parsed.facts[0]
            if fact.value == "subject":  # "Kafka is now our broker instead of RabbitMQ": RabbitMQ was
                return [ending("instead of", old, (fact.predicate,), fact.object)], parsed.facts
            return [ending("instead of", None if _anyone(fact.subject) else fact.subject, (fact.predicate,), old)], \
                parsed.facts
    if said_now and not _NOT.search(claim):
        parsed = _facts(claim, context)
        endings = []
        for fact in parsed.facts:
            if fact.predicate in vocabulary.SINGLE_VALUED:
                endings.append(ending("now", fact.subject, (fact.predicate,), None))
            elif fact.predicate in vocabulary.ONE_HOLDER:
                endings.append(ending("now", None, (fact.predicate,), fact.object))
        if endings:
            return endings, parsed.facts
    return None


def _taken_over(holder: str, what: str, said: str) -> Fact:
    """What taking a thing over states: a group is led, anything else owned ("took over the deploy pipeline")."""
    if _last_word(what) in vocabulary.GROUP_WORDS or _proper(what):
        return Fact(holder, "leads", what, said)
    return Fact(what, "owned by", holder, said)


def _no_longer(claim: str, context: Context, ending) -> tuple[list[Ending], list[Fact]] | None:
    """ "Hugo no longer works on checkout", "Mei doesn't prefer Jira anymore": the fact said without the negation
    ends."""
    plain = _NO_LONGER.sub(" ", claim)
    plain = _NOT.sub(lambda match: _BE_KEPT.get(" ".join(match.group().casefold().split()), " "), plain)
    plain = " ".join(plain.split())
    parsed = _facts(plain, context)
    if not parsed.facts:
        return None
    context.said = parsed.facts[-1]
    # Said with a near synonym of the stored fact's verb, or the other way round: "Imani is no longer responsible
    # for the contracts" ends "Imani manages the contracts".
    return [ending("no longer", None if _anyone(fact.subject) else fact.subject, _family(fact.predicate),
                   fact.object, either_way=fact.predicate in _REVERSIBLE) for fact in parsed.facts], []


def _family(predicate: str) -> tuple[str, ...]:
    """The predicate with those that say nearly the same (``vocabulary.FAMILIES``)."""
    for family in vocabulary.FAMILIES:
        if predicate in family:
            return (predicate, *(other for other in family if other != predicate))
    return (predicate,)


# Decisions -------------------------------------------------------------------------------------------------------

DECISION_PHRASES = ("decided not to", "chose not to", "agreed not to", "decided to", "decided on", "decided against",
                    "decided that", "have decided to", "has decided to", "chose to", "chose", "have chosen",
                    "has chosen", "agreed to", "agreed on", "agreed that", "opted for", "opted to", "opted against",
                    "settled on", "went with", "picked", "selected", "standardized on", "standardised on",
                    "are going with", "'re going with", "ended up with", "ended up going with", "ended up choosing",
                    "ended up picking", "ended up using", "ended up selecting", "landed on",
                    "committed to", "voted for", "voted to")
_DECIDED = "|".join(re.escape(phrase) for phrase in sorted(DECISION_PHRASES, key=len, reverse=True))
# "<who> decided to <choice>", who in at most four words after a lead clause ("After benchmarking, we picked ...");
# "Decision: <choice>"; "Let's go with <choice>".
DECISION_RULES = (
    re.compile(rf"^(?:[^,]{{1,60}},\s+)?(?P<who>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:(?:finally|eventually|"
               rf"ultimately|just|also|then|have|has)\s+)?(?P<verb>{_DECIDED})\s+(?P<rest>.+)$", re.I),
    re.compile(r"^(?:the\s+)?(?:final\s+)?(?:decision|decided)(?:\s+(?:is|was))?\s*[:-]?\s*(?:to\s+)?(?P<rest>.+)$",
               re.I),
    re.compile(r"^let'?s\s+(?P<verb>go\s+with|stick\s+with)\s+(?P<rest>.+)$", re.I),
    # "We'll go with Stripe", "We're going to standardize on Go": a choice said of the future is made now.
    re.compile(r"^(?P<who>we|i|the\s+team)(?:['’]ll|\s+will|\s+are\s+going\s+to|['’]re\s+going\s+to)\s+"
               r"(?P<verb>go\s+with|stick\s+with|standardi[sz]e\s+on)\s+(?P<rest>.+)$", re.I),
    # "We talked it through and agreed to use Kafka": the choice after what led to it.
    re.compile(rf"^(?P<who>we|i|the\s+team|they)\s+(?!(?:might|may|could|would|should|will)\b)[^.;]{{3,120}}?"
               rf"(?:,\s*|\s+)(?:and|so|then)\s+(?:finally\s+|eventually\s+)?(?P<verb>{_DECIDED})\s+(?P<rest>.+)$", re.I),
)
# Decision rules read before the hypothetical one: a stated decision about the future is a decision.
_DECIDED_AHEAD = (DECISION_RULES[1], DECISION_RULES[2], DECISION_RULES[3])
_REASON = re.compile(r"\s*,?\s+(?:because|since|given that|due to|so that)\s+", re.I)
_ALTERNATIVES = re.compile(r"\s+(?:over|instead of|rather than|and not)\s+", re.I)
_OR_LIST = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", re.I)


def _decision(claim: str, written: str, start: int, end: int) -> Item | Skipped | None:
    for rule in DECISION_RULES:
        match = rule.match(claim)
        if match:
            break
    else:
        return None
    who = match.groupdict().get("who") or ""
    if NEGATION[1].search(who):
        return Skipped(claim, start, end, NEGATION[0])
    rest = match["rest"].rstrip(" .!")
    verb = (match.groupdict().get("verb") or "").casefold()
    if verb.endswith(("not to", "against")):  # the choice is to refrain: say so in it
        rest = f"not {rest}"
    choice, _, reason = (part.strip() for part in _split_once(_REASON, rest))
    choice, _, over = (part.strip() for part in _split_once(_ALTERNATIVES, choice))
    alternatives = tuple(name for name in (_QUALIFIER.sub("", _DETERMINER.sub("", part.strip()))
                                           for part in _OR_LIST.split(over)) if name) if over else ()
    words = choice.split()
    if not words or (len(words) <= 3 and words[-1].casefold() in vocabulary.NOT_NAMES):
        return Skipped(claim, start, end, VAGUE)
    return Item(kind=DECISION, content=written, start=start, end=end, choice=choice,
                alternatives=alternatives, reason=reason)


def _split_once(pattern: re.Pattern, text: str) -> tuple[str, str, str]:
    match = pattern.search(text)
    return (text[:match.start()], match.group(), text[match.end():]) if match else (text, "", "")


# Skills ----------------------------------------------------------------------------------------------------------

_GOAL_LEAD = (r"(?:(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)|(?:(?:a\s+)?quick\s+)?how-to\s+(?:for|to)|"
              r"how\s+to|how\s+we|steps\s+to|steps\s+for|to)")
SKILL_HEADING = re.compile(rf"(?:^[ \t]*|(?<=[.!?] ))(?P<lead>{_GOAL_LEAD})\s+(?P<goal>[^:\n.]{{2,150}}?)\s*:[ \t]*"
                           r"(?P<inline>[^\n]*)$", re.I | re.M)
# "Deploy checklist:", "Release process:", "Runbook for failover:"
SKILL_TITLED = re.compile(r"(?:^[ \t]*|(?<=[.!?] ))(?:(?P<goal>[A-Za-z][^:\n.]{1,60}?)\s+(?P<lead>checklist|runbook|"
                          r"procedure|process|playbook|steps)|(?P<lead2>checklist|runbook|procedure|playbook)\s+"
                          r"(?:for|to)\s+(?P<goal2>[^:\n.]{2,60}?))\s*:[ \t]*(?P<inline>[^\n]*)$", re.I | re.M)
# "Runbook: rotating the API keys", then the steps on the lines after it.
SKILL_LABELLED = re.compile(r"^[ \t]*(?P<lead>runbook|checklist|procedure|playbook|how-to|steps)\s*[:—–-]\s*"
                            r"(?P<goal>[^\n:]{2,80}?)[ \t]*:?(?P<inline>)[ \t]*$", re.I | re.M)
SKILL_STEP = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•]|step\s+\d{1,2}\s*[:.)-])\s+(?P<step>\S[^\n]*)$", re.I)
_INLINE_STEP = re.compile(r"(?:^|\s)(?:\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-])\s+", re.I)
# "To restart the worker, drain it, then restart it": a goal and steps joined by "then".
SKILL_THEN = re.compile(r"^(?P<lead>to|how to)\s+(?P<goal>[^,]{2,80}),\s+(?:first\s+)?(?P<steps>.+?\bthen\b.+)$", re.I)
_THEN = re.compile(r"\s*(?:,\s*and\s+then|,\s*then|;\s*then|\s+and\s+then|\s+then|,\s*finally|\s+finally)\s+",
                   re.I)
SKILL_STEPS_MIN = 2


def _skill(lead: str, goal: str, steps: list[str], start: int, end: int) -> Item:
    lead = "How to" if lead.casefold().startswith(("how", "here", "this", "quick", "a quick")) else "To"
    goal = re.sub(r"^(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)\s+", "", goal, flags=re.I)
    goal = " ".join(goal.split())
    body = "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))
    if goal.split()[0].casefold().endswith("ing"):  # "how-to for onboarding a new engineer": the goal is a doing
        title = goal[0].upper() + goal[1:]
        return Item(kind=SKILL, content=f"{title}:\n{body}", start=start, end=end, title=title, steps=tuple(steps))
    return Item(kind=SKILL, content=f"{lead} {goal}:\n{body}", start=start, end=end, title=f"How to {goal}",
                steps=tuple(steps))


def _headings(text: str) -> list[tuple[re.Match, str, str]]:
    """(match, lead, goal) of each line or sentence that names a goal before a colon, in the text's order."""
    found = [(heading, heading["lead"], heading["goal"]) for heading in SKILL_HEADING.finditer(text)]
    titled = [(heading, heading["goal"] or heading["goal2"]) for heading in SKILL_TITLED.finditer(text)]
    titled += [(heading, heading["goal"]) for heading in SKILL_LABELLED.finditer(text)]
    for heading, goal in titled:
        if not any(other.start() <= heading.start() < other.end() for other, _, _ in found):
            found.append((heading, "how to", goal[0].lower() + goal[1:]))
    return sorted(found, key=lambda entry: entry[0].start())


def _inline_steps(inline: str) -> list[str] | None:
    """The steps said after a goal on its line: numbered ("1. Build. 2. Push.") or joined by "then"."""
    parts = _INLINE_STEP.split(inline)
    if len(parts) > 1:
        return None if parts[0].strip() else [" ".join(part.split()) for part in parts[1:] if part.strip()]
    # Joined by "then", the steps before it may be joined by commas: "create the account, add them, then ...".
    pieces = _THEN.split(re.sub(r"^\s*first\s+", "", inline, flags=re.I))
    if len(pieces) > 1:
        pieces = [step for piece in pieces for step in re.split(r",\s+(?:and\s+)?", piece)]
    steps = [" ".join(step.split()).rstrip(" .") for step in pieces if step.strip()]
    return [step[0].upper() + step[1:] + "." for step in steps] if len(steps) > 1 else None


def _skills(text: str) -> list[Item]:
    items = []
    for heading, lead, goal in _headings(text):
        if lead.casefold() == "how we" and not goal.strip():
            continue
        if heading["inline"].strip():
            steps = _inline_steps(heading["inline"])
            if steps is None or len(steps) < SKILL_STEPS_MIN:
                continue
            end = heading.end()
        else:
            steps, end = [], heading.end()
            for line in re.finditer(r"\n([^\n]*)", text[heading.end():]):
                step = SKILL_STEP.match(line[1])
                if not step:
                    if not line[1].strip() and not steps:
                        continue  # a blank line between the goal and its first step
                    break
                steps.append(" ".join(step["step"].split()))
                end = heading.end() + line.end()
            if len(steps) < SKILL_STEPS_MIN:
                continue
        # The heading starts at its first word, after any indent or masked speaker prefix.
        start = heading.start() + len(heading.group()) - len(heading.group().lstrip())
        items.append(_skill(lead, goal, steps, start, end))
    return items


def _skill_then(claim: str, start: int, end: int) -> Item | None:
    match = SKILL_THEN.match(claim)
    if not match:
        return None
    steps = [" ".join(step.split()).rstrip(" .") for step in _THEN.split(match["steps"]) if step.strip()]
    if len(steps) < SKILL_STEPS_MIN:
        return None
    return _skill(match["lead"], match["goal"], [step[0].upper() + step[1:] + "." for step in steps], start, end)


# Speakers and sentences ------------------------------------------------------------------------------------------

# "Alice:", "[10:42] mei:", "10:42 Bob Smith:", "<Carol>": a name of one or two words, a time before it maybe.
SPEAKER = re.compile(r"^[ \t]*(?:\[?(?P<time>(?:\d{4}-\d{2}-\d{2}[ T,]+)?\d{1,2}:\d{2}(?::\d{2})?(?:\s*[aApP][mM])?)\]?"
                     r"\s*[-–]?\s*)?"
                     r"(?:<(?P<tagged>[\w.' -]{1,30})>|(?P<name>[A-Za-z][\w.'-]*(?:\s+[A-Z][\w.'-]*)?))"
                     r"(?:\s*:|\s+[—–]|\s+-(?=\s))?(?:\s+|$)")
_LEAD_IN = re.compile(r"^(?:(?:ok|okay|so|also|and|but|well|fyi|btw|note|for the record|for reference|as agreed|"
                      r"update|plus|additionally|besides|anyway|meanwhile|oh|ah|right|alright|in short|in summary|"
                      r"to summarize|to summarise|quick update|heads up|just so you know|for context|oh and|and also|"
                      r"by the way|as a reminder|reminder)\s*[,:\-–]\s*|(?:please\s+)?(?:remember|note|keep in mind|"
                      r"be aware|fyi|just so you know)(?:\s+that|\s*:)\s*|(?:also|so|and|plus|btw|fyi|oh|heads\s+up)\s+)", re.I)
_SENTENCE = re.compile(r".+?(?:[.!?]+(?=\s|$)|$)")
_BULLET = re.compile(r"^(?:\d{1,2}[.)]|[-*•>]|\[[ xX]?\])\s+")


def _speaker_of(line: str) -> tuple[str | None, bool, int]:
    """(who speaks, whether it is the agent, where the words start) for a line with a speaker prefix;
    (None, False, 0) when it has none. A label ("Summary:") speaks for no one: ("", False, its end)."""
    match = SPEAKER.match(line)
    if not match:
        return None, False, 0
    name = " ".join((match["tagged"] or match["name"]).split())
    colon = line[match.start():match.end()].rstrip().endswith((":", "—", "–", " -"))
    if not match["tagged"] and not colon:
        return None, False, 0
    if not match["time"] and not match["tagged"] and line[match.end():].strip() == "":
        return None, False, 0
    folded = name.casefold()
    if folded in vocabulary.MEANINGFUL_LABELS:
        return None, False, 0
    if folded in vocabulary.USER_SPEAKERS:
        return USER, False, match.end()
    if folded in vocabulary.ASSISTANT_SPEAKERS:
        return "", True, match.end()
    if folded in vocabulary.LABELS:
        return "", False, match.end()
    if not match["time"] and not match["tagged"] and not name[0].isupper() and " " in name:
        return None, False, 0  # "alice:" speaks, "to deploy:" is no one
    return name[0].upper() + name[1:], False, match.end()


@dataclass(frozen=True)
class Line:
    start: int  # where its words start (after a speaker prefix)
    end: int
    speaker: str
    assistant: bool
    prefix: int  # where its speaker prefix starts (``start`` when it has none)


def _lines(text: str) -> list[Line]:
    """Each non-empty line, its speaker prefix left out; a line without one is spoken by the last speaker named."""
    lines, speaker, assistant = [], "", False
    for line in re.finditer(r"[^\n]+", text):
        bullet = _BULLET.match(line.group().lstrip())
        lead = len(line.group()) - len(line.group().lstrip()) + bullet.end() if bullet else 0
        who, agent, offset = _speaker_of(line.group()[lead:])
        words = line.start() + lead + offset
        # A speaker's prefix is masked for the skill rules; a label ("Runbook:") may be a skill's heading.
        prefix = line.start() + lead if who or agent else words
        if who is not None and bullet:  # "- Hiro: the webhook ...": Hiro speaks on this bullet only
            lines.append(Line(words, line.end(), who or speaker, agent or assistant, prefix))
            continue
        if who is not None and (who or agent):
            speaker, assistant = who, agent
        lines.append(Line(words, line.end(), speaker, assistant, prefix))
    return lines


def _sentences(text: str, line: Line, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of each sentence of a line outside the ``taken`` spans, a leading bullet left out."""
    spans = []
    body = text[line.start:line.end]
    bullet = _BULLET.match(body.lstrip())
    offset = line.start + len(body) - len(body.lstrip()) + (bullet.end() if bullet else 0)
    for sentence in _SENTENCE.finditer(text[offset:line.end]):
        piece = sentence.group()
        start = offset + sentence.start() + len(piece) - len(piece.lstrip())
        end = offset + sentence.end() - (len(piece) - len(piece.rstrip()))
        if start < end and not any(a <= start < b for a, b in taken):
            spans.append((start, end))
    return spans


# Verbs of change that go on about the subject before them: "Gabriel stopped using Vim and switched to VS Code".
_CONTINUING = r"(?:switched|moved|migrated|stopped\s+using|started\s+using|joined|left|replaced)"
# Where a sentence holds a second claim: at ";", at "and" before a new subject ("My name is Sam and I work at
# Initech"), at a comma before "it is" ("The wiki isn't on Confluence anymore, it's on Notion now"). A sentence
# that opens with a condition stays whole: its second half is what the condition is about.
_CLAUSE_BREAK = re.compile(r"\s*(?<!\btl);(?!dr\b)\s*|,?\s+and\s+(?=(?:I|we|he|she|they)\s+(?!think|guess|believe|suppose|hope|"
                           r"wish|assume|feel|might|may|could|would|will|should)\w)|"
                           r",\s+(?=(?:it|he|she|they)(?:\s+(?:is|are|was|were|has|have)|['’]s)\s)|"
                           r",\s+(?=(?:which|who)\s+(?:is|are|has|have|runs|uses|leads|heads|owns|"
                           r"\w+s)\b)|,?\s+and\s+(?=(?:then\s+)?" + _CONTINUING + r"\s)")
_CONDITION = re.compile(r"^(?:if|unless|when|whenever|whether|maybe|perhaps|once|until|assuming|in case)\b", re.I)


def _clauses(sentence: str, start: int) -> list[tuple[str, int, int]]:
    """The clauses of a sentence, each with its span."""
    if _CONDITION.match(sentence):
        return [(sentence, start, start + len(sentence))]
    clauses, at = [], 0
    for match in [*_CLAUSE_BREAK.finditer(sentence), None]:
        piece_end = match.start() if match else len(sentence)
        piece = sentence[at:piece_end]
        if piece.strip():
            offset = start + at + len(piece) - len(piece.lstrip())
            clauses.append((piece.strip(), offset, offset + len(piece.strip())))
        at = match.end() if match else at
    return clauses


def _clean(text: str) -> str:
    """One sentence: spaces collapsed, the first letter upper case, a full stop at the end."""
    text = " ".join(text.split()).strip(" ,;:-–—")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


# Reading ---------------------------------------------------------------------------------------------------------


# Verbs with a negation in them that say a fact: "Mark can't stand YAML", "I'm not a fan of YAML".
_STANDS = re.compile(r"\b(?:(?:can't|cannot|can not)\s+stand|not\s+a\s+(?:big\s+)?fan\s+of|no\s+fan\s+of|"
                     r"(?:don't|doesn't|do\s+not|does\s+not)\s+like)\b", re.I)
# Contractions after a pronoun, said in full so the verb table reads them: "I'm based in Lyon".
_CONTRACTIONS = (
    (re.compile(r"\b(I)['’]m\b", re.I), r"\1 am"),
    (re.compile(r"\b(we|you|they)['’]re\b", re.I), r"\1 are"),
    (re.compile(r"\b(he|she|it|that|who)['’]s\b", re.I), r"\1 is"),
    (re.compile(r"\b(I|we|you|they)['’]ve\b", re.I), r"\1 have"),
)
# Adverbs anywhere in a claim: "Elena works remotely from Porto" reads as "Elena works from Porto".
_ADVERBS = re.compile(rf"(?<![\w-])(?:{'|'.join(re.escape(word) for word in vocabulary.ADVERBS + ('now',))})"
                      rf"(?![\w-])\s*")


# Data between a verb and its particle: "pushes events to S3" says what "pushes to S3" says.
_CARRIED = re.compile(r"\b((?:push|send|write|ship|stream|export|forward|upload|sync|emit|publish|pull|fetch|read|ingest|"
                      r"load|copy|post|dump|cache|store|save|persist|keep)(?:e?s|d|ed|ing)|sent|wrote|written|kept)\s+(?:(?:the|its|all|our|their|some)\s+)?"
                      r"(?:(?:push|audit|access|error|usage|app|raw|daily|nightly|system)\s+)?"
                      rf"(?:{'|'.join(vocabulary.DATA_WORDS)})\s+(to|from|into|in|on)\b", re.I)


# An adverb that opens the claim, capital and all: "Honestly, I'm not a fan of YAML".
# What someone likes doing with a thing is a liking of the thing: "Leilani likes working with TypeScript".
_DOING = re.compile(r"\b((?:like|love|enjoy|prefer|hate|dislike)s?)\s+(?:working|coding|programming|writing|building|"
                    r"developing)\s+(?:with|in|on)\s+|\b((?:like|love|enjoy|prefer|hate|dislike)s?)\s+using\s+", re.I)
# The job between "work" and where: "I work as a data engineer at Brightwave" says "I work at Brightwave".
_WORK_AS = re.compile(r"\b(work(?:s|ed|ing)?)\s+as\s+(?:a|an|the|our)\s+[\w -]{1,40}?\s+(at|for|on|in)\b", re.I)
# Roles said in several words that mean the one to ask: "Felix is the point of contact for the vendor API".
_CONTACT = re.compile(r"\b(?:point\s+of\s+contact|go-to\s+(?:person|contact))\b", re.I)
# A participle after a comma says a fact of the subject: "Siobhan is fully remote, based out of Galway".
_PARTICIPLE = re.compile(r"^(?P<subject>[^,]+?)\s+(?:is|are)\s+[^,]{1,40},\s+(?P<participle>(?:based|located|hosted|"
                         r"deployed|owned|maintained|written|built|led|run)\s+.+)$", re.I)
_OPENING_ADVERB = re.compile(rf"^(?:{'|'.join(re.escape(word) for word in vocabulary.ADVERBS)}),?\s+", re.I)


def _plain(claim: str) -> str:
    """The claim with contractions said in full, adverbs and data between a verb and its particle left out: what
    the fact rules read."""
    for pattern, full in _CONTRACTIONS:
        claim = pattern.sub(full, claim)
    claim = _CARRIED.sub(r"\1 \2", claim)
    claim = _DOING.sub(lambda match: f"{match[1] or match[2]} ", claim)
    claim = _WORK_AS.sub(r"\1 \2", claim)
    claim = _CONTACT.sub("contact", claim)
    claim = _PARTICIPLE.sub(r"\g<subject> is \g<participle>", claim)
    claim = _OPENING_ADVERB.sub("", claim)
    return _ADVERBS.sub("", claim).strip()


def _without(claim: str, start: int, end: int) -> str:
    """The claim with a span taken out (a stated time), and the commas it leaves cleaned up."""
    rest = f"{claim[:start]} {claim[end:]}"
    return " ".join(rest.split()).strip(" ,").replace(" ,", ",")


# "Summary: ...", "Outcome of the architecture review: ...", "Weekly sync takeaways: ...".
_LABEL = re.compile(r"^(?P<label>[\w;'’ -]{1,60}?):\s+(?=\S)")


def _is_label(label: str) -> bool:
    """Whether the words before a colon label what follows: a label, or a phrase that starts or ends with one."""
    words = label.casefold().split()
    return bool(words) and (" ".join(words) in vocabulary.LABELS or words[0] in vocabulary.LABELS or
                            words[-1] in vocabulary.LABELS)


def _read(sentence: str, start: int, end: int, context: Context, *, continued: bool = False
          ) -> list[Item | Ending] | Skipped:
    """The items and endings one clause gives, or why it gives none (the rules in the module's docstring)."""
    claim = _LEAD_IN.sub("", _LEAD_IN.sub("", sentence)).strip()
    claim = _LABEL.sub(lambda match: "" if _is_label(match["label"]) else match.group(), claim)
    relative = continued and re.match(r"(?:which|who)\s", claim, re.I) and not claim.endswith("?")
    if continued and context.thing and re.match(rf"(?:then\s+)?{_CONTINUING}\s", claim, re.I):
        claim = f"{context.thing} {claim}"  # "... and switched to VS Code": the clause before names who
    if QUESTION[1].search(claim) and not relative:  # ", who heads up X" goes on about the name before it
        return Skipped(sentence, start, end, QUESTION[0])
    written = _clean(claim)  # what an item stores: the writer's words, lead-ins left out
    claim = claim.rstrip(" .!")
    stated = dates.stated_time(claim, context.now) if context.now is not None else None
    if stated is not None:
        if stated.at > context.now and not stated.ends:
            return Skipped(sentence, start, end, FUTURE.format(when=claim[stated.start:stated.end].strip()))
        claim = _without(claim, stated.start, stated.end)
    at = stated.at if stated is not None and not stated.ends else None
    until = stated.at if stated is not None and stated.ends else None
    said_now = bool(_NOW.search(claim))
    claim = _plain(claim)
    # The skip rules read the claim, not the reason given for it.
    before_reason = _split_once(_REASON, claim)[0]
    decided = _decision(claim, written, start, end) if any(rule.match(claim) for rule in _DECIDED_AHEAD) else None
    if decided is None and HYPOTHETICAL[1].search(before_reason):
        return Skipped(sentence, start, end, HYPOTHETICAL[0])
    skill = _skill_then(claim, start, end)
    if skill is not None:
        return [skill]
    decided = decided or _decision(claim, written, start, end)
    if isinstance(decided, Item):
        return [decided]
    if decided is not None:
        return Skipped(sentence, start, end, decided.reason)
    elided = _ELLIPSIS.match(claim)
    if elided and context.said is not None and (holder := _resolve(elided["subject"], context, part="subject")):
        # "The SRE team no longer maintains the page; Support Engineering does now": the same fact, another holder.
        fact = context.said
        subject, object_ = (holder, fact.object) if fact.actor == "subject" else (fact.subject, holder)
        return [_fact_item(Fact(subject, fact.predicate, object_, written), start, end, at, until, context)]
    changed = _change(claim, written, start, end, context, at, said_now=said_now)
    if changed is not None:
        endings, facts = changed
        facts = _in_own_words(facts, claim, written)
        _remember_person(facts or [Fact(ending.subject or "", "", "", "") for ending in endings], context, claim)
        return [*endings, *(_fact_item(fact, start, end, at, until, context) for fact in facts)]
    for reason, pattern in (NEGATION, PAST):
        if pattern.search(_STANDS.sub("", before_reason)):
            return Skipped(sentence, start, end, reason)
    claim, role = _appositive(claim, context)
    parsed = _facts(claim, context)
    if parsed.facts and role is not None:
        parsed.facts.append(role)
    if parsed.facts:
        _remember_person(parsed.facts, context, claim)
        return [_fact_item(fact, start, end, at, until, context) for fact in _in_own_words(parsed.facts, claim,
                                                                                             written)]
    said_of = _SAID_OF.match(claim)
    if said_of and (thing := _name(said_of["subject"])):
        context.thing = thing  # "the sync job is flaky again. ... it runs on Airflow": "it" is the sync job
    if parsed.past:
        return Skipped(sentence, start, end, PAST[0])
    if parsed.vague:
        return Skipped(sentence, start, end, parsed.vague)
    if PLEASANTRY[1].search(claim):
        return Skipped(sentence, start, end, PLEASANTRY[0])
    return Skipped(sentence, start, end, VAGUE)


def _in_own_words(facts: list[Fact], claim: str, written: str) -> list[Fact]:
    """Facts that say the whole clause keep the writer's words (with the time and adverbs they said)."""
    whole = _clean(claim)
    return [Fact(fact.subject, fact.predicate, fact.object, written, fact.value) if fact.said == whole else fact
            for fact in facts]


# A clause that says again what the last one said, of another name: "Support Engineering does now".
_ELLIPSIS = re.compile(r"^(?P<subject>[\w][\w .'-]{0,60}?)\s+(?:does|do|is|are|has|have)(?:\s+(?:now|too|instead|"
                       r"as\s+well))*$", re.I)
# A clause that says something of a name without a fact to store: "the CRM sync job is flaky again".
_SAID_OF = re.compile(r"^(?P<subject>(?:the|our|my)\s+[\w -]+?)\s+(?:is|are|was|were|keeps|has\s+been)\b", re.I)
# An appositive before the verb: "Our CTO, Ngozi, prefers ..." or "Ngozi, our CTO, prefers ...".
_APPOSITIVE = (
    re.compile(r"^(?i:our|the|my)\s+(?P<role>[\w -]{1,40}?),\s+(?P<name>[A-Z][\w.' -]{0,40}?),\s+(?P<rest>.+)$"),
    re.compile(r"^(?P<name>[A-Z][\w.' -]{0,40}?),\s+(?i:our|the|my)\s+(?P<role>[\w -]{1,40}?),\s+(?P<rest>.+)$"),
)


def _appositive(claim: str, context: Context) -> tuple[str, Fact | None]:
    """The claim with an appositive taken out, and the role it names as a fact of its own."""
    for pattern in _APPOSITIVE:
        match = pattern.match(claim)
        # The rest must go on with a verb of the table, and the role be a short noun: "The data pipeline uses
        # Kafka, Spark, and Airflow" is a list, not an appositive.
        if match and (name := _name(match["name"])) is not None and _proper(name) and \
                len(match["role"].split()) <= 3 and _VERB_FIRST.match(match["rest"]) and \
                not _VERB_AT.search(f"{match['role']} x"):
            role = " ".join(match["role"].split())
            return f"{match['name']} {match['rest']}", _role_fact("our role", role, name, "", None, _clean(claim))
    return claim, None


def _remember_person(facts: list[Fact], context: Context, claim: str) -> None:
    """Keep the subject of the clause's first fact for a "she" or "he" after it, when it is a person's name, and
    for an "it"; and the name the clause ends with for a "which" or "who" after it."""
    if facts and facts[0].subject and _proper(facts[0].subject) and len(facts[0].subject.split()) <= 3:
        context.person = facts[0].subject
    if facts and facts[0].subject:
        context.thing = facts[0].subject
    if facts and facts[-1].predicate:
        context.said = facts[-1]
    names = [name for fact in facts[-1:] for name in (fact.subject, fact.object) if name]
    if names:
        context.last = max(names, key=lambda name: claim.casefold().rfind(name.casefold()))


def _fact_item(fact: Fact, start: int, end: int, at, until, context: Context) -> Item:
    content = fact.said
    if context.speaker and context.speaker != USER and context.speaker not in content:
        content = f"{context.speaker}: {content}"  # "Alice: I prefer tabs." keeps who "I" is
    elif context.speaker == USER and re.search(r"\b(?:I|my|me)\b", content):
        content = f"User: {content}"
    return Item(kind=FACT, content=content, start=start, end=end, subject=fact.subject, predicate=fact.predicate,
                object=fact.object, valid_from=at, valid_to=until)


def extract(text: str, *, now: dt.datetime | None = None) -> Extraction:
    """Return the facts, decisions, skills and endings ``text`` states, in the order they appear, and the
    sentences skipped. ``now``: the time stated times are resolved against (None: stated times are not read)."""
    lines = _lines(text)
    # Skills read the text with speaker prefixes blanked out, so a goal after "Marco:" starts its line.
    masked = list(text)
    for line in lines:
        masked[line.prefix:line.start] = " " * (line.start - line.prefix)
    skills = _skills("".join(masked))
    found: list[tuple[int, Item | Ending | Skipped]] = [(item.start, item) for item in skills]
    taken = [(item.start, item.end) for item in skills]
    context = Context(now=now)
    for line in lines:
        if line.speaker != context.speaker or line.assistant != context.assistant:
            context = Context(speaker=line.speaker, assistant=line.assistant, now=now)
        context.thing = context.last = ""  # "it", "which" and "who" look back along their own line only
        for sentence_start, sentence_end in _sentences(text, line, taken):
            for number, (clause, start, end) in enumerate(_clauses(text[sentence_start:sentence_end],
                                                                   sentence_start)):
                result = _read(clause, start, end, context, continued=number > 0)
                found.extend((start, entry) for entry in (result if isinstance(result, list) else [result]))
    found.sort(key=lambda pair: pair[0])
    return Extraction(items=tuple(entry for _, entry in found if isinstance(entry, Item)),
                      skipped=tuple(entry for _, entry in found if isinstance(entry, Skipped)),
                      endings=tuple(entry for _, entry in found if isinstance(entry, Ending)))

