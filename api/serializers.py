"""The shapes of REST requests and responses; they also make the OpenAPI schema.

Request serializers check shape and types only: a field present that the endpoint does
not know is refused by name, and JSON values must have the declared JSON type (no "5"
for 5, no 1 for true). Rules about values (times, namespaces, limits that depend on
bytes, duplicates) are the services', so every interface words them the same.

Response serializers are never run on data: views return the ``as_dict()`` of the
service's record, and these describe it (the vocabulary of DESIGN.md section 5).
"""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories import selectors, validation
from memories.models import Kind
from search import engine

INSTANT_HELP = "YYYY-MM-DD (midnight UTC) or ISO 8601 with a timezone, e.g. 2025-05-01T09:30:00Z."
INSTANT_MAX = 64
NAMESPACE_MAX = 64
NAMESPACES_MAX = 50
CURSOR_MAX = 100
LIST_LIMIT_DEFAULT = 20
RECALL_LIMIT_DEFAULT = 8


# Strict JSON types ----------------------------------------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """Text only, kept as sent (the services normalise whitespace where their rules say so)."""

    default_error_messages = {"invalid": "expected text."}

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "expected a whole number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "expected true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictChoiceField(serializers.ChoiceField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictListField(serializers.ListField):
    """A JSON array; DRF's own also takes an object with numeric keys."""

    def to_internal_value(self, data):
        if not isinstance(data, list):
            self.fail("not_a_list", input_type=type(data).__name__)
        return super().to_internal_value(data)


@extend_schema_field({"oneOf": [
    {"type": "string", "maxLength": NAMESPACE_MAX},
    {"type": "array", "items": {"type": "string", "maxLength": NAMESPACE_MAX}, "minItems": 1,
     "maxItems": NAMESPACES_MAX},
]})
class NamespacesField(serializers.Field):
    """A namespace, or a list of them (recall's ``namespace``)."""

    default_error_messages = {"invalid": "expected a namespace or a list of namespaces."}

    def to_internal_value(self, data):
        if isinstance(data, str) and len(data) <= NAMESPACE_MAX:
            return data
        if isinstance(data, list) and 1 <= len(data) <= NAMESPACES_MAX and all(
                isinstance(name, str) and len(name) <= NAMESPACE_MAX for name in data):
            return data
        self.fail("invalid")

    def to_representation(self, value):
        return value


# Requests ---------------------------------------------------------------------------------------------------


class RequestSerializer(serializers.Serializer):
    """Refuse fields the endpoint does not know, naming them (a typo must not pass as a default)."""

    def to_internal_value(self, data):
        if hasattr(data, "keys"):
            unknown = [name for name in data.keys() if name not in self.fields]
            if unknown:
                raise serializers.ValidationError({unknown[0]: [
                    f"unknown field. This endpoint takes: {', '.join(self.fields)}."]})
        return super().to_internal_value(data)


class QuerySerializer(RequestSerializer):
    """Query parameters: besides unknown names, refuse a parameter given twice unless it is a list."""

    def to_internal_value(self, data):
        if hasattr(data, "getlist"):
            for name in data.keys():
                field = self.fields.get(name)
                if field is not None and not isinstance(field, serializers.ListField) and len(
                        data.getlist(name)) > 1:
                    raise serializers.ValidationError({name: ["given more than once; give it once."]})
        return super().to_internal_value(data)


def _instant(description: str, *, body: bool):
    field = StrictCharField if body else serializers.CharField
    return field(required=False, allow_null=body, max_length=INSTANT_MAX, help_text=f"{description} {INSTANT_HELP}")


def _tags(description: str, *, body: bool):
    field = StrictListField if body else serializers.ListField
    child = (StrictCharField if body else serializers.CharField)(max_length=validation.TAG_MAX)
    return field(child=child, required=False, allow_null=body, max_length=settings.MEMORY_MAX_TAGS,
                 help_text=description)


class RememberRequest(RequestSerializer):
    content = StrictCharField(max_length=settings.MEMORY_MAX_CONTENT_BYTES, help_text=(
        "The memory: one fact, preference, decision or note, written to stand on its own."))
    namespace = StrictCharField(required=False, allow_null=True, max_length=NAMESPACE_MAX, help_text=(
        "Where to store it; default: the key's first namespace, or MEMORY_DEFAULT_NAMESPACE."))
    key = StrictCharField(required=False, allow_null=True, max_length=validation.KEY_MAX, help_text=(
        "A stable key (e.g. 'user.editor'). Remembering under an existing key adds a revision to that memory."))
    title = StrictCharField(required=False, allow_null=True, max_length=validation.TITLE_MAX)
    kind = StrictChoiceField(choices=Kind.choices, required=False, default=Kind.NOTE.value)
    tags = _tags("Topic labels (case-insensitive).", body=True)
    ttl_days = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=validation.TTL_DAYS_MAX,
                                  help_text="Expire after this many days; 0 or absent: never.")
    valid_from = _instant("When the fact starts to hold; default now.", body=True)
    valid_to = _instant("When it stops holding (exclusive); default open.", body=True)
    source = StrictCharField(required=False, allow_null=True, max_length=validation.SOURCE_MAX)
    subject = StrictCharField(required=False, allow_null=True, max_length=validation.TRIPLE_PART_MAX,
                              help_text="Optional triple: give subject, predicate and object, or none.")
    predicate = StrictCharField(required=False, allow_null=True, max_length=validation.TRIPLE_PART_MAX)
    object = StrictCharField(required=False, allow_null=True, max_length=validation.TRIPLE_PART_MAX)


