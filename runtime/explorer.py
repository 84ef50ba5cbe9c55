"""The explorer: the child agent behind the `explore` tool.

It runs in a session of its own (`<parent>/explore-<id>`, marked `source=subagent`), so the
parent's history only ever receives its report, never its tool messages. It has the same
model and settings as the parent but only read-only tools: `read`, and `bash` when the
conversation's policy allows it, limited to commands the risk policy lets run without asking.
It can never write, edit, ask for approval or start another explorer. Cancelling the parent
cancels it: it shares the parent's cancel event and runs inside the parent's tool call."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

from runtime.audit import AuditLog
from runtime.channel import Event
from runtime.context.compactor import DEFAULT_BUDGET, compacting
from runtime.loop import AgentLoop, LoopOptions, RunState
from runtime.middleware.approval import assess, risk_decision
from runtime.middleware.chain import Handler, ToolInvocation, decided
from runtime.middleware.tool_policy import denied
from runtime.models import (
    AssistantMessage,
    Message,
    PolicyDecision,
    RunResult,
    StopReason,
    ToolMessage,
    ToolResult,
    ToolStatus,
    UserMessage,
)
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyService
from runtime.providers.base import Provider
from runtime.redact import one_line
from runtime.risk.policy import Verdict
from runtime.store.history import HistoryStore, Window
from runtime.tools.base import Tool, ToolContext
from runtime.tools.explore import MAX_STEPS
from runtime.tools.registry import ToolRegistry
from runtime.tracing import hooks as tracing

log = logging.getLogger(__name__)

REPORT_CHARS = 4_000
CHILD_TTL = 7 * 86_400  # seconds a child session's history is kept
READ_ONLY = ("read", "bash")  # the only tools an explorer may ever have
# Whatever would ask elsewhere is refused to an explorer: there is nobody to ask.
ONLY_READS = PolicyDecision(verdict="deny", source="builtin", rule="explorer_read_only")
SYSTEM_PROMPT = (
    "You are an explorer working for another agent. Investigate the work directory to answer "
    "the task with the read-only tools you have (read files; run read-only shell commands if "
    "offered). You cannot change anything and nobody can approve anything for you. Read in "
    "parallel when you can. Finish with a concise report of your findings: facts, file paths "
    "and line numbers, no preamble."
)


async def _quiet(event: Event) -> None:
    """The child's replies and progress are not posted to the chat: only its report counts."""


class ReadOnlyGuard:
    """The child's only middleware. Each call is checked against the conversation's policy as
    it is now (an admin's deny during a long exploration applies at once), then against the
    risk policy, whose every "ask" is a refusal here: there is nobody to ask."""

    def __init__(self, policies: PolicyService) -> None:
        self.policies = policies

    async def __call__(self, invocation: ToolInvocation, call_next: Handler) -> ToolResult:
        name = invocation.tool.name
        policy = await explorer_policy(self.policies, invocation.context)
        if name not in offered_to_explorer(policy):
            verdict = policy.verdict(name)
            return denied(
                invocation,
                f"{name} is not allowed to the explorer here ({verdict.source})",
                policy=verdict.decision("deny"),
            )
        risk = self.policies.risk_policy(policy.risk)
        decision = await assess(risk, invocation)
        reasons = [*decision.reasons, *filter(None, [invocation.tool.uncontained()])]
        if decision.verdict is not Verdict.ALLOW or reasons:
            why = "; ".join(reasons)
            return denied(
                invocation, f"the explorer only runs read-only calls ({why})", policy=ONLY_READS
            )
        # read-only: the context's default access
        return decided(await call_next(invocation), risk_decision(decision))


async def explorer_policy(policies: PolicyService, ctx: ToolContext) -> EffectivePolicy:
    """The conversation's policy as it applies to an explorer: `read` counts as enabled (it is
    the explorer's own tool even where the parent only has `explore`), so what decides is
    whether the policy denies it, leaves it out of an allow list or always asks for it."""
    return await policies.for_context(ctx, also_enabled=("read",))


def offered_to_explorer(policy: EffectivePolicy) -> tuple[str, ...]:
    """`read` and `bash` where the policy allows them outright: an explorer cannot ask."""
    return tuple(name for name in READ_ONLY if policy.verdict(name).state == "allow")


def child_session(parent: str) -> str:
    suffix = f"/explore-{secrets.token_hex(4)}"
    if len(parent) + len(suffix) <= 200:
        return parent + suffix
    return f"explore-{hashlib.sha256(parent.encode()).hexdigest()[:16]}{suffix}"


