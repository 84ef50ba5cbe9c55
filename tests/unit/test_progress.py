"""The working message's preview of an answer being written: when it shows, what it says,
and how the message's other changes keep their distance from it (a fake clock)."""

from __future__ import annotations

import pytest

from adapters.progress import PREVIEW_CHARS, Progress, Show, Style
from runtime.channel import RunFinished, ToolFinished, ToolStarted, Writing
from runtime.models import StopReason, ToolStatus

STYLE = Style(
    marks={ToolStatus.COMPLETED: "ok"},
    running="..",
    line=lambda mark, tool, text: f"{mark} {tool} {text}",
    heading="Working",
    footer=lambda stop: f"[{stop}]",
    escape=lambda text: text.replace("<", "&lt;"),
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(clock: Clock) -> Progress:
    return Progress(STYLE, interval=1.0, clock=clock)


def shown(p: Progress, show: Show | None) -> Show:
    assert show is not None
    if show.working.ref is None:
        show.working.ref = "m1"
    p.shown(show)
    return show


def test_a_quick_answer_shows_no_preview(clock: Clock) -> None:
    p = make(clock)
    for text in ("He", "Hello", "Hello there"):
        assert p.apply("t", Writing(text)) is None
        clock.now += 0.3
    assert p.apply("t", RunFinished(StopReason.FINAL, 1)) is None  # nothing was posted


def test_the_preview_is_throttled_and_leaves_at_the_end(clock: Clock) -> None:
    p = make(clock)
    assert p.apply("t", Writing("   ")) is None  # nothing to show yet: no clock started
    clock.now += 5
    assert p.apply("t", Writing("Once")) is None  # writing for 0 s
    clock.now += 1.0
    first = shown(p, p.apply("t", Writing("Once upon <a>")))
    assert first.preview and first.wait == 0
    assert first.text == "Working\nOnce upon &lt;a>"
    clock.now += 0.5
    assert p.apply("t", Writing("Once upon a time")) is None  # within the interval
    clock.now += 0.5
    second = shown(p, p.apply("t", Writing("Once upon a time there")))
    assert second.text == "Working\nOnce upon a time there"
    clock.now += 1.0
    assert p.apply("t", Writing("Once upon a time there")) is None  # nothing new
    clock.now += 0.25
    end = p.apply("t", RunFinished(StopReason.FINAL, 1))
    assert end is not None and end.text == "[Done]" and not end.preview
    assert end.wait == pytest.approx(0.0)  # the last edit was 1.25 s ago
    assert end.working.ref == "m1"


def test_the_edit_after_a_preview_waits_out_the_interval(clock: Clock) -> None:
    p = make(clock)
    p.apply("t", Writing("Let me"))
    clock.now += 1.0
    shown(p, p.apply("t", Writing("Let me look.")))
    clock.now += 0.3
    started = p.apply("t", ToolStarted("c1", "read", "a.txt"))
    assert started is not None and started.wait == pytest.approx(0.7)
    assert started.text == "Working\n.. read a.txt"  # the preview is gone
    shown(p, started)
    finished = p.apply("t", ToolFinished("c1", "read", ToolStatus.COMPLETED, "read 1 line"))
    assert finished is not None and finished.wait == 0  # tool lines are not throttled
    shown(p, finished)
    # The next answer: a preview under the tool lines, once it was written for a second.
    assert p.apply("t", Writing("The file")) is None
    clock.now += 1.0
    preview = p.apply("t", Writing("The file says"))
    assert preview is not None
    assert preview.text == "Working\nok read read 1 line\nThe file says"


def test_a_long_answer_shows_its_end(clock: Clock) -> None:
    p = make(clock)
    text = "x" * PREVIEW_CHARS + "the end"
    p.apply("t", Writing(text))
    clock.now += 1.0
    show = p.apply("t", Writing(text + "!"))
    assert show is not None
    assert show.text == "Working\n…" + ("x" * PREVIEW_CHARS + "the end!")[-PREVIEW_CHARS:]


def test_places_are_apart(clock: Clock) -> None:
    p = make(clock)
    p.apply("a", Writing("one"))
    clock.now += 1.0
    assert p.apply("b", Writing("two")) is None  # b began writing just now
    assert p.apply("a", Writing("one more")) is not None
