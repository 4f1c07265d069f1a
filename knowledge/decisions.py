"""Decisions: "we decided to X over Z because Y", "Decision: X", "Let's go with X", read into what was chosen, over
what, and why. ``knowledge.extraction`` tries them before the hypothetical rule, so a choice said of the future
("We'll go with Stripe") is a decision made now.
"""

import re

from knowledge import name_words
from knowledge.clauses import DETERMINER, QUALIFIER, VAGUE
from knowledge.findings import DECISION, Item, Skipped
from knowledge.skip_rules import NEGATION

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
DECIDED_AHEAD = (DECISION_RULES[1], DECISION_RULES[2], DECISION_RULES[3])
_REASON = re.compile(r"\s*,?\s+(?:because|since|given that|due to|so that)\s+", re.I)
_ALTERNATIVES = re.compile(r"\s+(?:over|instead of|rather than|and not)\s+", re.I)
_OR_LIST = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+", re.I)


def decision(claim: str, written: str, start: int, end: int) -> Item | Skipped | None:
    """The decision a claim states, the skip of one that names no choice, or None when it states none."""
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


def claim_before_reason(claim: str) -> str:
    """The claim without the reason given for it: the skip rules read "We chose Go", not "because it might scale"."""
    return _split_once(_REASON, claim)[0]


def _split_once(pattern: re.Pattern, text: str) -> tuple[str, str, str]:
    match = pattern.search(text)
    return (text[: match.start()], match.group(), text[match.end() :]) if match else (text, "", "")
