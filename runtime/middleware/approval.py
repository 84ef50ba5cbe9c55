"""HumanApprovalMiddleware: lets safe calls through, denies catastrophic ones, and suspends
the rest until a human decides. The runtime then checkpoints the run (see agent.py). The
policy's admin hooks (runtime/hooks) are asked here, after every deny of the built-in rules:
they may deny, ask, or waive the risk rules' ask, never lift a deny. The conversation's mode
(runtime/policy/modes.py) makes it ask for every call with side effects (`ask`) or let
project-file edits through (`edits`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable

from runtime.approval.always import rule_for_call
from runtime.approval.changes import WRITING_TOOLS
from runtime.approval.questions import ASKED
from runtime.approval.rejudge import rejudged
from runtime.approval.store import ApprovalStore
from runtime.canonical import canonical_arguments
from runtime.hooks.answer import Decision
from runtime.hooks.judge import HookCall, HookJudge, HookVerdict
from runtime.mcp.tool import McpTool
from runtime.middleware.chain import Handler, ToolInvocation, decided, stop_here
from runtime.middleware.tool_policy import current_policy, denied
from runtime.models import PolicyDecision, ToolResult, ToolStatus
from runtime.policy.modes import has_side_effects
from runtime.policy.resolve import EffectivePolicy, ScopedHook
from runtime.policy.service import PolicyService
from runtime.redact import one_line
from runtime.risk.policy import RiskDecision, RiskPolicy, Verdict
from runtime.tools.clarify import ClarifyTool
from runtime.tools.sandbox import Access

GRANTED = 'an "approve always" grant'
# Verdicts of clawgate's own making, for traces and the audit trail.
ASKS_REQUESTER = PolicyDecision(verdict="ask", source="builtin", rule="clarify")
APPROVED = PolicyDecision(verdict="allow", source="approval")
ASK_MODE = PolicyDecision(verdict="ask", source="mode", rule="ask")
UNCONTAINED = PolicyDecision(verdict="ask", source="builtin", rule="uncontained")
CHANGED = PolicyDecision(verdict="deny", source="builtin", rule="changed_since_approval")


def risk_decision(decision: RiskDecision) -> PolicyDecision:
    return PolicyDecision(
        verdict=decision.verdict.value, source=decision.source, rule=decision.rule
    )


def hook_decision(judged: HookVerdict) -> PolicyDecision:
    return PolicyDecision(verdict=judged.decision, source="hook", rule=judged.names)


def suspended(
    invocation: ToolInvocation,
    reasons: tuple[str, ...],
    policy: PolicyDecision,
    hooks: HookVerdict | None = None,
) -> ToolResult:
    """`policy`: why it asks; `hooks`: their answer, whose quorum and routes the request
    takes on."""
    why = "; ".join(reasons)
    result = stop_here(
        invocation,
        ToolStatus.SUSPENDED,
        f"waiting for a human to approve this call ({why})",
        f"{invocation.tool.name} needs approval: {why}",
        reasons,
        policy,
    )
    if hooks is not None and hooks.decision == "ask":
        result.quorum, result.routes = hooks.quorum, list(hooks.routes)
    return result


def mode_asks(effective: EffectivePolicy | None, invocation: ToolInvocation) -> str | None:
    """Why the conversation's mode asks for the call (ask mode, a tool with side effects)."""
    if effective is None or effective.mode != "ask" or not has_side_effects(invocation.tool):
        return None
    return f"this conversation is in ask mode ({effective.sources['mode']})"


def hook_call(
    invocation: ToolInvocation,
    reasons: tuple[str, ...],
    verdict: Decision,
    mode: str,
    approved: bool = False,
) -> HookCall:
    ctx = invocation.context
    return HookCall(
        tool=invocation.tool.name,
        arguments=canonical_arguments(invocation.call),
        reasons=reasons,
        verdict=verdict,
        session=ctx.session,
        conversation=ctx.conversation.id if ctx.conversation else "",
        requester=ctx.actor.key if ctx.actor else "",
        approved=approved,
        mode=mode,
    )


