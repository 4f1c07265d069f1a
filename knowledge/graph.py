"""The knowledge graph of one namespace as of (as_of, valid_at): entities, their relations, paths between them.

Entities are names in normal form (``knowledge.names``); edges are the visible fact
revisions, read from the fact rows by name and kept when the snapshot says the
revision is its memory's visible one, in the namespace, at that point
(``search.visibility.View.visible_among``, the rule of docs/concepts.md, "Which revision a
read sees"). So an edge learned after T is absent at as_of T, and a forgotten fact's
edge goes from its tombstone's known_at on. Every lookup is by name or by revision id: what other
namespaces hold costs dict lookups and index probes, never a scan.

Aliases: a visible fact whose predicate is one of ``ALIAS_PREDICATES`` says its subject
and object name one entity. An entity is then every name linked to it by such facts
(followed transitively); its relations are those of all its names, and the alias facts
themselves are not relations.

The fact rows are read through ``_known``: a copy of them in process memory, by name,
kept in step with the table like the snapshot (new rows by id; a reload when rows were
deleted, as erasure, purge and ``reindex --graph`` do). It holds the table's rows and
nothing else, so visibility stays the snapshot's alone; a path search reads the full
relations of every entity one hop from either end, which through SQL cost most of its time.

Bounds: a path has at most ``MAX_DEPTH`` hops; a path search follows at most ``FANOUT``
relations of each entity (the first by predicate, then the other entity's name), and
says when it cut some (``truncated``).
"""

import datetime as dt
import re
import threading
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from django.db import connection

from knowledge.names import entity_name
from memoryproject import dialect
from memoryproject.exceptions import InvalidInput
from search import snapshot

# Predicates (in normal form) that say two names name one entity.
ALIAS_PREDICATES = (
    "also known as",
    "aka",
    "a.k.a",
    "alias",
    "alias of",
    "is alias of",
    "is an alias of",
    "is also known as",
    "same as",
    "is the same as",
)
MAX_DEPTH = 4
# Relations of one entity a path search follows, at most.
FANOUT = 25
# Paths returned, at most (shortest first).
PATHS_MAX = 10
# Words of a free-text query looked at, and the longest name (in words) matched in it.
QUERY_WORDS_MAX = 64
NAME_WORDS_MAX = 6
# Ids per lookup query (SQLite allows 32766 parameters; smaller IN lists plan the same).
_IDS_PER_QUERY = 500
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class EntityRef:
    name: str  # normal form
    display: str  # as a supporting fact spells it


@dataclass(frozen=True)
class Relation:
    predicate: str
    direction: str  # "out": the entity is the subject; "in": the object
    other: EntityRef
    memory_id: int
    revision_id: int


@dataclass(frozen=True)
class Hop:
    source: EntityRef  # where the hop starts, along the path
    predicate: str
    direction: str  # "out": source is the fact's subject; "in": its object
    target: EntityRef
    memory_id: int
    revision_id: int


@dataclass(frozen=True)
class Neighbourhood:
    entity: EntityRef
    aliases: list[str]
    relations: list[Relation]
    truncated: bool  # more relations than the limit


@dataclass(frozen=True)
class Paths:
    source: EntityRef
    target: EntityRef
    paths: list[list[Hop]]
    truncated: bool  # a fan-out or the paths cap cut the search


@dataclass(frozen=True)
class Mentions:
    entities: list[Neighbourhood] = field(default_factory=list)


class _Fact(NamedTuple):
    revision_id: int
    memory_id: int
    subject: str
    predicate: str
    object: str

    def other(self, name: str) -> str:
        return self.object if self.subject == name else self.subject


@dataclass(frozen=True)
class _Known:
    """Every fact row of one database, by name: alias facts apart from the others. Never changed once built."""

    generation: int  # search_state's, bumped when revisions or attribute rows are deleted
    max_id: int  # the last fact row's id
    anchor: int | None  # that row's revision id: gone or different when the rows were deleted since
    relations: dict[str, tuple[_Fact, ...]]  # name -> the facts naming it that are not alias facts
    aliases: dict[str, tuple[_Fact, ...]]  # name -> the alias facts naming it


