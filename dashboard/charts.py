"""Charts as inline SVG, drawn on the server: they need no JavaScript, no CDN and no canvas.

Every piece of text that reaches the markup goes through ``format_html`` (escaped);
numbers are formatted by this module. Colours come from the stylesheet
(``static/dashboard/dashboard.css``) through the ``series-N`` classes.
"""

import datetime as dt
import math
from dataclasses import dataclass

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

# Room around the plot for the axis labels and the title, in SVG user units.
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 36, 44
_SERIES_CLASSES = 4
_STEPS = 4
# Wider bars than this read as areas, not bars.
_BAR_MAX = 36
# A timeline's lanes: the height of each, and the room left of them for their labels.
_LANE_HEIGHT = 28
_LANE_LABELS = 150


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]


def axis_step(peak: float, *, steps: int = 4) -> float:
    """Return the gap between gridlines: a whole 1, 2 or 5 times a power of ten, ``steps`` of which reach ``peak``.

    The charts count things, so a step is never a fraction (no gridline at 1.5 events).
    """
    wanted = max(peak / steps, 1)
    power = 10 ** math.floor(math.log10(wanted))
    for multiple in (1, 2, 5, 10):
        if multiple * power >= wanted:
            return multiple * power
    return 10 * power  # not reached: 10 * power >= wanted always


def _svg(template: str, *args) -> SafeString:
    """Return ``format_html`` of ``args`` with float coordinates written to a tenth of a unit."""
    return format_html(template, *(f"{arg:.1f}" if isinstance(arg, float) else arg for arg in args))


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _frame(*, width: int, height: int, title: str, body, description: str) -> SafeString:
    return _svg(
        '<svg class="chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}" '
        'xmlns="http://www.w3.org/2000/svg"><title>{}</title><desc>{}</desc>'
        '<text class="chart-title" x="{}" y="20">{}</text>{}</svg>',
        width,
        height,
        width,
        height,
        title,
        title,
        description,
        _LEFT,
        title,
        body,
    )


def _y_axis(*, top: float, plot_height: float, width: int, step: float, label: str) -> SafeString:
    ticks = []
    for index in range(_STEPS + 1):
        value = step * index
        y = top + plot_height - plot_height * index / _STEPS
        ticks.append(
            _svg(
                '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>',
                _LEFT,
                y,
                width - _RIGHT,
                y,
                _LEFT - 6,
                y + 4,
                _number(value),
            )
        )
    middle = top + plot_height / 2
    return _svg(
        '{}<text class="axis-label" x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>',
        mark_safe("".join(ticks)),
        middle,
        middle,
        label,
    )


def bar_chart(
    *,
    title: str,
    labels: list[str],
    series: list[Series],
    x_label: str,
    y_label: str,
    width: int = 720,
    height: int = 260,
) -> SafeString:
    """Return a grouped bar chart: one group per label, one bar per series, with axes, legend and title."""
    plot_width = width - _LEFT - _RIGHT
    plot_height = height - _TOP - _BOTTOM
    top = _TOP
    peak = max((value for entry in series for value in entry.values), default=0)
    step = axis_step(peak, steps=_STEPS)
    parts = [_y_axis(top=top, plot_height=plot_height, width=width, step=step, label=y_label)]
    baseline = top + plot_height
    slot = plot_width / max(len(labels), 1)
    parts += _bars(labels, series, slot=slot, baseline=baseline, plot_height=plot_height, ceiling=step * _STEPS)
    parts += _group_labels(labels, slot=slot, baseline=baseline)
    parts.append(
        _svg('<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>', _LEFT, baseline, width - _RIGHT, baseline)
    )
    parts.append(
        _svg(
            '<text class="axis-label" x="{}" y="{}" text-anchor="middle">{}</text>',
            _LEFT + plot_width / 2,
            height - 6,
            x_label,
        )
    )
    if not labels or peak <= 0:
        parts.append(
            _svg(
                '<text class="empty" x="{}" y="{}" text-anchor="middle">{}</text>',
                _LEFT + plot_width / 2,
                top + plot_height / 2,
                "No data yet",
            )
        )
    parts.append(_legend(series, x=width - _RIGHT))
    description = "; ".join(
        f"{entry.name}: " + ", ".join(f"{label} {_number(value)}" for label, value in zip(labels, entry.values))
        for entry in series
    )
    return _frame(width=width, height=height, title=title, body=mark_safe("".join(parts)), description=description)


