"""The knowledge graph of a namespace as of a time: an entity's relations, or the paths between two."""

from knowledge import graph
from memories import validation
from memories.records.graph_records import GraphResult
from memoryproject.exceptions import InvalidInput

GRAPH_LIMIT_DEFAULT = 20
GRAPH_LIMIT_MAX = 200
_GRAPH_QUESTIONS = (
    "Give entity (its relations), source and target (the paths between them), or query (the entities it names)."
)


def memory_graph(
    *,
    namespace: str,
    entity: str | None = None,
    source: str | None = None,
    target: str | None = None,
    query: str | None = None,
    limit: int = GRAPH_LIMIT_DEFAULT,
    as_of=None,
    valid_at=None,
    only=None,
) -> GraphResult:
    """Answer one question about the facts of ``namespace`` as known at ``as_of`` about ``valid_at``.

    Exactly one of: ``entity`` (its relations), ``source`` with ``target`` (paths), ``query``
    (the entities it names). The facts are the visible revisions with a triple, so the
    answer is the one a store holding only what was visible then would give. With ``entity``,
    ``only`` keeps the relations of these (predicate, direction) pairs (query routing's graph questions).
    """
    namespace = validation.namespace(namespace)
    entity, source, target = (
        validation.short_text(value, field=name, limit=validation.TRIPLE_PART_MAX)
        for name, value in (("entity", entity), ("source", source), ("target", target))
    )
    query = validation.short_text(query, field="query", limit=validation.QUERY_MAX_CHARS)
    given = [
        name for name, value in (("entity", entity), ("source", source), ("target", target), ("query", query)) if value
    ]
    if not given:
        raise InvalidInput(f"Nothing to ask. {_GRAPH_QUESTIONS}", field="entity")
    if ("source" in given) != ("target" in given):
        missing = "target" if "source" in given else "source"
        raise InvalidInput(f"{missing}: missing; paths need both source and target.", field=missing)
    if len(given) > (2 if "source" in given else 1):
        raise InvalidInput(
            f"{' and '.join(given)} ask different questions; ask one at a time. {_GRAPH_QUESTIONS}", field=given[-1]
        )
    as_of_time, valid_time = validation.resolve_times(as_of, valid_at)
    at = {"namespace": namespace, "as_of": as_of_time, "valid_at": valid_time}
    if entity:
        found = {"entities": [graph.graph_neighbours(entity=entity, limit=limit, only=only, **at)]}
    elif query:
        found = {"entities": graph.graph_mentions(query=query, limit=limit, **at).entities}
    else:
        paths = graph.graph_paths(source=source, target=target, **at)
        found = {"source": paths.source, "target": paths.target, "paths": paths.paths, "truncated": paths.truncated}
    return GraphResult.model_validate({**at, **found}, from_attributes=True)
