"""The store: memories (identities), their append-only revisions and attributes, tags, and the audit trail.

Revisions and attributes are never updated or deleted (database triggers enforce it, see
migrations 0002 and 0007); the one exception is erasure, which opens ``ErasureGate`` inside its own
transaction and leaves an ``ErasureReceipt``. Rows an import writes carry its
``ImportBatch`` and count nowhere until the batch is published.
"""

import datetime as dt
import re

from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.models import OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL

from memories import staging


class Kind(models.TextChoices):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    SKILL = "skill"
    NOTE = "note"
    ARTIFACT = "artifact"
    EVENT = "event"


class State(models.TextChoices):
    """Whether a memory is forgotten (a tombstone hides it from then on), kept by the services."""

    ACTIVE = "active"
    FORGOTTEN = "forgotten"


class Lifecycle(models.TextChoices):
    """The lifecycle state an attribute row records (``memories.states`` says what a read shows).

    A candidate waits for a person or a trusted caller to promote it (an untrusted key's
    writes start here); an archived memory is kept and answers get, history and list, but
    recall leaves it out unless asked. Stale is never recorded: reads derive it from age.
    """

    CANDIDATE = "candidate"
    ACTIVE = "active"
    ARCHIVED = "archived"


class Interface(models.TextChoices):
    ADMIN = "admin"
    API = "api"
    MCP = "mcp"
    CLI = "cli"
    # The OAuth endpoints: approvals, tokens and revocations (oauth/).
    OAUTH = "oauth"


class Tag(models.Model):
    """A case-insensitive label of one namespace: ``slug`` is the casefolded name and is what makes tags equal.

    Each namespace has its own row per slug, so the spelling one namespace gave first is
    never what another namespace sees (memories only carry tags of their own namespace).
    """

    namespace = models.SlugField(max_length=64)
    name = models.CharField(max_length=64)
    slug = models.CharField(max_length=64)

    class Meta:
        ordering = ["namespace", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "slug"], name="tag_slug_unique_per_namespace"),
        ]

    def __str__(self):
        return self.name


class ImportBatch(models.Model):
    """One import, written in short transactions: its memories and revisions count only once it is published.

    ``counts_from`` is null while the import writes, and its rows are then invisible
    everywhere but in the import itself (``memories.staging``). Publishing sets it, in
    one short transaction: to the publish time for an import on the server clock, so
    that no answer as of an earlier time changes, and to ``EARLIEST`` for a trusted
    import (a restore), whose recorded history then answers as of its own times. A
    batch left ``writing`` by a process that died is removed by ``manage.py purge``.
    """

    class Status(models.TextChoices):
        WRITING = "writing"
        PUBLISHED = "published"

    EARLIEST = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)

    state = models.CharField(max_length=16, choices=Status.choices, default=Status.WRITING)
    trusted = models.BooleanField()
    actor = models.CharField(max_length=200)
    interface = models.CharField(max_length=8)
    started_at = models.DateTimeField()
    progress_at = models.DateTimeField()  # when its last chunk committed
    published_at = models.DateTimeField(null=True, blank=True)
    counts_from = models.DateTimeField(null=True, blank=True)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()

    class Meta:
        verbose_name_plural = "import batches"

    def __str__(self):
        return f"import batch {self.pk} ({self.state})"


def counted_rows(as_of: dt.datetime | None = None) -> Q:
    """Rows (memories or revisions) that count: written outside an import, or by one published (by ``as_of``).

    The import writing in this thread also sees its own rows. The batches are few, so
    the subquery is read once per statement and rows without a batch never need it.
    Raw SQL: nearly every query on memories and revisions carries it, and the ORM's
    form of the subquery costs more to build than most of those queries take to run.
    """
    if as_of is None:
        published = RawSQL("SELECT id FROM memories_importbatch WHERE counts_from IS NOT NULL", ())
    else:
        published = RawSQL(
            "SELECT id FROM memories_importbatch WHERE counts_from <= %s",
            (connection.ops.adapt_datetimefield_value(as_of),),
        )
    counted = Q(batch__isnull=True) | Q(batch_id__in=published)
    own = staging.own_batch_id()
    return counted | Q(batch_id=own) if own is not None else counted


