"""The one-line hooks the loop, the executor and the runtime call. Each one records into the
current run's trace (see context.py) and does nothing outside a traced run; none ever raises.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence

from runtime.canonical import UNKNOWN_TOOL, tool_fields
from runtime.error_codes import model_error_code, tool_error_code
from runtime.models import AssistantMessage, Message, ToolCall, ToolResult
from runtime.trace_context import current_span, enter, leave
from runtime.tracing.document import AttributeValue
from runtime.tracing.recorder import Span, TraceMode, payload_value, warn_once

Canonical = Callable[[ToolCall], str]
OFFERED_NAMES = 64  # tool names an `agent.step` records of what it offered (and their count)
NAME_CHARS = 64


def _chars(message: Message) -> int:
    size = len(getattr(message, "content", None) or "")
    if isinstance(message, AssistantMessage):
        size += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return size


def _replaying(span: Span) -> bool:
    return span.trace.tracer.mode is TraceMode.REPLAY


def _new_input(messages: Sequence[Message]) -> list[dict[str, object]]:
    """What is new since the model last answered: the user's message or the tool results."""
    tail = len(messages)
    while tail > 0 and not isinstance(messages[tail - 1], AssistantMessage):
        tail -= 1
    return [m.model_dump(exclude_none=True) for m in messages[tail:] if m.role != "system"]


def begin_step(
    step: int, *, resumed: str | None = None, call: tuple[str, int] | None = None
) -> None:
    """A new `agent.step` under the run's root (closing the previous one): what follows in
    this run hangs under it. A resumed step names the approval it continues after and
    `call`, the (call id, batch index) of the approved call."""
    span = current_span()
    if span is None:
        return
    try:
        step_span = span.trace.begin_step(step)
        step_span.set(resumed=resumed)
        span.trace.index_hints.clear()  # a hint is for the step it was given with
        if call is not None:
            span.trace.index_hints[call[0]] = call[1]
        enter(step_span)
    except Exception as exc:
        warn_once("recording", exc)


def tools_offered(names: Sequence[str]) -> None:
    """The tools the model is shown at this step, on its `agent.step`: at most
    `OFFERED_NAMES` names (each cut at `NAME_CHARS`) and how many there were."""
    span = current_span()
    if span is None:
        return
    try:
        step = span.trace.step or span
        step.set(
            offered_tools=[name[:NAME_CHARS] for name in names[:OFFERED_NAMES]],
            offered_count=len(names),
        )
    except Exception as exc:
        warn_once("recording", exc)


def annotate(**attributes: AttributeValue | None) -> None:
    """Attributes for the current span (a provider reports its token usage this way)."""
    span = current_span()
    if span is not None:
        span.set(**attributes)


@contextlib.contextmanager
def _child(name: str, **attributes: AttributeValue | None) -> Iterator[Span | None]:
    """A span named `name` under the current one, current itself within the block; its status
    says how the block ended (`error`/`cancelled`, with the exception's type)."""
    parent = current_span()
    span = token = None
    if parent is not None:
        try:
            span = parent.trace.child(parent, name)
            span.set(**attributes)
            token = enter(span)
        except Exception as exc:
            warn_once("recording", exc)
    try:
        yield span
    except BaseException as exc:
        if span is not None:
            span.set(error_type=type(exc).__name__)
            span.end("cancelled" if isinstance(exc, asyncio.CancelledError) else "error")
        raise
    finally:
        if token is not None:
            leave(token)
        if span is not None:
            span.end()


@contextlib.contextmanager
def llm_call(
    provider: str, messages: Sequence[Message], chars: int | None = None
) -> Iterator[Span | None]:
    """An `llm.call` span around one model request; current while it runs. `chars`: the
    messages' size, when the caller knows it (the loop does: then nothing here looks at
    every message)."""
    if current_span() is None:  # not traced: spend nothing on sizes
        yield None
        return
    size = sum(_chars(m) for m in messages) if chars is None else chars
    with _child("llm.call", provider=provider, messages=len(messages), message_chars=size) as span:
        if span is not None and _replaying(span):
            span.payload("input", _new_input(messages), metadata=False)
        try:
            yield span
        except BaseException as exc:
            # Its text may quote the model or the server: only its type and code as metadata.
            with contextlib.suppress(Exception):  # str() of an odd exception may raise
                if span is not None:
                    span.set(error_code=model_error_code(exc))
                    if text := str(exc):
                        span.payload("error", text, metadata=False)
            raise


@contextlib.contextmanager
def compaction(since: int, upto: int, messages: int, chars: int) -> Iterator[Span | None]:
    """A `context.compact` span: the history `[since, upto)` (`messages` messages, `chars`
    characters) summarized by one model request (its token usage lands here)."""
    with _child("context.compact", since=since, upto=upto, messages=messages, chars=chars) as span:
        yield span


