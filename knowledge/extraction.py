"""Learning from text: facts, decisions, skills and stated changes found by rules, in English, with no network.

``extract(text, now=...)`` reads the text top-down and returns what it found and what it passed over:

1. Speakers. A prefix ("Alice:", "[10:42] mei:", "User:") names who speaks on its line and
   on the lines after it; "I", "me" and "my" are then that speaker ("user" for User or Human,
   and when no one is named). A label ("Summary:", "Notes:") is dropped (``speaker_labels.LABELS``).
2. Skills: a goal ("To deploy the API:", "How to rotate keys:", "Runbook: failover") followed
   by two or more numbered or bulleted steps, on its lines or inline, wherever the goal starts
   a sentence; or "To <goal>, <step>, then <step>" (``knowledge.skills``).
3. The rest is cut into sentences (at a line's end, and after . ! or ? and a space) and
   clauses (at ";", at "and" before a new subject, before "which" or "who"). A leading bullet
   and a lead-in ("OK, ", "Plus, ") are dropped, and a stated time ("since March", "last
   month") is taken out of the clause (``knowledge.dates``).
4. Each clause meets the rules below in order, and the first that applies decides:
   a question is skipped; a hypothetical, plan, wish or guess is skipped; a decision
   ("we decided to X over Z because Y") is taken (``knowledge.decisions``); a stated change
   is taken as the endings of the facts it names and the facts it states
   (``knowledge.changes``); a negation or a statement about the past is skipped; a fact is
   taken (``knowledge.clauses``); anything else is skipped as a pleasantry or as too vague
   (the skip rules are ``knowledge.skip_rules``). The skip rules read the claim only, not
   its reason ("We chose Go because it might scale").

Decisions and skills carry no triple. Every item keeps the span of the input it came from.
docs/learning.md shows every rule with examples.
"""

import datetime as dt
import re
from dataclasses import dataclass

from knowledge import dates, speaker_labels
from knowledge.changes import change
from knowledge.clauses import (
    USER,
    VAGUE,
    Context,
    Fact,
    as_name,
    clean,
    facts_of,
    looks_proper,
    resolve,
    role_fact,
)
from knowledge.decisions import DECIDED_AHEAD, claim_before_reason, decision
from knowledge.findings import FACT, Ending, Extraction, Item, Skipped
from knowledge.plain_words import plain
from knowledge.skills import one_sentence_skill, skills_in
from knowledge.skip_rules import FUTURE, HYPOTHETICAL, NEGATION, PAST, PLEASANTRY, QUESTION
from knowledge.verb_forms import verb_patterns

# The longest text one call reads; longer is refused as a whole (memories.services.learn).
TEXT_MAX_CHARS = 20_000

# Speakers and sentences ------------------------------------------------------------------------------------------

# "Alice:", "[10:42] mei:", "10:42 Bob Smith:", "<Carol>": a name of one or two words, a time before it maybe.
SPEAKER = re.compile(
    r"^[ \t]*(?:\[?(?P<time>(?:\d{4}-\d{2}-\d{2}[ T,]+)?\d{1,2}:\d{2}(?::\d{2})?(?:\s*[aApP][mM])?)\]?"
    r"\s*[-–]?\s*)?"
    r"(?:<(?P<tagged>[\w.' -]{1,30})>|(?P<name>[A-Za-z][\w.'-]*(?:\s+[A-Z][\w.'-]*)?))"
    r"(?:\s*:|\s+[—–]|\s+-(?=\s))?(?:\s+|$)"
)
_LEAD_IN = re.compile(
    r"^(?:(?:ok|okay|so|also|and|but|well|fyi|btw|note|for the record|for reference|as agreed|"
    r"update|plus|additionally|besides|anyway|meanwhile|oh|ah|right|alright|in short|in summary|"
    r"to summarize|to summarise|quick update|heads up|just so you know|for context|oh and|and also|"
    r"by the way|as a reminder|reminder)\s*[,:\-–]\s*|(?:please\s+)?(?:remember|note|keep in mind|"
    r"be aware|fyi|just so you know)(?:\s+that|\s*:)\s*|"
    r"(?:also|so|and|plus|btw|fyi|oh|heads\s+up)\s+)",
    re.I,
)
_SENTENCE = re.compile(r".+?(?:[.!?]+(?=\s|$)|$)")
_BULLET = re.compile(r"^(?:\d{1,2}[.)]|[-*•>]|\[[ xX]?\])\s+")