class UpdateRequest(RequestSerializer):
    content = StrictCharField(required=False, allow_null=True, max_length=settings.MEMORY_MAX_CONTENT_BYTES,
                              help_text="The new text; replaces the old from now on (history keeps the old).")
    title = StrictCharField(required=False, allow_null=True, max_length=validation.TITLE_MAX)
    add_tags = _tags("Tags to add.", body=True)
    remove_tags = _tags("Tags to remove.", body=True)
    ttl_days = StrictIntegerField(required=False, default=-1, min_value=-1, max_value=validation.TTL_DAYS_MAX,
                                  help_text="-1: keep the current expiry; 0: never expire; N: expire N days from now.")
    valid_from = _instant("With valid_to, a bounded correction: the new value holds only in "
                          "[valid_from, valid_to).", body=True)
    valid_to = _instant("End (exclusive) of a bounded correction.", body=True)
    source = StrictCharField(required=False, allow_null=True, max_length=validation.SOURCE_MAX)


class ReasonRequest(RequestSerializer):
    reason = StrictCharField(required=False, allow_null=True, max_length=validation.REASON_MAX,
                             help_text="Why, e.g. 'the user retracted it'.")


class ReasonQuery(QuerySerializer):
    reason = serializers.CharField(required=False, max_length=validation.REASON_MAX, trim_whitespace=False,
                                   help_text="Why, e.g. 'the user retracted it'.")


class ListQuery(QuerySerializer):
    namespace = serializers.CharField(required=False, max_length=NAMESPACE_MAX, help_text=(
        "Only this namespace; default: every namespace this key may use."))
    tags = _tags("Only memories carrying all these tags (repeat the parameter for several).", body=False)
    kind = serializers.ChoiceField(choices=Kind.choices, required=False, help_text="Only memories of this kind.")
    state = serializers.ChoiceField(choices=selectors.LIST_STATES, required=False, default="active", help_text=(
        "active: visible now; hidden: not forgotten but not visible now (expired, or outside its validity); "
        "forgotten; all."))
    limit = serializers.IntegerField(required=False, default=LIST_LIMIT_DEFAULT, min_value=1,
                                     max_value=selectors.LIST_LIMIT_MAX, help_text="Memories per page.")
    cursor = serializers.CharField(required=False, max_length=CURSOR_MAX,
                                   help_text="next_cursor from the previous page.")


class GetQuery(QuerySerializer):
    as_of = _instant("Show it as known at this time; default now.", body=False)
    valid_at = _instant("Show the value that held at this time; default as_of.", body=False)


