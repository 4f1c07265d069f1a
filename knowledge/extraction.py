"""Learning from text: facts, decisions, skills and stated changes found by rules, in English, with no network.

``extract(text, now=...)`` reads the text top-down and returns what it found and what it passed over:

1. Speakers. A prefix ("Alice:", "[10:42] mei:", "User:") names who speaks on its line and
   on the lines after it; "I", "me" and "my" are then that speaker ("user" for User or Human,
   and when no one is named). A label ("Summary:", "Notes:") is dropped (``speaker_labels.LABELS``).
2. Skills: a goal ("To deploy the API:", "How to rotate keys:", "Runbook: failover") followed
   by two or more numbered or bulleted steps, on its lines or inline, wherever the goal starts
   a sentence; or "To <goal>, <step>, then <step>".
3. The rest is cut into sentences (at a line's end, and after . ! or ? and a space) and
   clauses (at ";", at "and" before a new subject, before "which" or "who"). A leading bullet
   and a lead-in ("OK, ", "Plus, ") are dropped, and a stated time ("since March", "last
   month") is taken out of the clause (``knowledge.dates``).
4. Each clause meets the rules below in order, and the first that applies decides:
   a question is skipped; a hypothetical, plan, wish or guess is skipped; a decision
   ("we decided to X over Z because Y") is taken; a stated change is taken as the endings of
   the facts it names and the facts it states (``knowledge.changes``); a negation or a
   statement about the past is skipped; a fact is taken (``knowledge.clauses``); anything
   else is skipped as a pleasantry or as too vague. The skip rules read the claim only, not
   its reason ("We chose Go because it might scale").

Decisions and skills carry no triple. Every item keeps the span of the input it came from.
docs/learning.md shows every rule with examples.
"""

import datetime as dt
import re
from dataclasses import dataclass

