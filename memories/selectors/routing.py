"""Query routing: which path answers a question, chosen by rules (RouteRule rows, editable in the admin), no LLM.

The first enabled rule, by order, whose pattern matches the question wins; its route runs with
what the pattern's named groups extracted:

- lookup: a memory by id, by key, the memories with a tag, or an attribute of an entity
  ("IP of X") answered from the facts whose predicate names the attribute;
- graph: the paths between two entities, or an entity's relations; with a ``question`` group,
  the relations a question asks for (``knowledge.questions``: "who led Orion in May 2025" is
  the incoming ``leads`` relations of Orion valid then, as known now). A rule whose pattern
  matches a question the question table does not read is passed over, as if it had not matched;
- as_of: a recall as known at the time the phrase names (``resolve_when``).

No match is a plain recall; a routed path that finds nothing falls back to recall and says so.
"""

import datetime as dt
import re

from django.conf import settings

from knowledge.names import predicate_name
from knowledge.questions import Asked, read_question
from memories import validation
from memories.models import Route, RouteRule
from memories.records.route_result import RouteResult
from memories.selectors.graph import memory_graph
from memories.selectors.listing import memory_get, memory_list
from memories.selectors.memory_records import records_with_confidence
from memories.selectors.recall import RECALL_LIMIT_DEFAULT, memory_recall
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput, MemoryNotFound
from memoryproject.timeparse import parse_instant

RECALL = "recall"
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_AGO = re.compile(r"^(?P<count>\d{1,4}|a|an|one)\s+(?P<unit>day|week|month|year)s?\s+ago$")
_LAST = re.compile(r"^last\s+(?P<unit>day|week|month|year)$")
_MONTH = re.compile(r"^(?:in\s+)?(?P<month>[a-z]+)(?:\s+(?P<year>\d{4}))?$")


def resolve_when(phrase: str, *, now: dt.datetime) -> dt.datetime:
    """The instant a time phrase names, as an as_of; ValueError when the phrase is not one understood.

    Understood: an instant (YYYY-MM-DD, ISO 8601); "yesterday", "today"; "last day/week/month/year" and
    "N days/weeks/months/years ago" (a month is 30 days, a year 365); a month name with or without a
    year ("March", "in March 2026"): the end of that month, the latest one begun by now when no year is given.
    """
    text = " ".join(phrase.casefold().split())
    if text in ("today", "now"):
        return now
    if text == "yesterday":
        return now - dt.timedelta(days=1)
    if found := _LAST.match(text):
        return now - dt.timedelta(days=_UNIT_DAYS[found["unit"]])
    if found := _AGO.match(text):
        count = int(found["count"]) if found["count"].isdigit() else 1
        return now - dt.timedelta(days=count * _UNIT_DAYS[found["unit"]])
    if (found := _MONTH.match(text)) and found["month"] in _MONTHS:
        month = _MONTHS.index(found["month"]) + 1
        year = int(found["year"]) if found["year"] else (now.year if month <= now.month else now.year - 1)
        first_after = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.timezone.utc)
        return min(first_after - dt.timedelta(microseconds=1), now)
    try:
        return parse_instant(phrase.strip(), field="when")
    except InvalidInput:
        raise ValueError(f"{phrase!r} is not a time phrase this server understands") from None


def matching_rule(question: str, *, now: dt.datetime) -> tuple[RouteRule, re.Match, Asked | None] | None:
    """The first enabled rule whose pattern matches ``question``, with its match and, for a graph rule with a
    ``question`` group, what the question asks of the graph; None when no rule matches."""
    for rule in RouteRule.objects.filter(enabled=True).order_by("order", "id"):
        try:
            found = re.search(rule.pattern, question, re.IGNORECASE)
        except re.error:
            continue  # saved outside the admin's check: skipped, as if disabled
        if not found:
            continue
        if rule.route != Route.GRAPH or "question" not in found.re.groupindex:
            return rule, found, None
        # The pattern only says which questions to try; the question table says whether this is one.
        if asked := read_question(found["question"] or "", now=now):
            return rule, found, asked
    return None


def memory_route(*, question: str, namespace=None, limit: int = RECALL_LIMIT_DEFAULT) -> RouteResult:
    """Answer ``question`` by the path its rules choose, with the route taken and why.

    ``namespace``: those it may read (a name or a list; None: all), as for recall. Keys and facts
    (lookups, graph questions) are read in the first of them, else MEMORY_DEFAULT_NAMESPACE.
    """
    namespaces = validation.namespace_names(namespace)
    home = namespaces[0] if namespaces else settings.MEMORY_DEFAULT_NAMESPACE
    question = validation.query_text(question, field="question")
    matched = matching_rule(question, now=dialect.now())
    if matched is None:
        return _recall(question, namespaces, limit, rule=None, extracted={}, why="No rule matched: plain recall.")
    rule, found, asked = matched
    if asked is None:
        extracted = {name: " ".join(value.split()) for name, value in found.groupdict().items() if value}
    else:
        extracted = {
            name: value
            for name, value in (
                ("shape", asked.shape),
                ("entity", asked.entity),
                ("asks", asked.words),
                ("when", asked.when),
            )
            if value
        }
    said = ", ".join(f"{name}={value!r}" for name, value in extracted.items())
    why = f"Rule {rule.name!r} matched ({said})"
    if asked is not None:
        answer = _graph_question(asked, home=home, limit=limit)
    else:
        answer = {Route.LOOKUP: _lookup, Route.GRAPH: _graph, Route.AS_OF: _as_of}[rule.route](
            question, found, extracted, namespaces=namespaces, home=home, limit=limit
        )
    if isinstance(answer, str):  # the routed path found nothing: why not
        return _recall(
            question,
            namespaces,
            limit,
            rule=rule.name,
            extracted=extracted,
            why=f"{why}. {answer} Fell back to recall.",
            fell_back=True,
        )
    if asked is not None:  # what was asked of the graph, and at what time
        why = f"{why}: {_asked_text(asked)}, {_time_text(answer['graph'])}"
    return RouteResult(
        question=question, route=rule.route, rule=rule.name, extracted=extracted, why=f"{why}.", **answer
    )