def _visibility_candidates(memory_ref, *, as_of: dt.datetime, valid_at: dt.datetime | None):
    """Return the revisions of ``memory_ref`` that compete at (as_of, valid_at), the winner first.

    This is the visibility rule (docs/concepts.md), written once: among revisions
    known by ``as_of`` and not expired by then, whose valid interval holds
    ``valid_at`` (a tombstone holds at every valid time), the newest by
    (known_at, id) wins. A tombstone winner means the memory is not visible.
    Revisions of an import count from its publication (``ImportBatch.counts_from``).
    """
    valid_at = as_of if valid_at is None else valid_at
    return (
        Revision.all_objects.filter(memory=memory_ref)
        .known_by(as_of)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=as_of))
        .filter(
            Q(tombstone=True) | (Q(valid_from__lte=valid_at) & (Q(valid_to__isnull=True) | Q(valid_to__gt=valid_at)))
        )
        .order_by("-known_at", "-id")
    )


_SHOWN = Q(winning_revision_id__isnull=False, winner_is_tombstone=False)


class MemoryQuerySet(models.QuerySet):
    def _with_winner(self, *, as_of: dt.datetime, valid_at: dt.datetime | None):
        winners = _visibility_candidates(OuterRef("pk"), as_of=as_of, valid_at=valid_at)
        return self.annotate(
            winning_revision_id=Subquery(winners.values("id")[:1]),
            winner_is_tombstone=Subquery(winners.values("tombstone")[:1]),
        )

    def visible(self, *, as_of: dt.datetime, valid_at: dt.datetime | None = None):
        """Memories visible at (as_of, valid_at), annotated with ``winning_revision_id``."""
        return self._with_winner(as_of=as_of, valid_at=valid_at).filter(_SHOWN)

    def hidden(self, *, as_of: dt.datetime, valid_at: dt.datetime | None = None):
        """Memories not visible at (as_of, valid_at): forgotten, expired, or outside their validity."""
        return self._with_winner(as_of=as_of, valid_at=valid_at).exclude(_SHOWN)


class MemoryManager(models.Manager.from_queryset(MemoryQuerySet)):
    """Memories that count: those of an import still being written are left out (see ImportBatch)."""

    def get_queryset(self):
        return super().get_queryset().filter(counted_rows())


class RevisionQuerySet(models.QuerySet):
    def known_by(self, as_of: dt.datetime):
        """Revisions known at ``as_of``: learned by then, and of no import or one that counts by then."""
        return self.filter(counted_rows(as_of), known_at__lte=as_of)

    def visible(self, *, as_of: dt.datetime, valid_at: dt.datetime | None = None):
        """The one revision each memory shows at (as_of, valid_at); memories hidden there have none."""
        winners = _visibility_candidates(OuterRef("memory_id"), as_of=as_of, valid_at=valid_at)
        return self.filter(id=Subquery(winners.values("id")[:1]), tombstone=False)

    def latest_known(self):
        """Newest first by the order the visibility rule uses."""
        return self.order_by("-known_at", "-id")


class RevisionManager(models.Manager.from_queryset(RevisionQuerySet)):
    """Revisions that count: those of an import still being written are left out (see ImportBatch)."""

    def get_queryset(self):
        return super().get_queryset().filter(counted_rows())


class Memory(models.Model):
    """One memory's identity. ``namespace``, ``kind`` and ``tags`` are its current values (its newest ``Attributes``
    row), kept for the key's uniqueness, access checks and queries about now; as of a time, read ``Attributes``."""

    namespace = models.SlugField(max_length=64)
    key = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.NOTE)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    tags = models.ManyToManyField(Tag, related_name="memories", blank=True)
    created_at = models.DateTimeField()
    # Set on a memory an import created; it counts once that import is published.
    batch = models.ForeignKey(ImportBatch, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    objects = MemoryManager()
    # Every row, the unpublished imports' too: for the imports themselves, purge and doctor.
    all_objects = models.Manager()

    class Meta:
        verbose_name_plural = "memories"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "key"], name="memory_key_unique_per_namespace"),
        ]
        indexes = [
            models.Index(fields=["namespace", "kind"], name="memory_namespace_kind"),
            # A get by namespace and key as of a time finds the memory by key, then where it was then.
            models.Index(fields=["key"], name="memory_key"),
        ]

    def __str__(self):
        return f"{self.namespace}/{self.key}"