class Explorer:
    def __init__(
        self,
        provider: Provider,
        tools: Sequence[Tool[Any]],
        history: HistoryStore,
        max_tool_result_chars: int,
        policies: PolicyService,
        audit: AuditLog | None = None,
        step_limit: int = MAX_STEPS,
        context_budget: int = DEFAULT_BUDGET,
        options: LoopOptions | None = None,
    ) -> None:
        """`tools`: the process's read-only tools (`read`, `bash`); others are ignored.
        `step_limit`: no explorer takes more steps than a run may (CLAWGATE_MAX_STEPS).
        `context_budget`: as a run's (CLAWGATE_CONTEXT_BUDGET): a long exploration is
        compacted like a long conversation. `options`: as a run's (repeats, parallel calls,
        receipts' keys)."""
        self.provider = provider
        self.tools = {t.name: t for t in tools if t.name in READ_ONLY}
        self.history = history
        self.max_tool_result_chars = max_tool_result_chars
        self.policies = policies
        self.audit = audit
        self.step_limit = step_limit
        self.options = options
        self.context = compacting(provider, history, context_budget, audit)

    async def explore(self, task: str, max_steps: int, ctx: ToolContext) -> str:
        max_steps = min(max_steps, self.step_limit)
        policy = await explorer_policy(self.policies, ctx)
        registry = ToolRegistry(
            [self.tools[name] for name in offered_to_explorer(policy) if name in self.tools]
        )
        loop = AgentLoop(
            self.provider,
            registry,
            self.history,
            SYSTEM_PROMPT,
            max_steps,
            self.max_tool_result_chars,
            audit=self.audit,
            middlewares=[ReadOnlyGuard(self.policies)],  # its only link
            context=self.context,
            options=self.options,
        )
        session = child_session(ctx.session)
        child_ctx = ToolContext(
            session=session,
            workdir=ctx.workdir,
            actor=ctx.actor,
            conversation=ctx.conversation,
            cancelled=ctx.cancelled,
            # The child runs on this process's own model, whatever the conversation chose.
            policy=dataclasses.replace(policy, model=None),
        )
        # Only the task's size is logged: it may quote anything the user said.
        log.info("session %s: explorer %s started (%d characters)", ctx.session, session, len(task))
        with tracing.subagent_run(session, max_steps, len(task)) as span:
            task_message = UserMessage(content=task, actor="subagent")
            window = await self._start(session, ctx.session, task_message)
            state = RunState.of(window, session, child_ctx, _quiet)
            result, suspension = await loop.run(state)
            if suspension is not None:  # cannot happen: nothing in its chain suspends
                raise RuntimeError("an explorer never asks for approval")
            tracing.subagent_done(span, result.stop_reason.value, result.steps)
        log.info(
            "session %s: explorer %s stopped (%s) after %d steps",
            ctx.session,
            session,
            result.stop_reason.value,
            result.steps,
        )
        return report(session, result, state.history)

    async def _start(self, session: str, parent: str, task: UserMessage) -> Window:
        """The child's history, holding the task, and its `source=subagent` marker; both keys
        expire (from the start, so an explorer that crashes leaves nothing for good). A new
        session: its window is the task alone."""
        length = await self.history.append(session, task)
        keys = self.history.keys
        meta = keys.session(session, "meta")
        created = int(time.time() * 1000)
        pipe = self.history.redis.pipeline(transaction=False)
        pipe.hset(
            meta,
            items=[
                "source",
                "subagent",
                "parent",
                parent,
                "task_chars",
                len(task.content),
                "created_at",
                created,
            ],
        )
        pipe.expire(meta, CHILD_TTL)
        pipe.expire(keys.history(session), CHILD_TTL)
        await pipe.execute()
        return Window(length - 1, [task])


def _looked_at(history: Sequence[Message]) -> list[str]:
    """The calls the child made, each once, those that did not run marked as such."""
    statuses = {m.tool_call_id: m.status for m in history if isinstance(m, ToolMessage)}
    seen: list[str] = []
    for message in history:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            try:
                args = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                args = {}
            what = args.get("path") or args.get("command") if isinstance(args, dict) else None
            item = one_line(f"{call.name} {what or call.arguments}", 120)
            status = statuses.get(call.id)
            if status is not ToolStatus.COMPLETED:
                item += f" ({status.value if status else 'not run'})"
            if item not in seen:
                seen.append(item)
    return seen


def report(session: str, result: RunResult, history: Sequence[Message]) -> str:
    """What the parent's model gets back: the header, then the findings, at most
    REPORT_CHARS characters in all."""
    stop, steps, final_text = result.stop_reason, result.steps, result.final_text
    header = (
        f"[explore report]\nchild session: {session}\nstop reason: {stop.value}\n"
        f"steps used: {steps}\n\n"
    )
    if stop is StopReason.FINAL and final_text:
        body = final_text
    else:
        looked = _looked_at(history)
        listing = "\n".join(f"- {item}" for item in looked) or "- nothing"
        why = {
            StopReason.MAX_STEPS: f"the explorer used all of its {steps} step(s)",
            StopReason.CANCELLED: "the explorer was cancelled",
            StopReason.REPEATED_CALLS: "the explorer kept repeating the same call",
        }.get(stop, f"the explorer stopped ({stop.value}: {result.error or 'no answer'})")
        body = f"No complete answer was found: {why}. What it looked at:\n{listing}"
    text = header + body
    if len(text) > REPORT_CHARS:
        note = f"\n[report cut at {REPORT_CHARS} characters]"
        text = text[: REPORT_CHARS - len(note)] + note
    return text