def _recall(question, namespaces, limit, *, rule, extracted, why, fell_back=False, query=None, as_of=None):
    recalled = memory_recall(query=query or question, namespace=namespaces, limit=limit, as_of=as_of)
    return RouteResult(
        question=question,
        route=RECALL if as_of is None else Route.AS_OF,
        rule=rule,
        extracted=extracted,
        why=why,
        fell_back=fell_back,
        recall=recalled,
    )


def _readable(record, namespaces) -> bool:
    return namespaces is None or record.namespace in namespaces


def _lookup(question, found, extracted, *, namespaces, home, limit):
    if "id" in extracted:
        try:
            record = memory_get(memory_id=int(extracted["id"]))
        except (MemoryNotFound, InvalidInput):
            record = None
        if record is None or not _readable(record, namespaces):
            return f"No memory #{extracted['id']} is visible here."
        return {"memories": [record]}
    if "key" in extracted:
        for namespace in dict.fromkeys([home, *(namespaces or [])]):
            try:
                return {"memories": [memory_get(namespace=namespace, key=extracted["key"])]}
            except (MemoryNotFound, InvalidInput):
                continue
        return f"No memory has the key {extracted['key']!r} here."
    if "tag" in extracted:
        try:
            page = memory_list(namespace=namespaces, tags=[extracted["tag"]], limit=limit)
        except InvalidInput:
            page = None
        if page is None or not page.items:
            return f"No visible memory carries the tag {extracted['tag']!r}."
        return {"memories": page.items}
    attribute = predicate_name(extracted["attribute"])
    try:
        graph = memory_graph(namespace=home, entity=extracted["entity"])
    except InvalidInput:
        return f"{extracted['entity']!r} is not an entity name."
    relations = [
        relation
        for neighbourhood in graph.entities
        for relation in neighbourhood.relations
        if relation.direction == "out" and attribute in predicate_name(relation.predicate)
    ]
    if not relations:
        return f"No fact gives {extracted['entity']!r} a predicate naming {attribute!r}."
    records = [memory_get(memory_id=relation.memory_id) for relation in relations[:limit]]
    return {"memories": records, "graph": graph}


def _graph(question, found, extracted, *, namespaces, home, limit):
    try:
        if "source" in extracted:
            graph = memory_graph(namespace=home, source=extracted["source"], target=extracted["target"])
            return (
                {"graph": graph}
                if graph.paths
                else (f"No path joins {extracted['source']!r} and {extracted['target']!r} in the facts of {home!r}.")
            )
        graph = memory_graph(namespace=home, entity=extracted["entity"], limit=max(limit, 1))
    except InvalidInput as error:
        return f"The graph could not answer ({error.message})"
    if not any(neighbourhood.relations for neighbourhood in graph.entities):
        return f"The facts of {home!r} give {extracted['entity']!r} no relation."
    return {"graph": graph}


def _asked_text(asked: Asked) -> str:
    """The relations a question asks for, with the end asked for as '?': "'? leads Orion'",
    "'Lena reports to ?' or '? manages Lena'"."""
    said = []
    for wanted in ("out", "in"):
        predicates = " / ".join(predicate for predicate, direction in asked.relations if direction == wanted)
        if predicates:
            said.append(f"'{asked.entity} {predicates} ?'" if wanted == "out" else f"'? {predicates} {asked.entity}'")
    return " or ".join(said)


def _instant_text(instant: dt.datetime) -> str:
    return f"{instant:%Y-%m-%d}" if instant.time() == dt.time() else f"{instant:%Y-%m-%d %H:%M:%S} UTC"


def _time_text(graph) -> str:
    if graph.valid_at == graph.as_of:
        return "as of now"
    return f"valid at {_instant_text(graph.valid_at)}, as known now"


def _graph_question(asked: Asked, *, home, limit):
    """The relations ``asked`` asks for, valid at its stated time as known now, with the memories behind them."""
    try:
        graph = memory_graph(
            namespace=home, entity=asked.entity, limit=limit, valid_at=asked.valid_at, only=asked.relations
        )
    except InvalidInput as error:
        return f"The graph could not answer ({error.message})"
    relations = graph.entities[0].relations
    if not relations:
        return f"The facts of {home!r} hold no {_asked_text(asked)} {_time_text(graph)}."
    revision_ids = list(dict.fromkeys(relation.revision_id for relation in relations))
    records = records_with_confidence(revision_ids, as_of=graph.as_of, valid_at=graph.valid_at)
    return {
        "graph": graph,
        "memories": [records[revision_id] for revision_id in revision_ids if revision_id in records],
    }


def _as_of(question, found, extracted, *, namespaces, home, limit):
    try:
        as_of = resolve_when(extracted["when"], now=dialect.now())
    except ValueError as error:
        return f"{error}."
    # The question without the time phrase is what to recall; all of it when nothing else is left.
    rest = (question[: found.start()] + " " + question[found.end() :]).strip(" ,.;:?!")
    recalled = memory_recall(query=rest or question, namespace=namespaces, limit=limit, as_of=as_of)
    return {"recall": recalled}
