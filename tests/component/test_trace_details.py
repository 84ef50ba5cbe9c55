"""What a trace records of each step and call besides its shape (issue 32, complete traces): the
tools a step offered, each call's verdict with where it came from, error codes, sizes, and
the replay payload cap as a setting; `clawgate trace show` prints them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.cli import main
from bot.settings import Settings
from bot.wiring import build_tracer
from runtime.approval.grants import GrantTerms
from runtime.models import StopReason
from runtime.policy.model import PolicyDocument, ToolRules
from runtime.providers.demo import DemoProvider
from runtime.store.keys import Keys
from runtime.tracing.document import SpanDoc
from runtime.tracing.store import TraceStore
from tests.component.test_audit import raw_entries
from tests.component.test_tracing import load, named, openai, traced
from tests.fake_openai import FakeOpenAI, calls, error, reply
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime


def by_call(doc_root: SpanDoc) -> dict[str, SpanDoc]:
    return {str(s.attributes["call_id"]): s for s in named(doc_root, "tool.call")}


async def test_a_trace_names_offered_tools_each_verdict_with_its_source_and_error_codes(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    cli_env: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (workdir / "notes.txt").write_text("some notes")
    (workdir / "x").write_text("to remove")
    fake_openai.script = [
        calls(
            ("c_read", "read", {"path": "notes.txt"}),  # allowed: a built-in rule (safe tool)
            ("c_write", "write", {"path": "y", "content": "no"}),  # the policy file denies it
            ("c_edit", "edit", {"path": 7}),  # arguments the tool does not take
            ("c_rm", "bash", {"command": "rm x"}),  # asks: the built-in shell rules
        ),
    ]
    document = PolicyDocument(tools=ToolRules(deny=["write"]))
    runtime, _, store = traced(redis, workdir, openai(fake_openai), document=document)

    result = await runtime.run("d1", "read the notes, then clean up", ALICE, HERE)

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED
    doc = await load(store, result.trace_id)
    (step,) = named(doc.root, "agent.step")
    offered = step.attributes["offered_tools"]
    assert isinstance(offered, list) and "read" in offered and "bash" in offered
    assert "write" not in offered  # denied here: never shown to the model
    assert step.attributes["offered_count"] == len(offered)
    (llm,) = named(doc.root, "llm.call")
    assert isinstance(llm.attributes["message_chars"], int) and llm.attributes["message_chars"] > 0
    assert isinstance(llm.attributes["reply_chars"], int) and llm.attributes["reply_chars"] > 0
    spans = by_call(doc.root)
    read, write, edit, rm = (spans[c] for c in ("c_read", "c_write", "c_edit", "c_rm"))
    assert (read.attributes["policy_verdict"], read.attributes["policy_source"]) == (
        "allow",
        "builtin",
    )
    assert read.attributes["policy_rule"] == "safe_tools"
    assert "error_code" not in read.attributes
    assert read.attributes["args_chars"] == len('{"path":"notes.txt"}')
    assert read.attributes["output_chars"] == len("some notes")
    assert (write.status, write.attributes["policy_verdict"]) == ("denied", "deny")
    assert write.attributes["policy_source"] == "policy_file"
    assert write.attributes["error_code"] == "denied"
    assert edit.status == "error" and edit.attributes["error_code"] == "invalid_arguments"
    assert "policy_verdict" not in edit.attributes  # it never reached the policy
    assert (rm.status, rm.attributes["policy_verdict"]) == ("suspended", "ask")
    assert (rm.attributes["policy_source"], rm.attributes["policy_rule"]) == ("builtin", "shell")
    assert "error_code" not in rm.attributes

    # The audit trail says where each verdict came from too.
    entries = [fields for _, fields in await raw_entries(redis)]
    executed = {e["call"]: e for e in entries if e["event"] == "tool_executed"}
    assert executed["c_read"]["policy_source"] == "builtin"
    assert (executed["c_write"]["policy_source"], executed["c_write"]["error_code"]) == (
        "policy_file",
        "denied",
    )
    assert executed["c_edit"]["error_code"] == "invalid_arguments"
    (requested,) = [e for e in entries if e["event"] == "approval_requested"]
    assert requested["policy_source"] == "builtin"

    assert await asyncio.to_thread(main, ["trace", "show", doc.trace_id]) == 0
    out = capsys.readouterr().out
    assert f"offered ({len(offered)}): " in out and "bash" in out.split("offered (")[1]
    lines = out.splitlines()

    def line_of(what: str) -> str:
        return next(line for line in lines if what in line)

    assert "verdict=allow source=builtin rule=safe_tools" in line_of("tool.call read #0")
    denied = line_of("tool.call write #1 denied")
    assert "verdict=deny source=policy_file" in denied and "error=denied" in denied
    assert "error=invalid_arguments" in line_of("tool.call edit #2 error")
    assert "verdict=ask source=builtin rule=shell" in line_of("tool.call bash #3 suspended")

    assert await asyncio.to_thread(main, ["trace", "show", doc.trace_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["trace"]
    step_json = shown["root"]["children"][0]
    assert step_json["attributes"]["offered_tools"] == offered
    calls_json = {c["attributes"].get("call_id"): c for c in step_json["children"]}
    assert calls_json["c_write"]["attributes"]["policy_source"] == "policy_file"
    assert calls_json["c_edit"]["attributes"]["error_code"] == "invalid_arguments"


async def test_an_approved_call_and_an_override_say_so(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    (workdir / "x").write_text("to remove")
    fake_openai.script = [
        calls(("c_rm", "bash", {"command": "rm x"})),
        calls(("c_read", "read", {"path": "x.txt"})),  # denied meanwhile by an admin
        reply("done"),
    ]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))
    first = await runtime.run("d2", "remove x", ALICE, HERE)
    assert first.approval_id is not None
    await runtime.policies.change(HERE.id, "read", "deny", ADMIN)

    decision = await runtime.decide(first.approval_id, True, ADMIN, HERE)

    assert decision.run is not None
    spans = by_call((await load(store, decision.run.trace_id)).root)
    assert spans["c_rm"].attributes["policy_source"] == "approval"
    assert spans["c_rm"].attributes["policy_verdict"] == "allow"
    read = spans["c_read"].attributes
    assert (read["policy_verdict"], read["policy_source"]) == ("deny", "override")


async def test_a_call_a_grant_lets_through_names_the_grant(
    redis: aioredis.Redis, workdir: Path
) -> None:
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    runtime, _, store = traced(redis, workdir, DemoProvider())
    asked = await runtime.run("d5", "run: rm a.txt", ALICE, HERE)
    assert asked.approval_id is not None
    await runtime.decide(asked.approval_id, True, ADMIN, HERE, always=GrantTerms("thread"))

    again = await runtime.run("d5", "run: rm b.txt", ALICE, HERE)

    assert again.stop_reason is StopReason.FINAL
    (call,) = named((await load(store, again.trace_id)).root, "tool.call")
    assert (call.attributes["policy_verdict"], call.attributes["policy_source"]) == (
        "allow",
        "grant",
    )
    rule = call.attributes["policy_rule"]
    assert isinstance(rule, str) and rule.startswith("g")  # the grant's id


async def test_a_failed_model_call_records_its_error_code(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [error(429)]
    runtime, _, store = traced(redis, workdir, openai(fake_openai))

    result = await runtime.run("d3", "hi", ALICE, HERE)

    assert result.stop_reason is StopReason.ERROR
    (llm,) = named((await load(store, result.trace_id)).root, "llm.call")
    assert llm.attributes["error_code"] == "rate_limited"


async def test_the_payload_cap_setting_cuts_replay_payloads_at_its_size(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI, redis_url: str
) -> None:
    (workdir / "big.txt").write_text("0123456789" * 100)  # 1,000 characters
    fake_openai.script = [calls(("c_big", "read", {"path": "big.txt"})), reply("read")]
    settings = Settings(
        REDIS_URL=redis_url,
        CLAWGATE_REDIS_PREFIX=PREFIX,
        CLAWGATE_TRACE_MODE="replay",
        CLAWGATE_TRACE_PAYLOAD_CHARS="300",
    )
    tracer = build_tracer(settings, redis, Keys(PREFIX))
    runtime, _ = make_runtime(redis, workdir, openai(fake_openai), tracer=tracer)

    result = await runtime.run("d4", "read big.txt", ALICE, HERE)

    doc = await load(TraceStore(redis, Keys(PREFIX), 3600), result.trace_id)
    (big,) = named(doc.root, "tool.call")
    output = big.payloads["output"]
    assert output.startswith("0123456789") and "[cut at 300 of 1000 characters]" in output
    assert len(output.split("…")[0]) == 300
    assert big.attributes["output_chars"] == 1000


@pytest.mark.parametrize("value", ["199", "1000001"])
def test_the_payload_cap_setting_is_bounded(value: str) -> None:
    with pytest.raises(ValueError, match="CLAWGATE_TRACE_PAYLOAD_CHARS"):
        Settings(CLAWGATE_TRACE_PAYLOAD_CHARS=value)
