"""Tracing on a real Redis: the shape of a paused-and-resumed run's trees, what each mode keeps,
that a broken recorder or store never breaks a run, and `clawgate trace show`."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.cli import main
from bot.operator import run_approvals_command
from runtime.agent import Runtime
from runtime.models import StopReason, ToolCall, ToolResult, ToolStatus
from runtime.providers.base import Provider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.store.keys import Keys
from runtime.tracing import hooks, recorder
from runtime.tracing.context import current_trace_id
from runtime.tracing.document import SpanDoc, TraceDoc
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel, make_runtime

TTL = 3600


def openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)


def traced(
    redis: aioredis.Redis, workdir: Path, provider: Provider, mode: str = "metadata"
) -> tuple[Runtime, RecordingChannel, TraceStore]:
    runtime, channel = make_runtime(redis, workdir, provider)
    store = TraceStore(redis, Keys(PREFIX), TTL)
    runtime.tracer = Tracer(mode, store)
    return runtime, channel, store


async def load(store: TraceStore, trace_id: str | None) -> TraceDoc:
    assert trace_id is not None
    doc = await store.load(trace_id)
    assert doc is not None, f"trace {trace_id} was not stored"
    return doc


def named(span: SpanDoc, name: str) -> list[SpanDoc]:
    return [s for s in span.walk() if s.name == name]


@pytest.fixture
def cli_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", PREFIX)
    return redis_url


async def trace_show(*args: str) -> int:
    # `main` runs its own event loop: give it a thread.
    return await asyncio.to_thread(main, ["trace", "show", *args])


# -- 1. the tree of a paused-and-resumed run ------------------------------------------------------


async def test_paused_and_resumed_run_draws_as_one_tree(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "x"):
        (workdir / name).write_text(f"content of {name}")
    fake_openai.script = [
        calls(
            ("call_r1", "read", {"path": "a.txt"}),
            ("call_r2", "read", {"path": "b.txt"}),
            ("call_r3", "read", {"path": "c.txt"}),
            ("call_rm", "bash", {"command": "rm x"}),
        ),
        reply("Read them all and removed x."),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))

    first = await runtime.run("t1", "read the notes, then remove x", ALICE, HERE)

    assert first.stop_reason is StopReason.APPROVAL_REQUIRED and first.approval_id
    paused = await load(store, first.trace_id)
    assert await redis.ttl(Keys(PREFIX).trace(paused.trace_id)) > TTL - 60
    root = paused.root
    assert (root.name, root.status) == ("agent.run", "approval_required")
    assert root.attributes["session"] == "t1"
    assert root.attributes["waits_for"] == first.approval_id
    (step,) = root.children
    assert step.name == "agent.step" and step.attributes["step"] == 1
    assert [c.name for c in step.children] == ["llm.call", *["tool.call"] * 4]
    llm, *tools = step.children
    assert llm.attributes["provider"] == "openai:fake"
    assert llm.attributes["messages"] == 2  # system + user
    assert llm.attributes["prompt_tokens"] == 20 and llm.attributes["completion_tokens"] == 5
    assert llm.attributes["tools_called"] == ["read", "read", "read", "bash"]
    # The three reads ran concurrently; the tree keeps the model's order, not finishing order.
    assert [t.attributes["call_id"] for t in tools] == ["call_r1", "call_r2", "call_r3", "call_rm"]
    assert [t.attributes["index"] for t in tools] == [0, 1, 2, 3]
    assert [t.status for t in tools] == ["completed"] * 3 + ["suspended"]
    assert all(t.duration_ms is not None and t.duration_ms >= 0 for t in tools)
    (pause,) = tools[3].children
    assert (pause.name, pause.status) == ("approval.pause", "pending")
    assert pause.attributes["approval_id"] == first.approval_id
    loaded = await runtime.approvals.load(first.approval_id)
    assert loaded is not None and loaded[1].trace_id == paused.trace_id

    decision = await runtime.decide(first.approval_id, True, ADMIN, HERE)

    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    assert not (workdir / "x").exists()
    resumed = await load(store, decision.run.trace_id)
    assert resumed.trace_id != paused.trace_id
    assert [(link.trace_id, link.approval_id) for link in resumed.links] == [
        (paused.trace_id, first.approval_id)
    ]
    again = resumed.root
    assert (again.name, again.status) == ("approval.resume", "final")
    assert again.attributes["decision"] == "approved"
    assert again.attributes["decided_by"] == ADMIN.key
    assert again.attributes["resumes"] == paused.trace_id
    resumed_step, next_step = again.children
    assert resumed_step.attributes == {"step": 1, "resumed": first.approval_id}
    (approved,) = resumed_step.children
    assert approved.name == "tool.call" and approved.status == "completed"
    assert approved.attributes["index"] == 3 and approved.attributes["call_id"] == "call_rm"
    assert approved.attributes["approval_id"] == first.approval_id
    assert next_step.attributes["step"] == 2
    assert [c.name for c in next_step.children] == ["llm.call"]
    assert await store.resumed_by(paused.trace_id) == [resumed.trace_id]

    assert await trace_show(paused.trace_id) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"trace {paused.trace_id}  session t1")
    assert lines[1].startswith("agent.run approval_required")
    assert "├─ llm.call openai:fake ok" in out
    reads = [i for i, line in enumerate(lines) if "tool.call read #" in line]
    assert [lines[i].split("tool.call read ")[1][:2] for i in reads] == ["#0", "#1", "#2"]
    at_pause = next(i for i, line in enumerate(lines) if "approval.pause pending" in line)
    at_resume = next(i for i, line in enumerate(lines) if "approval.resume final" in line)
    assert reads[-1] < at_pause < at_resume
    assert f"[trace {resumed.trace_id}] approval.resume final" in lines[at_resume]
    assert "└─ " in lines[at_resume]  # drawn beneath the pause
    assert "tool.call bash #3 completed" in out

    assert await trace_show(paused.trace_id, "--json") == 0
    nested = json.loads(capsys.readouterr().out)
    assert nested["trace"]["trace_id"] == paused.trace_id
    assert [r["trace"]["trace_id"] for r in nested["resumed_by"]] == [resumed.trace_id]

    # The operator's view of the approval points at the trace.
    shown = io.StringIO()
    show = argparse.Namespace(verb="show", id=first.approval_id, json=False)
    assert await run_approvals_command(runtime, show, shown) == 0
    assert f"{paused.trace_id}  (clawgate trace show {paused.trace_id})" in shown.getvalue()


async def test_a_run_paused_twice_draws_each_resume_under_its_pause(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    fake_openai.script = [
        calls(
            ("call_a", "bash", {"command": "rm a.txt"}),
            ("call_r", "read", {"path": "b.txt"}),
            ("call_b", "bash", {"command": "rm b.txt"}),
        ),
        reply("both gone"),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))
    first = await runtime.run("t7", "clean up", ALICE, HERE)
    assert first.approval_id is not None
    one = await runtime.decide(first.approval_id, True, ADMIN, HERE)
    assert one.run is not None and one.run.approval_id is not None
    two = await runtime.decide(one.run.approval_id, True, ADMIN, HERE)
    assert two.run is not None and two.run.stop_reason is StopReason.FINAL

    middle = await load(store, one.run.trace_id)
    assert middle.links[0].trace_id == first.trace_id
    (step,) = middle.root.children  # the rest of the batch, then a new pause
    assert [(c.attributes["call_id"], c.attributes["index"], c.status) for c in step.children] == [
        ("call_a", 0, "completed"),
        ("call_r", 1, "completed"),
        ("call_b", 2, "suspended"),
    ]
    (pause,) = step.children[2].children
    assert pause.attributes["approval_id"] == one.run.approval_id
    assert middle.root.attributes["approval_id"] == first.approval_id  # the one it resumed
    assert middle.root.attributes["waits_for"] == one.run.approval_id
    last = await load(store, two.run.trace_id)
    assert last.links[0].trace_id == middle.trace_id

    assert first.trace_id is not None
    assert await trace_show(first.trace_id) == 0
    lines = capsys.readouterr().out.splitlines()
    at_middle = next(i for i, line in enumerate(lines) if f"[trace {middle.trace_id}]" in line)
    at_last = next(i for i, line in enumerate(lines) if f"[trace {last.trace_id}]" in line)
    assert at_middle < at_last
    indent = [len(line) - len(line.lstrip("│├└─ ")) for line in (lines[at_middle], lines[at_last])]
    assert indent[0] < indent[1]  # the second resume hangs under the first resume's pause


async def test_concurrent_calls_hang_under_their_step_in_call_order(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """Spans opened inside tasks that finish in reverse order still come out in call order."""
    tracer = Tracer("metadata")

    async def one(index: int) -> None:
        call = ToolCall(id=f"c{index}", name="read", arguments='{"path":"p"}')
        span = hooks.tool_started(call, index, lambda c: c.arguments)
        await asyncio.sleep(0.01 * (3 - index))  # the first call finishes last
        result = ToolResult(
            call_id=call.id, tool="read", status=ToolStatus.COMPLETED, model_text="t", display="d"
        )
        hooks.tool_finished(span, result)

    async with tracer.trace("agent.run", session="s") as run:
        hooks.begin_step(1)
        ids = [current_trace_id()]
        await asyncio.gather(*(one(i) for i in range(3)))
        assert run.trace is not None
        doc = run.trace.to_doc()
    assert ids == [doc.trace_id]
    (step,) = doc.root.children
    assert [c.attributes["call_id"] for c in step.children] == ["c0", "c1", "c2"]
    assert current_trace_id() is None  # the context is restored after the run


# -- 2. metadata mode keeps no text ---------------------------------------------------------------


async def test_metadata_mode_keeps_hashes_and_sizes_but_no_text(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "secret-notes.txt").write_text("FILE-SENTINEL-3141 the launch code")
    fake_openai.script = [
        calls(("call_1", "read", {"path": "ARG-SENTINEL-2718/missing.txt"})),
        calls(("call_2", "read", {"path": "secret-notes.txt"})),
        reply("ANSWER-SENTINEL-1618"),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai), "metadata")

    result = await runtime.run("t2", "PROMPT-SENTINEL-1414 what is in it?", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    doc = await load(store, result.trace_id)
    stored = await redis.get(Keys(PREFIX).trace(doc.trace_id))
    assert stored is not None
    for sentinel in ("PROMPT-SENTINEL", "ARG-SENTINEL", "FILE-SENTINEL", "ANSWER-SENTINEL"):
        assert sentinel not in stored
    assert "secret-notes.txt" not in stored  # argument values are text too
    assert doc.mode == "metadata"
    assert all(not s.payloads for s in doc.spans())
    assert doc.root.attributes["input_chars"] == len("PROMPT-SENTINEL-1414 what is in it?")
    assert len(str(doc.root.attributes["input_sha256"])) == 64
    missing, ok = named(doc.root, "tool.call")
    assert missing.status == "error"  # no such file
    assert missing.attributes["args_keys"] == ["path"]
    assert ok.status == "completed"
    assert ok.attributes["args_keys"] == ["path"]
    assert len(str(ok.attributes["args_sha256"])) == 64
    assert ok.attributes["output_chars"] == len("FILE-SENTINEL-3141 the launch code")
    assert isinstance(ok.attributes["output_sha256"], str)


# -- 3. replay mode keeps redacted, truncated text ------------------------------------------------


async def test_replay_mode_keeps_payloads_redacted_and_cut(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    long_text = "line of the big file\n" * 500  # ~10,000 characters
    (workdir / "big.txt").write_text(long_text)
    (workdir / "keys.txt").write_text("OPENAI=sk-abcdefghijklmnopqrstuvwxyz0123 and more")
    secret_args = {
        "path": "keys.txt",
        "api_key": "AK-VALUE-1",
        "password": "PW-VALUE-2",
        "authorization": "AUTH-VALUE-3",
        "token": "TOKEN-VALUE-4",
    }
    fake_openai.script = [
        calls(
            ("call_big", "read", {"path": "big.txt"}),
            ("call_keys", "read", {"path": "keys.txt"}),
            ("call_secret", "read", secret_args),
        ),
        reply("done"),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai), "replay")

    result = await runtime.run("t3", "look, my password=hunter2 and PROMPT-VISIBLE", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL
    doc = await load(store, result.trace_id)
    stored = await redis.get(Keys(PREFIX).trace(doc.trace_id))
    assert stored is not None
    assert doc.mode == "replay"
    assert "PROMPT-VISIBLE" in doc.root.payloads["input"]
    assert "hunter2" not in stored
    for value in ("AK-VALUE-1", "PW-VALUE-2", "AUTH-VALUE-3", "TOKEN-VALUE-4"):
        assert value not in stored
    assert "sk-abcdefghijklmnopqrstuvwxyz0123" not in stored
    big, keys, secret = named(doc.root, "tool.call")
    assert json.loads(big.payloads["args"]) == {"path": "big.txt"}
    assert big.payloads["output"].startswith("line of the big file")
    assert len(big.payloads["output"]) < 2_100
    assert "[cut at 2000 of" in big.payloads["output"]
    assert big.attributes["output_chars"] == len(long_text)  # metadata is kept as well
    assert "[redacted]" in keys.payloads["output"] and "and more" in keys.payloads["output"]
    masked = json.loads(secret.payloads["args"])
    assert masked["path"] == "keys.txt"
    assert {masked[k] for k in ("api_key", "password", "authorization", "token")} == {"[redacted]"}
    asked, answered = named(doc.root, "llm.call")
    assert "[redacted]" in asked.payloads["output"]  # the model's call, secrets masked
    assert json.loads(answered.payloads["output"])["content"] == "done"
    assert "PROMPT-VISIBLE" in asked.payloads["input"]


# -- 4. off mode stores nothing -------------------------------------------------------------------


async def test_off_mode_stores_nothing(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "a.txt").write_text("a")
    fake_openai.script = [calls(("call_1", "read", {"path": "a.txt"})), reply("done")]
    runtime, _, _ = traced(redis, workdir, openai(fake_openai), "off")

    result = await runtime.run("t4", "read a.txt", ALICE, HERE)

    assert result.stop_reason is StopReason.FINAL and result.trace_id is None
    assert await redis.keys(f"{PREFIX}:trace:*") == []


# -- 5. a broken recorder or store never breaks a run ---------------------------------------------


class BrokenStore:
    def __init__(self) -> None:
        self.calls = 0

    async def save(self, doc: TraceDoc) -> None:
        self.calls += 1
        raise ConnectionError("trace store is down")


async def test_a_failing_store_or_recorder_never_breaks_the_run(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (workdir / "a.txt").write_text("a")
    (workdir / "victim.txt").write_text("precious")
    monkeypatch.setattr(recorder, "_warned", set())
    store = BrokenStore()
    fake_openai.script = [
        calls(("call_1", "read", {"path": "a.txt"})),
        reply("first done"),
        calls(("call_2", "bash", {"command": "rm victim.txt"})),
        reply("second done"),
    ]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai))
    runtime.tracer = Tracer("replay", store)

    with caplog.at_level(logging.WARNING, logger="runtime.tracing.recorder"):
        first = await runtime.run("t5", "read a.txt", ALICE, HERE)
        assert first.stop_reason is StopReason.FINAL and first.final_text == "first done"

        # Now the recorder itself breaks: every span operation raises.
        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("recorder bug")

        monkeypatch.setattr(recorder.Tracer, "record_payload", broken)
        monkeypatch.setattr(recorder.Trace, "child", broken)
        monkeypatch.setattr(recorder.Trace, "begin_step", broken)
        monkeypatch.setattr(recorder.Trace, "to_doc", broken)
        second = await runtime.run("t5", "remove victim.txt", ALICE, HERE)
        assert second.stop_reason is StopReason.APPROVAL_REQUIRED
        assert second.approval_id is not None
        decision = await runtime.decide(second.approval_id, True, ADMIN, HERE)

    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    assert decision.run.final_text == "second done"
    assert not (workdir / "victim.txt").exists()
    assert store.calls == 1  # then the document could not even be built
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if "storing failed" in w]) == 1
    assert len([w for w in warnings if "recording failed" in w]) == 1  # said once


async def test_a_store_that_hangs_is_given_up_on(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    class SlowStore:
        async def save(self, doc: TraceDoc) -> None:
            await asyncio.sleep(30)

    fake_openai.script = [reply("quick")]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai))
    runtime.tracer = Tracer("metadata", SlowStore(), save_timeout=0.05)
    result = await asyncio.wait_for(runtime.run("t6", "hi", ALICE, HERE), timeout=5)
    assert result.final_text == "quick"


# -- 6. unknown ids -------------------------------------------------------------------------------


async def test_unknown_trace_id_is_one_clear_line_and_exit_1(
    redis: aioredis.Redis, cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await trace_show("nosuchtrace") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("clawgate: unknown trace id 'nosuchtrace'")


def test_trace_show_needs_redis_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["trace", "show", "abc"]) == 2
    assert "REDIS_URL" in capsys.readouterr().err