def llm_replied(
    span: Span | None, reply: AssistantMessage, known: Callable[[str], bool] | None = None
) -> None:
    """The model's answer. `known` tells registered tool names from made-up ones (any text,
    recorded as `(unknown)`)."""
    if span is None:
        return
    try:
        names = [c.name for c in reply.tool_calls]
        if known is not None:
            names = [n if known(n) else UNKNOWN_TOOL for n in names]
        span.set(
            tool_calls=len(reply.tool_calls),
            tools_called=names or None,
            reply_chars=_chars(reply),
        )
        if not _replaying(span):
            return
        span.payload(
            "output",
            {
                "content": reply.content,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": payload_value(c.arguments)}
                    for c in reply.tool_calls
                ],
            },
            metadata=False,
        )
    except Exception as exc:
        warn_once("recording", exc)


def tool_started(
    call: ToolCall, index: int, canonical: Canonical, known: bool = True
) -> Span | None:
    """A `tool.call` span under the current step. `canonical` gives the call's canonical
    arguments (computed only when traced; their hash matches the approval record's and the
    audit log's). A tool name that is not `known` is recorded as `(unknown)` with its hash."""
    parent = current_span()
    if parent is None:
        return None
    try:
        trace = parent.trace
        index = trace.index_hints.pop(call.id, index)
        span = trace.child(parent, "tool.call", index)
        span.set(**tool_fields(call.name, known), call_id=call.id, index=index)
        span.payload("args", payload_value(canonical(call)))
        trace.calls[call.id] = span
        return span
    except Exception as exc:
        warn_once("recording", exc)
        return None


def tool_finished(
    span: Span | None,
    result: ToolResult,
    approval_id: str | None = None,
    receipt: str | None = None,
) -> None:
    """How the call ended: its status, the policy's verdict on it and where that came from,
    its error code, its receipt (a completed call's: runtime/receipts.py), its output's size
    (and text, in replay mode)."""
    if span is None:
        return
    try:
        span.set(
            approval_id=approval_id,
            reasons=len(result.reasons) or None,
            error_code=tool_error_code(result),
            receipt=receipt,
        )
        if result.policy is not None:
            policy = result.policy
            span.set(
                policy_verdict=policy.verdict,
                policy_source=policy.source,
                policy_rule=policy.rule or None,
            )
        span.payload("output", result.artifact or result.model_text)
        if result.reasons:  # they quote the call: text only in replay mode
            span.payload("reasons", list(result.reasons), metadata=False)
        span.end(result.status.value)
    except Exception as exc:
        warn_once("recording", exc)


def tool_result(
    call: ToolCall, index: int, canonical: Canonical, result: ToolResult, known: bool = True
) -> None:
    """A call answered without running (unknown tool, invalid arguments, a duplicate)."""
    tool_finished(tool_started(call, index, canonical, known), result)


def approval_paused(
    call_id: str, approval_id: str, checkpoint_id: str, tool: str, reasons: Sequence[str]
) -> None:
    """`approval.pause` under the suspended call's span: the run waits for a decision."""
    current = current_span()
    if current is None:
        return
    try:
        trace = current.trace
        parent = trace.calls.get(call_id) or trace.step or trace.root
        span = trace.child(parent, "approval.pause")
        span.set(approval_id=approval_id, checkpoint_id=checkpoint_id, tool=tool, call_id=call_id)
        span.payload("reasons", list(reasons), metadata=False)
        span.end("pending")
    except Exception as exc:
        warn_once("recording", exc)


@contextlib.contextmanager
def subagent_run(session: str, max_steps: int, task_chars: int) -> Iterator[Span | None]:
    """A `subagent.run` span under the current span (the parent's `explore` tool call): the
    child's steps, model calls and tool calls hang under it until the block ends, then the
    parent's step is current again."""
    with _child(
        "subagent.run", session=session, max_steps=max_steps, task_chars=task_chars
    ) as span:
        trace = None if span is None else span.trace
        saved = None if trace is None else (trace.run, trace.step)
        if trace is not None:
            trace.run, trace.step = span or trace.root, None
        try:
            yield span
        finally:
            if trace is not None and saved is not None:
                if trace.step is not None:
                    trace.step.end()
                trace.run, trace.step = saved


def subagent_done(span: Span | None, stop_reason: str, steps: int) -> None:
    if span is not None:
        span.set(stop_reason=stop_reason, steps=steps)
        span.end(stop_reason)


@contextlib.contextmanager
def inside(span: Span | None) -> Iterator[None]:
    """`span` is the current span within the block: what a tool does (an explorer's run)
    nests under its call."""
    token = enter(span) if span is not None else None
    try:
        yield
    finally:
        if token is not None:
            leave(token)