def _speaker_of(line: str) -> tuple[str | None, bool, int]:
    """(who speaks, whether it is the agent, where the words start) for a line with a speaker prefix;
    (None, False, 0) when it has none. A label ("Summary:") speaks for no one: ("", False, its end)."""
    match = SPEAKER.match(line)
    if not match:
        return None, False, 0
    name = " ".join((match["tagged"] or match["name"]).split())
    colon = line[match.start() : match.end()].rstrip().endswith((":", "—", "–", " -"))
    if not match["tagged"] and not colon:
        return None, False, 0
    if not match["time"] and not match["tagged"] and line[match.end() :].strip() == "":
        return None, False, 0
    folded = name.casefold()
    if folded in speaker_labels.MEANINGFUL_LABELS:
        return None, False, 0
    if folded in speaker_labels.USER_SPEAKERS:
        return USER, False, match.end()
    if folded in speaker_labels.ASSISTANT_SPEAKERS:
        return "", True, match.end()
    if folded in speaker_labels.LABELS:
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
    body = text[line.start : line.end]
    bullet = _BULLET.match(body.lstrip())
    offset = line.start + len(body) - len(body.lstrip()) + (bullet.end() if bullet else 0)
    for sentence in _SENTENCE.finditer(text[offset : line.end]):
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
_CLAUSE_BREAK = re.compile(
    r"\s*(?<!\btl);(?!dr\b)\s*|"
    r",?\s+and\s+(?=(?:I|we|he|she|they)\s+(?!think|guess|believe|suppose|hope|"
    r"wish|assume|feel|might|may|could|would|will|should)\w)|"
    r",\s+(?=(?:it|he|she|they)(?:\s+(?:is|are|was|were|has|have)|['’]s)\s)|"
    r",\s+(?=(?:which|who)\s+(?:is|are|has|have|runs|uses|leads|heads|owns|"
    r"\w+s)\b)|,?\s+and\s+(?=(?:then\s+)?" + _CONTINUING + r"\s)"
)
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


# Reading ---------------------------------------------------------------------------------------------------------


# "now" in a claim: a one-valued fact it states ends the value before it (knowledge.changes).
_NOW = re.compile(r"\bnow\b", re.I)
# Verbs with a negation in them that say a fact: "Mark can't stand YAML", "I'm not a fan of YAML".
_STANDS = re.compile(
    r"\b(?:(?:can't|cannot|can not)\s+stand|not\s+a\s+(?:big\s+)?fan\s+of|no\s+fan\s+of|"
    r"(?:don't|doesn't|do\s+not|does\s+not)\s+like)\b",
    re.I,
)


def _without(claim: str, start: int, end: int) -> str:
    """The claim with a span taken out (a stated time), and the commas it leaves cleaned up."""
    rest = f"{claim[:start]} {claim[end:]}"
    return " ".join(rest.split()).strip(" ,").replace(" ,", ",")


# "Summary: ...", "Outcome of the architecture review: ...", "Weekly sync takeaways: ...".
_LABEL = re.compile(r"^(?P<label>[\w;'’ -]{1,60}?):\s+(?=\S)")


def _is_label(label: str) -> bool:
    """Whether the words before a colon label what follows: a label, or a phrase that starts or ends with one."""
    words = label.casefold().split()
    labels = speaker_labels.LABELS
    return bool(words) and (" ".join(words) in labels or words[0] in labels or words[-1] in labels)


@dataclass(frozen=True)
class _Origin:
    """What each item or skip read from one clause carries from it: the clause as found and its span, the writer's
    words, and the times it states."""

    sentence: str
    start: int
    end: int
    written: str  # what an item stores: the writer's words, lead-ins left out
    at: dt.datetime | None  # a stated time the facts hold from
    until: dt.datetime | None  # a stated time they hold until

    def skipped(self, reason: str) -> Skipped:
        return Skipped(self.sentence, self.start, self.end, reason)


