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
