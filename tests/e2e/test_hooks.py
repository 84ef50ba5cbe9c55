"""Admin hooks end to end: the runtime on a real Redis asks a real command (a Python script run
as a subprocess) and a real HTTP endpoint shaped like OPA's data API, and the chat shows what
the hook decided: the call ran unasked, was refused with the hook's reason, or waits for an
approval whose notice names the hook's reason. Failing hooks ask and are audited."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from runtime.agent import Runtime
from runtime.audit import AuditEntry
from runtime.channel import ApprovalRequested, Reply, ToolFinished
from runtime.models import RunResult, StopReason, ToolStatus
from runtime.policy.choices import ConversationChoices
from runtime.policy.model import PolicyDocument
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.http_client import serving_app
from tests.support import ADMIN, ALICE, HERE, RecordingChannel, make_runtime

pytestmark = pytest.mark.e2e

# The command hook: answers as its first argument says, and logs each input it was sent.
HOOK_SCRIPT = """
import json, pathlib, sys, time
mode, log = sys.argv[1], pathlib.Path(sys.argv[2])
given = json.load(sys.stdin)
with log.open("a") as f:
    f.write(json.dumps(given) + "\\n")
if mode == "sleep":
    time.sleep(30)
if mode == "crash":
    sys.stderr.write("ticket service down\\n")
    sys.exit(1)
if mode == "garbage":
    print("yes, fine I guess")
    sys.exit(0)
answers = {
    "allow": {"decision": "allow"},
    "deny": {"decision": "deny", "reason": "deploy freeze until Monday"},
    "ask": {"decision": "ask", "reason": "no change ticket", "quorum": 2,
            "route": ["slack:T1:CAPPROVERS"]},
}
print(json.dumps(answers[mode]))
"""


@dataclass
class CommandHook:
    script: Path
    log: Path

    def toml(self, mode: str, **extra: Any) -> str:
        argv = json.dumps([sys.executable, str(self.script), mode, str(self.log)])
        lines = [f"command = {argv}", 'tools = ["bash"]']
        lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
        return "[hooks.tickets]\n" + "\n".join(lines) + "\n"

    def inputs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@dataclass
class OpaServer:
    """A stand-in for OPA's data API: POST /v1/data/clawgate/decision -> {"result": ...}."""

    url: str
    result: Any = None
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def command_hook(tmp_path: Path) -> CommandHook:
    script = tmp_path / "hook.py"
    script.write_text(HOOK_SCRIPT)
    return CommandHook(script, tmp_path / "hook-inputs.jsonl")


@pytest.fixture
async def opa() -> AsyncIterator[OpaServer]:
    server = OpaServer("")

    async def decide(request: web.Request) -> web.Response:
        server.requests.append(await request.json())
        # OPA leaves `result` out when the rule is undefined for the input.
        return web.json_response({} if server.result is None else {"result": server.result})

    app = web.Application()
    app.router.add_post("/v1/data/clawgate/decision", decide)
    async with serving_app(app) as base_url:
        server.url = f"{base_url}/v1/data/clawgate/decision"
        yield server


def runtime_with(
    redis: aioredis.Redis, workdir: Path, policy: str
) -> tuple[Runtime, RecordingChannel]:
    document = PolicyDocument.model_validate(tomllib.loads(policy))
    return make_runtime(redis, workdir, DemoProvider(), document=document)


def finished(channel: RecordingChannel) -> list[ToolFinished]:
    return channel.of(ToolFinished)


async def audited(runtime: Runtime, event: str) -> list[AuditEntry]:
    await runtime.audit.flush()
    return [e for e in await runtime.audit.newest(200) if e.event == event]


async def ask_run(runtime: Runtime, command: str, session: str = "s1") -> RunResult:
    return await runtime.run(session, f"run: {command}", ALICE, HERE)


# -- the command hook ----------------------------------------------------------------------------


async def test_a_command_hook_allow_lets_a_risky_call_run_unasked_as_a_grant_would(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("allow"))
    result = await ask_run(runtime, "touch made.txt")  # the risk rules alone would ask

    assert result.stop_reason is StopReason.FINAL, result
    assert channel.of(ApprovalRequested) == []
    assert (workdir / "made.txt").exists()  # ran with the work dir writable, like a grant
    (sent,) = command_hook.inputs()
    given = sent["input"]
    assert given["tool"] == "bash" and given["arguments"] == {"command": "touch made.txt"}
    assert given["verdict"] == "ask" and given["reasons"] and given["approved"] is False
    assert given["hook"] == "tickets" and given["scope"] == "global"
    assert given["conversation"] == HERE.id and given["requester"] == ALICE.key
    assert given["session"] == "s1"
    (decided,) = await audited(runtime, "hook_decided")
    assert decided.fields["hook"] == "tickets" and decided.fields["decision"] == "allow"
    (executed,) = await audited(runtime, "tool_executed")
    assert executed.fields["policy_source"] == "hook"  # what let it run unasked


