"""Stored trace -> OpenTelemetry spans: ids, times, parents, status, attributes."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import SpanKind, StatusCode

from runtime.tracing.document import AttributeValue, SpanDoc, TraceDoc, TraceLink
from runtime.tracing.otel import otel_id, to_spans

RESOURCE = Resource({"service.name": "test"})
STARTED = 1_764_900_000_000  # ms since the epoch


def span(
    span_id: str,
    name: str,
    start_ms: float,
    duration_ms: float,
    *children: SpanDoc,
    status: str = "ok",
    payloads: dict[str, str] | None = None,
    **attributes: AttributeValue,
) -> SpanDoc:
    return SpanDoc(
        id=span_id,
        name=name,
        status=status,
        start_ms=start_ms,
        duration_ms=duration_ms,
        attributes=attributes,
        payloads=payloads or {},
        children=list(children),
    )


def paused() -> TraceDoc:
    llm = span(
        "00000003",
        "llm.call",
        1.5,
        20.25,
        provider="openai:gpt-4o",
        prompt_tokens=120,
        completion_tokens=7,
    )
    pause = span("00000005", "approval.pause", 30.0, 0.0, status="pending", approval_id="ap1")
    tool = span(
        "00000004", "tool.call", 22.0, 8.0, pause, status="suspended", tool="bash", call_id="c1"
    )
    step = span("00000002", "agent.step", 1.0, 29.0, llm, tool, step=1)
    root = span("00000001", "agent.run", 0.0, 31.0, step, status="approval_required")
    return TraceDoc(
        trace_id="aaaaaaaa11111111",
        mode="metadata",
        session="slack:T1:C1:1.0",
        started_at=STARTED,
        duration_ms=31.0,
        root=root,
    )


def resumed(trace_id: str, resumes: str, origin: str | None, approval: str) -> TraceDoc:
    failing = span("00000007", "tool.call", 2.0, 1.0, status="error", tool="bash", call_id="c1")
    root = span("00000006", "approval.resume", 0.0, 5.0, failing, status="error", error_type="Boom")
    link = TraceLink(trace_id=resumes, approval_id=approval, origin=origin)
    return TraceDoc(
        trace_id=trace_id,
        mode="replay",
        session="slack:T1:C1:1.0",
        started_at=STARTED + 60_000,
        duration_ms=5.0,
        links=[link],
        root=root,
    )


def test_a_trace_becomes_spans_with_its_times_kinds_and_gen_ai_attributes() -> None:
    spans = {s.name: s for s in to_spans(paused(), RESOURCE)}
    assert list(spans) == [
        "agent.run",
        "agent.step",
        "chat gpt-4o",
        "execute_tool bash",
        "approval.pause",
    ]
    root, step, chat, tool = (spans[n] for n in list(spans)[:4])
    assert root.context is not None and root.parent is None
    assert root.context.trace_id == int("aaaaaaaa11111111", 16)  # the id, zero-padded
    assert root.context.span_id == int("aaaaaaaa00000001", 16)
    assert chat.parent == step.context
    assert chat.start_time == STARTED * 1_000_000 + 1_500_000
    assert chat.end_time == chat.start_time + 20_250_000
    assert chat.kind is SpanKind.CLIENT and tool.kind is SpanKind.INTERNAL
    assert chat.attributes == {
        "clawgate.provider": "openai:gpt-4o",
        "clawgate.prompt_tokens": 120,
        "clawgate.completion_tokens": 7,
        "clawgate.span": "llm.call",
        "clawgate.status": "ok",
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 7,
    }
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "bash"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert root.attributes is not None
    assert root.attributes["clawgate.trace_id"] == "aaaaaaaa11111111"
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert all(s.status.status_code is StatusCode.UNSET for s in spans.values())


def test_resumptions_share_the_first_trace_and_hang_under_their_pause() -> None:
    first = paused()
    (pause,) = [s for s in to_spans(first, RESOURCE) if s.name == "approval.pause"]
    second = resumed("bbbbbbbb22222222", first.trace_id, first.trace_id, "ap1")
    root, failing = to_spans(second, RESOURCE)
    assert root.context is not None and pause.context is not None and root.parent is not None
    assert root.context.trace_id == pause.context.trace_id
    assert root.parent.span_id == pause.context.span_id and root.parent.is_remote
    assert root.status.status_code is StatusCode.ERROR
    assert failing.status.status_code is StatusCode.ERROR
    assert root.attributes is not None and root.attributes["error.type"] == "Boom"
    # A third part, resuming the second, keeps the first part's trace.
    third = resumed("cccccccc33333333", second.trace_id, second.origin, "ap2")
    assert {s.context.trace_id for s in to_spans(third, RESOURCE) if s.context} == {
        pause.context.trace_id
    }
    # A link written before origins were kept: the trace it resumes stands for the origin.
    older = resumed("dddddddd44444444", first.trace_id, None, "ap1")
    assert to_spans(older, RESOURCE)[0].parent == root.parent


def test_payloads_go_out_as_attributes_and_odd_ids_are_hashed() -> None:
    doc = paused()
    doc.root.payloads = {"final": "done [redacted]"}
    doc.trace_id = "not-hex"
    root = to_spans(doc, RESOURCE)[0]
    assert root.attributes is not None
    assert root.attributes["clawgate.payload.final"] == "done [redacted]"
    assert root.context is not None
    assert root.context.trace_id == otel_id("not-hex", 32) != 0
    assert otel_id("0000", 16) != 0  # zero is no valid id
