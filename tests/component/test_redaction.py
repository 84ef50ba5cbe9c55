"""What an operator and a chat see of a call that waits for approval, through the real runtime
and Redis: a secret in the command masked and a bidi character escaped in the notice, in the
edit form (none offered with a secret), `/pending`, `clawgate approvals list|show`, and the
answers to commands (a grant's rule)."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import redis.asyncio as aioredis

from adapters.console.channel import render_request
from adapters.dispatch import dispatch
from adapters.pending import render_pending
from bot.cli_approvals import run_approvals_command
from runtime.agent import Runtime
from runtime.channel import ApprovalRequested
from runtime.models import StopReason
from runtime.providers.demo import DemoProvider
from tests.support import ADMIN, ALICE, HERE, RecordingChannel, make_runtime

COMMAND = "rm -f build.log; sshpass -p hunter2 ssh deploy@host 'rm -rf ./\u202egol.txt'"


async def asked(redis: aioredis.Redis, workdir: Path) -> tuple[Runtime, RecordingChannel, str]:
    runtime, channel = make_runtime(redis, workdir, DemoProvider())
    result = await runtime.run("s1", f"run: {COMMAND}", ALICE, HERE)
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED and result.approval_id
    return runtime, channel, result.approval_id


async def cli(runtime: Runtime, **args: object) -> str:
    out = io.StringIO()
    namespace = argparse.Namespace(**({"status": None, "conversation": None, "json": False} | args))
    assert await run_approvals_command(runtime.wing, namespace, out) == 0
    return out.getvalue()


def assert_shown(text: str) -> None:
    assert "hunter2" not in text and "[redacted]" in text, text
    assert "\u202e" not in text and "\\u202e" in text, text


async def test_an_asked_call_shows_masked_and_escaped_to_the_chat_and_the_operator(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, approval_id = await asked(redis, workdir)
    (requested,) = channel.of(ApprovalRequested)
    assert requested.notice.editable == ""  # no edit form carries the secret
    assert_shown(render_request(requested.notice))
    (pending,) = await runtime.pending(HERE)
    assert_shown(render_pending(pending))  # `/pending`
    assert_shown(await cli(runtime, verb="list"))
    shown = await cli(runtime, verb="show", id=approval_id)
    assert_shown(shown)
    assert "sshpass -p [redacted] ssh" in shown
    dumped = json.loads(await cli(runtime, verb="show", id=approval_id, json=True))
    assert "hunter2" not in json.dumps(dumped) and "[redacted]" in dumped["arguments"]
    listed = json.loads(await cli(runtime, verb="list", json=True))
    assert "hunter2" not in json.dumps(listed)
    # The call itself is kept whole: it runs as asked once approved.
    record, _ = await runtime.approvals.load(approval_id) or (None, None)
    assert record is not None and json.loads(record.arguments)["command"] == COMMAND


async def test_an_edit_copied_from_the_notice_with_a_mask_in_it_is_refused(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, channel, approval_id = await asked(redis, workdir)
    (requested,) = channel.of(ApprovalRequested)
    copied = json.dumps({"command": requested.notice.arguments.replace("gol", "log")})
    decision = await runtime.decide(approval_id, True, ADMIN, HERE, edit=copied)
    assert not decision.accepted
    assert "hold [redacted] where the call had a secret" in decision.message
    record, _ = await runtime.approvals.load(approval_id) or (None, None)
    assert record is not None and json.loads(record.arguments)["command"] == COMMAND


async def test_a_grant_for_a_call_with_a_token_is_told_and_listed_masked(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider())
    push = "git push https://hunter2TOKEN@github.com/org/repo HEAD:main"
    result = await runtime.run("s1", f"run: {push}", ALICE, HERE)
    assert result.approval_id is not None
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    await dispatch(runtime, "s1", f"/approve {result.approval_id} always", ADMIN, HERE, say)
    await dispatch(runtime, "s1", "/policy grants", ADMIN, HERE, say)
    assert len(said) == 2 and all("https://[redacted]@github.com/org/repo" in t for t in said)
    assert not any("hunter2" in text for text in said), said
