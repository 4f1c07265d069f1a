"""The REST endpoints the harness hooks call: recall a block, capture text, report an injection, mark what was used."""

from drf_spectacular.utils import extend_schema

from api.views import ApiView, answer, errors
from memories import services
from memories.arguments import HookIngestArgs, HookRecallArgs, HookReportArgs, HookUsedArgs
from memories.models import Scope
from telemetry.records import HookBlock, IngestResult, InjectionRecord, UsedRecord


class HookRecallView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: recall a block for a prompt",
        operation_id="hooks_recall",
        request=HookRecallArgs,
        responses={200: HookBlock, **errors(413, 415, 503)},
        description="Recall for a prompt and return the hits as a ready-to-inject block, wrapped in "
        "<memory-context> tags and marked as reference data, within budget characters.",
    )
    def post(self, request):
        # Null means "not given", so the service's default applies.
        fields = self.body(HookRecallArgs).model_dump(exclude_none=True)
        return answer(services.hook_recall(caller=self.caller, **fields))


class HookIngestView(ApiView):
    scopes = {"POST": Scope.WRITE}

    @extend_schema(
        summary="Hook: capture text",
        operation_id="hooks_ingest",
        request=HookIngestArgs,
        responses={201: IngestResult, 200: IngestResult, **errors(409, 413, 415)},
        description="Store text a harness captured as a memory with a retention TTL (201). Text already "
        "held, exactly or nearly, renews that memory instead (200). Text that looks like a "
        "prompt injection is refused (400, code injection_suspected) and counted.",
    )
    def post(self, request):
        fields = self.body(HookIngestArgs).model_dump(exclude_none=True)
        result = services.hook_ingest(caller=self.caller, **fields)
        return answer(result, status=201 if result.status == "created" else 200)


class HookReportView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: report an injection",
        operation_id="hooks_report",
        request=HookReportArgs,
        responses={201: InjectionRecord, **errors(404, 413, 415)},
        description="Record that a block was actually injected into a prompt: harness, hook, query, "
        "the memory revisions it carried and its size (injection telemetry, kept "
        "MEMORY_TELEMETRY_DAYS).",
    )
    def post(self, request):
        fields = self.body(HookReportArgs).model_dump(exclude_none=True)
        return answer(services.hook_report(caller=self.caller, **fields), status=201)


class HookUsedView(ApiView):
    scopes = {"POST": Scope.READ}

    @extend_schema(
        summary="Hook: hand over the answer after an injection",
        operation_id="hooks_used",
        request=HookUsedArgs,
        responses={200: UsedRecord, **errors(404, 413, 415)},
        description="Mark which memories of an injection (default: this key's newest in the session) the "
        "answer that followed used: those carrying enough of the memory's words. The answer "
        "is read, never kept. Used injections are what MEMORY_INJECTION_BOOST counts.",
    )
    def post(self, request):
        fields = self.body(HookUsedArgs).model_dump(exclude_none=True)
        return answer(services.hook_used(caller=self.caller, **fields))