_EMPTY = _Known(generation=-1, max_id=0, anchor=None, relations={}, aliases={})
_known_by_database: dict[str, _Known] = {}
_known_lock = threading.Lock()


def _known() -> _Known:
    """The fact rows as the current connection sees them (take the snapshot's view first: these may be newer)."""
    database = dialect.database_key()
    with _known_lock:
        known = _known_by_database.get(database, _EMPTY)
        with connection.cursor() as cursor:
            # Primary-key lookups: the one-row state table, the last fact row, the row the copy ends with.
            cursor.execute(
                "SELECT generation, (SELECT max(id) FROM knowledge_fact), "
                "(SELECT revision_id FROM knowledge_fact WHERE id = %s) FROM search_state",
                [known.max_id],
            )
            generation, max_id, anchor = cursor.fetchone()
        if generation != known.generation or anchor != known.anchor:
            known = replace(_EMPTY, generation=generation)
        if (max_id or 0) > known.max_id:
            known = _extended(known)
        # Rows this connection has not committed may roll back: never in the shared copy.
        if not connection.in_atomic_block:
            _known_by_database[database] = known
        return known


def _extended(known: _Known) -> _Known:
    """``known`` plus the fact rows written since, in new dicts and tuples (readers may hold the old ones)."""
    with connection.cursor() as cursor:
        # The primary key's range: rows written since the copy was taken.
        cursor.execute(
            "SELECT id, revision_id, memory_id, subject, predicate, object FROM knowledge_fact "
            "WHERE id > %s ORDER BY id",
            [known.max_id],
        )
        rows = cursor.fetchall()
    if not rows:  # deleted since the check: the next query's check reloads
        return known
    added: dict[str, list[_Fact]] = {}
    added_aliases: dict[str, list[_Fact]] = {}
    for _, *row in rows:
        fact = _Fact(*row)
        into = added_aliases if fact.predicate in ALIAS_PREDICATES else added
        into.setdefault(fact.subject, []).append(fact)
        if fact.object != fact.subject:
            into.setdefault(fact.object, []).append(fact)
    relations, aliases = dict(known.relations), dict(known.aliases)
    for name, facts in added.items():
        relations[name] = relations.get(name, ()) + tuple(facts)
    for name, facts in added_aliases.items():
        aliases[name] = aliases.get(name, ()) + tuple(facts)
    return _Known(
        generation=known.generation, max_id=rows[-1][0], anchor=rows[-1][1], relations=relations, aliases=aliases
    )


