from django.db import migrations, models


def derive_facts(apps, schema_editor):
    """Fill the fact rows of the revisions a store already holds, as ``knowledge.facts.rebuild_facts`` would."""
    from knowledge.names import entity_name, predicate_name

    Fact = apps.get_model("knowledge", "Fact")
    Revision = apps.get_model("memories", "Revision")
    rows = []
    for revision_id, memory_id, subject, predicate, object_ in (
        Revision.objects.filter(tombstone=False)
        .exclude(subject="")
        .order_by("id")
        .values_list("id", "memory_id", "subject", "predicate", "object")
        .iterator(chunk_size=5000)
    ):
        row = Fact(
            revision_id=revision_id,
            memory_id=memory_id,
            subject=entity_name(subject),
            predicate=predicate_name(predicate),
            object=entity_name(object_),
        )
        if row.subject and row.predicate and row.object:
            rows.append(row)
    Fact.objects.bulk_create(rows, batch_size=5000)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        # The revisions the rows are derived from.
        ("memories", "0009_attribute_set_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="Fact",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("revision_id", models.BigIntegerField(unique=True)),
                ("memory_id", models.BigIntegerField()),
                ("subject", models.TextField()),
                ("predicate", models.TextField()),
                ("object", models.TextField()),
            ],
            options={
                "indexes": [
                    models.Index(fields=["subject", "predicate"], name="fact_subject_predicate"),
                    models.Index(fields=["object"], name="fact_object"),
                ],
            },
        ),
        migrations.RunPython(derive_facts, migrations.RunPython.noop),
    ]
