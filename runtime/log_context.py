"""What the running code works on, for its log lines: the `session`, `conversation`,
`approval`, `job` and `worker` bound where they become known (the worker taking a job, the job
handler reading its conversation, a run or a resumed run starting: `Tracer.trace`, tracing on
or off), and the `trace` of the current run (runtime/trace_context.py). Carried by a
ContextVar, so each task (each run, each call of a batch) sees its own and nothing leaks
between concurrent runs; bot/logs.py writes it as fields of JSON lines and as a `key=value`
suffix of text lines.

Only ids: never text a person or the model wrote.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType

from runtime.trace_context import current_trace_id

FIELDS: tuple[str, ...] = ("session", "conversation", "approval", "trace", "job", "worker")
VALUE_CHARS = 200  # an id longer than this is cut: a log line stays a line

_EMPTY: Mapping[str, str] = MappingProxyType({})
_BOUND: ContextVar[Mapping[str, str]] = ContextVar("clawgate_log_context", default=_EMPTY)


@contextlib.contextmanager
def bound(
    *,
    session: str | None = None,
    conversation: str | None = None,
    approval: str | None = None,
    job: str | None = None,
    worker: str | None = None,
) -> Iterator[None]:
    """Within the block, these (those given and not empty) join the context; what was bound
    before is back after it."""
    given = {
        "session": session,
        "conversation": conversation,
        "approval": approval,
        "job": job,
        "worker": worker,
    }
    fields = {k: v[:VALUE_CHARS] for k, v in given.items() if v}
    token = _BOUND.set(MappingProxyType({**_BOUND.get(), **fields}))
    try:
        yield
    finally:
        # Ended in another context than it began (a generator closed elsewhere): nothing of
        # this block's is bound there.
        with contextlib.suppress(ValueError):
            _BOUND.reset(token)


def current() -> dict[str, str]:
    """The context now, in `FIELDS` order, only what is set."""
    found = dict(_BOUND.get())
    trace = current_trace_id()
    if trace:
        found["trace"] = trace
    return {name: found[name] for name in FIELDS if name in found}
