"""OpenTelemetry export on a real Redis: a run paused twice is one OTel trace whose resumed
parts hang under their pauses, with the GenAI attributes; payloads go out only in replay mode
and redacted; a broken export never breaks a run; when no OTLP endpoint is set, nothing of
OpenTelemetry is loaded."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bot.settings import SettingsError
from bot.wiring import otel_export_on
from runtime.agent import Runtime
from runtime.models import StopReason
from runtime.store.keys import Keys
from runtime.tracing import recorder
from runtime.tracing.otel import OtelExport, service_resource
from runtime.tracing.recorder import Tracer
from runtime.tracing.store import TraceStore
from tests.component.test_tracing import load, openai
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.processes import REPO
from tests.support import ADMIN, ALICE, HERE, PREFIX, make_runtime

CANARY = "sk-canary0123456789abcdefghij"  # looks like an OpenAI key: redaction masks it


class BrokenProcessor(SimpleSpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("collector gone")


def exported(
    redis: aioredis.Redis,
    workdir: Path,
    fake: FakeOpenAI,
    mode: str = "metadata",
    processor: SimpleSpanProcessor | None = None,
) -> tuple[Runtime, InMemorySpanExporter, TraceStore]:
    spans = InMemorySpanExporter()
    store = TraceStore(redis, Keys(PREFIX), 3600)
    sink = OtelExport(processor or SimpleSpanProcessor(spans), service_resource(), store)
    runtime, _ = make_runtime(redis, workdir, openai(fake), tracer=Tracer(mode, sink))
    return runtime, spans, store


def attributes(spans: Sequence[ReadableSpan]) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) for s in spans]


def every_value(spans: Sequence[ReadableSpan]) -> str:
    return json.dumps([*attributes(spans), *(s.name for s in spans)])


async def test_a_run_paused_twice_is_one_otel_trace_each_resume_under_its_pause(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    for name in ("a.txt", "b.txt"):
        (workdir / name).write_text(name)
    fake_openai.script = [
        calls(("call_a", "bash", {"command": "rm a.txt"})),
        calls(("call_b", "bash", {"command": "rm b.txt"})),
        reply("both gone"),
    ]
    runtime, spans, store = exported(redis, workdir, fake_openai)
    first = await runtime.run("t7", f"clean up, my key is {CANARY}", ALICE, HERE)
    assert first.approval_id is not None and first.trace_id is not None
    one = await runtime.decide(first.approval_id, True, ADMIN, HERE)
    assert one.run is not None and one.run.approval_id is not None
    two = await runtime.decide(one.run.approval_id, True, ADMIN, HERE)
    assert two.run is not None and two.run.stop_reason is StopReason.FINAL

    got = spans.get_finished_spans()
    assert {s.context.trace_id for s in got if s.context} == {int(first.trace_id, 16)}
    roots = [s for s in got if s.attributes and "clawgate.trace_id" in s.attributes]
    assert [s.name for s in roots] == ["agent.run", "approval.resume", "approval.resume"]
    assert [r.attributes["clawgate.trace_id"] for r in roots if r.attributes] == [
        first.trace_id,
        one.run.trace_id,
        two.run.trace_id,
    ]
    pauses = {
        s.attributes["clawgate.approval_id"]: s
        for s in got
        if s.name == "approval.pause" and s.attributes
    }
    assert roots[0].parent is None
    for root, approval in zip(roots[1:], (first.approval_id, one.run.approval_id), strict=True):
        pause = pauses[approval].context
        assert root.parent is not None and pause is not None
        assert root.parent.span_id == pause.span_id  # resumed under the pause it waited at
    ids = [s.context.span_id for s in got if s.context]
    assert len(set(ids)) == len(ids)
    known = {s.context.span_id for s in got if s.context}
    assert all(s.parent is None or s.parent.span_id in known for s in got)

    chats = [s for s in got if s.attributes and s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [s.name for s in chats] == ["chat fake"] * 3
    for chat in chats:
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.request.model"] == "fake"
        assert chat.attributes["gen_ai.system"] == "openai"
        assert chat.attributes["gen_ai.usage.output_tokens"] == 5  # the fake's counts
        assert (
            chat.attributes["gen_ai.usage.input_tokens"]
            == chat.attributes["clawgate.prompt_tokens"]
        )
        assert chat.start_time is not None and chat.end_time is not None
        assert chat.start_time <= chat.end_time
    tools = [s for s in got if s.name == "execute_tool bash"]
    assert {(a["gen_ai.tool.call.id"], a["clawgate.status"]) for a in attributes(tools)} == {
        ("call_a", "suspended"),
        ("call_a", "completed"),
        ("call_b", "suspended"),
        ("call_b", "completed"),
    }
    assert all(a["gen_ai.tool.name"] == "bash" for a in attributes(tools))
    text = every_value(got)
    assert "clawgate.payload." not in text and CANARY not in text  # metadata mode: no text
    # Still stored in Redis as before.
    assert (await load(store, two.run.trace_id)).origin == first.trace_id


async def test_replay_payloads_go_out_redacted(
    redis: aioredis.Redis, workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("call_1", "bash", {"command": f"echo {CANARY}"})),
        reply(f"it printed {CANARY}"),
    ]
    runtime, spans, _ = exported(redis, workdir, fake_openai, mode="replay")
    result = await runtime.run("t8", f"print my key {CANARY}", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL

    got = spans.get_finished_spans()
    text = every_value(got)
    assert "clawgate.payload.input" in text and "clawgate.payload.output" in text
    assert "[redacted]" in text and CANARY not in text


async def test_a_broken_export_never_breaks_a_run(
    redis: aioredis.Redis,
    workdir: Path,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recorder, "_warned", {})
    fake_openai.script = [reply("one"), reply("two")]
    broken = BrokenProcessor(InMemorySpanExporter())
    runtime, _, store = exported(redis, workdir, fake_openai, processor=broken)
    with caplog.at_level(logging.WARNING):
        results = [await runtime.run("t9", text, ALICE, HERE) for text in ("a", "b")]
    assert [r.final_text for r in results] == ["one", "two"]
    for result in results:  # stored all the same
        assert (await load(store, result.trace_id)).root.status == "final"
    warned = [r for r in caplog.records if "exporting failed" in r.getMessage()]
    assert len(warned) == 1 and "collector gone" in warned[0].getMessage()


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_TRACES_EXPORTER": "none"}, False),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",  # for others; traces say http
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            True,
        ),
    ],
)
def test_export_is_on_with_an_otlp_endpoint_unless_turned_off(
    env: dict[str, str], on: bool
) -> None:
    assert otel_export_on(env) is on


def test_a_protocol_other_than_http_protobuf_is_a_settings_error() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(SettingsError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL=grpc: .*http/protobuf"):
        otel_export_on(env)


PROBE = """
import sys
import redis.asyncio as aioredis
from bot.settings import Settings
from bot.wiring import build_tracer
from runtime.store.keys import Keys
tracer = build_tracer(Settings(), aioredis.Redis(), Keys("probe"))
loaded = [m for m in sys.modules if m.startswith(("opentelemetry.sdk.trace",
          "opentelemetry.exporter", "runtime.tracing.otel"))]
print(type(tracer.store).__name__, tracer.mode, bool(loaded))
"""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "TraceStore metadata False"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "CLAWGATE_TRACE_MODE": "off"},
            "OtelExport metadata True",  # recorded for the export only
        ),
    ],
)
def test_nothing_of_opentelemetry_is_loaded_unless_an_endpoint_is_set(
    env: dict[str, str], expected: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAWGATE_"))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_an_endpoint_without_the_sdk_installed_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else real(name, *a),
    )
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    with pytest.raises(SettingsError, match=r"ENDPOINT is set .*clawgate\[otel\]"):
        otel_export_on(env)
