"""The Insight page's SVG plots (adapters/web/charts.py), read back as XML the way a browser
would: hostile tool names come out as text, bars are as long as their counts, the axes have
readable ticks, every plot is an accessible image without inline style, and nothing to plot
gives a "no data yet" image."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta

import pytest

from adapters.web.charts import (
    DayOutcomes,
    DayTimes,
    duration_label,
    duration_ticks,
    insight_svgs,
    outcomes_chart,
    time_to_decision_chart,
    tools_chart,
)
from runtime.approval.stats import ApprovalStats
from runtime.audit import AuditEntry

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script>"
DAY0 = date(2026, 11, 28)
MIN, HOUR = 60_000, 3_600_000


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element, cls: str) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == cls]


def marks(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == cls]


def y_labels(root: ET.Element) -> list[str]:
    """The y axis' labels, bottom up (the anchored-at-the-end tick labels)."""
    ticks = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    return [t.text or "" for t in sorted(ticks, key=lambda t: -float(t.get("y", "0")))]


def times(*pairs: tuple[float | None, float | None]) -> list[DayTimes]:
    return [DayTimes(DAY0 + timedelta(days=i), p50, p90) for i, (p50, p90) in enumerate(pairs)]


def test_a_hostile_tool_name_is_text_not_markup() -> None:
    svg = tools_chart([(HOSTILE, 3), ("a&b\"'>", 1)])
    assert "<script" not in svg and "&lt;script&gt;" in svg
    root = parse(svg)
    # cut to fit, whole (and escaped) in the bar's tooltip
    assert texts(root, "tick-label") == ["<script>alert(1)</scr…", "a&b\"'>"]
    assert [r.findtext(f"{SVG}title") for r in marks(root, "bar-tool")] == [
        f"{HOSTILE}: 3",
        "a&b\"'>: 1",
    ]
    assert not list(root.iter(f"{SVG}script"))
    # a NUL would make the SVG no XML at all; a bidi override would reorder what is read
    hidden = parse(tools_chart([("a\x00b\u202egnp", 1)]))
    assert texts(hidden, "tick-label") == ["a\\u0000b\\u202egnp"]


def test_insight_svgs_of_stats_with_a_hostile_tool() -> None:
    stats = ApprovalStats(since_ms=0)
    at = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)
    for i, tool in enumerate((HOSTILE, HOSTILE, "bash")):
        stats.add(_entry("approval_requested", at + i, f"a{i}", tool=tool, conversation="c"))
    stats.add(_entry("approval_decided", at + 30_000, "a0", decision="approved"))
    stats.add(_entry("approval_decided", at + 5 * MIN, "a1", decision="rejected"))
    stats.add(_entry("approval_expired", at + HOUR, "a2"))
    svgs = insight_svgs(stats)
    assert set(svgs) == {"time_to_decision", "requests_per_tool", "outcomes"}
    roots = {name: parse(svg) for name, svg in svgs.items()}
    assert all("<script" not in svg for svg in svgs.values())
    assert texts(roots["requests_per_tool"], "value-label") == ["2", "1"]
    assert texts(roots["requests_per_tool"], "tick-label")[0].startswith("<script>")
    outcomes = roots["outcomes"]
    outcome_titles = [
        m.findtext(f"{SVG}title")
        for outcome in ("approved", "rejected", "expired")
        for m in marks(outcomes, f"bar-{outcome}")
    ]
    assert outcome_titles == [
        "2026-12-01: 1 approved",
        "2026-12-01: 1 rejected",
        "2026-12-01: 1 expired",
    ]
    p50 = marks(roots["time_to_decision"], "point-p50")
    assert [p.findtext(f"{SVG}title") for p in p50] == [
        "2026-12-01: p50 3 min"
    ]  # of 30 s and 5 min


def _entry(event: str, at: int, approval: str, **fields: str) -> AuditEntry:
    return AuditEntry(id=f"{at}-0", at=at, event=event, fields={"approval": approval, **fields})


def test_bars_are_as_long_as_their_counts_most_first_top_n() -> None:
    counts = [("bash", 120), ("write", 40), ("edit", 30), ("mcp.x", 0)]
    root = parse(tools_chart(counts))
    widths = [float(r.get("width", "0")) for r in marks(root, "bar-tool")]
    assert len(widths) == 3  # a tool asked 0 times is no bar
    assert widths[0] / widths[1] == pytest.approx(3, rel=0.01)
    assert widths[0] / widths[2] == pytest.approx(4, rel=0.01)
    assert texts(root, "value-label") == ["120", "40", "30"]
    rows = [float(r.get("y", "0")) for r in marks(root, "bar-tool")]
    assert rows == sorted(rows)  # one row each, top down
    top2 = parse(tools_chart(counts, top=2))
    assert texts(top2, "tick-label") == ["bash", "write"]


