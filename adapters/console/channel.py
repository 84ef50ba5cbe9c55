"""How runtime events look in a terminal: replies verbatim, tool progress as indented lines."""

from __future__ import annotations

from typing import TextIO

from runtime.channel import Event, Notice, Reply, RunFinished, ToolFinished, ToolStarted
from runtime.models import ConversationRef, StopReason, ToolStatus


def render(event: Event) -> str | None:
    if isinstance(event, Reply):
        return event.text
    if isinstance(event, Notice):
        return f"[notice] {event.text}"
    if isinstance(event, ToolStarted):
        return f"  > {event.summary}"
    if isinstance(event, ToolFinished):
        mark = "ok" if event.status is ToolStatus.COMPLETED else event.status.value
        return f"  < {event.display} [{mark}]"
    if isinstance(event, RunFinished) and event.stop_reason is not StopReason.FINAL:
        return f"[run stopped: {event.stop_reason.value}]"
    return None


class ConsoleChannel:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    async def send(self, conversation: ConversationRef, event: Event) -> None:
        line = render(event)
        if line is not None:
            self.out.write(line + "\n")
            self.out.flush()  # one event, one flush: scripts see output as it happens