def _bars(
    labels: list[str], series: list[Series], *, slot: float, baseline: float, plot_height: float, ceiling: float
) -> list[SafeString]:
    """One bar per series and label with a value above zero, side by side in the label's slot."""
    bar_width = min(max(slot * 0.8 / max(len(series), 1), 1), _BAR_MAX)
    # The bars of a group sit in the middle of its slot.
    group_offset = (slot - bar_width * len(series)) / 2
    bars = []
    for group, label in enumerate(labels):
        for index, entry in enumerate(series):
            value = entry.values[group]
            if value <= 0:
                continue
            bar_height = max(plot_height * value / ceiling, 1)
            x = _LEFT + slot * group + group_offset + bar_width * index
            bars.append(
                _svg(
                    '<rect class="bar series-{}" x="{}" y="{}" width="{}" height="{}"><title>{}: {} {}</title></rect>',
                    index % _SERIES_CLASSES,
                    x,
                    baseline - bar_height,
                    bar_width,
                    bar_height,
                    label,
                    _number(value),
                    entry.name,
                )
            )
    return bars


def _group_labels(labels: list[str], *, slot: float, baseline: float) -> list[SafeString]:
    # About eight labels fit under the axis; the others are named by their bar's tooltip.
    every = max(1, math.ceil(len(labels) / 8))
    return [
        _svg(
            '<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>',
            _LEFT + slot * (group + 0.5),
            baseline + 16,
            label,
        )
        for group, label in enumerate(labels)
        if group % every == 0
    ]


def _legend(series: list[Series], *, x: float) -> SafeString:
    if len(series) < 2:
        return mark_safe("")
    entries = []
    for index, entry in enumerate(reversed(series)):
        position = len(series) - 1 - index
        right = x - index * 110
        entries.append(
            _svg(
                '<rect class="swatch series-{}" x="{}" y="10" width="10" height="10"/>'
                '<text class="legend" x="{}" y="19">{}</text>',
                position % _SERIES_CLASSES,
                right - 100,
                right - 86,
                entry.name,
            )
        )
    return mark_safe("".join(entries))


@dataclass(frozen=True)
class Lane:
    """One row of a timeline: a bar from ``start`` to ``end`` (None: still open) and a mark at ``at``.

    A tombstone's band runs from ``at`` to ``end`` (its restore), or on to the edge while it still holds.
    """

    label: str
    start: dt.datetime | None
    end: dt.datetime | None
    at: dt.datetime
    tombstone: bool = False
    note: str = ""
    superseded: bool = False  # the bar ends where a later revision took over
    restore: bool = False  # this revision brought a forgotten memory back


def _time_label(moment: dt.datetime, span: dt.timedelta) -> str:
    if span <= dt.timedelta(days=2):
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%Y-%m-%d")


@dataclass(frozen=True)
class _TimeAxis:
    """A timeline's time axis: ``first`` at x ``left``, ``last`` at ``left + width``."""

    first: dt.datetime
    last: dt.datetime
    left: float
    width: float

    @property
    def span(self) -> dt.timedelta:
        return self.last - self.first

    def x_of(self, moment: dt.datetime) -> float:
        return self.left + self.width * ((moment - self.first) / self.span)


def _time_axis(lanes: list[Lane], now: dt.datetime, *, left: float, width: float) -> _TimeAxis:
    """The axis from the earliest to the latest moment of the lanes and now, with a little room either side."""
    moments = (
        [now]
        + [lane.at for lane in lanes]
        + [lane.start for lane in lanes if lane.start]
        + [lane.end for lane in lanes if lane.end]
    )
    first, last = min(moments), max(moments)
    span = last - first or dt.timedelta(minutes=1)
    # A little room either side so that a dot on the edge is whole.
    return _TimeAxis(first=first - span * 0.02, last=last + span * 0.02, left=left, width=width)