class HumanApprovalMiddleware:
    """Risk rules from the conversation's effective policy when there is a `PolicyService`
    (with its always-ask tools), else the fixed `policy`."""

    def __init__(
        self,
        policy: RiskPolicy,
        store: ApprovalStore,
        policies: PolicyService | None = None,
        hooks: HookJudge | None = None,
    ) -> None:
        """`hooks`: asks the policy's admin hooks (runtime/hooks)."""
        self.policy = policy
        self.store = store
        self.policies = policies
        self.hooks = hooks or HookJudge()

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
                ASKS_REQUESTER,
            )
        arguments = invocation.args.model_dump(mode="json")
        name = invocation.tool.name
        risk, always_ask, forced_by = self.policy, None, ASK_MODE
        effective = await current_policy(invocation.context, self.policies)
        hooks: tuple[ScopedHook, ...] = ()
        if effective is not None and self.policies is not None:
            risk = self.policies.risk_policy(effective.risk)
            verdict = effective.verdict(name)
            if verdict.state == "ask":
                always_ask = f"{name} always asks for approval here ({verdict.source})"
                forced_by = verdict.decision("ask")
            hooks = effective.hooks_for(name)
        mode = effective.mode if effective is not None else "auto"
        # An approved call is judged again as it was judged when asked (whatever the mode).
        edits = mode == "edits" and invocation.grant is None
        decision = await assess(risk, invocation, accept_edits=edits)
        if invocation.grant is not None:  # judged again: it runs only as it was approved
            return await self._run_approved(
                invocation, invocation.grant, decision, hooks, mode, call_next
            )
        if decision.verdict is Verdict.DENY:
            why = "refused by the risk policy: " + "; ".join(decision.reasons)
            return denied(invocation, why, decision.reasons, risk_decision(decision))
        uncontained = invocation.tool.uncontained()
        reasons = decision.reasons if uncontained is None else (*decision.reasons, uncontained)
        # A tool that always asks here, or any side effect in ask mode: asked whatever else.
        forced = always_ask or mode_asks(effective, invocation)
        # The hooks may only tighten: deny, ask, or waive the risk rules' ask.
        built_in = (forced, *reasons) if forced else reasons
        judged = await self._ask_hooks(invocation, hooks, built_in, mode)
        if judged is not None and judged.decision == "deny":
            why = "; ".join(judged.reasons)
            return denied(invocation, why, judged.reasons, hook_decision(judged))
        asked = judged.reasons if judged is not None and judged.decision == "ask" else ()
        if forced is not None:
            # "Always" means always: no standing rule, grant or hook's allow answers for it.
            return suspended(invocation, (forced, *decision.reasons, *asked), forced_by, judged)
        if judged is not None and asked:  # a hook's ask: before any grant, which it tightens
            return suspended(invocation, (*reasons, *asked), hook_decision(judged), judged)
        if decision.verdict is Verdict.ALLOW and uncontained is None:
            # read-only (the context's default access)
            running = call_next(invocation)
            return decided(await self._unasked(invocation, running), risk_decision(decision))
        if judged is not None and uncontained is None:
            # Every hook allowed what only the risk rules would ask: it runs as a grant would.
            running = call_next(approved(invocation))
            by = f"the allow of hook {', '.join(judged.allowed_by)}"
            return decided(await self._unasked(invocation, running, by), hook_decision(judged))
        ctx = invocation.context
        rule = rule_for_call(name, invocation.tool, arguments, effective)
        if ctx.conversation and rule:
            grants = self.store.grants
            grant = await grants.covering(rule, set(reasons), ctx.conversation.id, ctx.session)
            if grant is not None:
                running = call_next(approved(invocation))
                by_grant = PolicyDecision(verdict="allow", source="grant", rule=grant.id)
                return decided(await self._unasked(invocation, running, GRANTED), by_grant)
        asks = risk_decision(decision) if decision.verdict is Verdict.ASK else UNCONTAINED
        return suspended(invocation, reasons, asks)

    async def _ask_hooks(
        self,
        invocation: ToolInvocation,
        hooks: tuple[ScopedHook, ...],
        built_in: tuple[str, ...],
        mode: str,
    ) -> HookVerdict | None:
        """The hooks' answer on a call the built-in policy allows (no `built_in` reasons) or
        asks about; None without hooks (no work at all)."""
        if not hooks:
            return None
        call = hook_call(invocation, built_in, "ask" if built_in else "allow", mode)
        return await self.hooks.judge(hooks, call)

    async def _run_approved(
        self,
        invocation: ToolInvocation,
        grant: str,
        decision: RiskDecision,
        hooks: tuple[ScopedHook, ...],
        mode: str,
        call_next: Handler,
    ) -> ToolResult:
        """A call a human approved (`grant`), about to run: unless it changed since, or a
        hook denies it now (an edited call, a freeze that began while it waited)."""
        changed = await self._changed_since_approval(invocation, grant)
        changed = changed or await rejudged(self.store, grant, decision)
        if changed is not None:  # a deny too: even an approval cannot let it through
            return denied(invocation, changed, decision.reasons, CHANGED)
        if hooks:  # the approval answers any ask: only a deny stops it now
            call = hook_call(invocation, decision.reasons, "ask", mode, approved=True)
            judged = await self.hooks.judge(hooks, call)
            if judged.decision == "deny":
                why = "; ".join(judged.reasons)
                return denied(invocation, why, judged.reasons, hook_decision(judged))
        return decided(await call_next(approved(invocation)), APPROVED)

    async def _unasked(
        self,
        invocation: ToolInvocation,
        running: Awaitable[ToolResult],
        granted: str | None = None,
    ) -> ToolResult:
        """A call that runs without a human's approval of it (`granted`: what let it run as
        if approved, an "approve always" grant or a hook's allow): what it may have written
        is recorded, for the notice of the session's next approval
        (runtime/approval/changes.py)."""
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


def unasked_change(invocation: ToolInvocation, granted: str | None) -> str | None:
    """What a call that ran unasked may have changed: the file a file tool wrote, or, for a
    call that ran with the work dir writable (a command under a grant or a hook's allow, a
    tool of an MCP server with `writable_workdir`), anything it wrote. None: nothing (a
    read-only call)."""
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
        return f'whatever "{what}" wrote (it ran under {granted})'
    return None


def approved(invocation: ToolInvocation) -> ToolInvocation:
    """The call as a human approved it: it runs with the access of an approved call."""
    invocation.context = dataclasses.replace(invocation.context, access=Access.APPROVED)
    return invocation


LONG_COMMAND = 2_000  # characters of a bash command judged off the event loop


async def assess(
    risk: RiskPolicy, invocation: ToolInvocation, accept_edits: bool = False
) -> RiskDecision:
    """The risk policy's decision on the call, judged against its work directory. A long
    command (or one that expands globs against the disk) is judged in a thread, so that no
    input can hold up every other conversation of the process. `accept_edits`: the `edits`
    mode's (see RiskPolicy.assess)."""
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
    return risk.assess(name, arguments, workdir, accept_edits)