from knowledge import dates, name_words, speaker_labels
from knowledge.changes import change
from knowledge.clauses import (
    DETERMINER,
    QUALIFIER,
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
from knowledge.findings import DECISION, FACT, SKILL, Ending, Extraction, Item, Skipped
from knowledge.plain_words import plain
from knowledge.verb_forms import verb_patterns

# The longest text one call reads; longer is refused as a whole (memories.services.learn).
TEXT_MAX_CHARS = 20_000

# Skip rules ------------------------------------------------------------------------------------------------------

# (reason, pattern), tried in this order; see the module's docstring for when each applies.
QUESTION = (
    "question",
    re.compile(
        r"\?\s*$|^(?:who|whom|whose|what|when|where|why|which|how|should|shall|could|would|can|do|does|did|is|are|"
        r"will|won't|isn't|aren't|doesn't|don't|am|was|were|has|have|anyone|anybody)\b(?!\s*:)",
        re.I,
    ),
)
HYPOTHETICAL = (
    "hypothetical: a possibility, plan, wish or guess, not something that holds",
    re.compile(
        r"\b(?:if|unless|might|may|could|would(?!\s+rather)|should|shall|will|maybe|perhaps|possibly|probably|suppose|"
        r"supposing|"
        r"assuming|whether|hopefully|wish|wishes|consider|considering|let's|let us|ought|eventually|someday|"
        r"think|believe|guess|seems?|apparently|must|soon|tomorrow|later|once|"
        r"next\s+(?:week|month|quarter|year|sprint|release|time)|"
        r"(?:plan|plans|planning|want|wants|wanted|going|intend|intends|hope|hopes|need|needs|have|has|try|trying|"
        r"would like|'d like) to|\w+'ll|\w+'d(?!\s+rather))\b",
        re.I,
    ),
)
NEGATION = (
    "negation: says what does not hold",
    re.compile(r"\b(?:not|no|never|none|nor|neither|cannot|nobody|nothing)\b|n't\b", re.I),
)
PAST = (
    "past: says what held before, not what holds",
    re.compile(r"\b(?:used to|formerly|previously|in the past|back then|at the time|anymore|any more)\b", re.I),
)
PLEASANTRY = (
    "pleasantry: nothing to learn",
    re.compile(
        r"^(?:thanks|thank you|thx|ty|cheers|great|good|nice|cool|awesome|perfect|ok|okay|sure|yes|yep|yeah|no problem|"
        r"got it|sounds good|lgtm|hello|hi|hey|good morning|good night|bye|see you|welcome|you're welcome|will do|"
        r"done|noted|understood|agreed|right|indeed|exactly|haha|lol|wow|oops|sorry|congrats|congratulations)\b",
        re.I,
    ),
)
FUTURE = "hypothetical: the time it states ({when}) is still to come"


# Decisions -------------------------------------------------------------------------------------------------------

DECISION_PHRASES = (
    "decided not to",
    "chose not to",
    "agreed not to",
    "decided to",
    "decided on",
    "decided against",
    "decided that",
    "have decided to",
    "has decided to",
    "chose to",
    "chose",
    "have chosen",
    "has chosen",
    "agreed to",
    "agreed on",
    "agreed that",
    "opted for",
    "opted to",
    "opted against",
    "settled on",
    "went with",
    "picked",
    "selected",
    "standardized on",
    "standardised on",
    "are going with",
    "'re going with",
    "ended up with",
    "ended up going with",
    "ended up choosing",
    "ended up picking",
    "ended up using",
    "ended up selecting",
    "landed on",
    "committed to",
    "voted for",
    "voted to",
)
_DECIDED = "|".join(re.escape(phrase) for phrase in sorted(DECISION_PHRASES, key=len, reverse=True))
# "<who> decided to <choice>", who in at most four words after a lead clause ("After benchmarking, we picked ...");
# "Decision: <choice>"; "Let's go with <choice>".
DECISION_RULES = (
    re.compile(
        rf"^(?:[^,]{{1,60}},\s+)?(?P<who>[\w'-]+(?:\s+[\w'-]+){{0,3}}?)\s+(?:(?:finally|eventually|"
        rf"ultimately|just|also|then|have|has)\s+)?(?P<verb>{_DECIDED})\s+(?P<rest>.+)$",
        re.I,
    ),
    re.compile(
        r"^(?:the\s+)?(?:final\s+)?(?:decision|decided)(?:\s+(?:is|was))?\s*[:-]?\s*(?:to\s+)?(?P<rest>.+)$", re.I
    ),
    re.compile(r"^let'?s\s+(?P<verb>go\s+with|stick\s+with)\s+(?P<rest>.+)$", re.I),
    # "We'll go with Stripe", "We're going to standardize on Go": a choice said of the future is made now.
    re.compile(
        r"^(?P<who>we|i|the\s+team)(?:['’]ll|\s+will|\s+are\s+going\s+to|['’]re\s+going\s+to)\s+"
        r"(?P<verb>go\s+with|stick\s+with|standardi[sz]e\s+on)\s+(?P<rest>.+)$",
        re.I,
    ),
    # "We talked it through and agreed to use Kafka": the choice after what led to it.
    re.compile(
        rf"^(?P<who>we|i|the\s+team|they)\s+(?!(?:might|may|could|would|should|will)\b)[^.;]{{3,120}}?"
        rf"(?:,\s*|\s+)(?:and|so|then)\s+(?:finally\s+|eventually\s+)?(?P<verb>{_DECIDED})\s+(?P<rest>.+)$",
        re.I,
    ),
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
    alternatives = (
        tuple(
            name
            for name in (QUALIFIER.sub("", DETERMINER.sub("", part.strip())) for part in _OR_LIST.split(over))
            if name
        )
        if over
        else ()
    )
    words = choice.split()
    if not words or (len(words) <= 3 and words[-1].casefold() in name_words.NOT_NAMES):
        return Skipped(claim, start, end, VAGUE)
    return Item(
        kind=DECISION, content=written, start=start, end=end, choice=choice, alternatives=alternatives, reason=reason
    )


def _split_once(pattern: re.Pattern, text: str) -> tuple[str, str, str]:
    match = pattern.search(text)
    return (text[: match.start()], match.group(), text[match.end() :]) if match else (text, "", "")


# Skills ----------------------------------------------------------------------------------------------------------

_GOAL_LEAD = (
    r"(?:(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)|(?:(?:a\s+)?quick\s+)?how-to\s+(?:for|to)|"
    r"how\s+to|how\s+we|steps\s+to|steps\s+for|to)"
)
SKILL_HEADING = re.compile(
    rf"(?:^[ \t]*|(?<=[.!?] ))(?P<lead>{_GOAL_LEAD})\s+(?P<goal>[^:\n.]{{2,150}}?)\s*:[ \t]*"
    r"(?P<inline>[^\n]*)$",
    re.I | re.M,
)
# "Deploy checklist:", "Release process:", "Runbook for failover:"
SKILL_TITLED = re.compile(
    r"(?:^[ \t]*|(?<=[.!?] ))(?:(?P<goal>[A-Za-z][^:\n.]{1,60}?)\s+(?P<lead>checklist|runbook|"
    r"procedure|process|playbook|steps)|(?P<lead2>checklist|runbook|procedure|playbook)\s+"
    r"(?:for|to)\s+(?P<goal2>[^:\n.]{2,60}?))\s*:[ \t]*(?P<inline>[^\n]*)$",
    re.I | re.M,
)
# "Runbook: rotating the API keys", then the steps on the lines after it.
SKILL_LABELLED = re.compile(
    r"^[ \t]*(?P<lead>runbook|checklist|procedure|playbook|how-to|steps)\s*[:—–-]\s*"
    r"(?P<goal>[^\n:]{2,80}?)[ \t]*:?(?P<inline>)[ \t]*$",
    re.I | re.M,
)
SKILL_STEP = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•]|step\s+\d{1,2}\s*[:.)-])\s+(?P<step>\S[^\n]*)$", re.I)
_INLINE_STEP = re.compile(r"(?:^|\s)(?:\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-])\s+", re.I)
# "To restart the worker, drain it, then restart it": a goal and steps joined by "then".
SKILL_THEN = re.compile(r"^(?P<lead>to|how to)\s+(?P<goal>[^,]{2,80}),\s+(?:first\s+)?(?P<steps>.+?\bthen\b.+)$", re.I)
_THEN = re.compile(r"\s*(?:,\s*and\s+then|,\s*then|;\s*then|\s+and\s+then|\s+then|,\s*finally|\s+finally)\s+", re.I)
SKILL_STEPS_MIN = 2


