"""Injection telemetry: what the hooks recalled for prompts, and what harnesses report they injected.

Rows hold ids, names, the query and counts, never memory text. They expire after
``MEMORY_TELEMETRY_DAYS`` (``manage.py purge`` deletes them), and erasing a memory
removes the items that name it and the query text of the recalls and injections that
returned it (``memories.services.erasure``).
"""

from django.db import models


def estimate_tokens(characters: int) -> int:
    """Return a rough token count for this many characters (about 4 a token in English text)."""
    return (characters + 3) // 4


class HookRecall(models.Model):
    """One ``hooks/recall/`` answer: a block offered to a harness for a prompt."""

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200)
    harness = models.CharField(max_length=64, blank=True)
    hook = models.CharField(max_length=64, blank=True)
    session = models.CharField(max_length=200, blank=True)
    namespaces = models.JSONField(null=True, blank=True)
    query = models.TextField()
    hits = models.PositiveIntegerField()
    characters = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at", "-id"]


class RecalledMemory(models.Model):
    """One memory a hook recall found for its query: erasing the memory must find the query too.

    A plain id, not a foreign key, as in ``InjectedMemory``.
    """

    recall = models.ForeignKey(HookRecall, on_delete=models.CASCADE, related_name="items")
    memory_id = models.BigIntegerField(db_index=True)

    class Meta:
        verbose_name_plural = "recalled memories"
        ordering = ["recall_id", "id"]


class Injection(models.Model):
    """A harness's report (``hooks/report/``) that a block was actually put into a prompt."""

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200)
    harness = models.CharField(max_length=64)
    hook = models.CharField(max_length=64)
    session = models.CharField(max_length=200, blank=True)
    query = models.TextField(blank=True)
    characters = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at", "-id"]

    @property
    def tokens_estimate(self) -> int:
        return estimate_tokens(self.characters)


class InjectedMemory(models.Model):
    """One memory revision carried by an injection, and whether the answer that followed used it.

    Plain ids, not foreign keys: telemetry must never block an erase or a purge, and a
    report may name a memory that has since gone (it is then shown as gone).
    """

    injection = models.ForeignKey(Injection, on_delete=models.CASCADE, related_name="items")
    memory_id = models.BigIntegerField(db_index=True)
    revision_id = models.BigIntegerField(null=True, blank=True)
    # When an answer after the injection was found to use this memory (``hooks/used/``); null: not (yet).
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "injected memories"
        ordering = ["injection_id", "id"]


class RefusedIngest(models.Model):
    """A ``hooks/ingest/`` call refused because its text looked like a prompt injection.

    Only the pattern's name and the text's length are kept: the text itself is what
    was refused, so storing it here would store it after all.
    """

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200)
    harness = models.CharField(max_length=64, blank=True)
    hook = models.CharField(max_length=64, blank=True)
    session = models.CharField(max_length=200, blank=True)
    namespace = models.CharField(max_length=64)
    pattern = models.CharField(max_length=64)
    characters = models.PositiveIntegerField()

    class Meta:
        ordering = ["-at", "-id"]
