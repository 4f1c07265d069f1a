"""Dashboard pages: overview, time travel, a memory's timeline, telemetry. Rendered on the server.

Each page is for staff users holding the view permissions of what it shows, as the
admin's pages are: a staff user without them gets 403, as the admin gives.
"""

import datetime as dt
from dataclasses import dataclass

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import Http404
from django.shortcuts import render

from dashboard import timeseries
from dashboard.charts import Lane, Series, bar_chart, timeline_chart
from dashboard.forms import TimeTravelForm
from memories import selectors
from memories.models import Memory
from memories.records import RevisionRecord
from memories.selectors import memory_recall
from memories.selectors.conflicts import splits_of
from memoryproject import dialect
from memoryproject.exceptions import MemoryServiceError, NotFound
from memoryproject.timeparse import format_instant
from search.indexing import index_drift
from telemetry import selectors as telemetry_selectors

RECALL_LIMIT = 20
# The telemetry page's chart over time: (series name, DayActivity field).
OVER_TIME = [("recalls", "recalls"), ("injections", "injections"), ("refused ingests", "refused_ingests")]

# What each page shows. Telemetry names memories (titles, links to timelines), so it needs both.
MEMORIES = ["memories.view_memory"]
TELEMETRY = ["telemetry.view_hookrecall", "telemetry.view_injection", "telemetry.view_refusedingest", *MEMORIES]


def dashboard_page(permissions: list[str]):
    """Staff only (anyone else goes to the admin's login), then 403 without every one of ``permissions``."""

    def decorate(view):
        page = staff_member_required(permission_required(permissions, raise_exception=True)(view))
        page.permissions = permissions  # what the navigation checks before it links to the page
        return page

    return decorate


def _render(request, template: str, context: dict, *, status: int = 200):
    """Render a dashboard page; its navigation (``NAVIGATION``, after the pages) links those its user may open."""
    navigation = [(name, label) for name, label, page in NAVIGATION if request.user.has_perms(page.permissions)]
    return render(request, template, {**context, "navigation": navigation}, status=status)


@dashboard_page(MEMORIES)
def overview(request):
    now = dialect.now()  # the clock that stamps writes: a write another server just made counts
    stats = selectors.memory_stats()
    series = timeseries.time_series(selectors.memory_activity_per_day(), today=now.date())
    chart = bar_chart(
        title=f"Memories added and forgotten, per {series.unit}",
        labels=series.labels,
        series=series.series,
        x_label=f"{series.unit} (UTC)",
        y_label="memories",
    )
    return _render(
        request,
        "dashboard/overview.html",
        {
            "stats": stats,
            "namespace_kinds": selectors.namespace_kind_totals(now=now),
            "activity_chart": chart,
            "expiring": selectors.revisions_expiring_soon(now=now),
            "expiring_days": selectors.EXPIRING_DAYS,
            # Triggers and row counts only: the full FTS5 integrity check reads both indexes
            # whole (seconds at 100k memories) and is left to `manage.py doctor`.
            "drift": index_drift(full=False),
            "now": now,
        },
    )


@dashboard_page(MEMORIES)
def time_travel(request):
    form = TimeTravelForm(request.GET or None)
    result, error = None, None
    if form.is_bound and form.is_valid() and form.cleaned_data["query"]:
        data = form.cleaned_data
        try:
            # A person searching sees every ranked hit (min_score=0): holding back is for what agents are given.
            result = memory_recall(
                query=data["query"],
                namespace=data["namespace"] or None,
                mode=data["mode"],
                as_of=data["as_of"],
                valid_at=data["valid_at"],
                limit=RECALL_LIMIT,
                explain=True,
                min_score=0,
            )
        except MemoryServiceError as exc:
            # Errors name their field; unknown fields (or none) are shown above the form.
            if exc.field in form.fields:
                form.add_error(exc.field, exc.message)
            else:
                error = exc.message
    namespaces = Memory.objects.values_list("namespace", flat=True).distinct().order_by("namespace")
    status = 400 if form.errors or error else 200
    return _render(
        request,
        "dashboard/time_travel.html",
        {
            "form": form,
            "result": result,
            "error": error,
            "namespaces": list(namespaces),
            "as_of": format_instant(result.as_of) if result else None,
            "valid_at": format_instant(result.valid_at) if result else None,
        },
        status=status,
    )


