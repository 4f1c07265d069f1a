"""The knowledge graph read from the facts: entities, their relations, and the paths between two of them."""

from typing import Literal

from pydantic import Field

from memoryproject.records import Instant, OmittedWhenEmpty, Record


class GraphEntity(Record):
    name: str = Field(description="The entity's name in normal form (case-folded, spaces collapsed, no article).")
    display: str = Field(description="The name as a supporting fact spells it.")


class GraphRelation(Record):
    predicate: str = Field(description="The relation, in normal form (e.g. 'runs on').")
    direction: Literal["out", "in"] = Field(
        description=(
            "out: the entity is the fact's subject (entity predicate other); in: its object (other predicate entity)."
        )
    )
    other: GraphEntity
    memory_id: int = Field(description="The memory whose fact this is: pass it to memory_get.")
    revision_id: int = Field(description="The revision that states it.")


class GraphNeighbourhood(Record):
    entity: GraphEntity
    aliases: list[str] = Field(description="Its other names (alias facts: 'also known as', 'aka', ...).")
    relations: list[GraphRelation] = Field(description="By predicate, then the other entity's name.")
    truncated: bool = Field(description="It has more relations than limit.")


class GraphHop(Record):
    source: GraphEntity = Field(description="Where the hop starts along the path.")
    predicate: str
    direction: Literal["out", "in"] = Field(
        description=("out: source is the fact's subject; in: the fact points from target to source.")
    )
    target: GraphEntity
    memory_id: int
    revision_id: int


class GraphResult(Record):
    namespace: str
    as_of: Instant
    valid_at: Instant
    entities: OmittedWhenEmpty[list[GraphNeighbourhood]] = Field(
        None, description=("With entity: that entity; with query: the entities it names, in the order they appear.")
    )
    source: OmittedWhenEmpty[GraphEntity] = None
    target: OmittedWhenEmpty[GraphEntity] = None
    paths: OmittedWhenEmpty[list[list[GraphHop]]] = Field(
        None, description=("With source and target: the paths between them, shortest first, each a list of hops.")
    )
    truncated: bool = Field(
        False,
        description=(
            "With source and target: the search left some relations or paths out (see the bounds in the docs)."
        ),
    )
