"""Approve with edit on a real Redis: the edited call runs (never the original), it is judged
again, the model is told, the audit has the diff, and a stale edit is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.dispatch import dispatch
from runtime.approval.models import ApprovalStatus
from runtime.approval.notices import EDITABLE_CHARS, editable
from runtime.audit import AuditLog
from runtime.models import Actor, StopReason, ToolMessage
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime

CAROL = Actor(platform="slack", user_id="UCAROL")


async def test_the_edited_call_runs_and_the_model_is_told(
    redis: aioredis.Redis, workdir: Path
) -> None:
    for name in ("keep.txt", "drop.txt"):
        (workdir / name).write_text(name)
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), approvers=[CAROL.key])
    asked = await runtime.run("s1", "run: rm keep.txt", ALICE, HERE)
    assert asked.approval_id is not None
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    edit = json.dumps({"command": "rm drop.txt"})
    await dispatch(runtime, "s1", f"/approve {asked.approval_id} edit {edit}", CAROL, HERE, say)
    assert (workdir / "keep.txt").exists() and not (workdir / "drop.txt").exists()
    assert said == [
        f'Approval {asked.approval_id} approved. It ran with your edits (command: "rm keep.txt"'
        ' -> "rm drop.txt").'
    ]
    history = await runtime.history.load("s1")
    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert result.content.startswith(
        """(run with the approver's edits: command: "rm keep.txt" -> "rm drop.txt")"""
    )
    loaded = await runtime.approvals.load(asked.approval_id)
    assert loaded is not None
    record, checkpoint = loaded
    assert record.status is ApprovalStatus.CONSUMED and json.loads(record.arguments) == {
        "command": "rm drop.txt"
    }
    assert checkpoint.calls[checkpoint.index].arguments == edit
    entries = await AuditLog(redis, Keys(PREFIX)).newest(50)
    (edited,) = [e for e in entries if e.event == "approval_edited"]
    assert edited.actor == CAROL.key
    assert edited.fields["diff"] == 'command: "rm keep.txt" -> "rm drop.txt"'
    stream = [e["event"] for e in await runtime.approvals.audit_entries("s1")]
    assert stream[:4] == ["requested", "edited", "approved", "executing"]

    # Too late: it was decided; an edit now changes nothing.
    late = await runtime.decide(
        asked.approval_id, True, CAROL, HERE, edit=json.dumps({"command": "rm keep.txt"})
    )
    assert not late.accepted and "already decided" in late.message
    assert (workdir / "keep.txt").exists()


async def test_an_edit_the_policy_refuses_or_the_tool_rejects_runs_nothing(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "keep.txt").write_text("keep")
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), approvers=[CAROL.key])
    asked = await runtime.run("s1", "run: rm keep.txt", ALICE, HERE)
    assert asked.approval_id is not None
    for edit, why in (
        ({"command": "rm -rf /"}, "refused by the risk policy"),
        ({"cmd": "ls"}, "invalid for bash: command: Field required"),
        ([1, 2], "must be a JSON object"),
    ):
        decision = await runtime.decide(asked.approval_id, True, CAROL, HERE, edit=json.dumps(edit))
        assert not decision.accepted and why in decision.message, decision.message
    assert (workdir / "keep.txt").exists()
    loaded = await runtime.approvals.load(asked.approval_id)
    assert loaded is not None and loaded[0].status is ApprovalStatus.PENDING
    assert json.loads(loaded[0].arguments) == {"command": "rm keep.txt"}  # unchanged
    refusals = [
        e for e in await AuditLog(redis, Keys(PREFIX)).newest(50) if e.event == "approval_refused"
    ]
    assert [e.fields["why"] for e in refusals] == ["edit_refused"] * 3
    # The original can still be decided as it stands.
    decision = await runtime.decide(asked.approval_id, False, ADMIN, HERE, reason="no")
    assert decision.accepted and decision.run is not None
    assert decision.run.stop_reason is StopReason.FINAL


def test_edit_forms_are_prefilled_only_with_arguments_safe_to_show_whole() -> None:
    assert editable({"command": "rm x"}) == '{\n  "command": "rm x"\n}'
    # A secret would be masked in the notice: it stays out of buttons and forms too.
    assert editable({"command": "curl -H 'Authorization: Bearer sk-abcdefghijklmnop' x"}) == ""
    assert editable({"password": "hunter2"}) == ""
    assert editable({"content": "x" * EDITABLE_CHARS}) == ""  # typed instead
    assert editable(["not", "an", "object"]) == ""


async def test_an_edit_that_fails_tells_the_approver_and_the_call_stays_pending(
    redis: aioredis.Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deep `/approve <id> edit [[[[…` once killed the decision job without a word."""
    (workdir / "keep.txt").write_text("keep")
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), approvers=[CAROL.key])
    asked = await runtime.run("s1", "run: rm keep.txt", ALICE, HERE)
    approval = asked.approval_id
    assert approval is not None
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    deep = "[" * 100_000 + "]" * 100_000
    for edit in (deep, '{"command": ' + deep + "}", '{"command": "rm', "[1, 2]"):
        await dispatch(runtime, "s1", f"/approve {approval} edit {edit}", CAROL, HERE, say)
    assert said == [
        f"Approval {approval} not edited: the edited arguments are nested 100000 levels deep "
        "(at most 32).",
        f"Approval {approval} not edited: the edited arguments are nested 100001 levels deep "
        "(at most 32).",
        f"Approval {approval} not edited: the edited arguments are not valid JSON: "
        "Unterminated string starting at.",
        f"Approval {approval} not edited: the edited arguments must be a JSON object.",
    ]

    def broken(name: str) -> None:
        raise RuntimeError("boom")

    editor = runtime.decisions.editor
    assert editor is not None
    monkeypatch.setattr(editor.registry, "resolve", broken)  # any exception in the edit
    edit = json.dumps({"command": "rm other.txt"})
    await dispatch(runtime, "s1", f"/approve {approval} edit {edit}", CAROL, HERE, say)
    assert said[-1] == (
        f"Approval {approval} not edited: it could not be applied (RuntimeError); nothing was "
        "changed."
    )
    loaded = await runtime.approvals.load(approval)
    assert loaded is not None and loaded[0].status is ApprovalStatus.PENDING
    assert json.loads(loaded[0].arguments) == {"command": "rm keep.txt"}
    assert (workdir / "keep.txt").exists()
