"""The `explore` tool: a read-only child agent in a session of its own, through the real
`openai` client against the fake OpenAI-compatible server, on a real Redis."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from runtime.agent import Runtime
from runtime.approval.store import ApprovalStore
from runtime.audit import AuditLog
from runtime.channel import ToolFinished
from runtime.explorer import REPORT_CHARS, Explorer
from runtime.models import AssistantMessage, StopReason, ToolMessage, ToolStatus
from runtime.policy.choices import ConversationChoices
from runtime.policy.listed_models import ListedModel
from runtime.policy.model import PolicyDocument
from runtime.policy.resolve import Defaults
from runtime.policy.service import PolicyService
from runtime.providers.base import ProviderFactory
from runtime.providers.openai_provider import OpenAIProvider
from runtime.runtime_config import RuntimeConfig
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys
from runtime.tools.base import Tool
from runtime.tools.bash import BashTool
from runtime.tools.explore import ExploreTool
from runtime.tools.files import EditTool, ReadTool, WriteTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox, SandboxMode
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.fake_openai import FakeOpenAI, Step, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel

TOOLS = ("read", "write", "edit", "bash", "explore")


def explore_runtime(
    redis: aioredis.Redis,
    workdir: Path,
    fake: FakeOpenAI,
    enabled: tuple[str, ...] = ("explore",),
    tracer: Tracer | None = None,
    sandbox: Sandbox | None = None,
    document: PolicyDocument | None = None,
    models: ProviderFactory | None = None,
) -> tuple[Runtime, RecordingChannel]:
    """A runtime wired as `bot.wiring` wires it, with `enabled` tools."""
    keys = Keys(PREFIX)
    provider = OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)
    approvals = ApprovalStore(redis, keys)
    audit = AuditLog(redis, keys)
    defaults = Defaults(enabled=enabled, admins=frozenset({ADMIN.key}))
    policies = PolicyService(redis, keys, defaults, TOOLS, document, audit=audit)
    history = HistoryStore(redis, keys)
    bash = BashTool(timeout=10, sandbox=sandbox)
    base: list[Tool[Any]] = [ReadTool(), WriteTool(), EditTool(), bash]
    explorer = Explorer(provider, base, history, 16_000, policies, audit)
    registry = ToolRegistry([*base, ExploreTool(explorer)], enabled=enabled)
    channel = RecordingChannel()
    runtime = Runtime(
        RuntimeConfig(workdir=workdir),
        provider,
        registry,
        history,
        channel,
        approvals,
        policies,
        audit=audit,
        tracer=tracer,
        models=models,
    )
    return runtime, channel


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def report_of(fake: FakeOpenAI, request: int) -> str:
    """The explore call's result as the parent's model received it in `request`."""
    (message,) = [
        m
        for m in fake.requests[request]["messages"]
        if m["role"] == "tool" and "[explore" in m["content"]
    ]
    return str(message["content"])


async def test_the_parent_reads_only_through_the_explorer_and_keeps_only_its_report(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    (workdir / "alpha.txt").write_text("SENTINEL-ALPHA lives here\n")
    (workdir / "beta.txt").write_text("SENTINEL-BETA lives here\n")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "What do alpha.txt and beta.txt say?"})),
        calls(("k1", "read", {"path": "alpha.txt"}), ("k2", "read", {"path": "beta.txt"})),
        reply("alpha.txt holds SENTINEL-ALPHA; beta.txt holds SENTINEL-BETA."),
        reply("Both files hold sentinels: SENTINEL-ALPHA and SENTINEL-BETA."),
    ]
    runtime, channel = explore_runtime(redis, workdir, fake_openai)

    result = await runtime.run("s1", "what is in the files?", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    assert result.final_text == "Both files hold sentinels: SENTINEL-ALPHA and SENTINEL-BETA."
    parent, child, _, _ = fake_openai.requests
    assert offered(parent) == ["explore"]  # the parent has no file tool of its own
    assert offered(child) == ["read"]  # bash is not enabled, write and edit never
    assert child["messages"][-1] == {
        "role": "user",
        "content": "What do alpha.txt and beta.txt say?",
    }
    assert "what is in the files?" not in json.dumps(child["messages"])  # a clean context
    report = report_of(fake_openai, 3)
    lines = report.splitlines()
    assert lines[0] == "[explore report]"
    assert lines[1].startswith("child session: s1/explore-")
    assert lines[2:4] == ["stop reason: final", "steps used: 2"]
    assert "SENTINEL-ALPHA" in report and "SENTINEL-BETA" in report

    child_session = lines[1].removeprefix("child session: ")
    parent_history = await runtime.history.load("s1")
    parent_ids = {
        c.id for m in parent_history if isinstance(m, AssistantMessage) for c in m.tool_calls
    }
    assert parent_ids == {"p1"}
    assert not any(
        isinstance(m, ToolMessage) and m.tool_call_id in ("k1", "k2") for m in parent_history
    )
    child_history = await runtime.history.load(child_session)
    assert [m.tool_call_id for m in child_history if isinstance(m, ToolMessage)] == ["k1", "k2"]
    meta = await redis.hgetall(f"{PREFIX}:{{{child_session}}}:meta")
    assert meta["source"] == "subagent" and meta["parent"] == "s1"
    assert 0 < await redis.ttl(f"{PREFIX}:{{{child_session}}}:history") <= 7 * 86_400
    # Logs name the child session for the child's calls, and never hold the task's text.
    logged = [r.getMessage() for r in caplog.records]
    assert f"session {child_session}: read completed" in logged
    assert any(f"explorer {child_session} started (35 characters)" in line for line in logged)
    assert not any("alpha.txt and beta.txt" in line for line in logged)
    # The chat hears about the explore call, never about the child's own calls.
    assert [e.tool for e in channel.of(ToolFinished)] == ["explore"]


async def test_the_explorer_cannot_change_anything_whatever_the_model_asks(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "keep.txt").write_text("precious")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "clean up"})),
        calls(
            ("k1", "write", {"path": "new.txt", "content": "x"}),
            ("k2", "bash", {"command": "rm keep.txt"}),
            ("k3", "explore", {"task": "recurse"}),
            ("k4", "bash", {"command": "ls"}),
        ),
        reply("I could only look."),
        reply("done"),
    ]
    runtime, _ = explore_runtime(
        redis, workdir, fake_openai, enabled=("read", "write", "bash", "explore")
    )
    result = await runtime.run("s1", "tidy up", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    assert (workdir / "keep.txt").read_text() == "precious"
    assert not (workdir / "new.txt").exists()
    child = fake_openai.requests[1]
    assert offered(child) == ["read", "bash"]
    answers = {
        m["tool_call_id"]: m["content"]
        for m in fake_openai.requests[2]["messages"]
        if m["role"] == "tool"
    }
    assert "unknown tool 'write'" in answers["k1"] or "not enabled" in answers["k1"]
    assert "the explorer only runs read-only calls (rm deletes files)" in answers["k2"]
    assert "unknown tool 'explore'" in answers["k3"] or "not enabled" in answers["k3"]
    assert "keep.txt" in answers["k4"]  # a read-only command runs
    assert not await runtime.approvals.open_ids()  # nothing asked a human


async def test_without_a_sandbox_the_explorer_runs_no_bash(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    """`auto` without bwrap: every bash call would need a human, and an explorer cannot ask."""
    missing = Sandbox(SandboxMode.AUTO, problem="bwrap is not installed")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "list the files"})),
        calls(("k1", "bash", {"command": "ls"})),
        reply("I could not list them."),
        reply("done"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai, ("bash", "explore"), sandbox=missing)
    result = await runtime.run("s1", "what is here?", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    answers = [m["content"] for m in fake_openai.requests[2]["messages"] if m["role"] == "tool"]
    assert any("no OS sandbox" in answer for answer in answers), answers
    assert not await runtime.approvals.open_ids()


async def test_the_explorer_respects_the_conversations_denies(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("p1", "explore", {"task": "look"})),
        calls(("k1", "bash", {"command": "ls"})),
        reply("nothing"),
        reply("ok"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai, enabled=("read", "bash", "explore"))
    await runtime.policies.change(HERE.id, "bash", "deny", ADMIN)
    await runtime.run("s1", "look around", ALICE, HERE)
    assert offered(fake_openai.requests[1]) == ["read"]
    answer = fake_openai.requests[2]["messages"][-1]["content"]
    assert answer == "unknown tool 'bash'; available tools: read"


async def test_max_steps_exhausted_says_so_and_lists_what_was_looked_at(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("a")
    (workdir / "b.txt").write_text("b")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "find the answer", "max_steps": 2})),
        calls(("k1", "read", {"path": "a.txt"})),
        calls(("k2", "write", {"path": "b.txt", "content": "x"})),
        reply("I found nothing either."),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    await runtime.run("s1", "where is it?", ALICE, HERE)
    report = report_of(fake_openai, 3)
    assert "stop reason: max_steps" in report and "steps used: 2" in report
    assert "No complete answer was found: the explorer used all of its 2 step(s)." in report
    assert "- read a.txt\n- write b.txt (error)" in report  # refused: not one of its tools


async def test_long_findings_are_cut_to_the_report_limit(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("p1", "explore", {"task": "summarize"})),
        reply("x" * 10_000),
        reply("ok"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    await runtime.run("s1", "go", ALICE, HERE)
    report = report_of(fake_openai, 2)
    assert len(report) == REPORT_CHARS
    assert report.endswith("[report cut at 4000 characters]")


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "task: Field required"),
        ({"task": "   "}, "task: Value error, must not be empty"),
        ({"task": "x", "max_steps": 13}, "max_steps: Input should be less than or equal to 12"),
        ({"task": "x", "max_steps": 0}, "max_steps: Input should be greater than or equal to 1"),
        ({"task": "x", "depth": 2}, "depth: Extra inputs are not permitted"),
    ],
)
async def test_invalid_arguments_are_refused_before_any_child_runs(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    arguments: dict[str, Any],
    problem: str,
) -> None:
    fake_openai.script = [calls(("p1", "explore", arguments)), reply("ok")]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    await runtime.run("s1", "go", ALICE, HERE)
    assert len(fake_openai.requests) == 2  # no child request in between
    answer = fake_openai.requests[1]["messages"][-1]["content"]
    assert answer.startswith("invalid arguments for explore") and problem in answer
    assert not [k async for k in redis.scan_iter(match=f"{PREFIX}:*explore-*")]


async def test_explores_of_one_batch_run_one_after_another_and_nest_in_the_trace(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("A")
    (workdir / "b.txt").write_text("B")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "first"}), ("p2", "explore", {"task": "second"})),
        calls(("k1", "read", {"path": "a.txt"}), ("k2", "read", {"path": "b.txt"})),
        reply("first: A and B"),
        calls(("k3", "read", {"path": "b.txt"})),
        reply("second: B"),
        reply("both done"),
    ]
    tracer = Tracer("metadata", TraceStore(redis, Keys(PREFIX), 3600))
    runtime, _ = explore_runtime(redis, workdir, fake_openai, tracer=tracer)
    result = await runtime.run("s1", "go", ALICE, HERE)
    assert result.final_text == "both done"
    # Sequential: the second child's first request comes after the first child's answer.
    tasks = [r["messages"][1]["content"] for r in fake_openai.requests[1:5]]
    assert tasks == ["first", "first", "second", "second"]

    assert result.trace_id is not None
    stored = await redis.get(f"{PREFIX}:trace:{result.trace_id}")
    assert stored is not None
    doc = json.loads(stored)
    step = doc["root"]["children"][0]
    explores = [c for c in step["children"] if c["name"] == "tool.call"]
    assert [c["attributes"]["tool"] for c in explores] == ["explore", "explore"]
    first, second = (c["children"][0] for c in explores)
    assert first["name"] == second["name"] == "subagent.run"
    assert first["start_ms"] + first["duration_ms"] <= second["start_ms"]
    assert first["status"] == "final" and first["attributes"]["steps"] == 2
    child_steps = first["children"]
    assert [s["name"] for s in child_steps] == ["agent.step", "agent.step"]
    assert [c["name"] for c in child_steps[0]["children"]] == ["llm.call", "tool.call", "tool.call"]
    reads = child_steps[0]["children"][1:]
    assert [(r["attributes"]["tool"], r["attributes"]["index"]) for r in reads] == [
        ("read", 0),
        ("read", 1),
    ]
    # The parent's next step is back under the parent's run, not the child's.
    assert [c["name"] for c in doc["root"]["children"]] == ["agent.step", "agent.step"]
    # Metadata mode: the task text is nowhere, only its size.
    assert '"first"' not in json.dumps(doc) and first["attributes"]["task_chars"] == 5


async def test_cancelling_the_parent_cancels_the_child(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("A")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "slow"})),
        Step(tool_calls=[("k1", "read", {"path": "a.txt"})], delay=0.5),
        reply("never asked"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    run = asyncio.create_task(runtime.run("s1", "go", ALICE, HERE))
    for _ in range(200):
        if len(fake_openai.requests) == 2:
            break
        await asyncio.sleep(0.01)
    said = await runtime.cancel("s1", ALICE, HERE)
    assert said == "Stopping the running request."
    result = await asyncio.wait_for(run, 10)
    assert result.stop_reason is StopReason.CANCELLED
    assert len(fake_openai.requests) == 2  # neither the child nor the parent asked again
    report = [m for m in await runtime.history.load("s1") if isinstance(m, ToolMessage)]
    assert "stop reason: cancelled" in report[0].content
    assert report[0].status is ToolStatus.CANCELLED


@pytest.mark.parametrize(
    "file_rules",
    [
        {"tools": {"deny": ["read"]}},
        {"tools": {"ask": ["read"]}},
        {"tools": {"allow": ["explore"]}},
    ],
)
async def test_the_explorer_reads_only_where_the_policy_lets_read_run_unasked(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, file_rules: dict[str, Any]
) -> None:
    """Even where the parent has only `explore` (so `read` is not enabled for it)."""
    (workdir / "secret.txt").write_text("TOP-SECRET")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "read secret.txt"})),
        calls(("k1", "read", {"path": "secret.txt"})),
        reply("nothing"),
        reply("ok"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    runtime.policies.document = PolicyDocument.model_validate(file_rules)
    await runtime.run("s1", "go", ALICE, HERE)
    assert offered(fake_openai.requests[1]) == []
    answer = fake_openai.requests[2]["messages"][-1]["content"]
    assert answer.startswith("unknown tool 'read'") and "TOP-SECRET" not in json.dumps(
        fake_openai.requests
    )


async def test_a_deny_made_during_an_exploration_applies_to_the_childs_next_call(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("CONTENT-OF-A")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "look"})),
        Step(tool_calls=[("k1", "bash", {"command": "cat a.txt"})], delay=0.5),
        reply("done"),
        reply("ok"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai, enabled=("bash", "explore"))
    run = asyncio.create_task(runtime.run("s1", "go", ALICE, HERE))
    for _ in range(200):
        if len(fake_openai.requests) == 2:
            break
        await asyncio.sleep(0.01)
    assert offered(fake_openai.requests[1]) == ["read", "bash"]
    await runtime.policies.change(HERE.id, "bash", "deny", ADMIN)  # while the child thinks
    await asyncio.wait_for(run, 10)
    answer = fake_openai.requests[2]["messages"][-1]["content"]
    assert "bash is not allowed to the explorer here" in answer
    assert "CONTENT-OF-A" not in answer


async def test_a_failed_explorer_still_reports_and_leaves_nothing_without_expiry(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [calls(("p1", "explore", {"task": "look"})), Step(status=400), reply("ok")]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    result = await runtime.run("s1", "go", ALICE, HERE)
    assert result.final_text == "ok"
    report = report_of(fake_openai, 2)
    assert "stop reason: error" in report and "No complete answer was found" in report
    child_keys = [k async for k in redis.scan_iter(match=f"{PREFIX}:*explore-*")]
    assert len(child_keys) == 2  # history and meta
    for key in child_keys:
        assert 0 < await redis.ttl(key) <= 7 * 86_400


async def test_an_explorer_takes_no_more_steps_than_a_run_may(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("A")
    fake_openai.script = [
        calls(("p1", "explore", {"task": "look", "max_steps": 12})),
        calls(("k1", "read", {"path": "a.txt"})),
        reply("ok"),
    ]
    runtime, _ = explore_runtime(redis, workdir, fake_openai)
    explore_tool = runtime.registry.resolve("explore")
    assert isinstance(explore_tool, ExploreTool)
    explore_tool.explorer.step_limit = 1  # type: ignore[attr-defined]
    await runtime.run("s1", "go", ALICE, HERE)
    report = report_of(fake_openai, 2)
    assert "stop reason: max_steps" in report and "steps used: 1" in report


async def test_the_explorer_runs_on_the_default_model_whatever_the_conversation_chose(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, big_model: FakeOpenAI
) -> None:
    listed = ListedModel(
        name="big", base_url=big_model.base_url, api_key_env="K", model="big-1", context_window=8192
    )

    def models(model: ListedModel) -> OpenAIProvider:
        return OpenAIProvider(model.model, api_key="k", base_url=model.base_url, max_retries=0)

    document = PolicyDocument(models=[listed])
    runtime, _ = explore_runtime(redis, workdir, fake_openai, document=document, models=models)
    await ConversationChoices(runtime.policies).switch_model("big", ALICE, HERE)
    big_model.script = [calls(("p1", "explore", {"task": "look"})), reply("done")]
    fake_openai.script = [reply("the child's findings")]
    result = await runtime.run("s1", "look around", ALICE, HERE)
    assert result.final_text == "done"
    assert [r["model"] for r in big_model.requests] == ["big-1", "big-1"]
    assert [r["model"] for r in fake_openai.requests] == ["fake"]  # the child
    assert "the child's findings" in report_of(big_model, 1)
