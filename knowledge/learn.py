"""Learning from text: facts, decisions and skills found by rules, in English, with no model and no network.

``extract(text)`` reads the text top-down and returns what it found and what it passed over:

1. Skills first: a heading that names a goal ("To deploy the API:", "How to rotate keys:",
   "Steps to release:") followed by two or more numbered or bulleted steps, one per line or
   inline ("To deploy: 1. Build the image. 2. Push it."). The block becomes one skill.
2. The rest is cut into sentences: at a line's end, and after . ! or ? followed by a space.
   A leading bullet or number and a lead-in ("OK, ", "FYI: ", "Also ") are dropped.
3. Each sentence meets the rules below in order, and the first that applies decides:
   a question is skipped; a hypothetical, plan or wish is skipped; a decision
   ("we decided to X over Z because Y") is taken; a negation or a statement about the past
   is skipped; a fact ("X runs on Y") is taken; anything else is skipped as a pleasantry
   or as too vague to store. The skip rules read the claim only, not its reason: in
   "We chose Go because it might scale", the "might" is the reason's.
4. A fact's subject and object must be names: at most ``NAME_WORDS_MAX`` words, no pronoun
   ("it", "this", "they") and no filler ("a lot of", "stuff"); else the sentence is vague.

Facts carry a triple whose predicate comes from a small vocabulary (``PREDICATES``): uses,
runs on, hosted on, depends on, owned by, prefers. "The payments team owns billing" reads as
(billing, owned by, payments team). One sentence may hold several facts: "The API uses Redis
and Postgres" gives two, "The API runs on Kubernetes and uses Redis" gives two. A triple's
names keep the writer's spelling without a leading article; a qualifier after the name
("Kubernetes in production", "Redis for caching") stays in the content, not in the triple.
Decisions and skills carry no triple. Every item keeps the span of the input it came from.
"""

import re
from dataclasses import dataclass

FACT = "fact"
DECISION = "decision"
SKILL = "skill"

# The longest text one call reads; longer is refused as a whole (memories.services.learn).
TEXT_MAX_CHARS = 20_000
# A subject or object longer than this is a clause, not a name.
NAME_WORDS_MAX = 6


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


# Facts ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """A canonical predicate and the verb phrases that say it; ``reverse``: the sentence names the owner first."""

    name: str
    phrases: tuple[str, ...]
    reverse: bool = False


PREDICATES = (
    Predicate("uses", ("uses", "use", "is using", "are using", "utilizes", "utilises", "is built with",
                       "are built with")),
    Predicate("runs on", ("runs on", "run on", "is running on", "are running on", "is deployed on", "are deployed on",
                          "is deployed to", "are deployed to")),
    Predicate("hosted on", ("is hosted on", "are hosted on", "is hosted at", "are hosted at", "is hosted in",
                            "are hosted in", "is hosted by", "are hosted by")),
    Predicate("depends on", ("depends on", "depend on", "relies on", "rely on", "requires", "require")),
    Predicate("owned by", ("is owned by", "are owned by", "is maintained by", "are maintained by", "belongs to",
                           "belong to")),
    # "The payments team owns billing": the owner comes first, so the triple turns round.
    Predicate("owned by", ("owns", "own", "maintains", "maintain"), reverse=True),
    Predicate("prefers", ("prefers", "prefer")),
)

# Skip rules: (reason, pattern), tried in this order; see the module's docstring for when each applies.
QUESTION = ("question", re.compile(
    r"\?\s*$|^(?:who|what|when|where|why|which|how|should|shall|could|would|can|do|does|did|is|are|will)\b", re.I))
HYPOTHETICAL = ("hypothetical: a possibility, plan, wish or guess, not something that holds", re.compile(
    r"\b(?:if|unless|might|may|could|would|should|shall|will|maybe|perhaps|possibly|probably|suppose|supposing|"
    r"assuming|whether|hopefully|wish|wishes|consider|considering|let's|let us|ought|eventually|someday|"
    r"think|believe|guess|seems?|apparently|"
    r"(?:plan|plans|planning|want|wants|going|intend|intends|hope|hopes) to)\b", re.I))