def _read(
    sentence: str, start: int, end: int, context: Context, *, continued: bool = False
) -> list[Item | Ending] | Skipped:
    """The items and endings one clause gives, or why it gives none (the rules in the module's docstring)."""
    claim = _LEAD_IN.sub("", _LEAD_IN.sub("", sentence)).strip()
    claim = _LABEL.sub(lambda match: "" if _is_label(match["label"]) else match.group(), claim)
    relative = continued and re.match(r"(?:which|who)\s", claim, re.I) and not claim.endswith("?")
    if continued and context.thing and re.match(rf"(?:then\s+)?{_CONTINUING}\s", claim, re.I):
        claim = f"{context.thing} {claim}"  # "... and switched to VS Code": the clause before names who
    if QUESTION[1].search(claim) and not relative:  # ", who heads up X" goes on about the name before it
        return Skipped(sentence, start, end, QUESTION[0])
    written = clean(claim)
    claim = claim.rstrip(" .!")
    stated = dates.stated_time(claim, context.now) if context.now is not None else None
    if stated is not None:
        if stated.at > context.now and not stated.ends:
            return Skipped(sentence, start, end, FUTURE.format(when=claim[stated.start : stated.end].strip()))
        claim = _without(claim, stated.start, stated.end)
    origin = _Origin(
        sentence=sentence,
        start=start,
        end=end,
        written=written,
        at=stated.at if stated is not None and not stated.ends else None,
        until=stated.at if stated is not None and stated.ends else None,
    )
    said_now = bool(_NOW.search(claim))
    claim = plain(claim)
    chosen = _decision_or_skill(claim, origin)
    if chosen is not None:
        return chosen
    return _change_or_facts(claim, origin, context, said_now=said_now)


def _decision_or_skill(claim: str, origin: _Origin) -> list[Item] | Skipped | None:
    """A decision or a one-sentence skill the clause states, or the hypothetical it is skipped as; None when it is
    none of them. A decision said of the future ("We'll go with Stripe") is read before the hypothetical rule."""
    written, start, end = origin.written, origin.start, origin.end
    decided = decision(claim, written, start, end) if any(rule.match(claim) for rule in DECIDED_AHEAD) else None
    # The skip rules read the claim, not the reason given for it.
    if decided is None and HYPOTHETICAL[1].search(claim_before_reason(claim)):
        return origin.skipped(HYPOTHETICAL[0])
    skill = one_sentence_skill(claim, start, end)
    if skill is not None:
        return [skill]
    decided = decided or decision(claim, written, start, end)
    if isinstance(decided, Item):
        return [decided]
    if decided is not None:
        return origin.skipped(decided.reason)
    return None


def _change_or_facts(claim: str, origin: _Origin, context: Context, *, said_now: bool) -> list[Item | Ending] | Skipped:
    """The rules after decisions and skills: a fact said again of another holder, a stated change, a negation or
    the past skipped, then the facts the clause states."""
    written = origin.written
    elided = _ELLIPSIS.match(claim)
    if elided and context.said is not None and (holder := resolve(elided["subject"], context, part="subject")):
        # "The SRE team no longer maintains the page; Support Engineering does now": the same fact, another holder.
        fact = context.said
        subject, object_ = (holder, fact.object) if fact.actor == "subject" else (fact.subject, holder)
        return [_fact_item(Fact(subject, fact.predicate, object_, written), origin, context)]
    changed = change(claim, written, origin.start, origin.end, context, origin.at, said_now=said_now)
    if changed is not None:
        endings, facts = changed
        facts = _in_own_words(facts, claim, written)
        _remember_person(facts or [Fact(ending.subject or "", "", "", "") for ending in endings], context, claim)
        return [*endings, *(_fact_item(fact, origin, context) for fact in facts)]
    for reason, pattern in (NEGATION, PAST):
        if pattern.search(_STANDS.sub("", claim_before_reason(claim))):
            return origin.skipped(reason)
    return _facts(claim, origin, context)


def _facts(claim: str, origin: _Origin, context: Context) -> list[Item] | Skipped:
    """The facts the clause states (with the role an appositive names), or why it states none."""
    claim, role = _appositive(claim, context)
    parsed = facts_of(claim, context)
    if parsed.facts and role is not None:
        parsed.facts.append(role)
    if parsed.facts:
        _remember_person(parsed.facts, context, claim)
        return [_fact_item(fact, origin, context) for fact in _in_own_words(parsed.facts, claim, origin.written)]
    said_of = _SAID_OF.match(claim)
    if said_of and (thing := as_name(said_of["subject"])):
        context.thing = thing  # "the sync job is flaky again. ... it runs on Airflow": "it" is the sync job
    if parsed.past:
        return origin.skipped(PAST[0])
    if PLEASANTRY[1].search(claim):
        return origin.skipped(PLEASANTRY[0])
    if parsed.vague:
        return origin.skipped(parsed.vague)
    return origin.skipped(VAGUE)