class Revision(models.Model):
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="revisions")
    content = models.TextField(blank=True)
    title = models.CharField(max_length=300, blank=True)
    subject = models.CharField(max_length=300, blank=True)
    predicate = models.CharField(max_length=300, blank=True)
    object = models.CharField(max_length=300, blank=True)
    source = models.CharField(max_length=500, blank=True)
    # The writer's stated confidence in this assertion, 0..1 (memories.validation.confidence); null: not stated.
    confidence = models.FloatField(null=True, blank=True)
    content_hash = models.CharField(max_length=64)
    known_at = models.DateTimeField()
    valid_from = models.DateTimeField()
    valid_to = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    tombstone = models.BooleanField(default=False)
    hides = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    reason = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=200)
    interface = models.CharField(max_length=8, choices=Interface.choices)
    embedding_model = models.CharField(max_length=200, blank=True)
    # Set at insert on a revision an import wrote (revisions are never updated); counted once that import is published.
    batch = models.ForeignKey(ImportBatch, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    objects = RevisionManager()
    # Every row, the unpublished imports' too: for the imports themselves, purge and doctor.
    all_objects = RevisionQuerySet.as_manager()

    class Meta:
        indexes = [
            # The visibility rule picks, per memory, the newest revision by (known_at, id).
            models.Index(fields=["memory", "known_at", "id"], name="revision_memory_known"),
            # Exact-duplicate detection looks revisions up by hash.
            models.Index(fields=["content_hash"], name="revision_content_hash"),
            # Purge finds expired rows without a scan.
            models.Index(fields=["expires_at"], name="revision_expires", condition=Q(expires_at__isnull=False)),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="revision_valid_interval_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(tombstone=False) | Q(hides__isnull=False),
                name="revision_tombstone_names_hidden_revision",
            ),
        ]

    def __str__(self):
        return f"revision {self.pk} of memory {self.memory_id}"


class AttributesQuerySet(models.QuerySet):
    def known_by(self, as_of: dt.datetime):
        """Rows known at ``as_of``: written by then, and of no import or one that counts by then."""
        return self.filter(counted_rows(as_of), known_at__lte=as_of)

    def as_of(self, as_of: dt.datetime):
        """The one row each memory carries at ``as_of``: its newest known by then, by (known_at, id)."""
        newest = (
            Attributes.all_objects.filter(memory_id=OuterRef("memory_id"))
            .known_by(as_of)
            .order_by("-known_at", "-id")
            .values("id")[:1]
        )
        return self.filter(id=Subquery(newest))


class AttributesManager(models.Manager.from_queryset(AttributesQuerySet)):
    """Rows that count: those of an import still being written are left out (see ImportBatch)."""

    def get_queryset(self):
        return super().get_queryset().filter(counted_rows())


class Attributes(models.Model):
    """A memory's namespace, kind, tags and lifecycle state from ``known_at`` on: the whole set after a change,
    never a delta.

    Every write that creates a memory or changes one of these appends a row, in its own
    transaction and at its own clock reading. As of T a memory carries the newest row by
    (known_at, id) known by T that counts at T (an import's rows count from its
    publication, as its revisions do). They are facts of knowledge time: they do not vary
    with ``valid_at``. Append-only like revisions (migrations 0007, 0010); only erasure and the
    removal of a dead import delete rows.
    """

    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="attribute_rows")
    known_at = models.DateTimeField()
    namespace = models.SlugField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    tags = models.ManyToManyField(Tag, related_name="attribute_rows", blank=True)
    state = models.CharField(max_length=16, choices=Lifecycle.choices, default=Lifecycle.ACTIVE)
    # Why the state changed (promote, archive, unarchive); empty on rows that carry it over.
    reason = models.CharField(max_length=500, blank=True)
    author = models.CharField(max_length=200)
    interface = models.CharField(max_length=8, choices=Interface.choices)
    batch = models.ForeignKey(ImportBatch, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    objects = AttributesManager()
    # Every row, the unpublished imports' too: for the imports themselves, purge and erasure.
    all_objects = AttributesQuerySet.as_manager()

    class Meta:
        # Each row is the whole set of a memory's attributes after one change.
        verbose_name = "attribute set"
        indexes = [
            # As of T, a memory's row is its newest by (known_at, id).
            models.Index(fields=["memory", "known_at", "id"], name="attributes_memory_known"),
        ]

    def __str__(self):
        return f"attributes {self.pk} of memory {self.memory_id}"


class AuditEvent(models.Model):
    """Who did what, through which interface. Holds ids and names, never memory text."""

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200)
    interface = models.CharField(max_length=8, choices=Interface.choices)
    action = models.CharField(max_length=32)
    memory_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]


