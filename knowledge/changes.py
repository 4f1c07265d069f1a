"""Stated changes: "moved from A to B", "replaced X as lead of Y", "took over", "left", "no longer", "now ... not A".

``change(claim, ...)`` reads a clause and returns the endings it states (``findings.Ending``:
which current facts end, and what takes their place) and the facts it states beside them,
or None when the clause states no change. What an ending ends is decided by the store
(``memories.services.learn``): the current facts of the namespace that match it.
"""

import datetime as dt
import re
from dataclasses import dataclass

from knowledge import vocabulary
from knowledge.clauses import (
    QUALIFIER,
    WE,
    Context,
    Fact,
    as_name,
    facts_of,
    last_word,
    looks_proper,
    resolve,
    role_of,
)
from knowledge.findings import FACT, Ending, Item
from knowledge.verb_forms import inflections

_CHANGED = "|".join(re.escape(verb) for verb in vocabulary.CHANGE_VERBS)
_TO = r"(?:to|over\s+to|onto|into|for)"
# "The ledger switched from Oracle to Postgres", "We moved the wiki from Confluence to Notion", "X moved to B from A"
_FROM = r"(?:from|off(?:\s+of)?)"
FROM_TO = (
    re.compile(
        rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+|was\s+|were\s+|has\s+been\s+|have\s+been\s+|got\s+)?"
        rf"(?:(?:just|recently|finally)\s+)?(?P<verb>{_CHANGED})"
        rf"(?:\s+(?:over|back))?(?:\s+(?P<what>.+?))?\s+{_FROM}\s+(?P<old>.+?)\s+{_TO}\s+(?P<new>.+)$",
        re.I,
    ),
    re.compile(
        rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?P<verb>{_CHANGED})"
        rf"(?:\s+(?:over|back))?(?:\s+(?P<what>.+?))?\s+{_TO}\s+(?P<new>.+?)\s+{_FROM}\s+(?P<old>.+)$",
        re.I,
    ),
)
_MOVED = r"(?:moved|relocated|switched|migrated|transitioned|upgraded|ported|converted)"
# "Kai moved to Amsterdam", "The API switched to ECS": the subject's one-valued facts take the new value.
MOVED_TO = re.compile(
    rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?P<verb>{_MOVED})"
    rf"(?:\s+over)?(?:\s+(?P<what>.+?))?\s+(?:to|over\s+to|onto|into)\s+(?P<new>.+)$",
    re.I,
)
_SUCCEEDED = r"(?:replaced|succeeded|took\s+over\s+from|has\s+taken\s+over\s+from|have\s+taken\s+over\s+from)"
# "Kenji replaced Nadia as lead of Orion", "Tariq took over from Ines as lead of the mobile team",
# "Pulsar replaced Kafka", "Kenji took over Orion from Nadia", "We replaced Jenkins with GitHub Actions",
# "Kafka was replaced by Pulsar".
REPLACED = (
    (
        "with",
        re.compile(
            r"^(?P<who>.+?)\s+(?:has\s+|have\s+)?(?:replaced|swapped(?:\s+out)?|substituted)\s+"
            r"(?P<old>.+?)\s+(?:with|for|by)\s+(?P<new>.+)$",
            re.I,
        ),
    ),
    (
        "as",
        re.compile(
            rf"^(?P<new>.+?)\s+(?:has\s+|have\s+)?{_SUCCEEDED}\s+(?P<old>.+?)(?:\s+as\s+(?:the\s+|our\s+)?"
            rf"(?:new\s+)?(?P<role>[\w -]+?)(?:\s+(?:of|for|on|at)\s+(?P<of>.+))?)?$",
            re.I,
        ),
    ),
    (
        "took over",
        re.compile(
            r"^(?P<new>.+?)\s+(?:has\s+|have\s+)?(?:took|taken)\s+over\s+(?:as\s+(?:the\s+)?"
            r"(?:new\s+)?(?P<role>[\w -]+?)\s+(?:of|for)\s+)?(?P<of>.+?)(?:\s+from\s+(?P<old>.+))?$",
            re.I,
        ),
    ),
    # "Hugo handed the test automation team over to Esther"
    (
        "handed",
        re.compile(
            rf"^(?P<old>.+?)\s+(?:{'|'.join(vocabulary.HANDING_VERBS)})\s+(?:over\s+)?(?P<of>.+?)\s+"
            r"(?:over\s+)?to\s+(?P<new>.+)$",
            re.I,
        ),
    ),
    (
        "by",
        re.compile(
            r"^(?P<old>.+?)\s+(?:was|were|has\s+been|have\s+been|got|is|are)\s+(?:now\s+)?"
            r"(?:replaced|succeeded|superseded)\s+(?:by|with)\s+(?P<new>.+?)(?:\s+as\s+(?:the\s+)?"
            r"(?P<role>[\w -]+?)(?:\s+(?:of|for)\s+(?P<of>.+))?)?$",
            re.I,
        ),
    ),
)
_LEFT = "|".join(re.escape(verb) for verb in sorted(vocabulary.LEAVING_VERBS, key=len, reverse=True))
# "Nadia stepped down as lead of Orion"
STEPPED_DOWN = re.compile(
    r"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:stepped\s+down|resigned|stepped\s+away)\s+as\s+"
    r"(?:the\s+|our\s+)?(?P<role>[\w -]+?)(?:\s+(?:of|for|on)\s+(?P<of>.+))?$",
    re.I,
)
# "Pieter left the billing service", "Hugo has left"
LEFT = re.compile(
    rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?:{_LEFT})"
    rf"(?:\s+(?P<object>.+))?$",
    re.I,
)
_DROPPED = "|".join(re.escape(verb) for verb in sorted(vocabulary.DROPPING_VERBS, key=len, reverse=True))
# "We dropped Redis", "The API stopped using Memcached", "host-7 was decommissioned"
DROPPED = (
    re.compile(
        rf"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?(?:(?:just|recently|finally)\s+)?(?:{_DROPPED})\s+"
        rf"(?P<object>.+)$",
        re.I,
    ),
    re.compile(
        rf"^(?P<object>.+?)\s+(?:was|were|has\s+been|have\s+been|got|is|are)\s+(?:now\s+)?(?:{_DROPPED})$", re.I
    ),
)
# "no longer", "doesn't ... anymore": the rest of the clause is the fact that ends.
_NO_LONGER = re.compile(r"\b(?:no\s+longer|not\s+any\s*(?:more|longer)|any\s*(?:more|longer))\b", re.I)
_NOT = re.compile(
    r"\b(?:does\s+not|do\s+not|did\s+not|doesn't|don't|didn't|won't|isn't|aren't|is\s+not|are\s+not|"
    r"not|never)\b",
    re.I,
)
_DOES_NOT = re.compile(r"\b(?:doesn't|does\s+not)\s+(?P<verb>[a-z]+)\b", re.I)
_BE_KEPT = {"isn't": "is", "aren't": "are", "is not": "is", "are not": "are"}
# "now ... instead of A", "..., not A", "rather than A": the fact that ends has A in the place of the new object.
_INSTEAD = re.compile(
    r"(?:,\s*|\s+)(?:not|instead\s+of|rather\s+than|in\s+place\s+of|in\s+favou?r\s+of)\s+"
    r"(?P<old>[^,;]+?)\s*(?:any\s*more|anymore)?$",
    re.I,
)
# Predicates a change whose subject is "we" or no one never touches: a taste is a person's own.
TASTES = ("prefers", "likes", "dislikes")
# Predicates of a family whose names stand the other way round in some of its members: (X, owned by, Imani) and
# (Imani, manages, X).
_REVERSIBLE = ("owned by", "leads", "manages")
# What "X left" ends when it names no object.
MEMBERSHIP = ("works at", "member of", "works on", "leads", "manages", "reports to")


