"""Tags belong to a namespace: one row per (namespace, slug) instead of one per slug for the whole store.

Every existing tag is split into one row per namespace whose memories carry it, and each
memory keeps pointing at its own namespace's row. The namespace of the tag's earliest
memory (by created_at, then id) keeps the row and its spelling; every other namespace gets
a new row named by the slug, since which spelling it typed was never stored and the
existing one may be another namespace's. Tags no memory carries are dropped. Backwards,
the rows of one slug merge into the oldest row (its spelling), and the links follow it.
"""

from django.db import migrations, models

# Ids per query: well under SQLite's limit on parameters.
CHUNK = 500


def _chunks(ids):
    ids = sorted(ids)
    for start in range(0, len(ids), CHUNK):
        yield ids[start : start + CHUNK]


def split_tags_by_namespace(apps, schema_editor):
    Tag = apps.get_model("memories", "Tag")
    Link = apps.get_model("memories", "Memory").tags.through
    owner: dict[int, str] = {}  # tag id -> the namespace that keeps the row
    moved: dict[tuple[int, str], list[int]] = {}  # (tag id, another namespace) -> its links
    links = Link.objects.order_by("memory__created_at", "memory_id", "id")
    for link_id, tag_id, namespace in links.values_list("id", "tag_id", "memory__namespace").iterator():
        owner.setdefault(tag_id, namespace)
        if owner[tag_id] != namespace:
            moved.setdefault((tag_id, namespace), []).append(link_id)
    by_namespace: dict[str, list[int]] = {}
    for tag_id, namespace in owner.items():
        by_namespace.setdefault(namespace, []).append(tag_id)
    for namespace, tag_ids in by_namespace.items():
        for chunk in _chunks(tag_ids):
            Tag.objects.filter(pk__in=chunk).update(namespace=namespace)
    Tag.objects.filter(namespace="").delete()  # carried by no memory
    slugs = dict(Tag.objects.values_list("id", "slug"))
    for (tag_id, namespace), link_ids in moved.items():
        copy = Tag.objects.create(namespace=namespace, slug=slugs[tag_id], name=slugs[tag_id])
        for chunk in _chunks(link_ids):
            Link.objects.filter(pk__in=chunk).update(tag_id=copy.pk)
    _check_links_now(schema_editor)


def merge_tags_across_namespaces(apps, schema_editor):
    Tag = apps.get_model("memories", "Tag")
    Link = apps.get_model("memories", "Memory").tags.through
    kept: dict[str, int] = {}  # slug -> the oldest row
    for tag_id, slug in list(Tag.objects.order_by("id").values_list("id", "slug")):
        if slug not in kept:
            kept[slug] = tag_id
            continue
        # A memory carries one row per slug (its namespace's), so no link is doubled.
        Link.objects.filter(tag_id=tag_id).update(tag_id=kept[slug])
        Tag.objects.filter(pk=tag_id).delete()
    _check_links_now(schema_editor)


def _check_links_now(schema_editor):
    # PostgreSQL defers foreign-key checks to the commit, and refuses to alter a table while checks are pending.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0003_api_key"),
    ]

    operations = [
        migrations.AlterField(
            model_name="tag",
            name="slug",
            field=models.CharField(max_length=64),
        ),
        migrations.AddField(
            model_name="tag",
            name="namespace",
            field=models.SlugField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AlterModelOptions(
            name="tag",
            options={"ordering": ["namespace", "slug"]},
        ),
        migrations.RunPython(split_tags_by_namespace, merge_tags_across_namespaces),
        migrations.AddConstraint(
            model_name="tag",
            constraint=models.UniqueConstraint(fields=("namespace", "slug"), name="tag_slug_unique_per_namespace"),
        ),
    ]