class _Reading:
    """What one query has read of the namespace's visible facts, by name; each name's facts are read once."""

    def __init__(self, *, namespace: str, as_of: dt.datetime, valid_at: dt.datetime):
        self.namespace = namespace
        self.view = snapshot.current()
        self.known = _known()
        self.as_of, self.valid_at = snapshot.to_micros(as_of), snapshot.to_micros(valid_at)
        self.relations: dict[str, list[_Fact]] = {}  # name -> its visible facts that are not alias facts
        self.alias_links: dict[str, set[str]] = {}  # name -> names a visible alias fact ties it to
        self.aliases_read: set[str] = set()  # names whose alias facts are all in alias_links
        self.spelling: dict[int, tuple[str, str, str]] = {}

    def _shown(self, facts) -> set[int]:
        """The revision ids of those of ``facts`` visible at this point in this namespace."""
        return set(
            self.view.visible_among(
                [fact.revision_id for fact in facts], as_of=self.as_of, valid_at=self.valid_at, namespace=self.namespace
            ).tolist()
        )

    def read(self, names) -> None:
        """Read every visible fact naming one of ``names`` (those not read yet)."""
        names = sorted({name for name in names if name not in self.relations})
        self.read_aliases(names)
        found = {name: self.known.relations.get(name, ()) for name in names}
        shown = self._shown(fact for facts in found.values() for fact in facts)
        for name, facts in found.items():
            self.relations[name] = [fact for fact in facts if fact.revision_id in shown]

    def read_aliases(self, names) -> None:
        """Read only the alias facts naming ``names``: enough to know which entity each belongs to."""
        names = sorted(set(names) - self.aliases_read)
        self.aliases_read.update(names)
        facts = [fact for name in names for fact in self.known.aliases.get(name, ())]
        if facts:
            shown = self._shown(facts)
            for fact in facts:
                if fact.revision_id in shown:
                    self._link(fact)

    def _link(self, fact: _Fact) -> None:
        if fact.subject != fact.object:
            self.alias_links.setdefault(fact.subject, set()).add(fact.object)
            self.alias_links.setdefault(fact.object, set()).add(fact.subject)

    def names_of(self, name: str, *, with_relations: bool) -> frozenset[str]:
        """Every name of the entity ``name`` names (itself and its aliases, transitively)."""
        found, frontier = {name}, [name]
        while frontier:
            if with_relations:
                self.read(frontier)
            else:
                self.read_aliases(frontier)
            frontier = sorted({other for each in frontier for other in self.alias_links.get(each, ())} - found)
            found.update(frontier)
        return frozenset(found)

    def entities_of(self, names, *, with_relations: bool) -> dict[str, frozenset[str]]:
        """``names_of`` for many names, reading them together: {name: the names of its entity}, for ``names`` and
        every other name of their entities."""
        names = set(names)
        (self.read if with_relations else self.read_aliases)(names)
        known = {}
        for name in sorted(names):
            if name in known:
                continue
            if not self.alias_links.get(name):  # the usual case: a name without aliases
                known[name] = frozenset((name,))
                continue
            for each in (members := self.names_of(name, with_relations=with_relations)):
                known[each] = members
        return known

    def facts_of(self, names: frozenset[str]) -> list[_Fact]:
        """The relations of the entity with these names, each fact once, in a fixed order."""
        if len(names) == 1:  # the usual case: a name without aliases, whose facts are distinct already
            facts = self.relations[next(iter(names))]
        else:
            facts = {fact for name in names for fact in self.relations[name]}
        # By predicate, the other end's name, the direction (out first), then ids for equal triples.
        keyed = [
            (
                (fact.predicate, fact.object, 0) if fact.subject in names else (fact.predicate, fact.subject, 1),
                fact.memory_id,
                fact.revision_id,
                fact,
            )
            for fact in facts
        ]
        keyed.sort()
        return [item[-1] for item in keyed]

    def spell(self, revision_ids) -> None:
        """Read how the writers spelled the triples of these revisions (for display)."""
        wanted = sorted(set(revision_ids) - set(self.spelling))
        with connection.cursor() as cursor:
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                chunk = wanted[start : start + _IDS_PER_QUERY]
                # Primary key lookups.
                cursor.execute(
                    "SELECT id, subject, predicate, object FROM memories_revision WHERE id IN (%s)"
                    % ", ".join(["%s"] * len(chunk)),
                    chunk,
                )
                for revision_id, *triple in cursor.fetchall():
                    self.spelling[revision_id] = tuple(triple)

    def ref(self, fact: _Fact, name: str) -> EntityRef:
        subject, _, object_ = self.spelling.get(fact.revision_id, (fact.subject, "", fact.object))
        return EntityRef(name=name, display=(subject if name == fact.subject else object_).strip())


def _end_in(fact: _Fact, names) -> str:
    """The end of ``fact`` that is one of ``names`` (its subject when both are)."""
    return fact.subject if fact.subject in names else fact.object


def _direction(fact: _Fact, names) -> str:
    return "out" if fact.subject in names else "in"