def _anyone(subject: str | None) -> bool:
    return subject is None or subject.casefold() in WE


# What a change rule gives: the endings it states, and the facts it states beside them.
Change = tuple[list[Ending], list[Fact]]


@dataclass(frozen=True)
class _Statement:
    """The clause a change is said in: its endings and the facts they store keep its words, span and time."""

    said: str  # the clause as written
    start: int
    end: int
    at: dt.datetime | None

    def ending(self, rule, subject, predicates, object_, **options) -> Ending:
        return Ending(
            rule=rule,
            content=self.said,
            start=self.start,
            end=self.end,
            subject=subject,
            predicates=tuple(predicates),
            object=object_,
            at=self.at,
            **options,
        )

    def fact_item(self, fact: Fact) -> Item:
        return Item(
            kind=FACT,
            content=self.said,
            start=self.start,
            end=self.end,
            subject=fact.subject,
            predicate=fact.predicate,
            object=fact.object,
            valid_from=self.at,
        )


def change(
    claim: str, said: str, start: int, end: int, context: Context, at: dt.datetime | None, *, said_now: bool
) -> Change | None:
    """The endings a clause states, and the facts it states beside them; None when it states no change.
    ``said``: the clause as written, what an ending and the facts it stores keep as their content."""
    statement = _Statement(said=said, start=start, end=end, at=at)
    # Tried in this order; the first that reads the clause decides.
    for rule in (_moved_from_to, _moved_to, _replaced, _stepped_down, _left, _dropped):
        changed = rule(claim, context, statement)
        if changed is not None:
            return changed
    if _NO_LONGER.search(claim):
        return _no_longer(claim, context, statement)
    return _instead_of(claim, context, statement) or _said_now(claim, context, statement, said_now=said_now)


