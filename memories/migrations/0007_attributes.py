"""Attributes: a memory's namespace, kind and tags as an append-only history, so each answers as of a time.

Existing memories get their rows from the audit trail, undone from today's values back
to their creation: a "retag" (added, removed) or "deduplicate" (added_tags) event
changed the tags, a "move" (from_namespace, to_namespace) the namespace, a "rekind"
(kind) the kind. A revise that changed the kind, and a trusted import that updated an
existing memory, recorded no detail: there the later value is the best the trail knows,
and before a memory's first "rekind" its kind is taken to be the one that event set.
A memory without such events gets one row at its creation with today's values. Rows
are append-only from here on (triggers, as for revisions in 0002).
"""

import django.db.models.deletion
from django.db import migrations, models

from memoryproject.migration_ops import EngineSQL, append_only_trigger

# Memories per batch of inserts.
CHUNK = 500
CHANGES = ("retag", "deduplicate", "move", "rekind")

TRIGGERS = [
    f"""
    CREATE TRIGGER memories_{table}_no_{verb}
    BEFORE {verb.upper()} ON memories_{table}
    WHEN NOT EXISTS (SELECT 1 FROM memories_erasuregate)
    BEGIN
        SELECT RAISE(ABORT, 'attributes are append-only: add a new row instead of changing one');
    END
    """
    for table in ("attributes", "attributes_tags")
    for verb in ("update", "delete")
]
DROP_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS memories_{table}_no_{verb}"
    for table in ("attributes", "attributes_tags")
    for verb in ("update", "delete")
]

POSTGRESQL_TRIGGERS = [
    append_only_trigger(
        f"memories_{table}_no_{verb}",
        f"memories_{table}",
        verb,
        "attributes are append-only: add a new row instead of changing one",
    )
    for table in ("attributes", "attributes_tags")
    for verb in ("update", "delete")
]
POSTGRESQL_DROP_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS memories_{table}_no_{verb} ON memories_{table}"
    for table in ("attributes", "attributes_tags")
    for verb in ("update", "delete")
]


def _history(memory, events, tag_names):
    """[(known_at, namespace, kind, tag names, actor, interface)] of ``memory``, oldest first: its events undone."""
    kinds = [event for event in events if event.action == "rekind"]
    kind_before = {
        event.pk: (kinds[index - 1].detail.get("kind") if index else event.detail.get("kind"))
        for index, event in enumerate(kinds)
    }
    namespace, kind, tags = memory.namespace, memory.kind, dict(tag_names)
    rows = []
    for event in reversed(events):  # newest first
        rows.append((max(event.at, memory.created_at), namespace, kind, dict(tags), event.actor, event.interface))
        detail = event.detail or {}
        if event.action in ("retag", "deduplicate"):
            for name in detail.get("added", []) + detail.get("added_tags", []):
                tags.pop(name.casefold(), None)
            for name in detail.get("removed", []):
                tags.setdefault(name.casefold(), name)
        elif event.action == "move":
            namespace = detail.get("from_namespace") or namespace
        else:
            kind = kind_before[event.pk] or kind
    rows.append((memory.created_at, namespace, kind, tags, None, None))
    rows.reverse()
    return rows


def backfill(apps, schema_editor):
    Memory = apps.get_model("memories", "Memory")
    Revision = apps.get_model("memories", "Revision")
    Attributes = apps.get_model("memories", "Attributes")
    AuditEvent = apps.get_model("memories", "AuditEvent")
    Tag = apps.get_model("memories", "Tag")
    Link = Attributes.tags.through
    tag_rows = {(tag.namespace, tag.slug): tag.pk for tag in Tag.objects.all()}

    def tag_id(namespace, slug, name):
        if (namespace, slug) not in tag_rows:  # a tag of a namespace the memory left, dropped since
            tag_rows[namespace, slug] = Tag.objects.create(namespace=namespace, slug=slug, name=name).pk
        return tag_rows[namespace, slug]

    after = 0
    while True:
        memories = list(Memory.objects.filter(pk__gt=after).order_by("pk")[:CHUNK])
        if not memories:
            break
        after = memories[-1].pk
        ids = [memory.pk for memory in memories]
        first = {}
        for memory_id, known_at, author, interface in (
            Revision.objects.filter(memory_id__in=ids)
            .order_by("-known_at", "-id")
            .values_list("memory_id", "known_at", "author", "interface")
        ):
            first[memory_id] = (known_at, author, interface)  # the oldest wins
        events = {}
        for event in AuditEvent.objects.filter(memory_id__in=ids, action__in=CHANGES).order_by("at", "id"):
            events.setdefault(event.memory_id, []).append(event)
        names = {}
        for memory_id, slug, name in Memory.tags.through.objects.filter(memory_id__in=ids).values_list(
            "memory_id", "tag__slug", "tag__name"
        ):
            names.setdefault(memory_id, []).append((slug, name))
        rows, links = [], []
        for memory in memories:
            created_at, author, interface = first.get(memory.pk, (memory.created_at, "migration", "cli"))
            # A trusted import may date the memory after its first revision: the row holds from the earlier.
            memory.created_at = min(memory.created_at, created_at)
            for known_at, namespace, kind, tags, actor, via in _history(
                memory, events.get(memory.pk, []), names.get(memory.pk, [])
            ):
                rows.append(
                    Attributes(
                        memory_id=memory.pk,
                        known_at=known_at,
                        namespace=namespace,
                        kind=kind,
                        author=actor or author,
                        interface=via or interface,
                        batch_id=memory.batch_id,
                    )
                )
                links.append([tag_id(namespace, slug, name) for slug, name in tags.items()])
        Attributes.objects.bulk_create(rows)
        Link.objects.bulk_create(
            [Link(attributes_id=row.pk, tag_id=tag) for row, tags in zip(rows, links) for tag in tags]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0006_import_batch"),
    ]

    operations = [
        migrations.CreateModel(
            name="Attributes",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("known_at", models.DateTimeField()),
                ("namespace", models.SlugField(max_length=64)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("fact", "Fact"),
                            ("preference", "Preference"),
                            ("decision", "Decision"),
                            ("skill", "Skill"),
                            ("note", "Note"),
                            ("artifact", "Artifact"),
                            ("event", "Event"),
                        ],
                        max_length=16,
                    ),
                ),
                ("author", models.CharField(max_length=200)),
                (
                    "interface",
                    models.CharField(
                        choices=[("admin", "Admin"), ("api", "Api"), ("mcp", "Mcp"), ("cli", "Cli")], max_length=8
                    ),
                ),
                (
                    "batch",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memories.importbatch",
                    ),
                ),
                (
                    "memory",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="attribute_rows", to="memories.memory"
                    ),
                ),
                ("tags", models.ManyToManyField(blank=True, related_name="attribute_rows", to="memories.tag")),
            ],
            options={
                "verbose_name_plural": "attributes",
                "indexes": [models.Index(fields=["memory", "known_at", "id"], name="attributes_memory_known")],
            },
        ),
        migrations.AddIndex(model_name="memory", index=models.Index(fields=["key"], name="memory_key")),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        EngineSQL(
            sql=TRIGGERS,
            reverse_sql=DROP_TRIGGERS,
            postgresql=POSTGRESQL_TRIGGERS,
            reverse_postgresql=POSTGRESQL_DROP_TRIGGERS,
        ),
    ]