@dataclass(frozen=True)
class Step:
    """One revision of a timeline with what followed it.

    ``ended_by`` is the revision that took over from an open one (a tombstone, or later text
    open-ended in valid time), or the restore that ended a forget; ``ends_at`` is when.
    ``restores`` is, for a restore, the revision it brought back. ``bounds``: a tombstone and the
    revision after it in the same instant narrow a fact's validity (a fact ended by a stated
    change, or a conflict split), not a forget and a restore. ``split``: (conflict id, boundary)
    when a conflict's split resolution wrote this revision.
    """

    revision: RevisionRecord
    ended_by: RevisionRecord | None = None
    ends_at: dt.datetime | None = None
    restores: int | None = None
    bounds: bool = False
    split: tuple[str, str] | None = None

    @property
    def split_words(self) -> str | None:
        """What a split resolution did here, in the words the timeline shows; None for anything else."""
        return f"split of conflict {self.split[0]} at {self.split[1]}" if self.split and self.bounds else None

    def lane(self) -> Lane:
        if self.revision.tombstone:
            return self._tombstone_lane()
        revision, known = self.revision, format_instant(self.revision.known_at)
        until = format_instant(revision.valid_to) or "open"
        if self.split_words:
            learned = f"{self.split_words}, at {known} (revision {self.restores}, from then on held only here)"
        elif self.bounds:
            learned = f"bounded at {known} (revision {self.restores}, from then on held only here)"
        elif self.restores:
            learned = f"restored at {known} (brings back revision {self.restores})"
        else:
            learned = f"known {known}"
        note = f"revision {revision.id}: {learned}; valid {format_instant(revision.valid_from)} to {until}"
        if self.ended_by:
            note += f"; replaced by revision {self.ended_by.id} at {format_instant(self.ends_at)}"
        label = (
            f"rev {revision.id} (split)"
            if self.split_words
            else f"rev {revision.id} (bounded)"
            if self.bounds
            else f"rev {revision.id} (restored)"
            if self.restores
            else f"rev {revision.id}"
        )
        return Lane(
            label=label,
            start=revision.valid_from,
            end=revision.valid_to or self.ends_at,
            at=revision.known_at,
            note=note,
            superseded=revision.valid_to is None and self.ended_by is not None,
            restore=self.restores is not None and not self.bounds,
        )

    def _tombstone_lane(self) -> Lane:
        revision, known = self.revision, format_instant(self.revision.known_at)
        if self.bounds:
            why = f"{self.split_words}: " if self.split_words else ""
            note = (
                f"revision {revision.id}: at {known}, {why}revision {revision.hides} holds only as revision "
                f"{self.ended_by.id} says"
            )
            label = f"rev {revision.id} ({'split' if self.split_words else 'bounds'})"
        else:
            note = f"revision {revision.id}: forgotten at {known} (hides revision {revision.hides})"
            label = f"rev {revision.id} (forgotten)"
        if revision.reason:
            note += f": {revision.reason}"
        if self.ended_by and not self.bounds:
            note += f"; restored by revision {self.ended_by.id} at {format_instant(self.ends_at)}"
        return Lane(label=label, start=None, end=self.ends_at, at=revision.known_at, tombstone=True, note=note)


def _takes_over(revision, later: list) -> tuple:
    """The first of ``later`` to take over from ``revision``, and when; (None, None) while nothing has.

    A restore ends a forget. An open revision ends at the next forget, or at the next text open-ended
    in valid time, from when that was learned (or from its valid_from, if later). A revision with a
    valid_to ends there, and a bounded correction replaces only its own interval: it ends nothing.
    """
    if revision.tombstone:
        restore = next((other for other in later if not other.tombstone), None)
        return (restore, restore.known_at) if restore else (None, None)
    if revision.valid_to is not None:
        return None, None
    for other in later:
        if other.tombstone:
            return other, other.known_at
        if other.valid_to is None:
            return other, max(other.known_at, other.valid_from)
    return None, None


