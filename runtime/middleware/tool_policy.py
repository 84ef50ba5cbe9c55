"""ToolPolicyMiddleware: which tools may run here, enforced at execution time (the model may
call a tool it was not offered, and the policy may change while a call waits); in plan mode
no tool with side effects runs."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.middleware.chain import Handler, ToolInvocation, stop_here
from runtime.models import PolicyDecision, ToolResult, ToolStatus
from runtime.policy.modes import has_side_effects
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyService
from runtime.tools.base import ToolContext

PLAN_MODE = PolicyDecision(verdict="deny", source="mode", rule="plan")


def denied(
    invocation: ToolInvocation,
    reason: str,
    reasons: Sequence[str] = (),
    policy: PolicyDecision | None = None,
) -> ToolResult:
    return stop_here(
        invocation,
        ToolStatus.DENIED,
        f"{reason}; the tool was not executed",
        f"{invocation.tool.name} denied: {reason}",
        reasons,
        policy,
    )


async def current_policy(
    ctx: ToolContext, policies: PolicyService | None
) -> EffectivePolicy | None:
    """The policy the runtime put on the context for this step, else a fresh one."""
    if ctx.policy is None and policies is not None:
        ctx.policy = await policies.for_context(ctx)
    return ctx.policy


class ToolPolicyMiddleware:
    """Enforces the conversation's effective policy (see runtime.policy): the one the runtime
    put on the context for this step, else a fresh one from `policies`."""

    def __init__(self, policies: PolicyService | None = None) -> None:
        self.policies = policies

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        name = invocation.tool.name
        policy = await current_policy(invocation.context, self.policies)
        if policy is not None:
            verdict = policy.verdict(name)
            if verdict.state in ("deny", "off"):
                what = "denied" if verdict.state == "deny" else "not enabled"
                return denied(
                    invocation,
                    f"tool {name!r} is {what} here by policy: {verdict.source}",
                    policy=verdict.decision("deny"),
                )
            if policy.mode == "plan" and has_side_effects(invocation.tool):
                # Not offered in plan mode; a call the model makes anyway does not run.
                return denied(
                    invocation,
                    f"{name} may change things and this conversation is in plan mode "
                    f"({policy.sources['mode']}); switch with /mode",
                    policy=PLAN_MODE,
                )
        return await call_next(invocation)