def _moved_from_to(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "The ledger switched from Oracle to Postgres": facts naming the old value take the new one."""
    for pattern in FROM_TO:
        match = pattern.match(claim)
        if not match:
            continue
        who = resolve(match["subject"], context, part="subject")
        what = resolve(match["what"], context, part="subject") if match["what"] else None
        subject = what or who
        old, new = as_name(QUALIFIER.sub("", match["old"])), as_name(QUALIFIER.sub("", match["new"]))
        if subject is None or old is None or new is None:
            continue
        anyone = _anyone(subject)
        default = vocabulary.CHANGE_VERBS[match["verb"].casefold()] or f"{match['verb'].casefold()} to"
        otherwise = (statement.fact_item(Fact(subject, default, new, statement.said)),)
        return [
            statement.ending(
                "moved from",
                None if anyone else subject,
                (),
                old,
                becomes=new,
                replaced="object",
                otherwise=otherwise,
                either_way=False,
            )
        ], []
    return None


def _moved_to(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Kai moved to Amsterdam": the subject's facts of place take the new value."""
    match = MOVED_TO.match(claim)
    if not match:
        return None
    who = resolve(match["subject"], context, part="subject")
    what = resolve(match["what"], context, part="subject") if match["what"] else None
    subject, new = what or who, as_name(QUALIFIER.sub("", match["new"]))
    if subject is None or new is None:
        return None
    default = vocabulary.CHANGE_VERBS.get(match["verb"].casefold()) or f"{match['verb'].casefold()} to"
    otherwise = (statement.fact_item(Fact(subject, default, new, statement.said)),)
    if _anyone(subject):  # "We switched to Linear": nothing says which of anyone's facts ends
        return [], [Fact(subject, default, new, statement.said)]
    return [
        statement.ending(
            "moved to", subject, vocabulary.PLACES, None, becomes=new, replaced="object", otherwise=otherwise
        )
    ], []


def _replaced(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Kenji replaced Nadia as lead of Orion", "Pulsar replaced Kafka", "Kenji took over Orion from Nadia": the
    old holder's fact passes to the new one."""
    for rule, pattern in REPLACED:
        match = pattern.match(claim)
        if not match:
            continue
        groups = match.groupdict()
        new = resolve(groups["new"], context, part="subject")
        old = resolve(groups["old"], context, part="subject") if groups.get("old") else None
        of = as_name(QUALIFIER.sub("", groups["of"])) if groups.get("of") else None
        role = " ".join((groups.get("role") or "").split())
        if new is None or (groups.get("old") and old is None) or (groups.get("of") and of is None):
            continue
        if old is None and of is None:
            continue
        if role:
            return _role_replaced(rule, role, new=new, old=old, of=of, statement=statement)
        return _holder_replaced(rule, groups, new=new, old=old, of=of, context=context, statement=statement)
    return None


def _role_replaced(rule: str, role: str, *, new: str, old: str | None, of: str | None, statement: _Statement) -> Change:
    """A replacement said with a role: "X replaced Y as lead of Z", "Pulsar replaced Kafka as our message broker"."""
    said = statement.said
    known = role_of(role)
    if known is not None:
        predicate, holder_first = known
        if not holder_first:  # "X replaced Y as owner of Z": (Z, owned by, Y) becomes (Z, owned by, X)
            return [
                statement.ending(
                    rule,
                    of,
                    (predicate,),
                    old,
                    becomes=new,
                    replaced="object",
                    otherwise=(statement.fact_item(Fact(of, predicate, new, said)),) if of else (),
                )
            ], []
        return [
            statement.ending(
                rule,
                old,
                (predicate,),
                of,
                becomes=new,
                replaced="subject",
                otherwise=(statement.fact_item(Fact(new, predicate, of, said)),) if of else (),
            )
        ], []
    return [
        statement.ending(
            rule,
            old,
            ("is",),
            role.casefold(),
            becomes=new,
            replaced="subject",
            otherwise=(statement.fact_item(Fact(new, "is", role.casefold(), said)),),
        )
    ], []


def _holder_replaced(
    rule: str, groups: dict, *, new: str, old: str | None, of: str | None, context: Context, statement: _Statement
) -> Change:
    """A replacement said without a role: of a thing's holder ("Kenji took over Orion"), or of a thing itself
    ("We replaced Jenkins with GitHub Actions")."""
    if old is None:  # "Kenji took over Orion": whoever leads Orion now no longer does
        return [
            statement.ending(
                rule,
                None,
                vocabulary.ONE_HOLDER,
                of,
                becomes=new,
                replaced="subject",
                otherwise=(statement.fact_item(_taken_over(new, of, statement.said)),),
            )
        ], []
    if of is not None:  # "Ines took over the mobile team from Tariq", "Sunniva took over the pipeline from Kofi"
        return [
            statement.ending(
                rule,
                old,
                (),
                of,
                either_way=True,
                becomes=new,
                replaced="subject",
                otherwise=(statement.fact_item(_taken_over(new, of, statement.said)),),
            )
        ], []
    who = resolve(groups["who"], context, part="subject") if groups.get("who") else None
    scope = None if _anyone(who) else who
    return [statement.ending(rule, scope, (), old, becomes=new, replaced="object")], []


def _stepped_down(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Nadia stepped down as lead of Orion": the role's fact ends."""
    match = STEPPED_DOWN.match(claim)
    if not match:
        return None
    subject = resolve(match["subject"], context, part="subject")
    known = role_of(match["role"])
    of = as_name(QUALIFIER.sub("", match["of"])) if match["of"] else None
    if subject is None or known is None:
        return None
    predicate, holder_first = known
    if holder_first:
        return [statement.ending("left", subject, (predicate,), of)], []
    return [statement.ending("left", of, (predicate,), subject)], []


def _left(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Pieter left the billing service", "Hugo has left": what linked them ends (a membership, when no object)."""
    match = LEFT.match(claim)
    if not match:
        return None
    subject = resolve(match["subject"], context, part="subject")
    left, _, joined = (match["object"] or "").partition(" to join ")
    object_ = as_name(QUALIFIER.sub("", left)) if left else None
    if subject is None or (object_ is None and left):
        return None
    # "Viktor left the data team to join Security": he is a member of Security now.
    facts = facts_of(f"{match['subject']} joined {joined}", context).facts if joined else []
    generic = object_ is None or object_.casefold() in ("company", "team", "project", "group")
    if generic:
        return [statement.ending("left", subject, MEMBERSHIP, None)], facts
    return [statement.ending("left", subject, (), object_, either_way=True)], facts


def _dropped(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "We dropped Redis", "host-7 was decommissioned": every current fact naming the object ends."""
    for pattern in DROPPED:
        match = pattern.match(claim)
        if match:
            subject = resolve(match["subject"], context, part="subject") if "subject" in match.groupdict() else None
            object_ = as_name(QUALIFIER.sub("", match["object"]))
            if object_ is not None and (subject is not None or "subject" not in match.groupdict()):
                anyone = _anyone(subject)
                return [
                    statement.ending("dropped", None if anyone else subject, (), object_, either_way=subject is None)
                ], []
    return None


def _instead_of(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Kafka is now our broker instead of RabbitMQ": the fact with the old name in the new one's place ends."""
    instead = _INSTEAD.search(claim)
    if not instead or _NOT.search(claim[: instead.start()]):
        return None
    parsed = facts_of(claim[: instead.start()], context)
    old = as_name(instead["old"])
    if not parsed.facts or old is None:
        return None
    fact = parsed.facts[0]
    if fact.value == "subject":  # "Kafka is now our broker instead of RabbitMQ": RabbitMQ was
        return [statement.ending("instead of", old, (fact.predicate,), fact.object)], parsed.facts
    return [
        statement.ending("instead of", None if _anyone(fact.subject) else fact.subject, (fact.predicate,), old)
    ], parsed.facts


def _said_now(claim: str, context: Context, statement: _Statement, *, said_now: bool) -> Change | None:
    """ "The API now runs on ECS": a one-valued fact said with "now" ends the value it replaces."""
    if not said_now or _NOT.search(claim):
        return None
    parsed = facts_of(claim, context)
    endings = []
    for fact in parsed.facts:
        if fact.predicate in vocabulary.SINGLE_VALUED:
            endings.append(statement.ending("now", fact.subject, (fact.predicate,), None))
        elif fact.predicate in vocabulary.ONE_HOLDER:
            endings.append(statement.ending("now", None, (fact.predicate,), fact.object))
    if endings:
        return endings, parsed.facts
    return None


def _taken_over(holder: str, what: str, said: str) -> Fact:
    """What taking a thing over states: a group is led, anything else owned ("took over the deploy pipeline")."""
    if last_word(what) in vocabulary.GROUP_WORDS or looks_proper(what):
        return Fact(holder, "leads", what, said)
    return Fact(what, "owned by", holder, said)


def _no_longer(claim: str, context: Context, statement: _Statement) -> Change | None:
    """ "Hugo no longer works on checkout", "Mei doesn't prefer Jira anymore": the fact said without the negation
    ends."""
    plain = _NO_LONGER.sub(" ", claim)
    # "Aiyana doesn't like Figma": the verb after "doesn't" is said as "likes" again.
    plain = _DOES_NOT.sub(lambda match: inflections(match["verb"].casefold())[0], plain)
    plain = _NOT.sub(lambda match: _BE_KEPT.get(" ".join(match.group().casefold().split()), " "), plain)
    plain = " ".join(plain.split())
    parsed = facts_of(plain, context)
    if not parsed.facts:
        return None
    context.said = parsed.facts[-1]
    # Said with a near synonym of the stored fact's verb, or the other way round: "Imani is no longer responsible
    # for the contracts" ends "Imani manages the contracts".
    return [
        statement.ending(
            "no longer",
            None if _anyone(fact.subject) else fact.subject,
            _family(fact.predicate),
            fact.object,
            either_way=fact.predicate in _REVERSIBLE,
        )
        for fact in parsed.facts
    ], []


def _family(predicate: str) -> tuple[str, ...]:
    """The predicate with those that say nearly the same (``vocabulary.FAMILIES``)."""
    for family in vocabulary.FAMILIES:
        if predicate in family:
            return (predicate, *(other for other in family if other != predicate))
    return (predicate,)
