"""The tool middleware chain: registration order in, reverse order out, any link may stop it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.models import PolicyDecision, ToolCall, ToolResult, ToolStatus
from runtime.tools.base import Tool, ToolArgs, ToolContext


@dataclass(slots=True)
class ToolInvocation:
    """One validated tool call on its way through the chain."""

    call: ToolCall
    tool: Tool[Any]
    args: ToolArgs
    context: ToolContext
    # Set by the runtime only, when resuming this exact call after a human approved it.
    grant: str | None = None
    # Only judged, never run: whether it needs a human (the calls after a suspended one, put
    # to approvers in one batch). The chain's end answers instead of the tool.
    judging: bool = False


Handler = Callable[[ToolInvocation], Awaitable[ToolResult]]


class Middleware(Protocol):
    """Return `await call_next(invocation)` to pass on, or a `ToolResult` to short-circuit."""

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult: ...


def stop_here(
    invocation: ToolInvocation,
    status: ToolStatus,
    model_text: str,
    display: str,
    reasons: Sequence[str] = (),
    policy: PolicyDecision | None = None,
) -> ToolResult:
    """The result of a middleware that short-circuits: the tool does not run. `policy`: the
    verdict that stopped it and where it came from."""
    return ToolResult(
        call_id=invocation.call.id,
        tool=invocation.tool.name,
        status=status,
        model_text=model_text,
        display=display,
        reasons=list(reasons),
        policy=policy,
    )


def decided(result: ToolResult, policy: PolicyDecision) -> ToolResult:
    """`result` of a call that ran (or was stopped further down the chain), with the verdict
    that let it through unless one further down was recorded."""
    if result.policy is None:
        result.policy = policy
    return result


def build_chain(middlewares: Sequence[Middleware], endpoint: Handler) -> Handler:
    handler = endpoint
    for middleware in reversed(middlewares):
        handler = _link(middleware, handler)
    return handler


def _link(middleware: Middleware, call_next: Handler) -> Handler:
    async def handle(invocation: ToolInvocation) -> ToolResult:
        return await middleware(invocation, call_next)

    return handle
