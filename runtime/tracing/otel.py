"""OpenTelemetry export: each trace the recorder writes also goes out as OTel spans, over
OTLP/HTTP (protobuf), to where the standard OTEL_* variables say (the SDK reads them).

Imported only when export is on (bot/wiring.py): a process without it loads none of this.

- One OTel trace per run, its resumptions included: the trace id is the run's first clawgate
  trace id (`TraceDoc.origin`), zero-padded on the left to 32 hex digits.
- Span ids: the first 8 hex digits of the clawgate trace id, then the span's own 8. An
  `approval.pause` span's last 8 come from its approval id instead, so that the root of the
  run resumed after it — recorded by another process, which knows only the trace it resumes
  and the approval — can name it as its parent.
- Times: the trace's start plus each span's offset and duration.
- Attributes: every recorded one as `clawgate.<name>`, the GenAI semantic-convention ones on
  model and tool calls; replay payloads (redacted and cut when recorded) as
  `clawgate.payload.<name>` — there are none in metadata mode.

`OtelExport.save` only converts and queues: the SDK's `BatchSpanProcessor` exports from its
own thread, never on the event loop, and flushes what is queued when the process exits.
Exporting never breaks a run; the SDK's failure messages are let through at most once per
kind every `WARN_EVERY` seconds.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import re

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue as OtelValue

from runtime.tracing.document import SpanDoc, TraceDoc
from runtime.tracing.recorder import TraceSink, due, warn_once

SCOPE = InstrumentationScope("clawgate")
ERROR_STATUSES = frozenset({"error", "interrupted"})  # interrupted: cut short by a crash
OPERATIONS = {"llm.call": "chat", "tool.call": "execute_tool", "agent.run": "invoke_agent"}
# Recorded attribute -> its GenAI semantic-convention name (besides clawgate.<name>).
GEN_AI = {
    "prompt_tokens": "gen_ai.usage.input_tokens",
    "completion_tokens": "gen_ai.usage.output_tokens",
    "tool": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
    "error_type": "error.type",
}
# The SDK's loggers that speak of failed or dropped exports, once per batch.
SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.sdk._shared_internal",  # the batch processor: a full queue drops spans
)
_HEX = {16: re.compile(r"[0-9a-f]{1,16}"), 32: re.compile(r"[0-9a-f]{1,32}")}


def otel_id(text: str, digits: int) -> int:
    """`text` as an OTel id of `digits` hex digits: itself when it is such hex (and not zero),
    else a hash of it."""
    if _HEX[digits].fullmatch(text) and int(text, 16):
        return int(text, 16)
    return int(hashlib.sha256(text.encode()).hexdigest()[:digits], 16) or 1


def pause_span_id(trace_id: str, approval_id: str) -> int:
    """The span id of the `approval.pause` for `approval_id` in the clawgate trace `trace_id`."""
    return otel_id(trace_id[:8] + hashlib.sha256(approval_id.encode()).hexdigest()[:8], 16)


def span_id(trace_id: str, span: SpanDoc) -> int:
    approval = span.attributes.get("approval_id")
    if span.name == "approval.pause" and isinstance(approval, str):
        return pause_span_id(trace_id, approval)
    return otel_id(trace_id[:8] + span.id, 16)


def _context(trace_id: int, span: int, remote: bool = False) -> SpanContext:
    return SpanContext(trace_id, span, is_remote=remote, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _name_and_attributes(doc: TraceDoc, span: SpanDoc) -> tuple[str, dict[str, OtelValue]]:
    found = span.attributes
    out: dict[str, OtelValue] = {f"clawgate.{k}": v for k, v in found.items()}
    out.update({GEN_AI[k]: v for k, v in found.items() if k in GEN_AI})
    out["clawgate.span"] = span.name
    out["clawgate.status"] = span.status
    out.update({f"clawgate.payload.{k}": v for k, v in span.payloads.items()})
    name = span.name
    operation = OPERATIONS.get(span.name)
    if operation is not None:
        out["gen_ai.operation.name"] = operation
    if span.name == "llm.call":  # provider: `openai:<model>`, or `demo`
        system, _, model = str(found.get("provider", "")).partition(":")
        out["gen_ai.system"] = out["gen_ai.provider.name"] = system
        if model:
            out["gen_ai.request.model"] = model
        name = f"chat {model or system}"
    elif span.name == "tool.call":
        name = f"execute_tool {found.get('tool', '')}"
    elif span.name == "agent.run":
        out["gen_ai.agent.name"] = "clawgate"
    if span is doc.root:
        out["clawgate.trace_id"] = doc.trace_id
        out["clawgate.trace_mode"] = doc.mode
        if doc.dropped_spans:
            out["clawgate.dropped_spans"] = doc.dropped_spans
    return name, out


def to_spans(doc: TraceDoc, resource: Resource) -> list[ReadableSpan]:
    """The OTel spans of one stored trace, parents before children. A resumed run's root is
    the child of the pause it continues, in the trace of the run's first part."""
    trace = otel_id(doc.origin, 32)
    link = doc.links[0] if doc.links else None
    parent = None
    if link is not None and link.approval_id:  # made by the process that paused: remote
        parent = _context(trace, pause_span_id(link.trace_id, link.approval_id), remote=True)
    started_ns = doc.started_at * 1_000_000
    out: list[ReadableSpan] = []
    todo: list[tuple[SpanDoc, SpanContext | None]] = [(doc.root, parent)]
    while todo:
        span, above = todo.pop()
        context = _context(trace, span_id(doc.trace_id, span))
        start = started_ns + round(span.start_ms * 1_000_000)
        name, attributes = _name_and_attributes(doc, span)
        failed = span.status in ERROR_STATUSES
        out.append(
            ReadableSpan(
                name=name,
                context=context,
                parent=above,
                resource=resource,
                attributes=attributes,
                kind=SpanKind.CLIENT if span.name == "llm.call" else SpanKind.INTERNAL,
                status=Status(StatusCode.ERROR, span.status) if failed else Status(),
                start_time=start,
                end_time=start + round((span.duration_ms or 0.0) * 1_000_000),
                instrumentation_scope=SCOPE,
            )
        )
        todo.extend((child, context) for child in reversed(span.children))
    return out


