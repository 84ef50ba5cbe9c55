"""The outbound port: events the runtime emits and the `Channel` each adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from runtime.models import ConversationRef, StopReason, ToolStatus


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant's answer (or an explanation the user must see). `key`: a stable id of
    this answer; a run retaken after a crash posts it again with `again` set, and the channel
    then posts it only if it is not there yet."""

    text: str
    key: str = ""
    again: bool = False


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
class Writing:
    """The model is writing its answer: `text` is all of it so far (it only grows, except
    when a broken stream is asked again). Sent at every piece; a chat shows it throttled, as
    a preview in its working message, and the answer still comes as one `Reply`."""

    text: str


@dataclass(frozen=True, slots=True)
class RunFinished:
    stop_reason: StopReason
    steps: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalNotice:
    """What a chat shows about one approval; `message` is the adapter's ref to the notice it
    posted (so it can update it in place), as returned by `Channel.send`."""

    approval_id: str
    tool: str
    arguments: str  # redacted and truncated
    reasons: tuple[str, ...]
    requester: str
    expires_at: int  # ms since the epoch
    status: str
    decided_by: str | None = None
    reason: str | None = None
    outcome: str | None = None
    message: dict[str, str] = field(default_factory=dict)
    conversation: str = ""  # the id of the conversation that asked
    quorum: int = 1  # approvers needed (the N-person rule)
    approved_by: tuple[str, ...] = ()  # so far, while more are needed
    editable: str = ""  # the arguments whole, to prefill an edit form; "" when not offered


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """Post the notice; `again`: it may have been posted before a crash (post it only if it
    is not there yet); `copy`: in another conversation than the one that asked (an
    approvers' channel), which the notice then names."""

    notice: ApprovalNotice
    again: bool = False
    copy: bool = False


@dataclass(frozen=True, slots=True)
class ApprovalUpdated:
    """Decided, expired or outcome unknown: update the notice in place."""

    notice: ApprovalNotice


Event = (
    Reply
    | Notice
    | ToolStarted
    | ToolFinished
    | Writing
    | RunFinished
    | ApprovalRequested
    | ApprovalUpdated
)
MessageRef = dict[str, str]
# `Channel.send` as a callable: what the approval lifecycle is handed to post and update.
Send = Callable[[ConversationRef, "Event"], Awaitable[MessageRef | None]]


class Channel(Protocol):
    """Implemented by every adapter: deliver one event to a conversation. It may return a
    reference to the message it posted (used to update approval notices in place)."""

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None: ...
