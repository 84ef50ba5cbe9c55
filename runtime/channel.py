"""The outbound port: events the runtime emits and the `Channel` each adapter implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from runtime.models import ConversationRef, StopReason, ToolStatus


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant's answer (or an explanation the user must see)."""

    text: str


@dataclass(frozen=True, slots=True)
class Notice:
    """Something about the system rather than the task, e.g. "the offline demo model is in use"."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call_id: str
    tool: str
    summary: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    call_id: str
    tool: str
    status: ToolStatus
    display: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    stop_reason: StopReason
    steps: int
    error: str | None = None


Event = Reply | Notice | ToolStarted | ToolFinished | RunFinished


class Channel(Protocol):
    """Implemented by every adapter: deliver one event to a conversation."""

    async def send(self, conversation: ConversationRef, event: Event) -> None: ...