def _name(text: str, *, field: str) -> str:
    name = entity_name(text)
    if not name:
        raise InvalidInput(
            f"{field}: {text!r} names no entity (it is empty once spaces, quotes and a leading article are taken off).",
            field=field,
        )
    return name


def _display(reading: _Reading, name: str, facts: list[_Fact]) -> EntityRef:
    """An entity as the first of its facts spells it, else as asked."""
    for fact in facts:
        if name in (fact.subject, fact.object):
            return reading.ref(fact, name)
    return EntityRef(name=name, display=name)


def _neighbourhood(reading: _Reading, name: str, *, limit: int, only=None) -> Neighbourhood:
    names = reading.names_of(name, with_relations=True)
    facts = reading.facts_of(names)
    if only is not None:  # before the limit, so that the relations asked for are not cut by others
        facts = [fact for fact in facts if (fact.predicate, _direction(fact, names)) in only]
    shown = facts[:limit]
    reading.spell(fact.revision_id for fact in shown)
    relations = [
        Relation(
            predicate=fact.predicate,
            direction=_direction(fact, names),
            other=reading.ref(fact, fact.other(_end_in(fact, names))),
            memory_id=fact.memory_id,
            revision_id=fact.revision_id,
        )
        for fact in shown
    ]
    return Neighbourhood(
        entity=_display(reading, name, shown),
        aliases=sorted(names - {name}),
        relations=relations,
        truncated=len(facts) > limit,
    )


def graph_neighbours(
    *,
    namespace: str,
    entity: str,
    as_of: dt.datetime,
    valid_at: dt.datetime,
    limit: int,
    only: Collection[tuple[str, str]] | None = None,
) -> Neighbourhood:
    """The relations of ``entity`` in ``namespace`` at (as_of, valid_at): at most ``limit``, by predicate.

    ``only``: the (predicate, direction) pairs wanted, predicates in normal form; None: every relation.
    """
    reading = _Reading(namespace=namespace, as_of=as_of, valid_at=valid_at)
    return _neighbourhood(
        reading, _name(entity, field="entity"), limit=limit, only=None if only is None else frozenset(only)
    )


def graph_paths(*, namespace: str, source: str, target: str, as_of: dt.datetime, valid_at: dt.datetime) -> Paths:
    """The shortest paths (at most MAX_DEPTH hops, PATHS_MAX of them) between two entities, shortest first.

    Both ends are expanded two hops (FANOUT relations per entity): every path of up to
    four hops between them then runs over relations read, since each of its hops has
    an end within one hop of the source or of the target.
    """
    reading = _Reading(namespace=namespace, as_of=as_of, valid_at=valid_at)
    start, goal = _name(source, field="source"), _name(target, field="target")
    ends = reading.entities_of([start, goal], with_relations=True)
    if ends[start] & ends[goal]:
        raise InvalidInput(
            f"source and target name one entity ({start!r}); ask for its neighbours instead.", field="target"
        )
    truncated = False
    followed: list[_Fact] = []
    frontier = [ends[start], ends[goal]]
    rounds = (MAX_DEPTH + 1) // 2
    for round_ in range(rounds):
        reached = []
        for names in frontier:
            facts = reading.facts_of(names)
            truncated |= len(facts) > FANOUT
            followed.extend(facts[:FANOUT])
            reached.extend(fact.other(_end_in(fact, names)) for fact in facts[:FANOUT])
        # The names reached become entities (their aliases read); their relations too, if they are expanded next.
        entities = reading.entities_of(reached, with_relations=round_ < rounds - 1)
        frontier = sorted(set(entities.values()) - set(ends.values()), key=min)
        ends.update(entities)
    # Each entity by one of its names (the least), so the walk compares strings.
    key = {name: min(names) for name, names in ends.items()}
    found, cut = _enumerate(followed, key, key[start], key[goal])
    reading.spell(fact.revision_id for path in found for fact, _ in path)
    paths = [
        [
            Hop(
                source=reading.ref(fact, here),
                predicate=fact.predicate,
                direction="out" if fact.subject == here else "in",
                target=reading.ref(fact, fact.other(here)),
                memory_id=fact.memory_id,
                revision_id=fact.revision_id,
            )
            for fact, here in path
        ]
        for path in found
    ]
    return Paths(
        source=_display(reading, start, [fact for path in found for fact, _ in path[:1]]),
        target=_display(reading, goal, [fact for path in found for fact, _ in path[-1:]]),
        paths=paths,
        truncated=truncated or cut,
    )


