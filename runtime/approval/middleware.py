"""HumanApprovalMiddleware: lets safe calls through, denies catastrophic ones, and suspends
the rest until a human decides. The runtime then checkpoints the run (see agent.py)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from runtime.approval.risk import RiskPolicy, Verdict, command_signature
from runtime.approval.store import ApprovalStore
from runtime.middleware import Handler, ToolInvocation, stop_here
from runtime.models import ToolResult, ToolStatus
from runtime.policy.service import PolicyService
from runtime.tool_policy import current_policy, denied

RULE_SEPARATOR = "\x1f"


def standing_rule(tool: str, arguments: dict[str, Any]) -> str | None:
    """The key of an "approve always" rule covering this call, or None when no standing rule
    may ever cover it (bash chains, redirections, substitutions, unparseable commands).

    bash: the tool plus the parsed command signature (`rm -rf`, `git push --force`);
    file tools: the tool plus the path; any other tool: the tool itself."""
    if tool == "bash":
        signature = command_signature(str(arguments.get("command", "")))
        return None if signature is None else f"bash{RULE_SEPARATOR}{signature}"
    if "path" in arguments:
        return f"{tool}{RULE_SEPARATOR}{PurePath(str(arguments['path'])).as_posix()}"
    return tool


def suspended(invocation: ToolInvocation, reasons: tuple[str, ...]) -> ToolResult:
    why = "; ".join(reasons)
    return stop_here(
        invocation,
        ToolStatus.SUSPENDED,
        f"waiting for a human to approve this call ({why})",
        f"{invocation.tool.name} needs approval: {why}",
        reasons,
    )


class HumanApprovalMiddleware:
    """Risk rules from the conversation's effective policy when there is a `PolicyService`
    (with its always-ask tools), else the fixed `policy`."""

    def __init__(
        self, policy: RiskPolicy, store: ApprovalStore, policies: PolicyService | None = None
    ) -> None:
        self.policy = policy
        self.store = store
        self.policies = policies

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        arguments = invocation.args.model_dump(mode="json")
        name = invocation.tool.name
        risk, always_ask = self.policy, None
        effective = await current_policy(invocation.context, self.policies)
        if effective is not None and self.policies is not None:
            risk = self.policies.risk_policy(effective.risk)
            verdict = effective.verdict(name)
            if verdict.state == "ask":
                always_ask = f"{name} always asks for approval here ({verdict.source})"
        decision = risk.assess(name, arguments)
        if decision.verdict is Verdict.DENY:
            # Even an approval cannot let a catastrophic call through.
            why = "refused by the risk policy: " + "; ".join(decision.reasons)
            return denied(invocation, why, decision.reasons)
        if invocation.grant is not None:
            return await call_next(invocation)
        if always_ask is not None:
            # "Always" means always: standing rules do not cover these tools.
            return suspended(invocation, (always_ask, *decision.reasons))
        if decision.verdict is Verdict.ALLOW:
            return await call_next(invocation)
        conversation = invocation.context.conversation
        rule = standing_rule(name, arguments)
        if conversation and rule:
            approved = await self.store.rule_reasons(conversation.id, rule)
            if approved is not None and set(decision.reasons) <= approved:
                return await call_next(invocation)
        return suspended(invocation, decision.reasons)
