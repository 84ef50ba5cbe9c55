"""The `/pending` list, as every platform shows it: one line per open approval or question
of the conversation, with its id, status, what it is about, who asked and until when."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime.approval.notices import quorum_line, said
from runtime.channel import ApprovalNotice


def expiry(notice: ApprovalNotice) -> str:
    when = datetime.fromtimestamp(notice.expires_at / 1000, tz=UTC)
    return when.strftime("%H:%M:%S UTC")


def render_pending(notice: ApprovalNotice) -> str:
    quorum = quorum_line(notice)
    if notice.kind == "question":
        return (
            f"{notice.approval_id}  {said(notice.status)}: question: {notice.question}  "
            f"(to {notice.requester}, expires {expiry(notice)})"
        )
    batch = f"  [batch {notice.batch}]" if notice.batch else ""
    return (
        f"{notice.approval_id}  {said(notice.status)}: {notice.tool}: {notice.arguments}  "
        f"(by {notice.requester}, expires {expiry(notice)})"
        + (f"  [{quorum}]" if quorum else "")
        + batch
    )