NEGATION = ("negation: says what does not hold", re.compile(
    r"\b(?:not|no|never|none|nor|neither|cannot|nobody|nothing)\b|n't\b", re.I))
PAST = ("past: says what held before, not what holds", re.compile(
    r"\b(?:used to|formerly|previously|in the past|anymore|any more)\b", re.I))
PLEASANTRY = ("pleasantry: nothing to learn", re.compile(
    r"^(?:thanks|thank you|thx|cheers|great|good|nice|cool|awesome|perfect|ok|okay|sure|yes|yep|yeah|no problem|"
    r"got it|sounds good|lgtm|hello|hi|hey|good morning|good night|bye|welcome|you're welcome|will do|done|noted|"
    r"understood|agreed|right|indeed|exactly)\b", re.I))
VAGUE = "vague: no rule found a fact, decision or skill in it"
VAGUE_NAME = "vague: the {part} ({name!r}) is not a name (a pronoun, filler, or more than {words} words)"

# Words that stand for a name without being one.
_NOT_NAMES = {"it", "its", "this", "that", "these", "those", "they", "them", "he", "she", "him", "her", "one",
              "something", "anything", "everything", "stuff", "things", "thing", "lot", "lots", "some", "all",
              "here", "there", "which", "what", "who"}
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
# A name: words of letters, digits and the marks names use (Node.js, C#, eu-west-1, @org/pkg, AWS (Ireland)).
_NAME = re.compile(r"[\w][\w .+#/@&'()-]*", re.UNICODE)
# Adverbs between a subject and its verb ("The API now runs on ...").
_ADVERBS = re.compile(r"\s+(?:now|also|currently|still|mostly|mainly|primarily|only|always|already|usually)$", re.I)
_VERB_OF = {phrase: predicate for predicate in PREDICATES for phrase in predicate.phrases}
_VERB = "|".join(re.escape(phrase) for phrase in sorted(_VERB_OF, key=len, reverse=True))
# The first verb phrase of the vocabulary splits a claim into subject and object.
FACT_RULE = re.compile(rf"^(?P<subject>.+?)\s+(?P<verb>{_VERB})\s+(?P<object>.+)$", re.I)
_VERB_FIRST = re.compile(rf"^(?P<verb>{_VERB})\s+(?P<object>.+)$", re.I)
# Where a fact's object ends: a new clause, or a reason.
_CLAUSE_END = re.compile(r"\s*(?:[;:]|\s[-–—]\s|,\s*(?:which|who|where|but|so|as|because|since|while)\b|"
                         r"\s+(?:because|since|so that|but|although|though|while|whereas)\b)", re.I)
# Between two objects (or two claims): "Redis and Postgres", "Redis, Kafka, and Postgres".
_LIST = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+", re.I)
# A qualifier after the name: "Kubernetes in production", "Redis for caching".
_QUALIFIER = re.compile(r"\s+(?:over|rather than|instead of|in|for|since|during|from|until|via|through|with|"
                        r"when|where|while|after|before|as of|at|on|to|by)\s+.*$", re.I)
_TO_USE = re.compile(r"^(?:to use|using)\s+", re.I)


# Decisions ------------------------------------------------------------------------------------------------------

DECISION_PHRASES = ("decided not to", "chose not to", "agreed not to", "decided to", "decided on", "decided against",
                    "decided that", "have decided to", "has decided to", "chose to", "chose", "have chosen",
                    "has chosen", "agreed to", "agreed on", "agreed that", "opted for", "opted to", "opted against",
                    "settled on", "went with", "picked", "selected", "standardized on", "standardised on",
                    "are going with", "'re going with")
_DECIDED = "|".join(re.escape(phrase) for phrase in sorted(DECISION_PHRASES, key=len, reverse=True))
# "<who> decided to <choice>", who in at most four words; or "Decision: <choice>".
DECISION_RULES = (
    re.compile(rf"^(?P<who>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:finally\s+)?(?P<verb>{_DECIDED})\s+(?P<rest>.+)$",
               re.I),
    re.compile(r"^(?:the\s+)?decision(?:\s+(?:is|was))?\s*[:-]?\s*(?:to\s+)?(?P<rest>.+)$", re.I),
)
_REASON = re.compile(r"\s*,?\s+(?:because|since|given that|due to|so that)\s+", re.I)
_ALTERNATIVES = re.compile(r"\s+(?:over|instead of|rather than)\s+", re.I)
_OR_LIST = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", re.I)


