"""HumanApprovalMiddleware: lets safe calls through, denies catastrophic ones, and suspends
the rest until a human decides. The runtime then checkpoints the run (see agent.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable

from runtime.approval.always import rule_for_call
from runtime.approval.changes import WRITING_TOOLS
from runtime.approval.questions import ASKED
from runtime.approval.rejudge import rejudged
from runtime.approval.store import ApprovalStore
from runtime.mcp.tool import McpTool
from runtime.middleware.chain import Handler, ToolInvocation, stop_here
from runtime.middleware.tool_policy import current_policy, denied
from runtime.models import ToolResult, ToolStatus
from runtime.policy.service import PolicyService
from runtime.redact import one_line
from runtime.risk.policy import RiskDecision, RiskPolicy, Verdict
from runtime.tools.clarify import ClarifyTool
from runtime.tools.sandbox import Access


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
        if isinstance(invocation.tool, ClarifyTool):
            # A question is always asked (runtime/approval/questions.py): no risk rule, grant
            # or "approve always" answers for the requester.
            return stop_here(
                invocation,
                ToolStatus.SUSPENDED,
                "waiting for the requester's answer",
                "clarify: waiting for the requester's answer",
                (ASKED,),
            )
        arguments = invocation.args.model_dump(mode="json")
        name = invocation.tool.name
        risk, always_ask = self.policy, None
        effective = await current_policy(invocation.context, self.policies)
        if effective is not None and self.policies is not None:
            risk = self.policies.risk_policy(effective.risk)
            verdict = effective.verdict(name)
            if verdict.state == "ask":
                always_ask = f"{name} always asks for approval here ({verdict.source})"
        decision = await assess(risk, invocation)
        if invocation.grant is not None:  # judged again: it runs only as it was approved
            changed = await self._changed_since_approval(invocation, invocation.grant)
            changed = changed or await rejudged(self.store, invocation.grant, decision)
            if changed is not None:  # a deny too: even an approval cannot let it through
                return denied(invocation, changed, decision.reasons)
            return await call_next(approved(invocation))
        if decision.verdict is Verdict.DENY:
            why = "refused by the risk policy: " + "; ".join(decision.reasons)
            return denied(invocation, why, decision.reasons)
        if always_ask is not None:
            # "Always" means always: standing rules do not cover these tools.
            return suspended(invocation, (always_ask, *decision.reasons))
        uncontained = invocation.tool.uncontained()
        if decision.verdict is Verdict.ALLOW and uncontained is None:
            # read-only (the context's default access)
            return await self._unasked(invocation, call_next(invocation))
        reasons = decision.reasons if uncontained is None else (*decision.reasons, uncontained)
        ctx = invocation.context
        rule = rule_for_call(name, invocation.tool, arguments, effective)
        if ctx.conversation and rule:
            grants = self.store.grants
            if await grants.covering(rule, set(reasons), ctx.conversation.id, ctx.session):
                running = call_next(approved(invocation))
                return await self._unasked(invocation, running, granted=True)
        return suspended(invocation, reasons)

    async def _unasked(
        self, invocation: ToolInvocation, running: Awaitable[ToolResult], granted: bool = False
    ) -> ToolResult:
        """A call that runs without a human's approval of it (`granted`: under an "approve
        always" grant): what it may have written is recorded, for the notice of the session's
        next approval (runtime/approval/changes.py)."""
        result = await running
        change = unasked_change(invocation, granted)
        ran = result.status not in (ToolStatus.DENIED, ToolStatus.SUSPENDED)
        ran = ran and not invocation.judging  # judged only: nothing ran
        if change is not None and ran:  # a failed call may have written part of it
            await self.store.changes.add(invocation.context.session, change)
        return result

    async def _changed_since_approval(self, invocation: ToolInvocation, grant: str) -> str | None:
        """Why an approved call may not run because its tool changed since a human approved
        it (an MCP tool re-listed with another schema): its approval record holds the
        signature it was approved for. None when it may run."""
        signature = invocation.tool.signature
        if signature is None:
            return None
        loaded = await self.store.load(grant)
        if loaded is not None and loaded[0].signature == signature:
            return None
        return (
            f"{invocation.tool.name} changed on its server since this call was approved (it "
            f"now has signature {signature}); ask again"
        )


def unasked_change(invocation: ToolInvocation, granted: bool) -> str | None:
    """What a call that ran unasked may have changed: the file a file tool wrote, or, for a
    call that ran with the work dir writable (a command under a grant, a tool of an MCP
    server with `writable_workdir`), anything it wrote. None: nothing (a read-only call)."""
    tool = invocation.tool
    path = invocation.args.model_dump(mode="json").get("path")
    if tool.name in WRITING_TOOLS and isinstance(path, str):
        return path
    if isinstance(tool, McpTool):  # runs in its server, whatever the call's access
        if getattr(tool.server.rules, "writable_workdir", False):
            return f"whatever {tool.name} wrote (its MCP server may write the work dir)"
        return None
    if granted:
        what = one_line(tool.summarize(invocation.args), 80)
        return f'whatever "{what}" wrote (it ran under an "approve always" grant)'
    return None


def approved(invocation: ToolInvocation) -> ToolInvocation:
    """The call as a human approved it: it runs with the access of an approved call."""
    invocation.context = dataclasses.replace(invocation.context, access=Access.APPROVED)
    return invocation


LONG_COMMAND = 2_000  # characters of a bash command judged off the event loop


async def assess(risk: RiskPolicy, invocation: ToolInvocation) -> RiskDecision:
    """The risk policy's decision on the call, judged against its work directory. A long
    command (or one that expands globs against the disk) is judged in a thread, so that no
    input can hold up every other conversation of the process."""
    arguments = invocation.args.model_dump(mode="json")
    own = invocation.tool.judge(arguments, risk.safe_tools)
    if own is not None:  # a tool the rules cannot know (MCP) judges itself
        return own
    name, workdir = invocation.tool.name, invocation.context.workdir
    command = arguments.get("command")
    if name == "send_file" or (  # send_file's judge reads the file
        name == "bash"
        and isinstance(command, str)
        and (len(command) > LONG_COMMAND or any(c in command for c in "*?["))
    ):
        return await asyncio.to_thread(risk.assess, name, arguments, workdir)
    return risk.assess(name, arguments, workdir)
