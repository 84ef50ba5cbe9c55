"""An approved call is judged again just before it runs (real Redis, the real runtime): what
changed on the disk while it waited, and the approver never saw, stops it."""

from __future__ import annotations

from pathlib import Path

import redis.asyncio as aioredis

from runtime.agent import Runtime
from runtime.approval.rejudge import changed_since_approval
from runtime.channel import Reply
from runtime.models import StopReason, ToolMessage, ToolStatus
from runtime.policy.model import PolicyDocument, ToolRules
from runtime.providers.demo import DemoProvider
from runtime.risk.policy import RiskDecision, Verdict
from tests.support import ADMIN, ALICE, HERE, RecordingChannel, make_runtime

GIT_CONFIG = "[core]\n\tbare = false\n"


def repository(workdir: Path) -> tuple[Path, Path]:
    (workdir / ".git").mkdir()
    config = workdir / ".git" / "config"
    config.write_text(GIT_CONFIG)
    (workdir / "docs").mkdir()
    guide = workdir / "docs" / "guide.md"
    guide.write_text("# guide\n")
    return config, guide


async def asked_to_write(
    redis: aioredis.Redis, workdir: Path
) -> tuple[Runtime, RecordingChannel, str]:
    """A `write docs/guide.md` waiting for approval (this conversation asks for every write)."""
    document = PolicyDocument(tools=ToolRules(ask=["write"]))
    runtime, channel = make_runtime(redis, workdir, DemoProvider(), document=document)
    asked = await runtime.run("s1", "write docs/guide.md: [core] fsmonitor = evil", ALICE, HERE)
    assert asked.stop_reason is StopReason.APPROVAL_REQUIRED and asked.approval_id is not None
    return runtime, channel, asked.approval_id


async def test_a_symlink_swapped_in_while_the_write_waited_is_not_written_through(
    redis: aioredis.Redis, workdir: Path
) -> None:
    config, guide = repository(workdir)
    runtime, channel, approval_id = await asked_to_write(redis, workdir)
    guide.unlink()
    guide.symlink_to("../.git/config")  # what an approved `tar -xf` or a `ln -sf` leaves

    decision = await runtime.decide(approval_id, True, ADMIN, HERE)

    assert decision.accepted
    assert config.read_text() == GIT_CONFIG  # nothing written to .git/config
    assert guide.is_symlink()
    said = [
        r.text
        for r in channel.of(Reply)
        if r.text.startswith(f"Approval {approval_id} (write): not run")
    ]
    assert len(said) == 1, said
    assert "not run: it changed since it was approved (" in said[0]
    assert "docs/guide.md (a link to .git/config)" in said[0] and "ask again" in said[0]
    history = await runtime.history.load("s1")
    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert result.status is ToolStatus.DENIED
    assert result.content.startswith("not run: it changed since it was approved (")


async def test_an_unchanged_approved_write_runs_once(redis: aioredis.Redis, workdir: Path) -> None:
    config, guide = repository(workdir)
    runtime, channel, approval_id = await asked_to_write(redis, workdir)

    decision = await runtime.decide(approval_id, True, ADMIN, HERE)

    assert decision.accepted
    assert guide.read_text() == "[core] fsmonitor = evil\n" and config.read_text() == GIT_CONFIG
    assert not [r for r in channel.of(Reply) if "not run" in r.text]
    history = await runtime.history.load("s1")
    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert result.status is ToolStatus.COMPLETED
    again = await runtime.decide(approval_id, True, ADMIN, HERE)
    assert not again.accepted and guide.read_text() == "[core] fsmonitor = evil\n"


async def test_a_command_whose_file_became_a_secret_is_not_run(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("notes\n")
    (workdir / ".env").write_text("API_TOKEN=canary-4f1c\n")
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    asked = await runtime.run("s1", "run: cp notes.txt shared.txt", ALICE, HERE)
    assert asked.approval_id is not None  # cp asks: it copies over files
    (workdir / "notes.txt").unlink()
    (workdir / "notes.txt").symlink_to(".env")

    decision = await runtime.decide(asked.approval_id, True, ADMIN, HERE)

    assert decision.accepted and not (workdir / "shared.txt").exists()
    (said,) = [r.text for r in channel.of(Reply) if r.text.startswith("Approval ")]
    assert said.startswith(f"Approval {asked.approval_id} (bash): not run: it changed since")
    assert "reads notes.txt, which leads to .env" in said
    assert "canary-4f1c" not in str(channel.events)


def test_a_deny_now_is_never_run_even_with_the_reasons_approved() -> None:
    approved = ["matches the ask pattern 'deploy'"]
    assert changed_since_approval(approved, RiskDecision(Verdict.ASK, tuple(approved))) is None
    assert changed_since_approval(approved, RiskDecision(Verdict.ALLOW, ())) is None
    denied = changed_since_approval(approved, RiskDecision(Verdict.DENY, tuple(approved)))
    assert denied == (
        "not run: it changed since it was approved (matches the ask pattern 'deploy'); ask again"
    )
    grown = RiskDecision(Verdict.ASK, (*approved, "reads .env (secrets)"))
    assert changed_since_approval(approved, grown) == (
        "not run: it changed since it was approved (reads .env (secrets)); ask again"
    )
