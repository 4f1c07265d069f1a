"""The REST endpoints of the facts: the conflicts between them, their resolution, and the knowledge graph."""

from drf_spectacular.utils import extend_schema

from api.schema import body_model, parameters
from api.views import IN_PATH, ApiView, answer, errors
from memories import selectors, services
from memories.arguments import ConflictsArgs, GraphArgs, ResolveConflictArgs
from memories.models import Scope
from memories.records import ConflictList, GraphResult, ResolveResult
from memories.selectors.conflicts import memory_conflicts


class ConflictListView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Conflicts",
        operation_id="conflicts_list",
        parameters=parameters(ConflictsArgs),
        responses={200: ConflictList, **errors()},
        description="Pairs of visible facts in a namespace with the same subject and a single-valued "
        "predicate but different objects, each side with its provenance. With as_of and "
        "valid_at, the conflicts of that point.",
    )
    def get(self, request):
        args = self.query(ConflictsArgs)
        return answer(
            memory_conflicts(
                namespace=self.caller.namespaces_to_read(args.namespace),
                as_of=args.as_of,
                valid_at=args.valid_at,
                limit=args.limit,
            )
        )


class ConflictResolveView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Resolve a conflict",
        operation_id="conflicts_resolve",
        parameters=parameters(ResolveConflictArgs, path=IN_PATH, query=False),
        request=body_model(ResolveConflictArgs, path=IN_PATH),
        responses={200: ResolveResult, **errors(404, 409, 413, 415)},
        description="Keep one memory (the other is forgotten), split the two at a boundary in valid "
        "time, or merge them into one text, by appending revisions; history keeps "
        "everything. 409 when the conflict no longer exists.",
    )
    def post(self, request, id: str):
        fields = self.body(ResolveConflictArgs, id=id).model_dump()
        for memory_id in services.conflict_memory_ids(fields["id"]):
            self.caller.check_memory(memory_id)
        return answer(services.conflict_resolve(conflict_id=fields.pop("id"), **fields, **self.caller.credit))


class GraphView(ApiView):
    scopes = {"GET": Scope.READ}

    @extend_schema(
        summary="Knowledge graph",
        operation_id="graph",
        parameters=parameters(GraphArgs),
        responses={200: GraphResult, **errors()},
        description="Ask the facts (memories with a subject, predicate and object) of one namespace, as "
        "known at as_of about valid_at: an entity's relations (entity), the shortest paths "
        "between two entities (source and target), or the entities a text names (query). "
        "Give one of the three.",
    )
    def get(self, request):
        fields = self.query(GraphArgs).model_dump()
        namespace = self.caller.home_namespace(fields.pop("namespace"))
        return answer(selectors.memory_graph(namespace=namespace, **fields))
