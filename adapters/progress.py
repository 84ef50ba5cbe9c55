"""The "working" message every chat adapter keeps while a run uses tools: one line per tool
call (started, then finished with its outcome), a heading while working and a footer saying
how the run stopped. Adapters supply the look (`Style`) and post or edit the text.

While the model writes its answer (a streaming provider), the message also shows it as a
preview, throttled: not before the model has written for `interval` seconds (a quick answer
shows none), then at most once per `interval`, never within `interval` of the message's last
post or edit. The edit after a preview waits out the rest of the interval; the answer itself
still comes as its own reply, and the preview leaves the message at the run's next event."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from runtime.channel import RunFinished, ToolFinished, ToolStarted, Writing
from runtime.models import StopReason, ToolStatus

STOPS = {
    StopReason.FINAL: "Done",
    StopReason.APPROVAL_REQUIRED: "Paused: waiting for approval",
    StopReason.MAX_STEPS: "Stopped: step limit reached",
    StopReason.CANCELLED: "Cancelled",
    StopReason.ERROR: "Stopped by an error",
    StopReason.REPEATED_CALLS: "Stopped: the same call kept repeating",
}
ProgressEvent = ToolStarted | ToolFinished | Writing | RunFinished
# The answer or the approval notice says it all when no tool ran.
QUIET_STOPS = (StopReason.FINAL, StopReason.APPROVAL_REQUIRED)
PREVIEW_INTERVAL = 1.0  # seconds: Slack allows about one update per second of a message
PREVIEW_CHARS = 2_000  # a longer answer's preview shows its end, where it is being written


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
    preview: str = ""  # the answer being written, as last shown
    writing_since: float | None = None  # when the model began writing the answer shown
    shown_at: float = -math.inf  # the clock at the end of the last post or edit


@dataclass(frozen=True, slots=True)
class Show:
    """Post (when `working.ref` is None) or edit the working message to say `text`, after
    waiting `wait` seconds. `preview`: only a newer preview, worth one attempt at most. The
    adapter calls `Progress.shown` once it posted or edited."""

    working: Working
    text: str
    preview: bool = False
    wait: float = 0.0


class Progress:
    def __init__(
        self,
        style: Style,
        interval: float = PREVIEW_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.style = style
        self.interval = interval
        self.clock = clock
        self._working: dict[Hashable, Working] = {}

    def shown(self, show: Show) -> None:
        show.working.shown_at = self.clock()

    def apply(self, place: Hashable, event: ProgressEvent) -> Show | None:
        """What the working message of `place` (a thread) must now say, if anything."""
        style, working = self.style, self._working.setdefault(place, Working())
        now = self.clock()
        if isinstance(event, Writing):
            return self._writing(working, event.text, now)
        # The model's answer is done (tools run now, or the run ended): the preview goes.
        wait = max(0.0, working.shown_at + self.interval - now) if working.preview else 0.0
        working.preview, working.writing_since = "", None
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
            text = "\n".join([*working.lines.values(), style.footer(stop)])
            return Show(working, text, wait=wait)
        return Show(working, "\n".join([style.heading, *working.lines.values()]), wait=wait)

    def _writing(self, working: Working, text: str, now: float) -> Show | None:
        if not text.strip():
            return None
        if working.writing_since is None:
            working.writing_since = now
        if now - working.writing_since < self.interval or now - working.shown_at < self.interval:
            return None
        if len(text) > PREVIEW_CHARS:
            text = "…" + text[-PREVIEW_CHARS:]
        preview = self.style.escape(text)
        if preview == working.preview:
            return None
        working.preview = preview
        lines = [self.style.heading, *working.lines.values(), preview]
        return Show(working, "\n".join(lines), preview=True)