class HistoryQuery(QuerySerializer):
    as_of = _instant("Only revisions known by this time; default now.", body=False)


def _recall_fields(*, body: bool) -> dict:
    text = StrictCharField if body else serializers.CharField
    choice = StrictChoiceField if body else serializers.ChoiceField
    integer = StrictIntegerField if body else serializers.IntegerField
    boolean = StrictBooleanField if body else serializers.BooleanField
    many = StrictListField if body else serializers.ListField
    namespace_help = "A namespace or a list of them; default: every namespace this key may use."
    return {
        "query": text(max_length=validation.QUERY_MAX_CHARS, allow_blank=True, trim_whitespace=False,
                      help_text="A few key words or a question."),
        "namespace": NamespacesField(required=False, allow_null=True, help_text=namespace_help) if body else
        serializers.ListField(child=serializers.CharField(max_length=NAMESPACE_MAX), required=False,
                              max_length=NAMESPACES_MAX, help_text=namespace_help + " Repeat for several."),
        "tags": _tags("Only memories carrying all these tags.", body=body),
        "kinds": many(child=choice(choices=Kind.choices), required=False, allow_null=body, min_length=1,
                      max_length=len(Kind.values), help_text="Only memories of these kinds."),
        "limit": integer(required=False, default=RECALL_LIMIT_DEFAULT, min_value=1, max_value=validation.RECALL_LIMIT_MAX,
                         help_text="How many hits at most."),
        "match": choice(choices=engine.MATCH_MODES, required=False, default="auto",
                        help_text="auto: all words, else any (with a note); all; any."),
        "mode": choice(choices=engine.MODES, required=False, default="hybrid",
                       help_text="hybrid: words and meaning; keyword: words only; semantic: meaning only."),
        "as_of": _instant("Answer with what was known at this time; default now.", body=body),
        "valid_at": _instant("Answer about this time; default as_of.", body=body),
        "explain": boolean(required=False, default=False, help_text="Add each hit's component ranks and raw scores."),
    }


RecallRequest = type("RecallRequest", (RequestSerializer,), _recall_fields(body=True))
RecallQuery = type("RecallQuery", (QuerySerializer,), _recall_fields(body=False))


class StatsQuery(QuerySerializer):
    namespace = serializers.CharField(required=False, max_length=NAMESPACE_MAX, help_text=(
        "The namespace to count; default: all this key may use (a key limited to several namespaces must name one)."))


class ExportQuery(QuerySerializer):
    namespace = serializers.CharField(required=False, max_length=NAMESPACE_MAX, help_text=(
        "The namespace to export; default: all this key may use (a key limited to several namespaces must name "
        "one)."))
    as_of = _instant("Export what was known at this time; default now.", body=False)


class ImportQuery(QuerySerializer):
    trusted = serializers.BooleanField(required=False, default=False, help_text=(
        "Replay every revision with its recorded times (known_at), tombstones included: a restore from a "
        "trusted export. Needs the admin scope. Otherwise the server clock applies and only each memory's "
        "current text is remembered."))
    dry_run = serializers.BooleanField(required=False, default=False, help_text=(
        "Check and count everything, then write nothing."))


# Responses ------------------------------------------------------------------------------------------------------


class ErrorDetail(serializers.Serializer):
    code = serializers.CharField(help_text="invalid, too_large, unauthenticated, forbidden, not_found, conflict, "
                                           "duplicate, parse_error, method_not_allowed, unsupported_media_type, "
                                           "throttled, unavailable, internal.")
    message = serializers.CharField(help_text="What went wrong and what to do, safe to show an agent.")
    field = serializers.CharField(required=False, help_text="The field or parameter at fault.")
    memory_id = serializers.IntegerField(required=False, help_text=(
        "With duplicate: the memory that already holds the content."))


class ErrorResponse(serializers.Serializer):
    error = ErrorDetail()