# Skills ---------------------------------------------------------------------------------------------------------

SKILL_HEADING = re.compile(r"^[ \t]*(?P<lead>how to|steps to|steps for|to)\s+(?P<goal>[^:\n]{2,150}?)\s*:[ \t]*"
                           r"(?P<inline>[^\n]*)$", re.I | re.M)
SKILL_STEP = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•])\s+(?P<step>\S[^\n]*)$")
_INLINE_STEP = re.compile(r"(?:^|\s)\d{1,2}[.)]\s+")
SKILL_STEPS_MIN = 2

# Sentences ------------------------------------------------------------------------------------------------------

_SENTENCE = re.compile(r".+?(?:[.!?]+(?=\s|$)|$)")
_BULLET = re.compile(r"^(?:\d{1,2}[.)]|[-*•>])\s+")
_LEAD_IN = re.compile(r"^(?:(?:ok|okay|so|also|and|but|well|fyi|btw|note|for the record|for reference|"
                      r"as agreed|update)\s*[,:]\s*|(?:please\s+)?(?:remember|note|keep in mind|be aware)"
                      r"(?:\s+that|\s*:)\s*|(?:also|so|and)\s+)", re.I)


def _clean(text: str) -> str:
    """One sentence: spaces collapsed, the first letter upper case, a full stop at the end."""
    text = " ".join(text.split()).rstrip(" ,;:")
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _name(text: str) -> str | None:
    """The name ``text`` gives (without a leading article), or None when it is no name."""
    words = _ARTICLE.sub("", text.strip().strip("\"'`“”‘’").rstrip(".,!?").strip()).split()
    text = " ".join(words)
    if not words or len(words) > NAME_WORDS_MAX or not _NAME.fullmatch(text):
        return None
    if words[0].casefold() in _NOT_NAMES:
        return None
    return text


def _skills(text: str) -> list[Item]:
    items = []
    for heading in SKILL_HEADING.finditer(text):
        goal = " ".join(heading["goal"].split())
        if heading["inline"].strip():
            parts = _INLINE_STEP.split(heading["inline"])
            steps = [" ".join(part.split()) for part in parts[1:] if part.strip()]
            if parts[0].strip() or len(steps) < SKILL_STEPS_MIN:
                continue
            end = heading.end()
        else:
            steps, end = [], heading.end()
            for line in re.finditer(r"\n([^\n]*)", text[heading.end():]):
                step = SKILL_STEP.match(line[1])
                if not step:
                    break
                steps.append(" ".join(step["step"].split()))
                end = heading.end() + line.end()
            if len(steps) < SKILL_STEPS_MIN:
                continue
        lead = "How to" if heading["lead"].casefold() == "how to" else "To"
        body = "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))
        items.append(Item(kind=SKILL, content=f"{lead} {goal}:\n{body}", start=heading.start("lead"), end=end,
                          title=f"How to {goal}", steps=tuple(steps)))
    return items