async def test_in_ask_mode_a_hooks_allow_does_not_waive_the_ask_and_the_hook_is_told_the_mode(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("allow"))
    await ConversationChoices(runtime.policies).switch_mode("ask", ALICE, HERE)
    result = await ask_run(runtime, "touch made.txt")

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED, result
    (requested,) = channel.of(ApprovalRequested)
    assert any("ask mode" in reason for reason in requested.notice.reasons)
    assert not (workdir / "made.txt").exists()
    (sent,) = command_hook.inputs()
    assert sent["input"]["mode"] == "ask" and sent["input"]["verdict"] == "ask"
    (asked,) = await audited(runtime, "approval_requested")
    assert asked.fields["policy_source"] == "mode"


async def test_a_command_hook_deny_refuses_a_call_the_policy_allows_with_its_reason(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("deny"))
    result = await ask_run(runtime, "ls")

    assert result.stop_reason is StopReason.FINAL
    (done,) = finished(channel)
    assert done.status is ToolStatus.DENIED
    assert "hook tickets refuses it: deploy freeze until Monday" in done.display
    (answer,) = channel.of(Reply)
    assert "deploy freeze until Monday" in answer.text and "not executed" in answer.text
    assert command_hook.inputs()[0]["input"]["verdict"] == "allow"
    (executed,) = await audited(runtime, "tool_executed")
    assert (executed.fields["policy_source"], executed.fields["error_code"]) == ("hook", "denied")


async def test_a_command_hook_ask_posts_a_notice_with_its_reason_quorum_and_route(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("ask"))
    result = await ask_run(runtime, "ls")  # a call that would run unasked

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    posted = channel.of(ApprovalRequested)
    here = [e for c, e in channel.events if isinstance(e, ApprovalRequested) and c.id == HERE.id]
    routed = [c.id for c, e in channel.events if isinstance(e, ApprovalRequested) and e.copy]
    assert len(here) == 1 and routed == ["slack:T1:CAPPROVERS"] and len(posted) == 2
    notice = here[0].notice
    assert "hook tickets asks for approval: no change ticket" in notice.reasons
    assert notice.quorum == 2  # the hook raised it

    assert result.approval_id is not None
    decision = await runtime.decide(result.approval_id, True, ADMIN, HERE)
    assert decision.accepted
    assert "1 of 2 approvals; 1 more approver needed" in decision.message
    assert decision.run is None  # one approver is not enough: nothing ran


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("sleep", "no answer within 0.5 s"),
        ("crash", "exited with status 1: ticket service down"),
        ("garbage", "answered no JSON"),
    ],
)
async def test_a_hook_that_times_out_crashes_or_answers_garbage_asks_and_is_audited(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook, mode: str, why: str
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml(mode, timeout=0.5))
    result = await ask_run(runtime, "ls")  # the built-in policy would run it unasked

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    (requested,) = channel.of(ApprovalRequested)
    (reason,) = [r for r in requested.notice.reasons if r.startswith("hook tickets failed")]
    assert why in reason and reason.endswith("a human decides")
    (failed,) = await audited(runtime, "hook_failed")
    assert failed.fields["hook"] == "tickets" and why in failed.fields["why"]
    assert failed.fields["tool"] == "bash" and failed.actor == ALICE.key


async def test_a_hook_cannot_lift_a_built_in_deny_and_is_not_even_asked(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook, fake_openai: FakeOpenAI
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("allow"))
    result = await ask_run(runtime, "rm -rf /")

    assert result.stop_reason is StopReason.FINAL
    (done,) = finished(channel)
    assert done.status is ToolStatus.DENIED and "refused by the risk policy" in done.display
    assert command_hook.inputs() == []
    # Nor a deny of the policy file (a model calling a tool it was not offered): the tool
    # policy refuses before any hook.
    document = tomllib.loads(command_hook.toml("allow") + '[tools]\ndeny = ["bash"]\n')
    provider = OpenAIProvider("fake", api_key="k", base_url=fake_openai.base_url, max_retries=0)
    fake_openai.script = [calls(("call_1", "bash", {"command": "ls"})), reply("ok")]
    runtime, channel = make_runtime(
        redis, workdir, provider, document=PolicyDocument.model_validate(document)
    )
    await ask_run(runtime, "list the files", session="s2")
    assert "is denied here by policy" in finished(channel)[0].display
    assert command_hook.inputs() == []