def _enumerate(
    facts: list[_Fact], key: dict[str, str], source: str, target: str
) -> tuple[list[list[tuple[_Fact, str]]], bool]:
    """Simple paths from ``source`` to ``target`` over ``facts``, shortest first; ``key``: each name's entity.

    Each path is [(fact, the name it leaves from)]; at most PATHS_MAX, and whether more were there.
    """
    adjacent: dict[str, list[tuple[_Fact, str, str]]] = {}
    # In the order read (by entity, then predicate and name): the walk below then finds paths in a fixed order.
    for fact in dict.fromkeys(facts):
        # Every end of a fact followed is a name of an entity expanded or reached.
        start, end = key[fact.subject], key[fact.object]
        if start != end:
            adjacent.setdefault(start, []).append((fact, fact.subject, end))
            adjacent.setdefault(end, []).append((fact, fact.object, start))
    # Hops from each entity to the target, so the walk below only takes steps that can still arrive.
    distance, frontier = {target: 0}, {target}
    for depth in range(1, MAX_DEPTH):
        frontier = {other for here in frontier for _, _, other in adjacent.get(here, ())} - distance.keys()
        distance.update(dict.fromkeys(frontier, depth))
    found = []

    def walk(here: str, path: list, seen: set, left: int) -> None:
        if here == target:
            if not left:
                found.append(list(path))
            return
        for fact, leaving, other in adjacent.get(here, ()):
            if other not in seen and distance.get(other, MAX_DEPTH + 1) <= left - 1:
                path.append((fact, leaving))
                seen.add(other)
                walk(other, path, seen, left - 1)
                seen.remove(other)
                path.pop()
                if len(found) > PATHS_MAX:
                    return

    for length in range(1, MAX_DEPTH + 1):
        if len(found) > PATHS_MAX:
            break
        # Exactly ``length`` hops: shorter paths were found in the earlier rounds.
        walk(source, [], {source}, length)
    return found[:PATHS_MAX], len(found) > PATHS_MAX


def _words(text: str) -> list[str]:
    return _SPACE.sub(" ", text).strip().split(" ")[:QUERY_WORDS_MAX]


def graph_mentions(*, namespace: str, query: str, as_of: dt.datetime, valid_at: dt.datetime, limit: int) -> Mentions:
    """The entities ``query`` names (longest names first, not overlapping), each with its relations (``limit``)."""
    reading = _Reading(namespace=namespace, as_of=as_of, valid_at=valid_at)
    words = _words(query)
    spans = {}
    for size in range(1, NAME_WORDS_MAX + 1):
        for start in range(len(words) - size + 1):
            name = entity_name(" ".join(words[start : start + size]))
            if name:
                spans[(start, size)] = name
    reading.read(spans.values())
    taken, chosen = set(), []
    for (start, size), name in sorted(spans.items(), key=lambda item: (-item[0][1], item[0][0])):
        covered = set(range(start, start + size))
        if covered & taken or not (reading.relations[name] or reading.alias_links.get(name)):
            continue
        taken |= covered
        chosen.append((start, name))
    entities, seen = [], set()
    for _, name in sorted(chosen):
        names = reading.names_of(name, with_relations=True)
        if names & seen:
            continue
        seen |= names
        entities.append(_neighbourhood(reading, name, limit=limit))
    return Mentions(entities=entities)
