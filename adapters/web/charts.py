"""The Insight page's plots, drawn on the server as SVG markup (no plotting library, no script):
time to decision per day (p50 and p90 lines), requests per tool (horizontal bars, top N) and
how each day's requests ended (stacked bars: approved, rejected, expired).

Each plot is one `<svg role="img">` with a `<title>` and an `aria-label`, a fixed viewBox and
`width="100%"` (it scales down to a phone), and no colour of its own: every mark carries a
class (`series-p50`, `bar-approved`, … see static/charts.css) since the console's CSP allows
no inline style. Every text that comes from data (tool names) is shown as notices show it
(runtime/redact.py: hidden characters escaped) and XML-escaped here, so the markup can be put in
a page as it is; nothing to plot gives a small "no data yet" image.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

from runtime.approval.stats import ApprovalStats, wait_text
from runtime.redact import shown

WIDTH = 480  # viewBox units; text is 12 of them, about 9 px on a 360 px wide phone
HEIGHT = 240
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 28, 36  # room for the y ticks, the legend, the x labels
ROW = 22  # one bar of the per-tool chart
LABEL_CHARS = 22  # a longer tool name is cut with "…" (whole in the bar's tooltip)
TOP_TOOLS = 10
MAX_X_LABELS = 8
SECOND_MS = 1000
MAX_Y_TICKS = 6
# Ticks of the duration axis, which is logarithmic (waits run from seconds to days): round
# figures as people say them. A shorter wait is drawn at the first.
DURATION_TICKS_MS = [100, 1000, 5000, 10_000, 30_000] + [
    minutes * 60_000 for minutes in (1, 5, 10, 30, 60, 120, 360, 720, 1440, 2880, 10_080)
]
UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", SECOND_MS))


@dataclass(frozen=True, slots=True)
class DayTimes:
    """One day's time to decision, ms (None: nothing decided that day)."""

    day: date
    p50_ms: float | None
    p90_ms: float | None


@dataclass(frozen=True, slots=True)
class DayOutcomes:
    day: date
    approved: int
    rejected: int
    expired: int


def insight_svgs(stats: ApprovalStats, top: int = TOP_TOOLS) -> dict[str, str]:
    """The Insight page's three plots of `stats`, by name: `time_to_decision`,
    `requests_per_tool`, `outcomes`. The suggestions are text: `stats.suggestions`."""
    days = stats.daily()
    per_tool: dict[str, int] = {}
    for signature, tally in stats.by_signature.items():
        per_tool[signature.tool] = per_tool.get(signature.tool, 0) + tally.requests
    return {
        "time_to_decision": time_to_decision_chart(
            [DayTimes(d, t.median_ms, t.p90_ms) for d, t in days]
        ),
        "requests_per_tool": tools_chart(
            sorted(per_tool.items(), key=lambda item: (-item[1], item[0])), top
        ),
        "outcomes": outcomes_chart(
            [DayOutcomes(d, t.approved, t.rejected, t.expired) for d, t in days]
        ),
    }


def time_to_decision_chart(days: Sequence[DayTimes]) -> str:
    """p50 and p90 of time to decision per day: two lines over a duration axis. A day with
    nothing decided breaks the lines; each point has its figure as a tooltip."""
    title = "Time to decision per day (p50 and p90)"
    known = [ms for d in days for ms in (d.p50_ms, d.p90_ms) if ms is not None]
    if not known:
        return no_data(title)
    ticks = duration_ticks(min(known), max(known))
    low, high = math.log(ticks[0]), math.log(ticks[-1])
    plot = _Plot(len(days), high - low)

    def y(ms: float) -> str:  # a shorter wait than the lowest tick is drawn on it
        return _n(plot.y(math.log(max(ms, ticks[0])) - low))

    marks = [*plot.y_axis([(math.log(t) - low, duration_label(t)) for t in ticks])]
    marks += plot.x_labels(days)
    series = {"p50": [d.p50_ms for d in days], "p90": [d.p90_ms for d in days]}
    for name, values in series.items():
        path, pen = [], "M"
        for i, ms in enumerate(values):
            if ms is None:
                pen = "M"
                continue
            path.append(f"{pen}{_n(plot.x(i))} {y(ms)}")
            pen = "L"
        marks.append(f'<path class="series-{name}" fill="none" d="{" ".join(path)}"/>')
        marks += [
            f'<circle class="point-{name}" cx="{_n(plot.x(i))}" cy="{y(ms)}" r="3">'
            f"<title>{d.day.isoformat()}: {name} {wait_text(ms)}</title></circle>"
            for i, (d, ms) in enumerate(zip(days, values, strict=True))
            if ms is not None
        ]
    marks.append(_legend([("series-p50", "p50"), ("series-p90", "p90")]))
    return _svg(title, HEIGHT, marks)


