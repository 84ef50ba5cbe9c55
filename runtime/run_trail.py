"""Recent runs as the audit trail tells them, for the console's Runs page: every entry carries
the trace id of the run it belongs to, so the entries of one trace id are one run (whether
tracing is on or not): when it ran, in which conversation, who asked, the tools it called,
the approvals it asked for with their outcome, and which paused run it resumed (a call that
ran under an approval asked for in another run). A run that called no tool leaves no entry
(ordinary messages are not audited), so it is not among them.

Decisions are recorded under the trace of the run that paused (`approval_decided` carries the
checkpoint's trace id), so a paused run shows its approvals' outcomes itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from runtime.audit import AuditEntry
from runtime.redact import redact_text

# The entries that end an approval, and what each says of its outcome.
ENDINGS = {
    "approval_decided": "",  # its `decision` field: approved or rejected
    "approval_expired": "expired",
    "approval_cancelled": "cancelled",
    "approval_outcome_unknown": "outcome unknown",
}
ASKERS = ("command", "tool_executed", "approval_requested")


@dataclass
class Asked:
    """An approval a run asked for, and how it ended ("pending" while it has not)."""

    id: str
    tool: str
    reasons: str
    outcome: str = "pending"
    by: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    status: str
    approval: str  # the approval it ran under, if any


@dataclass
class RunTrail:
    trace: str
    conversation: str = ""
    session: str = ""
    asked_by: str = ""
    started: int = 0
    ended: int = 0
    calls: list[Call] = field(default_factory=list)
    asked: list[Asked] = field(default_factory=list)
    resumes: dict[str, str] = field(default_factory=dict)  # approval id -> trace it paused
    resumed_by: list[str] = field(default_factory=list)
    entries: list[AuditEntry] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        """It paused for an approval that is still open."""
        return any(a.outcome == "pending" for a in self.asked)


def runs(entries: Sequence[AuditEntry]) -> list[RunTrail]:
    """The runs the entries (oldest first) tell of, newest first; text that may quote a call
    (reasons) redacted."""
    found: dict[str, RunTrail] = {}
    asked: dict[str, tuple[Asked, str]] = {}  # approval id -> (it, the trace that asked)
    for entry in entries:
        ended = asked.get(entry.fields.get("approval", "")) if entry.event in ENDINGS else None
        if ended is not None:
            approval = ended[0]
            approval.outcome = entry.fields.get("decision") or ENDINGS[entry.event] or "decided"
            approval.by = entry.actor or entry.fields.get("decided_by", "")
            approval.reason = redact_text(entry.fields.get("reason", ""))
        if not entry.trace:
            continue
        run = found.setdefault(entry.trace, RunTrail(entry.trace, started=entry.at))
        _add(run, entry, asked)
    for run in found.values():
        for approval_id in run.resumes:
            paused = asked.get(approval_id)
            if paused is not None and paused[1] in found and paused[1] != run.trace:
                found[paused[1]].resumed_by.append(run.trace)
        run.resumes = {
            approval_id: asked[approval_id][1] if approval_id in asked else ""
            for approval_id in run.resumes
        }
    return sorted(found.values(), key=lambda r: r.started, reverse=True)


def _add(run: RunTrail, entry: AuditEntry, asked: dict[str, tuple[Asked, str]]) -> None:
    fields = entry.fields
    run.entries.append(entry)
    run.ended = entry.at
    run.conversation = run.conversation or fields.get("conversation", "")
    run.session = run.session or fields.get("session", "")
    if entry.event in ASKERS and not run.asked_by:
        run.asked_by = fields.get("requester") or entry.actor
    approval_id = fields.get("approval", "")
    if entry.event == "approval_requested" and approval_id:
        reasons = redact_text(fields.get("reasons", ""))
        approval = Asked(approval_id, fields.get("tool", ""), reasons)
        asked[approval_id] = (approval, run.trace)
        run.asked.append(approval)
    elif entry.event == "tool_executed":
        run.calls.append(Call(fields.get("tool", ""), fields.get("status", ""), approval_id))
        if approval_id and approval_id not in {a.id for a in run.asked}:
            run.resumes[approval_id] = ""


def by_conversation(found: Sequence[RunTrail], per_conversation: int) -> dict[str, list[RunTrail]]:
    """The runs (newest first) grouped by conversation, the most recently active first, at
    most `per_conversation` each."""
    groups: dict[str, list[RunTrail]] = {}
    for run in found:
        shown = groups.setdefault(run.conversation, [])
        if len(shown) < per_conversation:
            shown.append(run)
    return groups