class ErasureReceipt(models.Model):
    """Proof that a memory's text was destroyed: who, when, and the hashes of what was removed."""

    erased_at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    interface = models.CharField(max_length=8, choices=Interface.choices)
    reason = models.CharField(max_length=500, blank=True)
    memory_id = models.BigIntegerField()
    namespace = models.CharField(max_length=64)
    revision_ids = models.JSONField()
    content_hashes = models.JSONField()
    # Hook recalls and injections that returned the memory: their query text was removed too.
    telemetry_queries_removed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-erased_at", "-id"]


class ErasureGate(models.Model):
    """A row exists only inside an erasure transaction; the revision triggers let deletes through then."""

    opened_at = models.DateTimeField()


class Scope(models.TextChoices):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class ApiKey(models.Model):
    """A bearer credential for the REST and MCP interfaces.

    Only the SHA-256 of the key is stored; the key itself is shown once, at creation.
    ``prefix`` is public (it is part of the key) and finds the row; the secret part is
    then checked against ``secret_hash`` in constant time. ``namespaces`` null means
    every namespace. The rules that use these fields live in ``memories.access``.
    """

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.JSONField()
    namespaces = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=200)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # An untrusted key's new memories are candidates, and it may not promote or archive.
    trusted = models.BooleanField(default=True)

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class Route(models.TextChoices):
    LOOKUP = "lookup", "exact lookup"
    GRAPH = "graph", "graph question"
    AS_OF = "as_of", "point-in-time recall"


# The named groups each route reads from a rule's match (memories.selectors.routing): a pattern needs one of these sets.
ROUTE_GROUPS = {
    Route.LOOKUP: ({"id"}, {"key"}, {"tag"}, {"attribute", "entity"}),
    Route.GRAPH: ({"source", "target"}, {"entity"}, {"question"}),
    Route.AS_OF: ({"when"},),
}


def route_rule_problem(pattern: str, route: str) -> str | None:
    """What is wrong with a routing rule's pattern for its route, in words; None when nothing is."""
    try:
        groups = set(re.compile(pattern, re.IGNORECASE).groupindex)
    except re.error as error:
        return f"not a valid regular expression ({error}); fix it or disable the rule."
    needed = ROUTE_GROUPS.get(route, ())
    if needed and not any(wanted <= groups for wanted in needed):
        sets = " or ".join("+".join(f"(?P<{name}>...)" for name in sorted(wanted)) for wanted in needed)
        return f"a {route} rule needs the named group{'s' if len(needed[0]) > 1 else ''} {sets}."
    return None


class RouteRule(models.Model):
    """One rule of query routing: the first enabled rule, by order, whose pattern matches a question chooses its
    route; a question no rule matches is recalled."""

    order = models.PositiveIntegerField(default=100, help_text="Rules are tried from the lowest order up.")
    name = models.SlugField(max_length=64, unique=True)
    pattern = models.TextField(
        help_text=(
            "A Python regular expression, matched case-insensitively anywhere in the question; its named groups say "
            "what it extracts: lookup: id, key, tag, or attribute and entity; graph: source and target, or entity, "
            "or question (read by the graph question table; a question it does not read goes on to the next rule); "
            "as_of: when."
        )
    )
    route = models.CharField(max_length=16, choices=Route.choices)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["order", "id"]

    def __str__(self) -> str:
        return f"{self.order} {self.name} -> {self.route}"

    def clean(self) -> None:
        problem = route_rule_problem(self.pattern, self.route)
        if problem:
            raise ValidationError({"pattern": f"Pattern: {problem}"})
