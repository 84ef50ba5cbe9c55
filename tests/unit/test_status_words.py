"""Statuses as people read them wherever a chat or the terminal shows one: "done" and
"running", not the record's "consumed" and "executing"."""

from __future__ import annotations

from adapters.console.channel import render_update
from adapters.pending import render_pending
from adapters.slack.blocks import fallback_text
from runtime.approval.notices import said
from runtime.channel import ApprovalNotice


def notice(status: str) -> ApprovalNotice:
    return ApprovalNotice(
        approval_id="k3x9q2m7vd4pw",
        tool="bash",
        arguments="rm -rf build",
        reasons=("deletes files",),
        requester="slack:U1",
        expires_at=0,
        status=status,
    )


def test_the_record_names_are_never_what_people_read() -> None:
    assert [said(s) for s in ("pending", "executing", "consumed", "outcome_unknown")] == [
        "waiting",
        "running",
        "done",
        "outcome unknown",
    ]
    assert fallback_text(notice("consumed")) == "Approval k3x9q2m7vd4pw (bash): done"
    assert render_update(notice("consumed")) == "[approval k3x9q2m7vd4pw done]"
    assert render_pending(notice("executing")).startswith("k3x9q2m7vd4pw  running: bash: ")
    assert "consumed" not in render_pending(notice("consumed"))
