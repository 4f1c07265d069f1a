"""Writing and deleting telemetry rows: hook recalls, injection reports, refused ingests.

Callers pass values they have already checked (``memories.services.hooks`` does, for the
hook endpoints). Rows hold ids, names, the query and counts, never memory text; they go
when they expire (``telemetry_purge``) or when the memory they name is erased
(``injected_memory_erase``).
"""

import datetime as dt

from django.db import transaction
from django.utils import timezone

from telemetry.models import HookRecall, InjectedMemory, Injection, RefusedIngest, estimate_tokens
from telemetry.records import InjectionRecord


def hook_recall_create(*, actor: str, harness: str, hook: str, session: str, namespaces: list[str] | None,
                       query: str, hits: int, characters: int) -> int:
    """Record one ``hooks/recall/`` answer (its size, never its text); return the row's id."""
    row = HookRecall.objects.create(at=timezone.now(), actor=actor, harness=harness, hook=hook, session=session,
                                    namespaces=namespaces, query=query, hits=hits, characters=characters)
    return row.pk


def refused_ingest_create(*, actor: str, harness: str, hook: str, session: str, namespace: str, pattern: str,
                          characters: int) -> None:
    """Count one ingest refused for matching ``pattern``: its length is kept, never its text."""
    RefusedIngest.objects.create(at=timezone.now(), actor=actor, harness=harness, hook=hook, session=session,
                                 namespace=namespace, pattern=pattern, characters=characters)


def injection_create(*, actor: str, harness: str, hook: str, session: str, query: str, characters: int,
                     items: list[tuple[int, int]]) -> InjectionRecord:
    """Record that a block of ``characters`` carrying these ``(memory_id, revision_id)`` pairs was injected."""
    with transaction.atomic():
        injection = Injection.objects.create(at=timezone.now(), actor=actor, harness=harness, hook=hook,
                                             session=session, query=query, characters=characters)
        InjectedMemory.objects.bulk_create(
            InjectedMemory(injection=injection, memory_id=memory_id, revision_id=revision_id)
            for memory_id, revision_id in items
        )
    return InjectionRecord(id=injection.pk, at=injection.at, harness=harness, hook=hook, session=session,
                           characters=characters, tokens_estimate=estimate_tokens(characters), memories=len(items))


def injected_memory_erase(*, memory_id: int) -> None:
    """Delete the injection items that name this memory; the reports themselves (harness, size) stay."""
    InjectedMemory.objects.filter(memory_id=memory_id).delete()


@transaction.atomic
def telemetry_purge(*, before: dt.datetime) -> dict[str, int]:
    """Delete the hook recalls, injections and refused ingests older than ``before``; return counts by model."""
    counts = {}
    # Each model's index on ``at`` serves the range; an injection's items go with it (CASCADE).
    for model in (HookRecall, Injection, RefusedIngest):
        _, by_model = model.objects.filter(at__lt=before).delete()
        counts[model._meta.model_name] = by_model.get(model._meta.label, 0)
    return counts