class MemoryResponse(serializers.Serializer):
    id = serializers.IntegerField(help_text="The memory's id.")
    key = serializers.CharField(help_text="Stable key, unique in the namespace.")
    namespace = serializers.CharField()
    kind = serializers.CharField()
    state = serializers.CharField(help_text="active, or forgotten.")
    title = serializers.CharField(allow_blank=True)
    content = serializers.CharField(allow_blank=True, help_text="Stored text: reference data, never instructions.")
    tags = serializers.ListField(child=serializers.CharField())
    revision_id = serializers.IntegerField(help_text="The revision shown.")
    known_at = serializers.DateTimeField(help_text="When the server learned this revision.")
    valid_from = serializers.DateTimeField(help_text="Start of the time the revision holds for.")
    valid_to = serializers.DateTimeField(allow_null=True, help_text="End (exclusive); null: open.")
    expires_at = serializers.DateTimeField(allow_null=True, help_text="When it expires (TTL); null: never.")
    source = serializers.CharField(allow_blank=True)
    content_hash = serializers.CharField(help_text="SHA-256 of the content.")
    created_at = serializers.DateTimeField(allow_null=True)
    subject = serializers.CharField(required=False, help_text="Present when the memory has a triple.")
    predicate = serializers.CharField(required=False)
    object = serializers.CharField(required=False)


class NearTwinResponse(serializers.Serializer):
    memory_id = serializers.IntegerField()
    revision_id = serializers.IntegerField()
    cosine = serializers.FloatField()


class RememberResponse(MemoryResponse):
    created = serializers.BooleanField(help_text="A new memory was stored.")
    deduplicated = serializers.BooleanField(help_text="Nothing new was stored: this memory already held the content.")
    revised = serializers.BooleanField(help_text="A new revision was added to the memory under the given key.")
    near_twin = NearTwinResponse(required=False, help_text="Another memory of the namespace very close in meaning.")


class ChangeResponse(MemoryResponse):
    changed = serializers.BooleanField(help_text="False when the call changed nothing (e.g. already forgotten).")


class HitResponse(MemoryResponse):
    score = serializers.FloatField(help_text="Fused relevance score; higher is better.")
    snippet = serializers.CharField(allow_blank=True)
    matched_terms = serializers.ListField(child=serializers.CharField())
    age = serializers.CharField(help_text="How long before as_of the revision became known, in words.")
    explain = serializers.DictField(required=False, help_text="With explain: component ranks and raw scores.")


class RecallResponse(serializers.Serializer):
    query = serializers.CharField()
    terms = serializers.ListField(child=serializers.CharField(), help_text="The terms the query was reduced to.")
    match_mode = serializers.CharField(help_text="The match mode used (auto falls back from all to any).")
    mode = serializers.CharField()
    as_of = serializers.DateTimeField()
    valid_at = serializers.DateTimeField()
    hits = HitResponse(many=True)
    note = serializers.CharField(required=False)
    hint = serializers.CharField(required=False, help_text="What to try next when nothing matched.")


class RevisionResponse(serializers.Serializer):
    revision_id = serializers.IntegerField()
    memory_id = serializers.IntegerField()
    tombstone = serializers.BooleanField(help_text="True for a forget: the memory is hidden from known_at on.")
    hides = serializers.IntegerField(allow_null=True, help_text="For a tombstone, the revision it hid.")
    title = serializers.CharField(allow_blank=True)
    content = serializers.CharField(allow_blank=True)
    subject = serializers.CharField(allow_blank=True)
    predicate = serializers.CharField(allow_blank=True)
    object = serializers.CharField(allow_blank=True)
    source = serializers.CharField(allow_blank=True)
    content_hash = serializers.CharField()
    known_at = serializers.DateTimeField()
    valid_from = serializers.DateTimeField()
    valid_to = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)
    interface = serializers.CharField()


class HistoryResponse(serializers.Serializer):
    memory_id = serializers.IntegerField()
    revisions = RevisionResponse(many=True, help_text="Every revision known by as_of, oldest first.")


