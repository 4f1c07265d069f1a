from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0001_facts"),
    ]

    operations = [
        migrations.CreateModel(
            name="PredicateSetting",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("namespace", models.SlugField(max_length=64)),
                ("predicate", models.CharField(max_length=300)),
                ("single_valued", models.BooleanField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("namespace", "predicate"), name="predicate_setting_unique"),
                ],
            },
        ),
    ]