def timeline_chart(*, title: str, lanes: list[Lane], now: dt.datetime, width: int = 900) -> SafeString:
    """Return lanes on a shared time axis: validity intervals as bars, the moment each was learned as a dot.

    A tombstone has no validity of its own: it is a red band from the moment it was learned
    until the memory was restored, or on while it is still forgotten.
    """
    height = _TOP + _LANE_HEIGHT * max(len(lanes), 1) + _BOTTOM
    left = _LANE_LABELS
    plot_width = width - left - _RIGHT
    axis = _time_axis(lanes, now, left=left, width=plot_width)
    parts = [*_time_grid(axis, height=height), _now_line(axis, now, height=height)]
    for row, lane in enumerate(lanes):
        parts.append(_lane(axis, lane, y=_TOP + row * _LANE_HEIGHT))
    parts.append(
        _svg(
            '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>',
            left,
            height - _BOTTOM,
            width - _RIGHT,
            height - _BOTTOM,
        )
    )
    parts.append(
        _svg(
            '<text class="axis-label" x="{}" y="{}" text-anchor="middle">time (UTC): bar = valid interval, '
            "dot = when it was learned (known_at)</text>",
            left + plot_width / 2,
            height - 6,
        )
    )
    description = "; ".join(lane.note for lane in lanes)
    return _frame(width=width, height=height, title=title, body=mark_safe("".join(parts)), description=description)


def _time_grid(axis: _TimeAxis, *, height: int) -> list[SafeString]:
    """A gridline and a time label at each of the axis's steps."""
    lines = []
    for index in range(_STEPS + 1):
        moment = axis.first + axis.span * index / _STEPS
        x = axis.x_of(moment)
        # The end labels align inwards so that they are not cut at the edges.
        anchor = "start" if index == 0 else "end" if index == _STEPS else "middle"
        lines.append(
            _svg(
                '<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                '<text class="tick" x="{}" y="{}" text-anchor="{}">{}</text>',
                x,
                _TOP,
                x,
                height - _BOTTOM,
                x,
                height - _BOTTOM + 16,
                anchor,
                _time_label(moment, axis.span),
            )
        )
    return lines


def _now_line(axis: _TimeAxis, now: dt.datetime, *, height: int) -> SafeString:
    now_x = axis.x_of(now)
    return _svg(
        '<line class="now" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="tick now-label" x="{}" y="{}" text-anchor="middle">now</text>',
        now_x,
        _TOP - 4,
        now_x,
        height - _BOTTOM,
        now_x,
        _TOP - 6,
    )


def _lane(axis: _TimeAxis, lane: Lane, *, y: float) -> SafeString:
    """One lane at ``y``: its label, its band (validity or tombstone), the dot at ``at`` and a restore's word."""
    middle = y + _LANE_HEIGHT / 2
    parts = [
        _svg(
            '<text class="lane-label" x="{}" y="{}" text-anchor="end">{}</text>', axis.left - 8, middle + 4, lane.label
        )
    ]
    band = _lane_band(axis, lane, y=y)
    if band is not None:
        parts.append(band)
    mark = " tombstone-mark" if lane.tombstone else " restore-mark" if lane.restore else ""
    parts.append(
        _svg(
            '<circle class="known{}" cx="{}" cy="{}" r="5"><title>{}</title></circle>',
            mark,
            axis.x_of(lane.at),
            middle,
            lane.note,
        )
    )
    if lane.restore:
        # The word goes left of the dot (a restore is usually near now, the right edge) when it fits there.
        x, fits_left = axis.x_of(lane.at), axis.x_of(lane.at) - 70 > axis.left
        parts.append(
            _svg(
                '<text class="mark-label restore-label" x="{}" y="{}" text-anchor="{}">restored</text>',
                x - 9 if fits_left else x + 9,
                middle + 4,
                "end" if fits_left else "start",
            )
        )
    return mark_safe("".join(parts))


def _lane_band(axis: _TimeAxis, lane: Lane, *, y: float) -> SafeString | None:
    """A tombstone's red band, or a revision's validity bar; None for a revision without a start."""
    if lane.tombstone:
        x = axis.x_of(lane.at)
        end = axis.x_of(lane.end) if lane.end else axis.x_of(axis.last)
        return _svg(
            '<rect class="tombstone{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
            " restored" if lane.end else "",
            x,
            y + 6,
            max(end - x, 2),
            _LANE_HEIGHT - 12,
            lane.note,
        )
    if lane.start is not None:
        start = axis.x_of(lane.start)
        end = axis.x_of(lane.end) if lane.end else axis.x_of(axis.last)
        return _svg(
            '<rect class="validity{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
            " superseded" if lane.superseded else "" if lane.end else " open",
            start,
            y + 6,
            max(end - start, 2),
            _LANE_HEIGHT - 12,
            lane.note,
        )
    return None
