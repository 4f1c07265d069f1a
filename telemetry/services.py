"""Writing and deleting telemetry rows: hook recalls, injection reports, refused ingests.

Callers pass values they have already checked (``memories.services.hooks`` does, for the
hook endpoints). Rows hold ids, names, the query and counts, never memory text; they go
when they expire (``telemetry_purge``), and what names an erased memory, with the queries
that returned it, goes with it (``memory_traces_erase``).
"""

import datetime as dt

from django.db import transaction

from memoryproject import dialect
from memoryproject.metrics import TELEMETRY_EVENTS
from telemetry.models import HookRecall, InjectedMemory, Injection, RecalledMemory, RefusedIngest, estimate_tokens
from telemetry.records import InjectionRecord


def hook_recall_create(
    *,
    actor: str,
    harness: str,
    hook: str,
    session: str,
    namespaces: list[str] | None,
    query: str,
    hits: int,
    characters: int,
    memory_ids: list[int],
) -> int:
    """Record one ``hooks/recall/`` answer (its size and the memories recall found, never their text); return its id."""
    with transaction.atomic():
        row = HookRecall.objects.create(
            at=dialect.now(),
            actor=actor,
            harness=harness,
            hook=hook,
            session=session,
            namespaces=namespaces,
            query=query,
            hits=hits,
            characters=characters,
        )
        RecalledMemory.objects.bulk_create(RecalledMemory(recall=row, memory_id=memory_id) for memory_id in memory_ids)
    TELEMETRY_EVENTS.labels(kind="hook_recall").inc()
    return row.pk


def refused_ingest_create(
    *, actor: str, harness: str, hook: str, session: str, namespace: str, pattern: str, characters: int
) -> None:
    """Count one ingest refused for matching ``pattern``: its length is kept, never its text."""
    RefusedIngest.objects.create(
        at=dialect.now(),
        actor=actor,
        harness=harness,
        hook=hook,
        session=session,
        namespace=namespace,
        pattern=pattern,
        characters=characters,
    )
    TELEMETRY_EVENTS.labels(kind="refused_ingest").inc()


def injection_create(
    *, actor: str, harness: str, hook: str, session: str, query: str, characters: int, items: list[tuple[int, int]]
) -> InjectionRecord:
    """Record that a block of ``characters`` carrying these ``(memory_id, revision_id)`` pairs was injected."""
    with transaction.atomic():
        injection = Injection.objects.create(
            at=dialect.now(),
            actor=actor,
            harness=harness,
            hook=hook,
            session=session,
            query=query,
            characters=characters,
        )
        InjectedMemory.objects.bulk_create(
            InjectedMemory(injection=injection, memory_id=memory_id, revision_id=revision_id)
            for memory_id, revision_id in items
        )
    TELEMETRY_EVENTS.labels(kind="injection").inc()
    return InjectionRecord(
        id=injection.pk,
        at=injection.at,
        harness=harness,
        hook=hook,
        session=session,
        characters=characters,
        tokens_estimate=estimate_tokens(characters),
        memories=len(items),
    )


def injection_used_mark(*, injection_id: int, memory_ids: list[int]) -> int:
    """Mark these memories of an injection as used by the answer that followed, now; return how many were newly marked.

    An item marked before keeps its first time, so a boost counted at an earlier ``as_of`` never changes.
    """
    marked = InjectedMemory.objects.filter(
        injection_id=injection_id, memory_id__in=memory_ids, used_at__isnull=True
    ).update(used_at=dialect.now())
    if marked:
        TELEMETRY_EVENTS.labels(kind="injection_used").inc(marked)
    return marked


def memory_traces_erase(*, memory_id: int) -> int:
    """Blank the query of every hook recall and injection that returned this memory, and delete the items naming it.

    A query can say as much as the memory's text ("what is the vault code"). The rows themselves
    (when, which harness and hook, sizes) stay, so telemetry's totals do not change. Return
    how many rows had their query removed.
    """
    # The items' memory_id indexes find the rows; the filter on a join becomes "id IN (...)".
    removed = HookRecall.objects.filter(items__memory_id=memory_id).exclude(query="").update(query="")
    removed += Injection.objects.filter(items__memory_id=memory_id).exclude(query="").update(query="")
    RecalledMemory.objects.filter(memory_id=memory_id).delete()
    InjectedMemory.objects.filter(memory_id=memory_id).delete()
    return removed


@transaction.atomic
def telemetry_purge(*, before: dt.datetime) -> dict[str, int]:
    """Delete the hook recalls, injections and refused ingests older than ``before``; return counts by model."""
    counts = {}
    # Each model's index on ``at`` serves the range; an injection's items go with it (CASCADE).
    for model in (HookRecall, Injection, RefusedIngest):
        _, by_model = model.objects.filter(at__lt=before).delete()
        counts[model._meta.model_name] = by_model.get(model._meta.label, 0)
    return counts