def tools_chart(counts: Sequence[tuple[str, int]], top: int = TOP_TOOLS) -> str:
    """Requests per tool, most first: the `top` first of `counts` as horizontal bars, each
    as long as its count against the largest, the count at its end."""
    title = "Requests per tool"
    # a name that hides characters (or has some XML cannot hold) shows them escaped
    bars = [(shown(tool), n) for tool, n in counts if n > 0][:top]
    if not bars:
        return no_data(title)
    most = max(n for _, n in bars)
    label_w = 8 + 7 * min(LABEL_CHARS, max(len(tool) for tool, _ in bars))
    span = WIDTH - label_w - RIGHT - 40  # room for the count after the longest bar
    marks = []
    for row, (tool, n) in enumerate(bars):
        y = TOP + row * ROW
        name = tool if len(tool) <= LABEL_CHARS else tool[: LABEL_CHARS - 1] + "…"
        marks += [
            f'<text class="tick-label" x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
            f"{escape(name)}</text>",
            f'<rect class="bar-tool" x="{label_w}" y="{y + 3}" width="{_n(span * n / most)}" '
            f'height="{ROW - 6}"><title>{escape(tool)}: {n}</title></rect>',
            f'<text class="value-label" x="{_n(label_w + span * n / most + 4)}" y="{y + 15}">'
            f"{n}</text>",
        ]
    return _svg(title, TOP + len(bars) * ROW + 8, marks)


def outcomes_chart(days: Sequence[DayOutcomes]) -> str:
    """How each day's requests ended: approved, rejected and expired stacked in one bar."""
    title = "Approved, rejected and expired per day"
    most = max((d.approved + d.rejected + d.expired for d in days), default=0)
    if not most:
        return no_data(title)
    step = _count_step(most)
    plot = _Plot(len(days), step * math.ceil(most / step))
    ticks = range(0, int(plot.top) + 1, step)
    marks = [*plot.y_axis([(t, str(t)) for t in ticks]), *plot.x_labels(days)]
    bar_w = max(2.0, min(32.0, plot.slot * 0.7))
    for i, d in enumerate(days):
        base = 0
        for outcome, n in (
            ("approved", d.approved),
            ("rejected", d.rejected),
            ("expired", d.expired),
        ):
            if not n:
                continue
            y_low, y_high = plot.y(base), plot.y(base + n)
            marks.append(
                f'<rect class="bar-{outcome}" x="{_n(plot.x(i) - bar_w / 2)}" y="{_n(y_high)}" '
                f'width="{_n(bar_w)}" height="{_n(y_low - y_high)}">'
                f"<title>{d.day.isoformat()}: {n} {outcome}</title></rect>"
            )
            base += n
    legend = [
        ("bar-approved", "approved"),
        ("bar-rejected", "rejected"),
        ("bar-expired", "expired"),
    ]
    marks.append(_legend(legend))
    return _svg(title, HEIGHT, marks)


def no_data(title: str) -> str:
    """A small image in place of a plot with nothing to show."""
    text = '<text class="no-data" x="50%" y="50%" text-anchor="middle">no data yet</text>'
    return _svg(title, 60, [text], label=f"{title}: no data yet")