def _in_own_words(facts: list[Fact], claim: str, written: str) -> list[Fact]:
    """Facts that say the whole clause keep the writer's words (with the time and adverbs they said)."""
    whole = clean(claim)
    return [
        Fact(fact.subject, fact.predicate, fact.object, written, fact.value) if fact.said == whole else fact
        for fact in facts
    ]


# A clause that says again what the last one said, of another name: "Support Engineering does now".
_ELLIPSIS = re.compile(
    r"^(?P<subject>[\w][\w .'-]{0,60}?)\s+(?:does|do|is|are|has|have)(?:\s+(?:now|too|instead|"
    r"as\s+well))*$",
    re.I,
)
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
        if (
            match
            and (name := as_name(match["name"])) is not None
            and looks_proper(name)
            and len(match["role"].split()) <= 3
            and verb_patterns().first.match(match["rest"])
            and not verb_patterns().at.search(f"{match['role']} x")
        ):
            role = " ".join(match["role"].split())
            return f"{match['name']} {match['rest']}", role_fact("our role", role, name, "", None, clean(claim))
    return claim, None


def _remember_person(facts: list[Fact], context: Context, claim: str) -> None:
    """Keep the subject of the clause's first fact for a "she" or "he" after it, when it is a person's name, and
    for an "it"; and the name the clause ends with for a "which" or "who" after it."""
    if facts and facts[0].subject and looks_proper(facts[0].subject) and len(facts[0].subject.split()) <= 3:
        context.person = facts[0].subject
    if facts and facts[0].subject:
        context.thing = facts[0].subject
    if facts and facts[-1].predicate:
        context.said = facts[-1]
    names = [name for fact in facts[-1:] for name in (fact.subject, fact.object) if name]
    if names:
        context.last = max(names, key=lambda name: claim.casefold().rfind(name.casefold()))


def _fact_item(fact: Fact, origin: _Origin, context: Context) -> Item:
    content = fact.said
    # "Alice: I prefer tabs." keeps who "I" is; a fact that names no speaker needs no prefix.
    speaker = context.speaker if context.speaker in (fact.subject, fact.object) else ""
    if context.assistant:
        content = f"Assistant: {content}"  # its "you" is the user
    elif speaker and speaker != USER and speaker not in content:
        content = f"{speaker}: {content}"
    elif speaker == USER and re.search(r"\b(?:I|my|me)\b", content, re.I):
        content = f"User: {content}"
    return Item(
        kind=FACT,
        content=content,
        start=origin.start,
        end=origin.end,
        subject=fact.subject,
        predicate=fact.predicate,
        object=fact.object,
        valid_from=origin.at,
        valid_to=origin.until,
    )


def extract(text: str, *, now: dt.datetime | None = None) -> Extraction:
    """Return the facts, decisions, skills and endings ``text`` states, in the order they appear, and the
    sentences skipped. ``now``: the time stated times are resolved against (None: stated times are not read)."""
    lines = _lines(text)
    # Skills read the text with speaker prefixes blanked out, so a goal after "Marco:" starts its line.
    masked = list(text)
    for line in lines:
        masked[line.prefix : line.start] = " " * (line.start - line.prefix)
    skills = skills_in("".join(masked))
    found: list[tuple[int, Item | Ending | Skipped]] = [(item.start, item) for item in skills]
    taken = [(item.start, item.end) for item in skills]
    context = Context(now=now)
    for line in lines:
        if line.speaker != context.speaker or line.assistant != context.assistant:
            context = Context(speaker=line.speaker, assistant=line.assistant, now=now)
        context.thing = context.last = ""  # "it", "which" and "who" look back along their own line only
        for sentence_start, sentence_end in _sentences(text, line, taken):
            for number, (clause, start, end) in enumerate(_clauses(text[sentence_start:sentence_end], sentence_start)):
                result = _read(clause, start, end, context, continued=number > 0)
                found.extend((start, entry) for entry in (result if isinstance(result, list) else [result]))
    found.sort(key=lambda pair: pair[0])
    return Extraction(
        items=tuple(entry for _, entry in found if isinstance(entry, Item)),
        skipped=tuple(entry for _, entry in found if isinstance(entry, Skipped)),
        endings=tuple(entry for _, entry in found if isinstance(entry, Ending)),
    )