def timeline_steps(revisions: list, splits: dict[int, tuple[str, str]] | None = None) -> list[Step]:
    """Each revision of a history (oldest first) with what took over from it, and, for a restore, what it restored.

    ``splits``: the revisions a conflict's split wrote (``splits_of``), so they read as that split.
    """
    splits = splits or {}
    steps = []
    for index, revision in enumerate(revisions):
        ended_by, ends_at = _takes_over(revision, revisions[index + 1 :])
        before = revisions[index - 1] if index else None
        restores = before.hides if before is not None and before.tombstone and not revision.tombstone else None
        # A tombstone and a revision in one instant: the fact's validity narrowed (memory_end, a split).
        bounds = (restores is not None and before.known_at == revision.known_at) or (
            revision.tombstone and ended_by is not None and ends_at == revision.known_at
        )
        steps.append(
            Step(
                revision=revision,
                ended_by=ended_by,
                ends_at=ends_at,
                restores=restores,
                bounds=bounds,
                split=splits.get(revision.id),
            )
        )
    return steps


@dashboard_page(MEMORIES)
def timeline(request, memory_id: int):
    now = dialect.now()
    try:
        revisions = selectors.memory_history(memory_id=memory_id)
    except NotFound as exc:
        raise Http404(exc.message) from None
    memory = Memory.objects.prefetch_related("tags").get(pk=memory_id)
    shown = selectors.visible_revision(memory=memory, as_of=now)
    steps = timeline_steps(revisions, splits_of(memory_id=memory_id))
    chart = timeline_chart(
        title=f"Revisions of memory {memory.pk} ({memory.namespace}/{memory.key})",
        lanes=[step.lane() for step in steps],
        now=now,
    )
    return _render(
        request,
        "dashboard/timeline.html",
        {
            "memory": memory,
            "steps": list(reversed(steps)),
            "chart": chart,
            "shown_id": shown.pk if shown else None,
            "now": now,
        },
    )


@dashboard_page(TELEMETRY)
def telemetry(request):
    today = dialect.now().date()
    days = telemetry_selectors.activity_per_day(days=None, today=today)
    series = timeseries.time_series(
        {name: {row.day: getattr(row, field) for row in days} for name, field in OVER_TIME}, today=today
    )
    hooks = telemetry_selectors.activity_per_hook()
    # A short title: the legend names the three series on the same line.
    over_time = bar_chart(
        title=f"Hook events, per {series.unit}",
        labels=series.labels,
        series=series.series,
        x_label=f"{series.unit} (UTC)",
        y_label="events",
    )
    by_hook = bar_chart(
        title="Characters offered and injected, per harness and hook",
        labels=[f"{row.harness or '—'} / {row.hook or '—'}" for row in hooks],
        series=[
            Series("offered by recall", [row.recall_characters for row in hooks]),
            Series("injected", [row.characters for row in hooks]),
        ],
        x_label="harness / hook",
        y_label="characters",
    )
    top = telemetry_selectors.most_injected_memories()
    latest = telemetry_selectors.latest_injections()
    labels = selectors.memory_labels(
        {row.memory_id for row in top} | {memory_id for injection in latest for memory_id in injection.memory_ids}
    )
    return _render(
        request,
        "dashboard/telemetry.html",
        {
            "totals": telemetry_selectors.telemetry_totals(),
            "hooks": hooks,
            "over_time_chart": over_time,
            "by_hook_chart": by_hook,
            "most_injected": [
                {"memory_id": row.memory_id, "injections": row.injections, **labels[row.memory_id]} for row in top
            ],
            "latest": [
                {
                    "injection": injection,
                    "items": [
                        {"memory_id": memory_id, "revision_id": revision_id, **labels[memory_id]}
                        for memory_id, revision_id in zip(injection.memory_ids, injection.revision_ids)
                    ],
                }
                for injection in latest
            ],
        },
    )


# The top navigation, in order (the admin's link follows, for every staff user).
NAVIGATION = [
    ("dashboard:overview", "Overview", overview),
    ("dashboard:time_travel", "Time travel", time_travel),
    ("dashboard:telemetry", "Telemetry", telemetry),
]
