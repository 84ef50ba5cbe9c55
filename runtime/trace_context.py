"""The span the running code is in, carried through awaits (and copied into tasks, so the
concurrent calls of one batch each see their step) by a ContextVar.

`current_trace_id()` is what other parts of the runtime read (the audit log stamps every entry
with it): the id of the trace of the run this code runs in, None outside a traced run (or with
tracing off)."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.tracing.recorder import Span

_CURRENT: ContextVar[Span | None] = ContextVar("clawgate_span", default=None)


def current_span() -> Span | None:
    """The innermost open span of the current run, None outside a traced run."""
    return _CURRENT.get()


def current_trace_id() -> str | None:
    """The trace id of the run this code runs in, None outside a run."""
    span = _CURRENT.get()
    return None if span is None else span.trace.trace_id


def current_trace_origin() -> str | None:
    """The first trace of the run this code runs in (see `TraceLink.origin`): its own trace,
    unless the run continues one paused for approval; None outside a run."""
    span = _CURRENT.get()
    return None if span is None else span.trace.origin


def enter(span: Span | None) -> Token[Span | None]:
    return _CURRENT.set(span)


def leave(token: Token[Span | None]) -> None:
    try:
        _CURRENT.reset(token)
    except ValueError:  # made in another context (a task ended elsewhere): just clear it
        _CURRENT.set(None)
