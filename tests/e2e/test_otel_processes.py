"""OpenTelemetry export across processes, as an operator sees it in their tracing backend: a
real OTLP/HTTP receiver on 127.0.0.1 decodes what two `clawgate serve` processes send. A Slack
run pauses for approval in the first; the first stops (SIGTERM: what it queued is flushed as
it exits); the second carries out the decision. One trace, the resumed part under the pause,
GenAI attributes on model and tool calls, and no secret anywhere in what was exported."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.conftest import free_port
from tests.e2e.test_quorum_processes import approval_of
from tests.e2e.test_worker_processes import CHANNEL, SECRET, Clawgate, serve_env, wait_ready
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.fake_slack import Call, FakeSlack, event_body, mention_event, post_signed
from tests.processes import CLAWGATE, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

CANARY = "sk-canary0123456789abcdefghij"  # in the prompt, the call and its output
BOT_TOKEN = "xoxb-otel-e2e-bot-token-0001"
OPENAI_KEY = "sk-otel-e2e-openai-key-0002"
COLLECTOR_TOKEN = "otel-e2e-collector-token-0003"  # sent in OTEL_EXPORTER_OTLP_HEADERS
SECRETS = (CANARY, BOT_TOKEN, OPENAI_KEY, COLLECTOR_TOKEN, SECRET)


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Received:
    resource: dict[str, Any]
    span: Span

    @property
    def attributes(self) -> dict[str, Any]:
        return {a.key: plain(a.value) for a in self.span.attributes}


class Receiver:
    """An OTLP/HTTP collector: POST /v1/traces, protobuf (gzip or not)."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.authorizations: set[str] = set()
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        exported = ExportTraceServiceRequest()
        exported.ParseFromString(body)
        self.authorizations.add(request.headers.get("Authorization", ""))
        for group in exported.resource_spans:
            resource = {a.key: plain(a.value) for a in group.resource.attributes}
            for scope in group.scope_spans:
                self.spans.extend(Received(resource, span) for span in scope.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def named(self, name: str) -> list[Received]:
        return [r for r in self.spans if r.span.name == name]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as running:
        yield running


async def ask(fake: FakeSlack, url: str, text: str) -> tuple[str, Call]:
    """A mention in a new thread: (the thread, the approval notice posted there)."""
    event = mention_event(text, channel=CHANNEL)
    status, answer = await post_signed(f"{url}/slack/events", SECRET, event_body(event))
    assert status == 200, answer
    thread = str(event["ts"])

    def notice() -> Call | None:
        return next((c for c in fake.posts(CHANNEL, thread) if c.is_notice), None)

    return thread, await fake.await_for(notice, 20, what="the approval notice")


async def test_a_run_paused_in_one_process_and_resumed_in_another_is_one_otel_trace(
    redis_url: str, tmp_path: Path, fake_openai: FakeOpenAI, receiver: Receiver
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    fake_openai.script = [
        calls(("call_1", "bash", {"command": f"echo {CANARY} >> runs.log"})),
        reply("Appended it."),
    ]
    async with FakeSlack() as fake:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = serve_env(
            fake,
            redis_url,
            workdir,
            port,
            **fake_openai.settings(OPENAI_API_KEY=OPENAI_KEY),
            CLAWGATE_MODEL="fake-model",
            CLAWGATE_TRACE_MODE="replay",  # payloads go out too: redacted
            SLACK_BOT_TOKEN=BOT_TOKEN,
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.port}",
            OTEL_EXPORTER_OTLP_HEADERS=f"Authorization=Bearer {COLLECTOR_TOKEN}",
            OTEL_SERVICE_NAME="clawgate-e2e",
            # Nothing is sent before the process exits: what arrives was flushed at exit.
            OTEL_BSP_SCHEDULE_DELAY="60000",
        )
        first = await Clawgate.start(
            "serve", {**env, "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=first"}, workdir
        )
        try:
            await wait_ready(url)
            thread, notice = await ask(fake, url, f"append my key {CANARY} to runs.log")
        finally:
            stopped = await first.stop()
        assert stopped == 0, first.stderr
        approval = approval_of(notice)
        assert [r.span.name for r in receiver.named("approval.pause")] == ["approval.pause"]

        second = await Clawgate.start(
            "serve", {**env, "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=second"}, workdir
        )
        try:
            await wait_ready(url)
            operator = clean_env(
                REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=env["CLAWGATE_REDIS_PREFIX"]
            )
            deciding = await asyncio.create_subprocess_exec(
                *CLAWGATE,
                "approvals",
                "approve",
                approval,
                "--wait",
                cwd=tmp_path,
                env=operator,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(deciding.communicate(), 30)
            assert deciding.returncode == 0, err.decode()
            await fake.await_for(
                lambda: any(
                    c.params.get("text") == "Appended it." for c in fake.posts(CHANNEL, thread)
                ),
                20,
                what="the resumed run's answer",
            )
        finally:
            stopped = await second.stop()
        assert stopped == 0, second.stderr
    assert (workdir / "runs.log").read_text() == f"{CANARY}\n"

    spans = receiver.spans
    instances = {r.resource["service.instance.id"] for r in spans}
    assert instances == {"first", "second"}
    assert {r.resource["service.name"] for r in spans} == {"clawgate-e2e"}
    assert {r.span.trace_id for r in spans} == {spans[0].span.trace_id}  # one trace
    (run,) = receiver.named("agent.run")
    (pause,) = receiver.named("approval.pause")
    (resume,) = receiver.named("approval.resume")
    assert run.resource["service.instance.id"] == pause.resource["service.instance.id"] == "first"
    assert resume.resource["service.instance.id"] == "second"
    assert run.span.trace_id.hex() == run.attributes["clawgate.trace_id"].rjust(32, "0")
    assert resume.span.parent_span_id == pause.span.span_id  # resumed under its pause
    assert pause.attributes["clawgate.approval_id"] == approval
    by_id = {r.span.span_id for r in spans}
    assert all(not r.span.parent_span_id or r.span.parent_span_id in by_id for r in spans)

    chats = receiver.named("chat fake-model")
    assert {c.resource["service.instance.id"] for c in chats} == {"first", "second"}
    for chat in chats:
        assert chat.span.kind == Span.SPAN_KIND_CLIENT
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.system"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.usage.output_tokens"] == 5
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    tools = receiver.named("execute_tool bash")
    assert sorted(t.attributes["clawgate.status"] for t in tools) == ["completed", "suspended"]
    for tool in tools:
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.name"] == "bash"
        assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert all(r.span.status.code != Status.STATUS_CODE_ERROR for r in spans)

    assert receiver.authorizations == {f"Bearer {COLLECTOR_TOKEN}"}
    exported = json.dumps(
        [[r.span.name, r.attributes, r.resource, [e.name for e in r.span.events]] for r in spans]
    )
    assert "clawgate.payload.args" in exported and "[redacted]" in exported
    for secret in SECRETS:
        assert secret not in exported
