"""The outbound port: events the runtime emits and the `Channel` each adapter implements."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from runtime.models import ConversationRef, StopReason, ToolStatus
from runtime.redact import redact_text, shown, visible


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
class FileShared:
    """Post a work-dir file to the conversation (the send_file tool): `data` is its content
    as the judge (or an approver) let it out, posted as it is; `path` where it lies in the
    work dir (the terminal shows that); `key`: a stable id of this share (the tool call's),
    `again`: it may have been posted before a crash (post it only if it is not there yet).
    The channel returns a ref to what it posted, None when it could not."""

    name: str
    data: bytes
    title: str
    path: str
    key: str
    again: bool = False


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
    # The "approve always" button's label, saying what it covers; "" when not offered.
    always: str = "Approve always"
    notes: tuple[str, ...] = ()  # more lines for the approver (what changed unasked, …)
    # A question to the requester (the clarify tool) instead of a call to approve: its
    # options, whether other words may answer it, and the answer once given.
    kind: str = "approval"
    question: str = ""
    options: tuple[str, ...] = ()
    allow_other: bool = False
    answer: str | None = None
    # A batch: the calls of one model turn put to approvers together. `batch` is its id (on
    # every item's notice: `/approve <it>` decides them all); the notice posted for it is
    # its lead's, with every item's notice in `items`, in the model's order.
    batch: str = ""
    items: tuple[ApprovalNotice, ...] = ()


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
    | FileShared
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


def shown_notice(notice: ApprovalNotice) -> ApprovalNotice:
    """The notice as people see it, in a chat, `/pending` or `clawgate approvals`: what may
    quote the call (reasons, a rejecter's reason, the outcome) redacted, and every text shown
    with hidden characters escaped. `arguments` comes redacted and escaped already
    (`argument_summary`); `editable` only when nothing in it is masked, and escaped it is
    still the same JSON."""
    return replace(
        notice,
        tool=visible(notice.tool),
        reasons=tuple(map(shown, notice.reasons)),
        requester=visible(notice.requester),
        decided_by=notice.decided_by and visible(notice.decided_by),
        reason=notice.reason and shown(notice.reason),
        outcome=notice.outcome and shown(notice.outcome),
        approved_by=tuple(map(visible, notice.approved_by)),
        editable=visible(notice.editable),
        always=visible(notice.always),
        notes=tuple(map(shown, notice.notes)),
        question=shown(notice.question),
        options=tuple(map(shown, notice.options)),
        answer=notice.answer and shown(notice.answer),
        items=tuple(map(shown_notice, notice.items)),
    )


# The word being written: the run of printable ASCII at the end (a token's characters; it
# starts where no such character precedes it, so the search is linear).
_LAST_WORD = re.compile(r"(?<![!-~])[!-~]*\Z")


def settled(text: str) -> str:
    """An answer still being written without its last word (a space, a newline or a CJK
    character ends a word): that may be the first part of a secret which only a later piece
    makes recognizable."""
    match = _LAST_WORD.search(text)
    return text[: match.start()] if match else text


def redacted(event: Event) -> Event:
    """`event` with its text as people may see it. The model's answer (and its preview) is
    redacted but not escaped: it is the model's prose, which may need joiners and bidi marks
    (emoji, Arabic, Hebrew); approval notices are made shown by `notice_of`."""
    if isinstance(event, Reply):
        return replace(event, text=redact_text(event.text))
    if isinstance(event, Writing):
        return Writing(redact_text(settled(event.text)))
    if isinstance(event, Notice):
        return Notice(shown(event.text))
    if isinstance(event, ToolStarted):
        return replace(event, tool=visible(event.tool), summary=shown(event.summary))
    if isinstance(event, ToolFinished):
        return replace(event, tool=visible(event.tool), display=shown(event.display))
    if isinstance(event, FileShared):
        # The words around the file are redacted like any other; its bytes are what the
        # judge let out (text that looks like a secret asks first), and a file redacted on
        # its way would not be the file that was approved (nor a valid image or archive).
        return replace(
            event, title=shown(event.title), name=shown(event.name), path=shown(event.path)
        )
    if isinstance(event, RunFinished) and event.error:
        return replace(event, error=shown(event.error))
    return event


# How often a conversation's preview is redacted and passed on, at most: the whole answer so
# far is redacted each time (a secret may span pieces), so at every piece (a few characters)
# a long answer would cost seconds of the event loop; a chat shows a preview once a second.
WRITING_INTERVAL = 0.25


class RedactingChannel:
    """Every event the runtime sends, redacted on its way to the adapter: one place that the
    chats and the terminal all go through, whatever the model or a tool put in the text.
    `Writing` goes on at most once per `interval` for a conversation (the answer follows)."""

    def __init__(
        self,
        channel: Channel,
        interval: float = WRITING_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.channel = channel
        self.interval = interval
        self.clock = clock
        self._written: dict[str, float] = {}  # conversation id -> when its last preview went

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        if isinstance(event, Writing):
            now = self.clock()
            if now - self._written.get(conversation.id, -math.inf) < self.interval:
                return None
            self._written[conversation.id] = now
        elif isinstance(event, Reply | RunFinished):
            self._written.pop(conversation.id, None)
        return await self.channel.send(conversation, redacted(event))