def duration_ticks(shortest: float, longest: float) -> list[int]:
    """The duration axis from the tick at or below `shortest` to the one at or above
    `longest` (two at least), with the ticks between that are at least 1/MAX_Y_TICKS of the
    axis from their neighbours (labels that would crowd are left out)."""
    ladder = DURATION_TICKS_MS
    low = max((i for i, t in enumerate(ladder) if t <= shortest), default=0)
    low = min(low, len(ladder) - 2)
    high = max(next((i for i, t in enumerate(ladder) if t >= longest), len(ladder) - 1), low + 1)
    gap = math.log(ladder[high] / ladder[low]) / MAX_Y_TICKS
    kept = [ladder[low]]
    for tick in ladder[low + 1 : high]:
        if min(math.log(tick / kept[-1]), math.log(ladder[high] / tick)) >= gap:
            kept.append(tick)
    return [*kept, ladder[high]]


def duration_label(ms: float) -> str:
    """A tick of the duration axis in the largest unit it is a whole number of: `30 s`,
    `5 min`, `2 h`, `1 d` (`0.1 s` below a second)."""
    for unit, size in UNITS:
        if ms % size == 0:
            return f"{int(ms // size)} {unit}"
    return wait_text(ms)


def _count_step(most: int) -> int:
    """1, 2, 5, 10, 20, 50… : the smallest giving at most five ticks above zero."""
    for power in range(0, 12):
        for mantissa in (1, 2, 5):
            step: int = mantissa * 10**power
            if most <= 5 * step:
                return step
    return 10**12


class _Plot:
    """Where things go in the plot area: `slots` days across, 0 to `top` up."""

    def __init__(self, slots: int, top: float) -> None:
        self.slots, self.top = slots, top
        self.slot = (WIDTH - LEFT - RIGHT) / max(1, slots)

    def x(self, i: int) -> float:
        return LEFT + self.slot * (i + 0.5)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * value / self.top

    def y_axis(self, ticks: list[tuple[float, str]]) -> list[str]:
        """The x axis line, and a grid line with its label at each tick (value, label)."""
        marks = [
            f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
            f'y2="{HEIGHT - BOTTOM}"/>'
        ]
        for value, label in ticks:
            y = _n(self.y(value))
            if value:
                marks.append(
                    f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}"/>'
                )
            marks.append(
                f'<text class="tick-label" x="{LEFT - 6}" y="{y}" text-anchor="end" '
                f'dominant-baseline="middle">{escape(label)}</text>'
            )
        return marks

    def x_labels(self, days: Sequence[DayTimes | DayOutcomes]) -> list[str]:
        """Every day's month and day, or every few days' when they would not fit."""
        every = math.ceil(len(days) / MAX_X_LABELS)
        return [
            f'<text class="tick-label" x="{_n(self.x(i))}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{escape(d.day.strftime("%m-%d"))}</text>'
            for i, d in enumerate(days)
            if i % every == 0
        ]


def _legend(items: list[tuple[str, str]]) -> str:
    parts = []
    for n, (cls, name) in enumerate(items):
        x = LEFT + n * 90
        parts.append(
            f'<rect class="{cls} legend-swatch" x="{x}" y="8" width="12" height="12"/>'
            f'<text class="legend" x="{x + 16}" y="18">{escape(name)}</text>'
        )
    return f'<g class="legend">{"".join(parts)}</g>'


def _svg(title: str, height: int, marks: list[str], label: str | None = None) -> str:
    label = escape(label or title)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="{label}" '
        f'viewBox="0 0 {WIDTH} {height}" width="100%" preserveAspectRatio="xMidYMid meet" '
        f'font-size="12"><title>{label}</title>{"".join(marks)}</svg>'
    )


def _n(value: float) -> str:
    """A coordinate: one decimal at most (the markup stays short)."""
    return f"{value:.1f}".removesuffix(".0")