def test_stacked_bars_per_day() -> None:
    days = [DayOutcomes(DAY0, 10, 5, 5), DayOutcomes(DAY0 + timedelta(days=1), 0, 0, 0)]
    days.append(DayOutcomes(DAY0 + timedelta(days=2), 37, 0, 0))
    root = parse(outcomes_chart(days))
    approved = marks(root, "bar-approved")
    (rejected,) = marks(root, "bar-rejected")
    (expired,) = marks(root, "bar-expired")
    heights = [float(r.get("height", "0")) for r in (*approved, rejected, expired)]
    assert heights[0] / heights[1] == pytest.approx(10 / 37, rel=0.01)
    assert heights[2] == heights[3] == pytest.approx(heights[0] / 2, rel=0.01)
    # stacked bottom up: approved, then rejected on it, then expired on that
    bottom = float(approved[0].get("y", "0"))
    assert float(rejected.get("y", "0")) + heights[2] == pytest.approx(bottom, abs=0.2)
    assert float(expired.get("y", "0")) + heights[3] == pytest.approx(
        float(rejected.get("y", "0")), abs=0.2
    )
    assert y_labels(root) == ["0", "10", "20", "30", "40"]
    assert texts(root, "tick-label")[-3:] == ["11-28", "11-29", "11-30"]
    assert texts(root, "legend") == ["approved", "rejected", "expired"]


def test_duration_axis_ticks_are_readable() -> None:
    assert [duration_label(ms) for ms in (100, 30_000, 5 * MIN, 2 * HOUR, 24 * HOUR)] == [
        "0.1 s",
        "30 s",
        "5 min",
        "2 h",
        "1 d",
    ]
    assert duration_ticks(5_000, 50 * MIN) == [5_000, 30_000, 5 * MIN, HOUR]
    assert duration_ticks(35_000, 35_000) == [30_000, MIN]  # an axis, even for one value
    assert duration_ticks(0, 300) == [100, 1000]
    assert len(duration_ticks(100, 10 * 24 * HOUR)) <= 7

    root = parse(time_to_decision_chart(times((35_000, 50 * MIN), (20_000, 2 * MIN))))
    assert y_labels(root) == ["10 s", "30 s", "5 min", "1 h"]
    (p50_day1, _), (p90_day1, _) = marks(root, "point-p50"), marks(root, "point-p90")
    assert float(p90_day1.get("cy", "0")) < float(p50_day1.get("cy", "0"))  # p90 drawn higher
    assert [p.findtext(f"{SVG}title") for p in marks(root, "point-p90")] == [
        "2026-11-28: p90 50 min",
        "2026-11-29: p90 2 min",
    ]


def test_a_day_without_decisions_breaks_the_lines() -> None:
    root = parse(time_to_decision_chart(times((10_000, 20_000), (None, None), (30_000, 40_000))))
    (p50,) = marks(root, "series-p50")
    assert p50.get("d", "").count("M") == 2 and p50.get("fill") == "none"
    assert len(marks(root, "point-p50")) == 2
    assert texts(root, "tick-label")[-3:] == ["11-28", "11-29", "11-30"]


def test_many_days_get_fewer_date_labels() -> None:
    root = parse(time_to_decision_chart(times(*[(10_000, 20_000)] * 30)))
    dates = [t for t in texts(root, "tick-label") if "-" in t]
    assert 4 <= len(dates) <= 8 and dates[0] == "11-28"


@pytest.mark.parametrize(
    "svg",
    [
        tools_chart([]),
        tools_chart([("bash", 0)]),
        outcomes_chart([]),
        outcomes_chart([DayOutcomes(DAY0, 0, 0, 0)]),
        time_to_decision_chart([]),
        time_to_decision_chart(times((None, None))),
        *insight_svgs(ApprovalStats(since_ms=0)).values(),
    ],
)
def test_nothing_to_plot_is_a_small_no_data_image(svg: str) -> None:
    root = parse(svg)
    assert texts(root, "no-data") == ["no data yet"]
    assert (root.get("aria-label") or "").endswith(": no data yet")


def test_every_plot_is_an_accessible_scalable_image_without_inline_style() -> None:
    svgs = [
        tools_chart([("bash", 2)]),
        outcomes_chart([DayOutcomes(DAY0, 1, 1, 1)]),
        time_to_decision_chart(times((1_000, 2_000))),
        tools_chart([]),
    ]
    for svg in svgs:
        root = parse(svg)
        assert root.get("role") == "img" and root.get("width") == "100%"
        assert root[0].tag == f"{SVG}title" and root[0].text == root.get("aria-label")
        assert root.get("viewBox", "").startswith("0 0 480 ")
        assert all(e.get("style") is None for e in root.iter())
        assert not list(root.iter(f"{SVG}style")) and "color" not in svg
