"""The agent loop end to end: the real `openai` client against a local fake server, history in a
real Redis, events delivered to a recording channel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from runtime.agent import DEMO_NOTICE, Runtime
from runtime.channel import Notice, Reply, RunFinished, ToolFinished, ToolStarted
from runtime.loop import INTERRUPTED, paired_tool_results
from runtime.middleware.chain import Middleware
from runtime.middleware.tool_policy import ToolPolicyMiddleware
from runtime.models import (
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolMessage,
    ToolStatus,
    UserMessage,
)
from runtime.policy.model import PolicyDocument, ToolRules
from runtime.providers.base import Provider
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.store.history import HistoryStore
from runtime.tools.bash import BashTool
from runtime.tools.files import ReadTool
from runtime.tools.registry import ToolRegistry
from runtime.tools.sandbox import Sandbox, SandboxMode
from tests import support
from tests.fake_openai import FakeOpenAI, calls, error, reply
from tests.support import ALICE as ACTOR
from tests.support import HERE as CONVERSATION
from tests.support import RecordingChannel


def make_runtime(
    redis: aioredis.Redis,
    workdir: Path,
    provider: Provider,
    max_steps: int = 6,
    registry: ToolRegistry | None = None,
    document: PolicyDocument | None = None,
    middlewares: list[Middleware] | None = None,
) -> tuple[Runtime, RecordingChannel, HistoryStore]:
    runtime, channel = support.make_runtime(
        redis,
        workdir,
        provider,
        max_steps=max_steps,
        registry=registry,
        document=document,
        middlewares=middlewares,
    )
    return runtime, channel, runtime.history


def openai_provider(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake-model", api_key="sk-test", base_url=fake.base_url, max_retries=0)


async def test_tool_call_runs_and_final_answer_is_delivered(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "notes.txt").write_text("sentinel-4711\n")
    fake_openai.script = [
        calls(("call_1", "read", {"path": "notes.txt"})),
        reply("The file says sentinel-4711."),
    ]
    runtime, channel, history = make_runtime(redis, workdir, openai_provider(fake_openai))

    result = await runtime.run("s1", "what is in notes.txt?", ACTOR, CONVERSATION)

    assert result.stop_reason is StopReason.FINAL
    assert result.steps == 2
    assert [e.text for e in channel.of(Reply)] == ["The file says sentinel-4711."]
    finished = channel.of(ToolFinished)
    assert len(finished) == 1 and finished[0].status is ToolStatus.COMPLETED
    assert all(conv == CONVERSATION for conv, _ in channel.events)
    # What the real openai client sent: tools from the argument models, then the tool result.
    first, second = fake_openai.requests
    assert {t["function"]["name"] for t in first["tools"]} == {"read", "write", "edit", "bash"}
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "what is in notes.txt?"}
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sentinel-4711\n",
    }
    # History in Redis: user, assistant(tool call), tool result, final answer.
    stored = await history.load("s1")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert await redis.llen("cgtest:{s1}:history") == 4


async def test_runs_count_tool_calls_model_latency_and_tokens(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "notes.txt").write_text("x\n")
    fake_openai.script = [calls(("call_1", "read", {"path": "notes.txt"})), reply("done")]
    provider = openai_provider(fake_openai)
    runtime, _, _ = make_runtime(redis, workdir, provider)

    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    tokens = {"provider": provider.name}
    before = (
        value("clawgate_tool_calls_total", tool="read", status="completed"),
        value("clawgate_llm_seconds_count", provider=provider.name),
        value("clawgate_llm_tokens_total", kind="prompt", **tokens),
        value("clawgate_llm_tokens_total", kind="completion", **tokens),
    )
    await runtime.run("s-metrics", "read it", ACTOR, CONVERSATION)
    after = (
        value("clawgate_tool_calls_total", tool="read", status="completed"),
        value("clawgate_llm_seconds_count", provider=provider.name),
        value("clawgate_llm_tokens_total", kind="prompt", **tokens),
        value("clawgate_llm_tokens_total", kind="completion", **tokens),
    )
    # One read; two model calls: (system + user) = 2 messages, then 4 (+ call and result).
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 2, 10 * (2 + 4), 5 + 5]


async def test_history_is_append_only_across_runs(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [reply("first"), reply("second")]
    runtime, _, history = make_runtime(redis, workdir, openai_provider(fake_openai))
    await runtime.run("s2", "one", ACTOR, CONVERSATION)
    before = await redis.lrange("cgtest:{s2}:history", 0, -1)
    await runtime.run("s2", "two", ACTOR, CONVERSATION)
    after = await redis.lrange("cgtest:{s2}:history", 0, -1)
    assert after[: len(before)] == before
    assert len(after) == 4
    # The second request carried the whole conversation.
    assert [m["content"] for m in fake_openai.requests[1]["messages"][1:]] == [
        "one",
        "first",
        "two",
    ]
    stored = await history.load("s2")
    assert isinstance(stored[0], UserMessage) and stored[0].actor == "console:alice"


@pytest.mark.parametrize("status", [500, 401, 429])
async def test_provider_failure_stops_with_error_and_tells_the_user(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, status: int
) -> None:
    fake_openai.script = [error(status)]
    runtime, channel, _ = make_runtime(redis, workdir, openai_provider(fake_openai))
    result = await runtime.run("s3", "hello", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.ERROR
    (message,) = channel.of(Reply)
    assert isinstance(message, Reply)
    assert f"HTTP {status}" in message.text
    assert "Traceback" not in message.text
    finished = channel.of(RunFinished)
    assert isinstance(finished[-1], RunFinished) and finished[-1].stop_reason is StopReason.ERROR


async def test_unreachable_model_server_is_a_clear_error(
    redis: aioredis.Redis, workdir: Path
) -> None:
    provider = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5)
    runtime, channel, _ = make_runtime(redis, workdir, provider)
    result = await runtime.run("s4", "hello", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.ERROR
    assert "cannot reach the model server" in (result.error or "")
    assert "cannot reach the model server" in channel.of(Reply)[0].text


async def test_max_steps_stops_a_model_that_never_finishes(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    # A new file each step: the same read again and again would stop as a loop (repeats.py).
    for i in range(10):
        (workdir / f"{i}.txt").write_text("a")
    fake_openai.script = [calls((f"call_{i}", "read", {"path": f"{i}.txt"})) for i in range(10)]
    runtime, channel, history = make_runtime(
        redis, workdir, openai_provider(fake_openai), max_steps=3
    )
    result = await runtime.run("s5", "loop forever", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.MAX_STEPS
    assert result.steps == 3
    assert len(fake_openai.requests) == 3
    assert "max_steps" in channel.of(Reply)[-1].text
    stored = await history.load("s5")
    assert sum(isinstance(m, ToolMessage) for m in stored) == 3


async def test_invalid_arguments_from_the_model_are_reported_back_and_nothing_runs(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("call_1", "write", {"path": "x.txt", "contents": "typo"})),
        reply("Sorry."),
    ]
    runtime, _, _ = make_runtime(redis, workdir, openai_provider(fake_openai))
    result = await runtime.run("s6", "write x", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.FINAL
    tool_message = fake_openai.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "invalid arguments for write" in tool_message["content"]
    assert not (workdir / "x.txt").exists()


async def test_denied_tool_is_reported_to_the_model(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    registry = ToolRegistry([ReadTool(), BashTool(timeout=5)])
    fake_openai.script = [calls(("call_1", "bash", {"command": "touch pwned"})), reply("ok")]
    runtime, channel, _ = make_runtime(
        redis,
        workdir,
        openai_provider(fake_openai),
        registry=registry,
        document=PolicyDocument(tools=ToolRules(deny=["bash"])),
        middlewares=[ToolPolicyMiddleware()],  # the runtime puts each step's policy on it
    )
    await runtime.run("s7", "touch", ACTOR, CONVERSATION)
    assert not (workdir / "pwned").exists()
    assert "bash" not in str(fake_openai.requests[0].get("tools"))  # never offered
    assert "denied here by policy" in fake_openai.requests[1]["messages"][-1]["content"]
    (finished,) = channel.of(ToolFinished)
    assert finished.status is ToolStatus.DENIED


async def test_demo_model_reads_a_file_and_says_once_that_it_is_offline(
    redis: aioredis.Redis, workdir: Path
) -> None:
    (workdir / "README.md").write_text("# Hello demo\n")
    runtime, channel, _ = make_runtime(redis, workdir, DemoProvider())
    first = await runtime.run("s8", "read README.md", ACTOR, CONVERSATION)
    second = await runtime.run("s8", "run: echo demo-ok", ACTOR, CONVERSATION)
    assert first.stop_reason is second.stop_reason is StopReason.FINAL
    assert first.final_text == "# Hello demo"
    assert second.final_text is not None and "demo-ok" in second.final_text
    notices = channel.of(Notice)
    assert notices == [Notice(DEMO_NOTICE)]


async def test_demo_model_grammar(redis: aioredis.Redis, workdir: Path) -> None:
    runtime, channel, _ = make_runtime(redis, workdir, DemoProvider())
    await runtime.run("s9", "write notes/a.txt: hello world", ACTOR, CONVERSATION)
    assert (workdir / "notes/a.txt").read_text() == "hello world\n"
    await runtime.run("s9", "edit notes/a.txt: world => there", ACTOR, CONVERSATION)
    assert (workdir / "notes/a.txt").read_text() == "hello there\n"
    await runtime.run("s9", 'call read {"path": "notes/a.txt", "offset": 0}', ACTOR, CONVERSATION)
    assert "greater than or equal to 1" in channel.of(Reply)[-1].text
    result = await runtime.run("s9", "tell me a joke", ACTOR, CONVERSATION)
    assert result.final_text is not None and "read <path>" in result.final_text


async def test_cancel_stops_the_run_before_the_next_call(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(
            ("call_1", "bash", {"command": "sleep 0.2; touch first"}),
            ("call_2", "bash", {"command": "touch second"}),
        ),
        reply("never asked"),
    ]
    # touch would otherwise wait for approval (and run read-only without it)
    ungated = ToolRegistry([BashTool(timeout=10, sandbox=Sandbox(SandboxMode.OFF))])
    runtime, channel, history = make_runtime(
        redis, workdir, openai_provider(fake_openai), registry=ungated, middlewares=[]
    )
    task = asyncio.create_task(runtime.run("s10", "go", ACTOR, CONVERSATION))
    while not channel.of(ToolStarted):  # the first call is running: cancel now
        await asyncio.sleep(0.01)
    assert "Stopping" in await runtime.cancel("s10", ACTOR, CONVERSATION)
    result = await task
    assert result.stop_reason is StopReason.CANCELLED
    assert (workdir / "first").exists()  # a started call finishes; cancel is checked between calls
    assert not (workdir / "second").exists()
    assert len(fake_openai.requests) == 1
    stored = await history.load("s10")
    assert stored[-1].role == "tool" and stored[-1].status is ToolStatus.CANCELLED


async def test_history_with_a_missing_tool_result_is_repaired_for_the_model(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    _, _, history = make_runtime(redis, workdir, DemoProvider())
    # A crash between the assistant turn and its results would leave this behind.
    await history.append(
        "s11",
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=[ToolCall(id="lost", name="read", arguments="{}")]),
    )
    fake_openai.script = [reply("recovered")]
    runtime, _, _ = make_runtime(redis, workdir, openai_provider(fake_openai))
    result = await runtime.run("s11", "again", ACTOR, CONVERSATION)
    assert result.stop_reason is StopReason.FINAL
    sent = fake_openai.requests[0]["messages"]
    assert sent[3] == {"role": "tool", "tool_call_id": "lost", "content": INTERRUPTED}
    assert sent[4]["content"] == "again"


def test_paired_tool_results_leaves_complete_history_alone() -> None:
    messages: list[Message] = [
        UserMessage(content="x"),
        AssistantMessage(tool_calls=[ToolCall(id="a", name="read")]),
        ToolMessage(tool_call_id="a", name="read", content="ok", status=ToolStatus.COMPLETED),
        AssistantMessage(content="done"),
    ]
    assert paired_tool_results(messages) == messages


async def test_sessions_keep_separate_histories_under_their_hash_tag(
    redis: aioredis.Redis, workdir: Path
) -> None:
    runtime, _, _ = make_runtime(redis, workdir, DemoProvider())
    await runtime.run("slack:T1:C1:1.2", "hello", ACTOR, CONVERSATION)
    await runtime.run("feishu:oc_1", "hello", ACTOR, CONVERSATION)
    keys = sorted([k async for k in redis.scan_iter("cgtest:*")])  # a cluster: every master
    assert keys == [
        "cgtest:{feishu:oc_1}:history",
        "cgtest:{feishu:oc_1}:jobs",
        "cgtest:{feishu:oc_1}:run",
        "cgtest:{slack:T1:C1:1.2}:history",
        "cgtest:{slack:T1:C1:1.2}:jobs",
        "cgtest:{slack:T1:C1:1.2}:run",
    ]
    raw = await redis.lindex("cgtest:{feishu:oc_1}:history", 0)
    assert raw is not None and json.loads(raw)["content"] == "hello"


def test_paired_tool_results_drops_late_answers() -> None:
    messages: list[Message] = [
        AssistantMessage(tool_calls=[ToolCall(id="a", name="read")]),
        UserMessage(content="meanwhile"),
        ToolMessage(tool_call_id="a", name="read", content="late", status=ToolStatus.COMPLETED),
    ]
    repaired = paired_tool_results(messages)
    assert [m.role for m in repaired] == ["assistant", "tool", "user"]
    assert isinstance(repaired[1], ToolMessage) and repaired[1].content == INTERRUPTED
