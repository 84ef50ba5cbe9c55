"""Recording runs as trees of spans: `Tracer` (mode, where traces go), `Trace` (one run),
`Span` (one timed node).

Modes: `off` records nothing; `metadata` keeps ids, hashes, key names, sizes, durations and
statuses but no prompt, argument or output text; `replay` also keeps those texts as payloads,
redacted (secret-sounding keys and secret-looking values masked) and cut at `payload_chars`.

Recording must never break a run: every operation here catches its own failures, logs a
warning per kind of failure at most every `WARN_EVERY` seconds, and lets the run go on. A trace
is written once, when its run ends or suspends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from enum import StrEnum
from typing import Any, Protocol

from runtime import log_context
from runtime import trace_context as context
from runtime.canonical import canonical_json, key_names, text_sha256
from runtime.models import RunResult
from runtime.redact import redact, redact_text
from runtime.tracing.document import AttributeValue, SpanDoc, TraceDoc, TraceLink

log = logging.getLogger(__name__)

PAYLOAD_CHARS = 2_000
MAX_SPANS = 2_000  # per trace: a runaway batch cannot grow a document without bound
SAVE_TIMEOUT = 5.0
CANCEL_SAVE_TIMEOUT = 0.5  # a cancelled run waits at most this long for its trace to be stored
WARN_EVERY = 300.0  # seconds between two warnings of the same kind of failure
# Attribute names of a payload's key names, where not `<payload>_keys`.
KEY_ATTRIBUTES = {"args": "arg_keys"}


class TraceMode(StrEnum):
    OFF = "off"
    METADATA = "metadata"
    REPLAY = "replay"


class TraceSink(Protocol):
    async def save(self, doc: TraceDoc) -> None: ...


_warned: dict[str, float] = {}  # kind of failure -> when it was last warned about
_clock = time.monotonic


def due(what: str) -> bool:
    """Whether a warning of kind `what` is due: none was in the last `WARN_EVERY` seconds."""
    now = _clock()
    last = _warned.get(what)
    if last is not None and now - last < WARN_EVERY:
        return False
    _warned[what] = now
    return True


def warn_once(what: str, exc: BaseException) -> None:
    """Tracing failed: warn once per kind of failure every `WARN_EVERY` seconds (in between
    only at debug level), so a lasting outage is neither silent after its first minute nor a
    flood."""
    if not due(what):
        log.debug("tracing: %s failed again: %s: %s", what, type(exc).__name__, exc)
        return
    log.warning(
        "tracing: %s failed (%s: %s); runs go on, traces may be missing "
        "(said at most every %d minutes)",
        what,
        type(exc).__name__,
        exc,
        WARN_EVERY // 60,
    )


def clip(text: str, limit: int, total: int | None = None) -> str:
    """`text` cut at `limit` characters, saying so (`total`: the length of the text it was
    taken from, when it was cut before)."""
    total = len(text) if total is None else total
    if len(text) <= limit and total <= limit:
        return text
    return f"{text[:limit]}… [cut at {limit} of {total} characters]"


def head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, ended at a whitespace near the cut when there is
    one, so a token (a secret) is not cut in two before it is redacted."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    near = max(0, limit - 200)
    space = max(cut.rfind(" ", near), cut.rfind("\n", near))
    return cut[:space] if space > 0 else cut


def _new_id(nbytes: int) -> str:
    return secrets.token_hex(nbytes)


class Span:
    """One timed node. `index` orders tool calls among their siblings (the call's place in
    the model's batch, whatever order they finished in)."""

    __slots__ = (
        "attributes",
        "children",
        "ended",
        "index",
        "name",
        "payloads",
        "span_id",
        "started",
        "status",
        "trace",
    )

    def __init__(self, trace: Trace, name: str, index: int | None = None) -> None:
        self.trace = trace
        self.name = name
        self.span_id = _new_id(4)
        self.index = index
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.status = "ok"
        self.attributes: dict[str, AttributeValue] = {}
        self.payloads: dict[str, str] = {}
        self.children: list[Span] = []

    def set(self, **attributes: AttributeValue | None) -> None:
        """Metadata attributes (None values are left out)."""
        try:
            self.attributes.update({k: v for k, v in attributes.items() if v is not None})
        except Exception as exc:
            warn_once("recording", exc)

    def payload(self, name: str, value: object, metadata: bool = True) -> None:
        """Text or JSON-able data: its hash, size and (of a mapping) key names as attributes
        (unless `metadata` is False); the text itself, redacted and cut, in replay mode only."""
        try:
            self.trace.tracer.record_payload(self, name, value, metadata)
        except Exception as exc:
            warn_once("recording", exc)

    def end(self, status: str | None = None) -> None:
        try:
            if status is not None:
                self.status = status
            if self.ended is None:
                self.ended = time.perf_counter()
        except Exception as exc:
            warn_once("recording", exc)

    def to_doc(self, origin: float, closed_at: float) -> SpanDoc:
        ended, status = self.ended, self.status
        if ended is None:  # still open when the trace ended: cut short (cancelled, crashed)
            ended, status = closed_at, ("interrupted" if status == "ok" else status)
        return SpanDoc(
            id=self.span_id,
            name=self.name,
            status=status,
            start_ms=round((self.started - origin) * 1000, 3),
            duration_ms=round((ended - self.started) * 1000, 3),
            attributes=dict(self.attributes),
            payloads=dict(self.payloads),
            children=[c.to_doc(origin, closed_at) for c in _in_call_order(self.children)],
        )


def _in_call_order(children: list[Span]) -> list[Span]:
    """Creation order, except that tool calls take their slots in batch-index order."""
    slots = [i for i, c in enumerate(children) if c.index is not None]
    ordered = sorted((children[i] for i in slots), key=lambda c: c.index or 0)
    out = list(children)
    for slot, child in zip(slots, ordered, strict=True):
        out[slot] = child
    return out


class Trace:
    """One run's spans, kept in memory until the run ends or suspends."""

    def __init__(self, tracer: Tracer, name: str, session: str, origin: str | None = None) -> None:
        self.tracer = tracer
        self.trace_id = _new_id(8)
        self.origin = origin or self.trace_id  # see TraceLink.origin
        self.session = session
        self.started_at = int(time.time() * 1000)
        self.links: list[TraceLink] = []
        self.calls: dict[str, Span] = {}  # tool.call spans by call id (the latest)
        self.index_hints: dict[str, int] = {}  # call id -> its index in the batch it came from
        self.count = 0
        self.dropped = 0
        self.step: Span | None = None  # the open agent.step
        self.root = Span(self, name)
        self.run: Span = self.root  # where steps go: the root, or a subagent.run inside it

    def child(self, parent: Span | None, name: str, index: int | None = None) -> Span:
        span = Span(self, name, index)
        if self.count >= MAX_SPANS:
            self.dropped += 1
            return span  # recorded nowhere
        self.count += 1
        (parent or self.root).children.append(span)
        return span

    def begin_step(self, step: int) -> Span:
        if self.step is not None:
            self.step.end()
        self.step = self.child(self.run, "agent.step")
        self.step.set(step=step)
        return self.step

    def to_doc(self) -> TraceDoc:
        closed_at = time.perf_counter()
        if self.step is not None:
            self.step.end()
        self.root.end()
        mode = "replay" if self.tracer.mode is TraceMode.REPLAY else "metadata"
        return TraceDoc(
            trace_id=self.trace_id,
            mode=mode,
            session=self.session,
            started_at=self.started_at,
            duration_ms=round(((self.root.ended or closed_at) - self.root.started) * 1000, 3),
            links=list(self.links),
            dropped_spans=self.dropped,
            root=self.root.to_doc(self.root.started, closed_at),
        )


class RunTrace:
    """What the runtime holds while a run is traced (a no-op when tracing is off)."""

    __slots__ = ("trace",)

    def __init__(self, trace: Trace | None) -> None:
        self.trace = trace

    def done(self, result: RunResult) -> RunResult:
        """Record how the run stopped; the result, carrying the trace id."""
        if self.trace is None:
            return result
        try:
            root = self.trace.root
            root.set(
                stop_reason=result.stop_reason.value,
                steps=result.steps,
                waits_for=result.approval_id,  # the approval the run stopped for
                held=result.held or None,
            )
            if result.error:  # may quote a tool or the model: text only in replay mode
                root.payload("error", result.error, metadata=False)
            if result.final_text is not None:
                root.payload("final", result.final_text)
            root.end(result.stop_reason.value)
            return result.model_copy(update={"trace_id": self.trace.trace_id})
        except Exception as exc:
            warn_once("recording", exc)
            return result


class Tracer:
    def __init__(
        self,
        mode: TraceMode | str = TraceMode.OFF,
        store: TraceSink | None = None,
        payload_chars: int = PAYLOAD_CHARS,
        save_timeout: float = SAVE_TIMEOUT,
    ) -> None:
        self.mode = TraceMode(mode)
        self.store = store
        self.payload_chars = payload_chars
        self.save_timeout = save_timeout

    @property
    def enabled(self) -> bool:
        return self.mode is not TraceMode.OFF

    @contextlib.asynccontextmanager
    async def trace(
        self,
        name: str,
        *,
        session: str,
        resumes: str | None = None,
        origin: str | None = None,
        approval_id: str | None = None,
        payloads: Mapping[str, object] | None = None,
        **attributes: AttributeValue | None,
    ) -> AsyncIterator[RunTrace]:
        """Trace the run inside the block as a new trace whose root span is `name`; written
        when the block ends. `resumes` links it to the trace of the run it continues, whose
        first trace is `origin` (None: `resumes` itself, or not known). The session, approval
        and conversation are the log context of the block (tracing on or off:
        runtime/log_context.py)."""
        conversation = attributes.get("conversation")
        logged = log_context.bound(
            session=session,
            approval=approval_id,
            conversation=conversation if isinstance(conversation, str) else None,
        )
        trace = self._start(name, session, resumes, origin, approval_id, payloads, attributes)
        token = context.enter(trace.root) if trace is not None else None
        timeout = self.save_timeout
        try:
            with logged:
                yield RunTrace(trace)
        except asyncio.CancelledError:
            # Whoever cancels waits for this block: a slow store must not hold them up.
            timeout = min(timeout, CANCEL_SAVE_TIMEOUT)
            if trace is not None:
                trace.root.end("cancelled")
            raise
        except BaseException as exc:
            if trace is not None:
                trace.root.set(error_type=type(exc).__name__)
                trace.root.end("error")
            raise
        finally:
            if token is not None:
                context.leave(token)
            if trace is not None:
                await self._save(trace, wait_s=timeout)

    def _start(
        self,
        name: str,
        session: str,
        resumes: str | None,
        origin: str | None,
        approval_id: str | None,
        payloads: Mapping[str, object] | None,
        attributes: Mapping[str, AttributeValue | None],
    ) -> Trace | None:
        if not self.enabled:
            return None
        try:
            trace = Trace(self, name, session, (origin or resumes) if resumes else None)
            trace.root.set(session=session, approval_id=approval_id, **attributes)
            if resumes:
                link = TraceLink(trace_id=resumes, approval_id=approval_id, origin=trace.origin)
                trace.links.append(link)
                trace.root.set(resumes=resumes)
            for key, value in (payloads or {}).items():
                trace.root.payload(key, value)
            return trace
        except Exception as exc:
            warn_once("recording", exc)
            return None

    async def _save(self, trace: Trace, wait_s: float) -> None:
        if self.store is None:
            return
        try:
            doc = trace.to_doc()
        except Exception as exc:
            warn_once("recording", exc)
            return
        try:
            async with asyncio.timeout(wait_s):
                await self.store.save(doc)
        except Exception as exc:  # TimeoutError included
            warn_once("storing", exc)

    def record_payload(self, span: Span, name: str, value: object, metadata: bool = True) -> None:
        if metadata:
            text = value if isinstance(value, str) else canonical_json(value)
            span.attributes[f"{name}_sha256"] = text_sha256(text)
            span.attributes[f"{name}_chars"] = len(text)
            if isinstance(value, Mapping):
                span.attributes[KEY_ATTRIBUTES.get(name, f"{name}_keys")] = key_names(value)
        if self.mode is TraceMode.REPLAY:
            span.payloads[name] = self.replay_text(value)

    def replay_text(self, value: object) -> str:
        """`value` as replay text: redacted, then cut at `payload_chars`. Only about twice what
        is kept is redacted (a tool's output may be 256 KB): each text is cut before, at a
        whitespace near the cut where there is one. JSON text is redacted as data, so secrets
        under secret-sounding keys are masked whatever its layout."""
        limit = self.payload_chars
        if isinstance(value, str) and len(value) <= 2 * limit and value.lstrip()[:1] in ("{", "["):
            value = payload_value(value)
        if isinstance(value, str):
            return clip(redact_text(head(value, 2 * limit)), limit, len(value))
        clean = canonical_json(redact(value, scrub=lambda s: redact_text(head(s, 2 * limit))))
        return clip(clean, limit)


def payload_value(raw: str) -> Any:
    """Tool arguments as data when they are JSON (so keys can be masked), else the raw text."""
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return raw
