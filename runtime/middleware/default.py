"""The one order of the chain, for every composition root (`bot.wiring`, the bench, the tests):
an admin's deny never reaches a human; only then the risk policy asks."""

from __future__ import annotations

from runtime.approval.store import ApprovalStore
from runtime.hooks.judge import HookJudge
from runtime.middleware.approval import HumanApprovalMiddleware
from runtime.middleware.chain import Middleware
from runtime.middleware.tool_policy import ToolPolicyMiddleware
from runtime.policy.service import PolicyService
from runtime.risk.policy import RiskPolicy


def default_chain(
    policies: PolicyService | None, approvals: ApprovalStore, risk: RiskPolicy | None = None
) -> list[Middleware]:
    """`ToolPolicyMiddleware` → `HumanApprovalMiddleware` (`risk` when the conversation has no
    policy service to give it), which asks the policy's admin hooks."""
    hooks = HookJudge(policies.audit if policies else None)
    return [
        ToolPolicyMiddleware(policies),
        HumanApprovalMiddleware(risk or RiskPolicy(), approvals, policies, hooks),
    ]
