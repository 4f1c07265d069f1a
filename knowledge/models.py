from django.db import models


class Fact(models.Model):
    """The triple a revision carries, in normal form (``knowledge.names``): one row per such revision.

    Derived, never a source of truth: written in the revision's own transaction, deleted
    with it (erasure, purge), and rebuilt from the revisions by ``manage.py reindex --graph``.
    No namespace here: a memory can move, and its namespace as of a time comes from the
    visibility snapshot. Plain ids, not foreign keys: knowledge sits below memories.
    """

    revision_id = models.BigIntegerField(unique=True)
    memory_id = models.BigIntegerField()
    subject = models.TextField()
    predicate = models.TextField()
    object = models.TextField()

    class Meta:
        indexes = [
            # Neighbours and paths look a name up as a subject (with or without its predicate) ...
            models.Index(fields=["subject", "predicate"], name="fact_subject_predicate"),
            # ... and as an object (with its predicate: the alias lookups probe both columns).
            models.Index(fields=["object", "predicate"], name="fact_object_predicate"),
        ]

    def __str__(self):
        return f"{self.subject} {self.predicate} {self.object} (revision {self.revision_id})"


class PredicateSetting(models.Model):
    """Whether a predicate holds one value per subject in a namespace, overriding the default list either way.

    A single-valued predicate ("runs on", "owned by") makes two visible facts with the same
    subject and different objects a conflict (``knowledge.contradictions``); a multi-valued one
    ("uses", "depends on") does not. ``predicate`` is kept in normal form (``knowledge.names``).
    """

    namespace = models.SlugField(max_length=64)
    predicate = models.CharField(max_length=300)
    single_valued = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "predicate"], name="predicate_setting_unique"),
        ]

    def __str__(self):
        return f"{self.namespace}: {self.predicate} ({'one value' if self.single_valued else 'many values'})"