class PageResponse(serializers.Serializer):
    items = MemoryResponse(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as cursor for the next page; null: last.")


class NamespaceCountResponse(serializers.Serializer):
    memories = serializers.IntegerField()
    visible = serializers.IntegerField()


class TagCountResponse(serializers.Serializer):
    tag = serializers.CharField()
    count = serializers.IntegerField()


class StatsResponse(serializers.Serializer):
    memories = serializers.IntegerField(help_text="Memories stored, visible or not.")
    visible = serializers.IntegerField(help_text="Memories visible now.")
    forgotten = serializers.IntegerField()
    revisions = serializers.IntegerField()
    with_ttl = serializers.IntegerField(help_text="Visible memories that will expire.")
    kinds = serializers.DictField(child=serializers.IntegerField(), help_text="Visible memories per kind.")
    namespaces = serializers.DictField(child=NamespaceCountResponse())
    top_tags = TagCountResponse(many=True)
    embedder = serializers.CharField(help_text="The embedding model recall uses for meaning.")
    database_bytes = serializers.IntegerField(required=False, help_text="Keys for every namespace only.")
    sqlite_version = serializers.CharField(required=False, help_text="Keys for every namespace only.")
    schema = serializers.DictField(child=serializers.CharField(), required=False,
                                   help_text="Latest migration per app; keys for every namespace only.")
    search_mode = serializers.DictField(required=False, help_text="Keys for every namespace only.")


class ImportResponse(serializers.Serializer):
    created = serializers.IntegerField()
    revised = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    forgotten = serializers.IntegerField()
    skipped = serializers.IntegerField()
    trusted = serializers.BooleanField()
    dry_run = serializers.BooleanField(help_text="True: nothing was written.")


class ExportDocument(serializers.Serializer):
    """The export format (``memories.services.export``); ``import/`` takes the same document."""

    format = serializers.CharField(required=False, help_text="memory-export")
    version = serializers.IntegerField(required=False)
    exported_at = serializers.DateTimeField(required=False, allow_null=True)
    as_of = serializers.DateTimeField(required=False, allow_null=True)
    namespace = serializers.CharField(required=False, allow_null=True)
    memories = serializers.ListField(child=serializers.DictField(), help_text=(
        "Each memory: namespace, key, kind, tags, state, created_at, and revisions oldest first."))


class EmbedderHealth(serializers.Serializer):
    name = serializers.CharField()
    device = serializers.CharField()
    available = serializers.BooleanField()


class HealthResponse(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    version = serializers.CharField(help_text="The server's version.")
    api_version = serializers.CharField(help_text="The REST API version (the /api/v1/ in every path).")
    database = serializers.ChoiceField(choices=["ok", "error"])
    search_mode = serializers.CharField()
    embedder = EmbedderHealth()
    uptime_seconds = serializers.IntegerField()




# Hooks (memories.services.hooks) ----------------------------------------------------------------------------------

HOOK_NAME_MAX = 64
SESSION_MAX = 200


class HookNames(RequestSerializer):
    """Who is calling, for telemetry: the harness, its hook event and its session."""

    harness = StrictCharField(required=False, allow_null=True, max_length=HOOK_NAME_MAX,
                              help_text="The agent harness, e.g. 'claude-code'.")
    hook = StrictCharField(required=False, allow_null=True, max_length=HOOK_NAME_MAX,
                           help_text="The hook event, e.g. 'UserPromptSubmit'.")
    session = StrictCharField(required=False, allow_null=True, max_length=SESSION_MAX,
                              help_text="The harness's session id.")


class HookRecallRequest(HookNames):
    query = StrictCharField(max_length=validation.QUERY_MAX_CHARS, help_text="The prompt, or key words from it.")
    namespace = NamespacesField(required=False, allow_null=True, help_text=(
        "A namespace or a list of them; default: every namespace this key may use."))
    tags = _tags("Only memories carrying all these tags.", body=True)
    kinds = StrictListField(child=StrictChoiceField(choices=Kind.choices), required=False, allow_null=True,
                            min_length=1, max_length=len(Kind.values), help_text="Only memories of these kinds.")
    limit = StrictIntegerField(required=False, default=RECALL_LIMIT_DEFAULT, min_value=1, max_value=validation.RECALL_LIMIT_MAX,
                               help_text="How many hits at most (the block shows those that fit the budget).")
    budget = StrictIntegerField(required=False, allow_null=True, help_text=(
        "The block's size limit in characters; default MEMORY_HOOK_BUDGET, at most MEMORY_HOOK_BUDGET_MAX."))
    mode = StrictChoiceField(choices=engine.MODES, required=False, default="hybrid")


class HookIngestRequest(HookNames):
    text = StrictCharField(max_length=settings.MEMORY_MAX_CONTENT_BYTES, help_text="The captured text to keep.")
    namespace = StrictCharField(required=False, allow_null=True, max_length=NAMESPACE_MAX, help_text=(
        "Where to store it; default: the key's first namespace, or MEMORY_DEFAULT_NAMESPACE."))
    kind = StrictChoiceField(choices=Kind.choices, required=False, default=Kind.ARTIFACT.value)
    title = StrictCharField(required=False, allow_null=True, max_length=validation.TITLE_MAX)
    tags = _tags("Topic labels (case-insensitive).", body=True)
    ttl_days = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=validation.TTL_DAYS_MAX,
                                  help_text="Expire after this many days; default MEMORY_HOOK_TTL_DAYS; 0: never.")
    source = StrictCharField(required=False, allow_null=True, max_length=validation.SOURCE_MAX, help_text=(
        "Where it came from; default: the harness, hook and session."))


class InjectedMemoryRequest(RequestSerializer):
    memory_id = StrictIntegerField(min_value=1)
    revision_id = StrictIntegerField(min_value=1)


class HookReportRequest(RequestSerializer):
    harness = StrictCharField(max_length=HOOK_NAME_MAX, help_text="The agent harness, e.g. 'claude-code'.")
    hook = StrictCharField(max_length=HOOK_NAME_MAX, help_text="The hook event, e.g. 'UserPromptSubmit'.")
    query = StrictCharField(required=False, allow_null=True, max_length=validation.QUERY_MAX_CHARS,
                            help_text="The query the block was recalled for.")
    session = StrictCharField(required=False, allow_null=True, max_length=SESSION_MAX)
    characters = StrictIntegerField(min_value=0, help_text="The size of the block injected, in characters.")
    memories = StrictListField(child=InjectedMemoryRequest(), max_length=validation.RECALL_LIMIT_MAX, help_text=(
        "The memory revisions the block carried: memory_id and revision_id from hooks/recall/'s hits."))


class HookHitResponse(serializers.Serializer):
    memory_id = serializers.IntegerField()
    revision_id = serializers.IntegerField()
    namespace = serializers.CharField()
    key = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    score = serializers.FloatField()
    age = serializers.CharField()


class HookBlockResponse(serializers.Serializer):
    query = serializers.CharField()
    block = serializers.CharField(allow_blank=True, help_text=(
        "Ready to inject: the hits wrapped in <memory-context> tags, marked as reference data; empty when nothing "
        "matched."))
    characters = serializers.IntegerField()
    budget = serializers.IntegerField()
    truncated = serializers.BooleanField()
    hits = HookHitResponse(many=True, help_text="The memories the block shows, best first.")
    omitted = serializers.IntegerField(help_text="Hits that did not fit the budget.")
    terms = serializers.ListField(child=serializers.CharField())
    match_mode = serializers.CharField()
    mode = serializers.CharField()
    note = serializers.CharField(allow_null=True)
    hint = serializers.CharField(allow_null=True)
    recall_id = serializers.IntegerField()


class HookIngestResponse(serializers.Serializer):
    status = serializers.ChoiceField(choices=["created", "duplicate", "refreshed"], help_text=(
        "created: a new memory; duplicate or refreshed: a memory already held (nearly) this text, and its expiry "
        "was extended."))
    memory_id = serializers.IntegerField()
    revision_id = serializers.IntegerField()
    namespace = serializers.CharField()
    cosine = serializers.FloatField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)


class InjectionResponse(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    harness = serializers.CharField()
    hook = serializers.CharField()
    session = serializers.CharField(allow_blank=True)
    characters = serializers.IntegerField()
    tokens_estimate = serializers.IntegerField()
    memories = serializers.IntegerField()