def _skill(lead: str, goal: str, steps: list[str], start: int, end: int) -> Item:
    lead = "How to" if lead.casefold().startswith(("how", "here", "this", "quick", "a quick")) else "To"
    goal = re.sub(r"^(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)\s+", "", goal, flags=re.I)
    goal = " ".join(goal.split())
    body = "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))
    if goal.split()[0].casefold().endswith("ing"):  # "how-to for onboarding a new engineer": the goal is a doing
        title = goal[0].upper() + goal[1:]
        return Item(kind=SKILL, content=f"{title}:\n{body}", start=start, end=end, title=title, steps=tuple(steps))
    return Item(
        kind=SKILL, content=f"{lead} {goal}:\n{body}", start=start, end=end, title=f"How to {goal}", steps=tuple(steps)
    )


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
            for line in re.finditer(r"\n([^\n]*)", text[heading.end() :]):
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
    written = clean(claim)  # what an item stores: the writer's words, lead-ins left out
    claim = claim.rstrip(" .!")
    stated = dates.stated_time(claim, context.now) if context.now is not None else None
    if stated is not None:
        if stated.at > context.now and not stated.ends:
            return Skipped(sentence, start, end, FUTURE.format(when=claim[stated.start : stated.end].strip()))
        claim = _without(claim, stated.start, stated.end)
    at = stated.at if stated is not None and not stated.ends else None
    until = stated.at if stated is not None and stated.ends else None
    said_now = bool(_NOW.search(claim))
    claim = plain(claim)
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
    if elided and context.said is not None and (holder := resolve(elided["subject"], context, part="subject")):
        # "The SRE team no longer maintains the page; Support Engineering does now": the same fact, another holder.
        fact = context.said
        subject, object_ = (holder, fact.object) if fact.actor == "subject" else (fact.subject, holder)
        return [_fact_item(Fact(subject, fact.predicate, object_, written), start, end, at, until, context)]
    changed = change(claim, written, start, end, context, at, said_now=said_now)
    if changed is not None:
        endings, facts = changed
        facts = _in_own_words(facts, claim, written)
        _remember_person(facts or [Fact(ending.subject or "", "", "", "") for ending in endings], context, claim)
        return [*endings, *(_fact_item(fact, start, end, at, until, context) for fact in facts)]
    for reason, pattern in (NEGATION, PAST):
        if pattern.search(_STANDS.sub("", before_reason)):
            return Skipped(sentence, start, end, reason)
    claim, role = _appositive(claim, context)
    parsed = facts_of(claim, context)
    if parsed.facts and role is not None:
        parsed.facts.append(role)
    if parsed.facts:
        _remember_person(parsed.facts, context, claim)
        return [
            _fact_item(fact, start, end, at, until, context) for fact in _in_own_words(parsed.facts, claim, written)
        ]
    said_of = _SAID_OF.match(claim)
    if said_of and (thing := as_name(said_of["subject"])):
        context.thing = thing  # "the sync job is flaky again. ... it runs on Airflow": "it" is the sync job
    if parsed.past:
        return Skipped(sentence, start, end, PAST[0])
    if PLEASANTRY[1].search(claim):
        return Skipped(sentence, start, end, PLEASANTRY[0])
    if parsed.vague:
        return Skipped(sentence, start, end, parsed.vague)
    return Skipped(sentence, start, end, VAGUE)


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


def _fact_item(fact: Fact, start: int, end: int, at, until, context: Context) -> Item:
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
        start=start,
        end=end,
        subject=fact.subject,
        predicate=fact.predicate,
        object=fact.object,
        valid_from=at,
        valid_to=until,
    )


def extract(text: str, *, now: dt.datetime | None = None) -> Extraction:
    """Return the facts, decisions, skills and endings ``text`` states, in the order they appear, and the
    sentences skipped. ``now``: the time stated times are resolved against (None: stated times are not read)."""
    lines = _lines(text)
    # Skills read the text with speaker prefixes blanked out, so a goal after "Marco:" starts its line.
    masked = list(text)
    for line in lines:
        masked[line.prefix : line.start] = " " * (line.start - line.prefix)
    skills = _skills("".join(masked))
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
