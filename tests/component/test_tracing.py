"""Tracing on a real Redis: the shape of a paused-and-resumed run's trees, what each mode keeps,
that a broken recorder or store never breaks a run, and `clawgate trace show`."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from redis.asyncio.client import Pipeline

from bot.cli import main
from bot.cli_approvals import run_approvals_command
from runtime.agent import Runtime
from runtime.audit import AuditLog
from runtime.channel import ApprovalRequested
from runtime.loop import LoopOptions
from runtime.models import StopReason, ToolCall, ToolResult, ToolStatus
from runtime.policy.model import PolicyDocument
from runtime.providers.base import Provider, ProviderError
from runtime.providers.demo import DemoProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.redact import redact_text
from runtime.store.keys import Keys
from runtime.trace_context import current_trace_id
from runtime.tracing import hooks, recorder
from runtime.tracing.document import SpanDoc, TraceDoc, TraceLink
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.component.test_approval_flow import two_gated_calls
from tests.conftest import CLUSTER
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.http_client import serving_app
from tests.support import ADMIN, ALICE, HERE, PREFIX, RecordingChannel, make_runtime

TTL = 3600


def openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider("fake", api_key="sk-test", base_url=fake.base_url, max_retries=0)


def traced(
    redis: aioredis.Redis,
    workdir: Path,
    provider: Provider,
    mode: str = "metadata",
    *,
    document: PolicyDocument | None = None,
    loop: LoopOptions | None = None,
) -> tuple[Runtime, RecordingChannel, TraceStore]:
    """A runtime (`make_runtime`) tracing in `mode` into the store it returns."""
    store = TraceStore(redis, Keys(PREFIX), TTL)
    tracer = Tracer(mode, store)
    runtime, channel = make_runtime(
        redis, workdir, provider, document=document, loop=loop, tracer=tracer
    )
    return runtime, channel, store


async def load(store: TraceStore, trace_id: str | None) -> TraceDoc:
    assert trace_id is not None
    doc = await store.load(trace_id)
    assert doc is not None, f"trace {trace_id} was not stored"
    return doc


def named(span: SpanDoc, name: str) -> list[SpanDoc]:
    return [s for s in span.walk() if s.name == name]


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
    assert await run_approvals_command(runtime.wing, show, shown) == 0
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
        calls(("call_a", "bash", {"command": "rm a.txt"})),
        calls(("call_r", "read", {"path": "b.txt"}), ("call_b", "bash", {"command": "rm b.txt"})),
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
    resumed, step = middle.root.children  # the approved call, then a new step and pause
    assert [c.attributes.get("call_id") for c in resumed.children] == ["call_a"]
    tools = [c for c in step.children if "call_id" in c.attributes]
    assert [(c.attributes["call_id"], c.attributes["index"], c.status) for c in tools] == [
        ("call_r", 0, "completed"),
        ("call_b", 1, "suspended"),
    ]
    (pause,) = tools[1].children
    assert pause.attributes["approval_id"] == one.run.approval_id
    assert middle.root.attributes["approval_id"] == first.approval_id  # the one it resumed
    assert middle.root.attributes["waits_for"] == one.run.approval_id
    last = await load(store, two.run.trace_id)
    assert last.links[0].trace_id == middle.trace_id
    assert middle.origin == last.origin == first.trace_id  # the run's first part, throughout

    assert first.trace_id is not None
    assert await trace_show(first.trace_id) == 0
    lines = capsys.readouterr().out.splitlines()
    at_middle = next(i for i, line in enumerate(lines) if f"[trace {middle.trace_id}]" in line)
    at_last = next(i for i, line in enumerate(lines) if f"[trace {last.trace_id}]" in line)
    assert at_middle < at_last
    indent = [len(line) - len(line.lstrip("│├└─ ")) for line in (lines[at_middle], lines[at_last])]
    assert indent[0] < indent[1]  # the second resume hangs under the first resume's pause


async def test_a_batch_pauses_at_each_call_and_its_resume_hangs_under_the_first(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    two_gated_calls(workdir, fake_openai)
    runtime, channel, store = traced(redis, workdir, openai(fake_openai))
    first = await runtime.run("t8", "clean up", ALICE, HERE)
    (requested,) = channel.of(ApprovalRequested)
    lead, other = (i.approval_id for i in requested.notice.items)
    paused = await load(store, first.trace_id)
    pauses = named(paused.root, "approval.pause")
    assert [(p.attributes["approval_id"], p.attributes["call_id"]) for p in pauses] == [
        (lead, "call_a"),
        (other, "call_b"),
    ]
    decision = await runtime.decide(requested.notice.batch, True, ADMIN, HERE)
    assert decision.run is not None
    resumed = await load(store, decision.run.trace_id)
    assert resumed.links[0].trace_id == first.trace_id
    assert resumed.links[0].approval_id == lead
    tools = [s for s in resumed.root.walk() if "call_id" in s.attributes]
    assert [(t.attributes["call_id"], t.status) for t in tools] == [
        ("call_a", "completed"),
        ("call_r", "completed"),
        ("call_b", "completed"),
    ]


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
    (workdir / "launch-notes.txt").write_text("FILE-SENTINEL-3141 the launch code")
    fake_openai.script = [
        calls(("call_1", "read", {"path": "ARG-SENTINEL-2718/missing.txt"})),
        calls(("call_2", "read", {"path": "launch-notes.txt"})),
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
    assert "launch-notes.txt" not in stored  # argument values are text too
    assert doc.mode == "metadata"
    assert all(not s.payloads for s in doc.spans())
    assert doc.root.attributes["input_chars"] == len("PROMPT-SENTINEL-1414 what is in it?")
    assert len(str(doc.root.attributes["input_sha256"])) == 64
    missing, ok = named(doc.root, "tool.call")
    assert missing.status == "error"  # no such file
    assert missing.attributes["arg_keys"] == ["path"]
    assert ok.status == "completed"
    assert ok.attributes["arg_keys"] == ["path"]
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
    assert [k async for k in redis.scan_iter(f"{PREFIX}:trace:*")] == []


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
    monkeypatch.setattr(recorder, "_warned", {})
    store = BrokenStore()
    fake_openai.script = [
        calls(("call_1", "read", {"path": "a.txt"})),
        reply("first done"),
        calls(("call_2", "bash", {"command": "rm victim.txt"})),
        reply("second done"),
    ]
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai), tracer=Tracer("replay", store))

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
    assert len([w for w in warnings if "recording failed" in w]) == 1  # said once (per 5 minutes)


async def test_a_store_that_hangs_is_given_up_on(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    class SlowStore:
        async def save(self, doc: TraceDoc) -> None:
            await asyncio.sleep(30)

    fake_openai.script = [reply("quick")]
    runtime, _ = make_runtime(
        redis,
        workdir,
        openai(fake_openai),
        tracer=Tracer("metadata", SlowStore(), save_timeout=0.05),
    )
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


# -- 7. what replay mode masks, and how fast ------------------------------------------------------

TOKENS = {
    "stripe": "sk_live_" + "S1t2r3i4p5e6K7e8y9Z0",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKV1RWQUwifQ.c2lnbmF0dXJlLWp3dA",
    "google": "AIza" + "GoogleKeyValue0123456789abcdefghijk",
    "gitlab": "glpat-" + "GitLabTokenValue2718x",
}


def test_redact_text_masks_json_pairs_authorization_and_more_token_kinds() -> None:
    text = redact_text(
        '{"api_key": "AKVAL-1", "password":"PWVAL-2", "db": "main"} '
        "Authorization: tok-AUTHVAL-3, authorization=Basic AUTHVAL-4 " + " ".join(TOKENS.values())
    )
    for value in ("AKVAL-1", "PWVAL-2", "tok-AUTHVAL-3", "AUTHVAL-4", *TOKENS.values()):
        assert value not in text
    assert '"api_key": "[redacted]"' in text and '"db": "main"' in text  # still JSON-shaped
    assert "Authorization: [redacted]" in text
    # Words that merely contain "auth" or "pass" in another sense are left alone.
    assert redact_text("author: Ada, --author=Ada") == "author: Ada, --author=Ada"


async def test_replay_masks_json_shaped_secrets_and_authorization_headers(
    redis: aioredis.Redis, workdir: Path
) -> None:
    secrets = {
        "api_key": "AKVAL-1234",
        "password": "PWVAL-5678",
        "Authorization": "Basic AUTHVAL-91",
        **TOKENS,
    }
    (workdir / "config.json").write_text(json.dumps({**secrets, "db": "DB-VISIBLE"}, indent=2))
    log_line = (
        'POST /login {"password": "PWVAL-LOG", "user": "USER-VISIBLE"} Authorization: tok-H1\n'
    )
    (workdir / "app.log").write_text(log_line * 3)  # JSON inside text: redacted as text
    runtime, _, store = traced(redis, workdir, DemoProvider(), "replay")

    read = await runtime.run("t8", "read config.json", ALICE, HERE)
    logged = await runtime.run("t8", "read app.log", ALICE, HERE)
    message = 'my creds: {"token": "TOKVAL-42"} and Authorization: tok-AUTHVAL'
    told = await runtime.run("t8", message, ALICE, HERE)

    stored = ""
    for result in (read, logged, told):
        doc = await load(store, result.trace_id)
        stored += str(await redis.get(Keys(PREFIX).trace(doc.trace_id)))
    for value in (*secrets.values(), "PWVAL-LOG", "tok-H1", "TOKVAL-42", "tok-AUTHVAL"):
        assert value not in stored
    assert "DB-VISIBLE" in stored and "USER-VISIBLE" in stored and "my creds" in stored


ADVERSARIAL = {
    "dashes": "ab-" * 70_000,  # one 210 KB word: every position used to start a scan
    "logins": "login " * 35_000,  # every `login` used to scan to the end of the line
    "tokens": "token-" * 35_000,
    "jwts": "eyJ" * 70_000,
    "quotes": 'password:"' * 21_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_redacting_adversarial_text_is_linear(name: str) -> None:
    text = ADVERSARIAL[name]
    began = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - began < 2.0  # quadratic: minutes


@pytest.mark.parametrize("name", ["dashes", "logins"])
async def test_replay_of_a_huge_adversarial_output_is_quick(
    redis: aioredis.Redis, workdir: Path, name: str
) -> None:
    text = ADVERSARIAL[name]
    (workdir / "data.txt").write_text(text)
    runtime, _, store = traced(redis, workdir, DemoProvider(), "replay")

    began = time.perf_counter()
    result = await runtime.run("t9", "read data.txt", ALICE, HERE)

    assert time.perf_counter() - began < 5.0  # redacting it all took minutes
    doc = await load(store, result.trace_id)
    (call,) = named(doc.root, "tool.call")
    output = call.payloads["output"]
    assert output.startswith(text[:100])
    assert output.endswith(f"[cut at 2000 of {len(text)} characters]")
    assert call.attributes["output_chars"] == len(text)


# -- 8. metadata mode keeps no error text ---------------------------------------------------------


class FailingModel:
    name = "failing"
    offline_demo = False

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def complete(self, messages: Any, tools: Any) -> Any:
        raise self.exc


@pytest.mark.parametrize("mode", ["metadata", "replay"])
async def test_error_text_is_kept_only_as_a_replay_payload(
    redis: aioredis.Redis, workdir: Path, mode: str
) -> None:
    failing = FailingModel(ProviderError("ERR-SENTINEL at the server, password=hunter2"))
    runtime, _, store = traced(redis, workdir, failing, mode)

    result = await runtime.run("t10", "hi", ALICE, HERE)

    assert result.stop_reason is StopReason.ERROR
    doc = await load(store, result.trace_id)
    stored = await redis.get(Keys(PREFIX).trace(doc.trace_id)) or ""
    (llm,) = named(doc.root, "llm.call")
    assert llm.status == "error" and llm.attributes["error_type"] == "ProviderError"
    assert "error" not in llm.attributes and "error" not in doc.root.attributes
    assert "hunter2" not in stored
    if mode == "metadata":
        assert "ERR-SENTINEL" not in stored
    else:
        assert llm.payloads["error"] == "ERR-SENTINEL at the server, password=[redacted]"
        assert doc.root.payloads["error"].startswith("ERR-SENTINEL")

    # Not a ProviderError: the run fails, its trace keeps the type only.
    crashing, _, _ = traced(redis, workdir, FailingModel(RuntimeError("BUG-SENTINEL")))
    with pytest.raises(RuntimeError):
        await crashing.run("t11", "hi", ALICE, HERE)
    traces = {k async for k in redis.scan_iter(f"{PREFIX}:trace:*")}  # a cluster: every master
    (key,) = traces - {Keys(PREFIX).trace(doc.trace_id)}
    crashed = await redis.get(key) or ""
    assert '"error_type":"RuntimeError"' in crashed and "BUG-SENTINEL" not in crashed


async def test_tool_call_arguments_sent_as_an_object_are_taken_as_json(
    redis: aioredis.Redis, workdir: Path
) -> None:
    """Some OpenAI-compatible servers send `arguments` as an object, not a JSON string."""
    (workdir / "a.txt").write_text("A-CONTENT")
    answers: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": {"path": "a.txt"}},
                }
            ]
        },
        {"content": "done"},
    ]

    async def complete(request: web.Request) -> web.Response:
        message = {"role": "assistant", "content": None, **answers.pop(0)}
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    async with serving_app(app) as base_url:
        provider = OpenAIProvider("m", base_url=f"{base_url}/v1", max_retries=0)
        runtime, _ = make_runtime(redis, workdir, provider)
        result = await runtime.run("t12", "read a.txt", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL and result.final_text == "done"
    history = await runtime.history.load("t12")
    assert "A-CONTENT" in [getattr(m, "content", None) for m in history]


# -- 9. names the model made up are bounded -------------------------------------------------------


async def test_made_up_tool_names_and_argument_keys_are_stored_bounded(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    name = "my password is HUNTER2 " + "x" * 5000
    arguments = {f"{i:02d}" + "k" * 3000: i for i in range(30)}
    fake_openai.script = [calls(("c1", name, arguments)), reply("ok")]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))

    result = await runtime.run("t13", "hi", ALICE, HERE)

    assert result.final_text == "ok"
    doc = await load(store, result.trace_id)
    (llm, _), (call,) = named(doc.root, "llm.call"), named(doc.root, "tool.call")
    assert llm.attributes["tools_called"] == ["(unknown)"]
    assert call.attributes["tool"] == "(unknown)"
    assert call.attributes["tool_chars"] == len(name)
    assert call.attributes["tool_sha256"] == hashlib.sha256(name.encode()).hexdigest()
    keys = call.attributes["arg_keys"]
    assert isinstance(keys, list) and len(keys) == 20
    assert keys[0] == "00" + "k" * 62 and all(len(k) == 64 for k in keys)
    stored = await redis.get(Keys(PREFIX).trace(doc.trace_id)) or ""
    assert "HUNTER2" not in stored and len(stored) < 8_000

    (entry,) = [
        e for e in await AuditLog(redis, Keys(PREFIX)).newest(10) if e.event == "tool_executed"
    ]
    assert entry.fields["tool"] == "(unknown)" and entry.fields["tool_chars"] == str(len(name))
    assert entry.fields["arg_keys"].split(",") == keys
    assert "HUNTER2" not in json.dumps(await redis.xrange(Keys(PREFIX).audit()))


# -- 10. a slow store does not hold up a cancel; warnings repeat, rarely --------------------------


async def test_cancelling_a_run_does_not_wait_for_a_hung_store(
    redis: aioredis.Redis, workdir: Path
) -> None:
    asked = asyncio.Event()
    saved: list[str] = []

    class SlowModel:
        name = "slow"
        offline_demo = False

        async def complete(self, messages: Any, tools: Any) -> Any:
            asked.set()
            await asyncio.sleep(60)

    class HungStore:
        async def save(self, doc: TraceDoc) -> None:
            saved.append(doc.root.status)
            await asyncio.sleep(60)

    runtime, _ = make_runtime(
        redis, workdir, SlowModel(), tracer=Tracer("metadata", HungStore(), save_timeout=60)
    )
    task = asyncio.create_task(runtime.run("t14", "hi", ALICE, HERE))
    await asyncio.wait_for(asked.wait(), timeout=10)
    task.cancel()
    try:
        done, _ = await asyncio.wait({task}, timeout=20)  # the store would hold it 60 s
        assert task in done and task.cancelled()
        assert saved == ["cancelled"]  # it was tried, briefly
    finally:
        task.cancel()


def test_tracing_warnings_repeat_at_most_every_five_minutes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    monkeypatch.setattr(recorder, "_warned", {})
    monkeypatch.setattr(recorder, "_clock", lambda: now[0])
    with caplog.at_level(logging.DEBUG, logger="runtime.tracing.recorder"):
        for at in (0, 10, 299):
            now[0] = 1000.0 + at
            recorder.warn_once("storing", ConnectionError("down"))
        recorder.warn_once("recording", RuntimeError("bug"))  # another kind: its own warning
        now[0] = 1000.0 + 301
        recorder.warn_once("storing", ConnectionError("still down"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(" failed")[0] for w in warnings] == [
        "tracing: storing",
        "tracing: recording",
        "tracing: storing",
    ]
    assert "still down" in warnings[-1]
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 2


# -- 11. an index hint is for its step only -------------------------------------------------------


@pytest.mark.parametrize("approve", [True, False])
async def test_a_call_id_reused_in_a_later_step_gets_its_own_index(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, approve: bool
) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "x"):
        (workdir / name).write_text(name)
    fake_openai.script = [
        calls(("c0", "read", {"path": "a.txt"}), ("cX", "bash", {"command": "rm x"})),
        calls(("cX", "read", {"path": "b.txt"}), ("c9", "read", {"path": "c.txt"})),
        reply("done"),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))
    first = await runtime.run("t15", "go", ALICE, HERE)
    assert first.approval_id is not None

    decision = await runtime.decide(first.approval_id, approve, ADMIN, HERE, reason="no")

    assert decision.run is not None and decision.run.stop_reason is StopReason.FINAL
    doc = await load(store, decision.run.trace_id)
    resumed, again = [s for s in doc.root.children if s.name == "agent.step"][:2]
    placed = [(c.attributes["call_id"], c.attributes["index"]) for c in named(resumed, "tool.call")]
    assert placed == ([("cX", 1)] if approve else [])  # the approved call, at its index
    placed = [(c.attributes["call_id"], c.attributes["index"]) for c in named(again, "tool.call")]
    assert placed == [("cX", 0), ("c9", 1)]


# -- 12. the CLI on unreadable and empty ids; resumed-by lists always expire ----------------------


@pytest.mark.parametrize("stored", ["{not json", '{"version": 1, "trace_id": "t"}'])
async def test_an_unreadable_trace_is_one_clear_line_and_exit_1(
    redis: aioredis.Redis,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    stored: str,
) -> None:
    await redis.set(Keys(PREFIX).trace("damaged1"), stored)
    with caplog.at_level(logging.WARNING):
        assert await trace_show("damaged1") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("clawgate: trace 'damaged1' is stored but unreadable")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("trace_id", ["", "   "])
def test_an_empty_trace_id_is_a_usage_error(
    cli_env: str, capsys: pytest.CaptureFixture[str], trace_id: str
) -> None:
    assert main(["trace", "show", trace_id]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "clawgate: trace show: the trace id is empty"


@pytest.mark.skipif(CLUSTER, reason="spies on the single-server client's pipeline")
async def test_resumed_by_is_appended_with_its_ttl_in_one_step(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[list[str]] = []
    execute = Pipeline.execute

    async def spy(self: Pipeline, *args: Any, **kwargs: Any) -> Any:
        sent.append([str(c[0][0]).upper() for c in self.command_stack])
        return await execute(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", spy)
    store = TraceStore(redis, Keys(PREFIX), TTL)
    doc = TraceDoc(
        trace_id="later",
        mode="metadata",
        session="s",
        started_at=0,
        duration_ms=1.0,
        links=[TraceLink(trace_id="earlier", approval_id="a1")],
        root=SpanDoc(id="r", name="approval.resume", status="final", start_ms=0.0),
    )
    await store.save(doc)

    (commands,) = sent
    # Never an RPUSH on its own that a failure could leave without its EXPIRE.
    assert "RPUSH" not in commands or "MULTI" in commands
    assert await store.resumed_by("earlier") == ["later"]
    assert 0 < await redis.ttl(Keys(PREFIX).trace_resumed_by("earlier")) <= TTL
    assert await store.load("later") == doc


async def test_an_approval_that_ends_without_a_resume_is_drawn_under_its_pause(
    redis: aioredis.Redis,
    workdir: Path,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Expired and withdrawn approvals leave a linked one-span trace, so `trace show` of
    the paused run says how it ended."""
    runtime, _, store = traced(redis, workdir, DemoProvider())
    expiring = await runtime.run("t9", "run: rm a.txt", ALICE, HERE)
    cancelled = await runtime.run("t10", "run: rm b.txt", ALICE, HERE)
    assert expiring.approval_id and cancelled.approval_id and expiring.trace_id
    key = f"{PREFIX}:{{t9}}:approval:{expiring.approval_id}"
    await redis.hset(key, "expires_at", "1")  # overdue now
    await redis.zadd(f"{PREFIX}:approvals:expiring", {expiring.approval_id: 1})
    assert await runtime.sweep() == 1
    assert "withdrawn" in await runtime.cancel("t10", ALICE, HERE)

    for paused, ending in ((expiring, "expired"), (cancelled, "cancelled")):
        assert paused.trace_id is not None
        (raw,) = await redis.lrange(f"{PREFIX}:trace:{paused.trace_id}:resumed-by", 0, -1)
        linked = str(raw)
        doc = await load(store, linked)
        assert doc.root.name == f"approval.{ending}" and doc.root.status == ending
        assert doc.links[0].trace_id == paused.trace_id
        assert await trace_show(paused.trace_id) == 0
        lines = capsys.readouterr().out.splitlines()
        pause = next(i for i, line in enumerate(lines) if "approval.pause" in line)
        assert f"[trace {linked}] approval.{ending} {ending}" in lines[pause + 1]
    assert doc.root.attributes["cancelled_by"] == ALICE.key
