"""ToolPolicyMiddleware: admins' allow and deny lists, enforced at execution time."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runtime.middleware import Handler, ToolInvocation, stop_here
from runtime.models import ToolResult, ToolStatus


def denied(invocation: ToolInvocation, reason: str, reasons: Sequence[str] = ()) -> ToolResult:
    return stop_here(
        invocation,
        ToolStatus.DENIED,
        f"{reason}; the tool was not executed",
        f"{invocation.tool.name} denied: {reason}",
        reasons,
    )


class ToolPolicyMiddleware:
    """`allow=None` allows every tool; a tool in `deny` is refused even if it is also allowed."""

    def __init__(self, allow: Iterable[str] | None = None, deny: Iterable[str] = ()) -> None:
        self.allow = None if allow is None else frozenset(allow)
        self.deny = frozenset(deny)

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        name = invocation.tool.name
        if name in self.deny:
            return denied(invocation, f"tool {name!r} is denied by policy")
        if self.allow is not None and name not in self.allow:
            return denied(invocation, f"tool {name!r} is not in the policy's allow list")
        return await call_next(invocation)