def _sentences(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of each sentence outside the ``taken`` spans: line by line, a leading bullet left out."""
    spans = []
    for line in re.finditer(r"[^\n]+", text):
        if any(a <= line.start() < b for a, b in taken):
            continue
        bullet = _BULLET.match(line.group().lstrip())
        offset = line.start() + len(line.group()) - len(line.group().lstrip()) + (bullet.end() if bullet else 0)
        for sentence in _SENTENCE.finditer(text[offset:line.end()]):
            piece = sentence.group()
            start = offset + sentence.start() + len(piece) - len(piece.lstrip())
            end = offset + sentence.end() - (len(piece) - len(piece.rstrip()))
            if start < end:
                spans.append((start, end))
    return spans


def _decision(claim: str, start: int, end: int) -> Item | Skipped | None:
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
    alternatives = tuple(name for name in (_ARTICLE.sub("", part.strip()) for part in _OR_LIST.split(over))
                         if name) if over else ()
    words = choice.split()
    if not words or (len(words) <= 3 and words[-1].casefold() in _NOT_NAMES):
        return Skipped(claim, start, end, VAGUE)
    return Item(kind=DECISION, content=_clean(claim), start=start, end=end, choice=choice,
                alternatives=alternatives, reason=reason)


def _split_once(pattern: re.Pattern, text: str) -> tuple[str, str, str]:
    match = pattern.search(text)
    return (text[:match.start()], match.group(), text[match.end():]) if match else (text, "", "")


def _facts(claim: str, start: int, end: int) -> list[Item] | Skipped | None:
    match = FACT_RULE.match(claim)
    if not match:
        return None
    subject_text = _ADVERBS.sub("", match["subject"])
    subject = _name(subject_text)
    if subject is None:
        return Skipped(claim, start, end, VAGUE_NAME.format(part="subject", name=subject_text.strip(),
                                                            words=NAME_WORDS_MAX))
    said = claim[:match.start("object")].rstrip()  # subject and verb as written
    verb = match["verb"]
    objects = _CLAUSE_END.split(match["object"].rstrip(" .!"), maxsplit=1)[0]
    items = []
    for part in _LIST.split(objects):
        again = _VERB_FIRST.match(part)
        if again:  # "... and uses Redis": a second claim about the same subject
            verb, part = again["verb"], again["object"]
            said = f"{subject_text.strip()} {verb}"
        written = _TO_USE.sub("", part.strip()) if _VERB_OF[verb.casefold()].name == "prefers" else part.strip()
        name = _name(_QUALIFIER.sub("", written))
        if name is None:
            return Skipped(claim, start, end, VAGUE_NAME.format(part="object", name=written, words=NAME_WORDS_MAX))
        predicate = _VERB_OF[verb.casefold()]
        subject_of, object_of = (name, subject) if predicate.reverse else (subject, name)
        items.append(Item(kind=FACT, content=_clean(f"{said} {written}"), start=start, end=end, subject=subject_of,
                          predicate=predicate.name, object=object_of))
    return items


def _read(sentence: str, start: int, end: int) -> list[Item] | Skipped:
    """The items one sentence gives, or why it gives none (the rules in the module's docstring, in order)."""
    claim = _LEAD_IN.sub("", sentence).strip()
    if QUESTION[1].search(claim):
        return Skipped(sentence, start, end, QUESTION[0])
    # The skip rules read the claim, not the reason given for it.
    before_reason = _split_once(_REASON, claim)[0]
    if HYPOTHETICAL[1].search(before_reason):
        return Skipped(sentence, start, end, HYPOTHETICAL[0])
    decided = _decision(claim, start, end)
    if isinstance(decided, Item):
        return [decided]
    if decided is not None:
        return Skipped(sentence, start, end, decided.reason)
    for reason, pattern in (NEGATION, PAST):
        if pattern.search(before_reason):
            return Skipped(sentence, start, end, reason)
    facts = _facts(claim, start, end)
    if isinstance(facts, Skipped):
        return Skipped(sentence, start, end, facts.reason)
    if facts:
        return facts
    if PLEASANTRY[1].search(claim):
        return Skipped(sentence, start, end, PLEASANTRY[0])
    return Skipped(sentence, start, end, VAGUE)


def extract(text: str) -> Extraction:
    """Return the facts, decisions and skills ``text`` states, in the order they appear, and the sentences skipped."""
    skills = _skills(text)
    found: list[tuple[int, Item | Skipped]] = [(item.start, item) for item in skills]
    for start, end in _sentences(text, [(item.start, item.end) for item in skills]):
        result = _read(text[start:end], start, end)
        found.extend((start, entry) for entry in (result if isinstance(result, list) else [result]))
    found.sort(key=lambda pair: pair[0])
    return Extraction(items=tuple(entry for _, entry in found if isinstance(entry, Item)),
                      skipped=tuple(entry for _, entry in found if isinstance(entry, Skipped)))
