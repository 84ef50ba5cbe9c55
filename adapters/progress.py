"""The "working" message every chat adapter keeps while a run uses tools: one line per tool
call (started, then finished with its outcome), a heading while working and a footer saying
how the run stopped. Adapters supply the look (`Style`) and post or edit the text."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from runtime.channel import RunFinished, ToolFinished, ToolStarted
from runtime.models import StopReason, ToolStatus

STOPS = {
    StopReason.FINAL: "Done",
    StopReason.APPROVAL_REQUIRED: "Paused: waiting for approval",
    StopReason.MAX_STEPS: "Stopped: step limit reached",
    StopReason.CANCELLED: "Cancelled",
    StopReason.ERROR: "Stopped by an error",
}
ProgressEvent = ToolStarted | ToolFinished | RunFinished
# The answer or the approval notice says it all when no tool ran.
QUIET_STOPS = (StopReason.FINAL, StopReason.APPROVAL_REQUIRED)


@dataclass(frozen=True, slots=True)
class Style:
    marks: Mapping[ToolStatus, str]  # a finished call's mark
    running: str  # a started call's mark
    line: Callable[[str, str, str], str]  # (mark, tool, text) -> line
    heading: str  # first line while working
    footer: Callable[[str], str]  # how the run stopped -> last line
    escape: Callable[[str], str] = str


@dataclass
class Working:
    ref: str | None = None  # the posted message, once there is one
    lines: dict[str, str] = field(default_factory=dict)  # call id -> line


@dataclass(frozen=True, slots=True)
class Show:
    """Post (when `working.ref` is None) or edit the working message to say `text`."""

    working: Working
    text: str


class Progress:
    def __init__(self, style: Style) -> None:
        self.style = style
        self._working: dict[Hashable, Working] = {}

    def apply(
        self, place: Hashable, event: ToolStarted | ToolFinished | RunFinished
    ) -> Show | None:
        """What the working message of `place` (a thread) must now say, if anything."""
        style, working = self.style, self._working.setdefault(place, Working())
        if isinstance(event, ToolStarted):
            text = style.escape(event.summary[:200])
            working.lines[event.call_id] = style.line(style.running, event.tool, text)
        elif isinstance(event, ToolFinished):
            mark, text = style.marks.get(event.status, ""), style.escape(event.display[:200])
            working.lines[event.call_id] = style.line(mark, event.tool, text)
        else:
            del self._working[place]
            if working.ref is None and event.stop_reason in QUIET_STOPS:
                return None
            stop = STOPS[event.stop_reason]
            if event.error:
                stop += f": {style.escape(event.error[:300])}"
            return Show(working, "\n".join([*working.lines.values(), style.footer(stop)]))
        return Show(working, "\n".join([style.heading, *working.lines.values()]))