class OtelExport:
    """A `TraceSink`: each trace goes out as OTel spans, then on to `forward` (the Redis
    store; None when traces are exported only)."""

    def __init__(
        self, processor: SpanProcessor, resource: Resource, forward: TraceSink | None
    ) -> None:
        self.processor = processor
        self.resource = resource
        self.forward = forward

    async def save(self, doc: TraceDoc) -> None:
        try:
            for span in to_spans(doc, self.resource):
                self.processor.on_end(span)  # queued: the SDK's thread exports
        except Exception as exc:
            warn_once("exporting", exc)
        if self.forward is not None:
            await self.forward.save(doc)


class _Throttled(logging.Filter):
    """Lets a warning of the SDK through at most once per kind every `WARN_EVERY` seconds:
    it logs each failed batch, a flood while a collector is down."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING or due(f"otel {record.name}: {record.msg}")


def service_resource() -> Resource:
    """What the SDK makes of OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; service.name
    `clawgate` unless they name one."""
    found = Resource.create()
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "clawgate"}))
    return found


@functools.cache
def _pipeline() -> tuple[SpanProcessor, Resource]:
    """One exporter per process (however many runtimes it builds), flushed at exit."""
    processor = BatchSpanProcessor(OTLPSpanExporter())
    atexit.register(processor.shutdown)
    for name in SDK_LOGGERS:
        logging.getLogger(name).addFilter(_Throttled())
    return processor, service_resource()


def exporting(forward: TraceSink | None) -> OtelExport:
    """A sink exporting to the collector the OTEL_* variables name, then storing in `forward`."""
    processor, resource = _pipeline()
    return OtelExport(processor, resource, forward)
