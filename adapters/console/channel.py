"""How runtime events look in a terminal: replies as written (but control characters, which
would rewrite the screen), their Markdown rendered when the output is a terminal, tool
progress as indented lines."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, TextIO, runtime_checkable

from adapters.console.markdown import styled
from adapters.pending import expiry
from runtime.approval.notices import quorum_line, said
from runtime.attachments import human_size
from runtime.channel import (
    ApprovalNotice,
    ApprovalRequested,
    ApprovalUpdated,
    Event,
    FileShared,
    MessageRef,
    Notice,
    Reply,
    RunFinished,
    ToolFinished,
    ToolStarted,
)
from runtime.models import ConversationRef, StopReason, ToolStatus
from runtime.redact import controls_escaped

# The approval notice already says why the run stopped.
QUIET_STOPS = (StopReason.FINAL, StopReason.APPROVAL_REQUIRED)


def render_question(notice: ApprovalNotice) -> str:
    """A question to the requester as a numbered prompt: their next line answers it."""
    own = ", or your own words" if notice.allow_other else ""
    return "\n".join(
        [
            f"[question for {notice.requester}] {notice.question}",
            *(f"  {n}. {option}" for n, option in enumerate(notice.options, 1)),
            f"  answer with a number (1-{len(notice.options)}){own}; /cancel withdraws it "
            f"(id {notice.approval_id}, expires {expiry(notice)})",
        ]
    )


def render_batch(notice: ApprovalNotice) -> str:
    """A batch: every call with its own decision, then the one for them all."""
    b, n = notice.batch, len(notice.items)
    lines = [f"[{n} calls need approval: batch {b}; each runs, in order, once all are decided]"]
    for k, item in enumerate(notice.items, 1):
        lines += [f"({k}/{n}) " + render_request(item).removeprefix("[approval needed] ")]
    lines.append(f"  all at once: /approve {b}  or  /reject {b} [reason]")
    return "\n".join(lines)


def render_request(notice: ApprovalNotice) -> str:
    if notice.kind == "question":
        return render_question(notice)
    if notice.items:
        return render_batch(notice)
    i = notice.approval_id
    quorum = quorum_line(notice)
    return "\n".join(
        [
            f"[approval needed] {notice.tool}: {notice.arguments}",
            f"  why: {'; '.join(notice.reasons)}",
            f"  requested by {notice.requester}, expires {expiry(notice)}",
            *([f"  approvals: {quorum}"] if quorum else []),
            *(f"  note: {note}" for note in notice.notes),
            f"  id {i}: /approve {i} [once|{'always|' if notice.always else ''}edit <json>]  or  "
            f"/reject {i} [reason]",
        ]
    )


def render_update(notice: ApprovalNotice) -> str:
    if notice.items:  # a batch: how each call stands
        return "\n".join(map(render_update, notice.items))
    head = f"[{notice.kind} {notice.approval_id} {said(notice.status)}"
    if notice.answer:
        return f"{head} by {notice.decided_by}: {notice.answer}]"
    if notice.decided_by:
        head += f" by {notice.decided_by}"
    if notice.reason:
        head += f": {notice.reason}"
    if notice.outcome and notice.status == "outcome_unknown":
        head += f" ({notice.outcome})"
    return head + "]"


def render(event: Event) -> str | None:
    if isinstance(event, ApprovalRequested):
        return render_request(event.notice)
    if isinstance(event, ApprovalUpdated):
        return render_update(event.notice)
    if isinstance(event, Reply):
        return controls_escaped(event.text)
    if isinstance(event, Notice):
        return f"[notice] {event.text}"
    if isinstance(event, ToolStarted):
        return f"  > {event.summary}"
    if isinstance(event, ToolFinished):
        mark = "ok" if event.status is ToolStatus.COMPLETED else event.status.value
        return f"  < {event.display} [{mark}]"
    if isinstance(event, FileShared):  # the terminal is where the work dir is: say where
        return f"[file] {event.title}: {event.path} in the work dir ({human_size(len(event.data))})"
    if isinstance(event, RunFinished) and event.stop_reason not in QUIET_STOPS:
        return f"[run stopped: {event.stop_reason.value}]"
    return None


# Colours of the first line of what asks, what was decided and what failed, at a terminal
# (none with NO_COLOR set: no-color.org).
ASKS, GOOD, BAD, RESET = "\x1b[1;33m", "\x1b[32m", "\x1b[31m", "\x1b[0m"
_GOOD_STATUSES = ("approved", "executing", "consumed", "answered")


def _colour(event: Event) -> str:
    """The colour of `event`'s first line ("" for none): a request is yellow, a decision that
    lets it run green, one that does not (or a failed call, a stopped run) red."""
    if isinstance(event, ApprovalRequested):
        return ASKS
    if isinstance(event, ApprovalUpdated) and not event.notice.items:
        status = event.notice.status
        return ASKS if status == "pending" else GOOD if status in _GOOD_STATUSES else BAD
    if isinstance(event, ToolFinished) and event.status is not ToolStatus.COMPLETED:
        return BAD
    if isinstance(event, RunFinished) and event.stop_reason not in QUIET_STOPS:
        return BAD
    return ""


@runtime_checkable
class StyledOut(Protocol):
    """An output that escapes what is written to it but takes styled text too (the terminal
    above the prompt, adapters/console/terminal.AbovePrompt)."""

    def write_styled(self, data: str) -> int: ...


def posted(event: Event) -> MessageRef | None:
    """What a terminal "posted": a shared file is where it lies (send_file needs a ref)."""
    return {"path": event.path} if isinstance(event, FileShared) else None


class ConsoleChannel:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.watch: Callable[[Event], None] | None = None  # the chat's status line

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        if self.watch is not None:
            self.watch(event)
        write = self._styled()
        line = render(event)
        colour = _colour(event) if write is not None and not os.environ.get("NO_COLOR") else ""
        if write is not None and isinstance(event, Reply):
            write(styled(event.text) + "\n")
        elif line is not None and colour and write is not None:
            first, _, rest = controls_escaped(line).partition("\n")
            write(f"{colour}{first}{RESET}" + (f"\n{rest}" if rest else "") + "\n")
        elif line is not None:
            self.out.write(line + "\n")
        self.out.flush()  # one event, one flush: scripts see output as it happens
        return posted(event)

    def _styled(self) -> Callable[[str], object] | None:
        """Where rendered Markdown goes: above the prompt (whose `write_styled` lets this
        program's own styles through) or straight to a terminal; None for a pipe or a file,
        which get the answer as written."""
        if isinstance(self.out, StyledOut):
            return self.out.write_styled
        return self.out.write if self.out.isatty() else None