async def test_an_answer_is_reused_for_the_same_call_within_cache_seconds(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("deny", cache_seconds=60))
    await ask_run(runtime, "ls")
    await ask_run(runtime, "ls")
    await ask_run(runtime, "ls -a")  # another call: asked

    assert [d.status for d in finished(channel)] == [ToolStatus.DENIED] * 3
    assert [i["input"]["arguments"]["command"] for i in command_hook.inputs()] == ["ls", "ls -a"]
    decided = await audited(runtime, "hook_decided")
    assert [e.fields.get("cached") for e in decided] == [None, "yes", None]


async def test_a_hook_asked_again_when_an_approved_call_runs_may_only_deny_it(
    redis: aioredis.Redis, workdir: Path, command_hook: CommandHook
) -> None:
    """An approver's edit or a freeze that began while the call waited: the hook's deny
    stops the approved call just before it runs."""
    runtime, channel = runtime_with(redis, workdir, command_hook.toml("deny"))
    runtime.policies.document.hooks["tickets"].tools = ["write"]  # not bash: it asks as usual
    result = await ask_run(runtime, "touch later.txt")
    assert result.approval_id is not None
    runtime.policies.document.hooks["tickets"].tools = ["bash"]  # the freeze begins

    decision = await runtime.decide(result.approval_id, True, ADMIN, HERE)

    assert decision.accepted
    assert not (workdir / "later.txt").exists()
    assert "deploy freeze until Monday" in finished(channel)[-1].display
    assert command_hook.inputs()[-1]["input"]["approved"] is True


# -- the HTTP hook (OPA's data API) -----------------------------------------------------------


def opa_policy(opa: OpaServer) -> str:
    return f'[hooks.opa]\nurl = "{opa.url}"\ntools = ["bash"]\n'


async def test_an_opa_hook_allows_denies_and_asks(
    redis: aioredis.Redis, workdir: Path, opa: OpaServer
) -> None:
    runtime, channel = runtime_with(redis, workdir, opa_policy(opa))

    opa.result = "allow"
    allowed = await ask_run(runtime, "touch opa.txt", session="s1")
    assert allowed.stop_reason is StopReason.FINAL and (workdir / "opa.txt").exists()

    opa.result = {"decision": "deny", "reason": "prod is frozen"}
    await ask_run(runtime, "ls", session="s2")
    assert "hook opa refuses it: prod is frozen" in finished(channel)[-1].display

    opa.result = {"decision": "ask", "reason": "outside office hours"}
    asked = await ask_run(runtime, "ls", session="s3")
    assert asked.stop_reason is StopReason.APPROVAL_REQUIRED
    (requested,) = channel.of(ApprovalRequested)
    assert "hook opa asks for approval: outside office hours" in requested.notice.reasons

    assert [r["input"]["arguments"]["command"] for r in opa.requests] == [
        "touch opa.txt",
        "ls",
        "ls",
    ]
    assert opa.requests[0]["input"]["tool"] == "bash"


async def test_an_opa_rule_undefined_for_the_input_asks(
    redis: aioredis.Redis, workdir: Path, opa: OpaServer
) -> None:
    runtime, _ = runtime_with(redis, workdir, opa_policy(opa))
    opa.result = None  # no rule matched
    result = await ask_run(runtime, "ls")

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    (failed,) = await audited(runtime, "hook_failed")
    assert failed.fields["hook"] == "opa"
    assert failed.fields["why"] == "answered without a decision or a result"


async def test_several_hooks_the_strictest_wins(
    redis: aioredis.Redis, workdir: Path, opa: OpaServer, command_hook: CommandHook
) -> None:
    policy = opa_policy(opa) + command_hook.toml("ask")
    runtime, channel = runtime_with(redis, workdir, policy)
    opa.result = "allow"
    result = await ask_run(runtime, "ls")
    assert result.stop_reason is StopReason.APPROVAL_REQUIRED

    opa.result = {"decision": "deny", "reason": "no"}
    await ask_run(runtime, "ls", session="s2")
    assert finished(channel)[-1].status is ToolStatus.DENIED
