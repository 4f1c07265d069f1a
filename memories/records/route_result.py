"""A question answered by the path query routing chose, with the route and why."""

from typing import Literal

from pydantic import Field

from memories.records.graph_records import GraphResult
from memories.records.memory_record import MemoryRecord
from memories.records.recall_results import RecallResult
from memoryproject.records import OmittedWhenEmpty, Record


class RouteResult(Record):
    """A question answered by the path query routing chose (memories.selectors.routing), with the route and why."""

    question: str
    route: Literal["lookup", "graph", "as_of", "recall"] = Field(
        description=(
            "lookup: by id, key, tag or an entity's attribute; graph: paths or relations; as_of: recall at the time "
            "the question names; recall: plain recall (no rule matched, or the routed path found nothing)."
        )
    )
    rule: str | None = Field(description="The rule that matched; null when none did.")
    extracted: dict[str, str] = Field(
        description=(
            "What the rule's pattern extracted, by group name; for a graph question, what the question table read: "
            "shape, entity, asks (the words that ask) and when (the time phrase)."
        )
    )
    why: str = Field(description="The rule, what it extracted and, on a fall back, what the routed path lacked.")
    fell_back: bool = Field(False, description="The routed path found nothing, so this is a plain recall.")
    memories: OmittedWhenEmpty[list[MemoryRecord]] = Field(
        None,
        description=("lookup: the memories found; graph question: the revisions behind the relations that answer it."),
    )
    graph: OmittedWhenEmpty[GraphResult] = Field(
        None, description=("graph (and attribute lookups): the facts, with the as_of and valid_at they were read at.")
    )
    recall: OmittedWhenEmpty[RecallResult] = Field(None, description="as_of and recall: the recall's answer.")
