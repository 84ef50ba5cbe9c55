"""The agent loop: ask the model, run the tool calls it made, append both to history, repeat.

It stops with a reason (`final`, `max_steps`, `approval_required`, `cancelled`, `error`, or
`repeated_calls`: the same call got the same outcome too often in a row, runtime/repeats.py).
When a call is suspended for approval it returns a `Suspension` describing exactly where it stood;
checkpointing that is the caller's job (see agent.py), so the loop never waits for a human.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from runtime.audit import AuditLog
from runtime.canonical import canonical_arguments
from runtime.channel import Reply, Writing
from runtime.context.compactor import Context, compacting
from runtime.evidence_keys import KeyRing
from runtime.executor import DEFAULT_MAX_PARALLEL, Emit, ToolExecutor, duplicates_in
from runtime.metrics import LLM_SECONDS
from runtime.middleware.chain import Middleware
from runtime.models import (
    AssistantMessage,
    Message,
    RunResult,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    ToolStatus,
)
from runtime.policy.listed_models import ListedModel
from runtime.policy.modes import has_side_effects
from runtime.policy.service import PolicyService
from runtime.providers.base import (
    Provider,
    ProviderError,
    ProviderFactory,
    Streaming,
    close,
)
from runtime.repeats import RepeatRule, Streak
from runtime.steer import Steer
from runtime.store.history import HistoryStore, Window
from runtime.store.runs import CallMark, RunJournal
from runtime.store.summary import Summary
from runtime.tools.base import Effects, ToolContext
from runtime.tools.clarify import ClarifyTool
from runtime.tools.registry import ToolRegistry
from runtime.tracing import hooks as tracing

INTERRUPTED = "(no result: the run was interrupted before this call finished)"
OUTCOME_UNKNOWN = (
    "outcome unknown: the process running this call stopped while it ran; it may or may not "
    "have taken effect, and it was not run again"
)
EMPTY_ANSWER = "(the model returned an empty answer)"
# Seconds a run's copy of the conversation's policy is used for: it is read again at a step's
# start and before the step's calls run when older (a deny made while the model answered
# applies to the calls of that answer). Saves a Redis round trip per quick step.
POLICY_MAX_AGE = 1.0
# Calls of one model turn put to approvers together, at most (one notice holds them all).
MAX_BATCH = 10


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How a run's calls run: when identical outcomes stop it (runtime/repeats.py), how many
    parallel-safe calls of one turn run at once (1: one at a time), and the key ring each
    completed call's receipt is made with (runtime/receipts.py; unkeyed by default)."""

    repeats: RepeatRule = field(default_factory=RepeatRule)
    max_parallel: int = DEFAULT_MAX_PARALLEL
    keys: KeyRing = field(default_factory=KeyRing, repr=False)  # secrets: never printed


@dataclass(slots=True)
class RunState:
    """A run as it goes. `history` is the part of the session's history the run holds, from
    index `base` on (its window: see runtime/store/history.py), and what it appends; every
    index a run records or compares (a turn's start, an answer's key, a checkpoint's
    `history_len`) is the session's, never one into this list."""

    session: str
    history: list[Message]
    ctx: ToolContext
    emit: Emit
    step: int = 0
    # Calls a human just rejected (tool + canonical arguments): asking again is pointless.
    rejected: dict[str, str] = field(default_factory=dict)
    # The approval whose batch this run continues (the session still waits for it).
    resumed_from: str | None = None
    policy_read_at: float = 0.0  # time.monotonic() of the policy on ctx
    base: int = 0  # the session's index of history[0]
    summary: Summary | None = None  # stands for the history before the window (runtime/context)
    steer: Steer | None = None  # None: messages sent meanwhile wait for the run to end
    streak: Streak = field(default_factory=Streak)  # identical outcomes in a row (repeats.py)

    @classmethod
    def of(
        cls,
        window: Window,
        session: str,
        ctx: ToolContext,
        emit: Emit,
        *,
        step: int = 0,
        resumed_from: str | None = None,
        policy_read_at: float = 0.0,
    ) -> RunState:
        return cls(
            session,
            window.messages,
            ctx,
            emit,
            step=step,
            resumed_from=resumed_from,
            policy_read_at=policy_read_at,
            base=window.base,
            summary=window.summary,
        )

    @property
    def end(self) -> int:
        """The session's history length as this run knows it."""
        return self.base + len(self.history)

    def since(self, start: int) -> list[Message]:
        """The history from the session's index `start` on (a run's turn)."""
        return self.history[max(0, start - self.base) :]


@dataclass(frozen=True, slots=True)
class Suspension:
    step: int
    calls: list[ToolCall]
    index: int
    prior: list[ToolResult]  # results of calls[:index]
    result: ToolResult  # the suspended call's result, with the risk reasons
    unsaved: list[Message]  # the turn so far, for history: written with the checkpoint
    # The later calls of the turn that need a human too (index, judged result): put to the
    # approvers in one batch with the suspended call.
    more: tuple[tuple[int, ToolResult], ...] = ()


def answer_key(session: str, index: int) -> str:
    """The stable id of the final answer at `index` in the session's history."""
    return f"answer/{session}/{index}"


def fingerprint(call: ToolCall) -> str:
    return f"{call.name}:{canonical_arguments(call)}"


def paired_tool_results(history: Sequence[Message]) -> list[Message]:
    """Every assistant tool call needs exactly one tool message before the next turn, or the
    model API refuses the conversation: fill the gaps a crash may have left and drop answers
    that arrived too late."""
    # One pass with as little as possible per message: it runs over every message a model
    # request carries, at every step.
    out: list[Message] = []
    open_calls: list[tuple[str, str]] = []

    def close_open() -> None:
        out.extend(
            ToolMessage(tool_call_id=cid, name=name, content=INTERRUPTED, status=ToolStatus.ERROR)
            for cid, name in open_calls
        )
        open_calls.clear()

    for message in history:
        if isinstance(message, ToolMessage):
            if all(c[0] != message.tool_call_id for c in open_calls):
                continue  # an orphan (answer to no open call): the model API would refuse it
            open_calls[:] = [c for c in open_calls if c[0] != message.tool_call_id]
        elif open_calls:
            close_open()
        out.append(message)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            open_calls.extend((c.id, c.name) for c in message.tool_calls)
    close_open()
    return out


class AgentLoop:
    def __init__(
        self,
        provider: Provider,
        registry: ToolRegistry,
        history: HistoryStore,
        system_prompt: str,
        max_steps: int,
        max_tool_result_chars: int,
        audit: AuditLog | None = None,
        policies: PolicyService | None = None,
        middlewares: Sequence[Middleware] = (),
        context: Context | None = None,
        models: ProviderFactory | None = None,
        journal: RunJournal | None = None,
        options: LoopOptions | None = None,
    ) -> None:
        """`context`: what the model is sent of a history (default: the default budget,
        never compacted, the oldest turns left out when over it). `models`: makes the provider
        of a model the policy file lists, for conversations that switched to one (`/model`);
        None: this process serves the default model only. `journal`: where each call is marked
        before it starts, for a retake (none: calls are not marked). `options`: see
        LoopOptions."""
        self.journal = journal
        self.options = options or LoopOptions()
        self.provider = provider
        self.context = context or Context()
        self.models = models
        self._listed: dict[ListedModel, tuple[Provider, Context]] = {}
        self.registry = registry
        self.middlewares = list(middlewares)  # every call's chain, in order
        self.history = history
        self.system = SystemMessage(content=system_prompt)
        self.max_steps = max_steps
        self.max_tool_result_chars = max_tool_result_chars
        self.audit = audit
        self.policies = policies

    async def aclose(self) -> None:
        """Closes the models' connections (the process is done with this loop)."""
        for provider in [self.provider, *(p for p, _ in self._listed.values())]:
            await close(provider)

    async def _read_policy(self, state: RunState) -> None:
        """The conversation's policy kept on the context for the executor: read again unless
        this run read it less than POLICY_MAX_AGE ago."""
        fresh = time.monotonic() - state.policy_read_at <= POLICY_MAX_AGE
        if self.policies is not None and not (fresh and state.ctx.policy is not None):
            state.ctx.policy = await self.policies.for_context(state.ctx)
            state.policy_read_at = time.monotonic()

    async def _offered(self, state: RunState) -> list[ToolSpec]:
        """The tools the model may see at this step (an admin's change applies to every step
        that starts a second after it)."""
        if self.policies is None:
            return self.registry.specs()
        await self._read_policy(state)
        policy = state.ctx.policy
        assert policy is not None
        offered = policy.offered
        if policy.mode == "plan":  # only tools that change nothing
            offered = frozenset(
                t.name
                for t in self.registry.active()
                if t.name in offered and not has_side_effects(t)
            )
        return self.registry.specs(offered)

    def _model(self, state: RunState) -> tuple[Provider, Context, ListedModel | None]:
        """The provider and context of the conversation's model (as of the policy read at
        this step): one provider per listed model, made on first use and kept."""
        listed = state.ctx.policy.model if state.ctx.policy is not None else None
        if listed is None:
            return self.provider, self.context, None
        if listed not in self._listed:
            if self.models is None:
                raise ProviderError(
                    f"the model {listed.name} is not available in this process",
                    "model_unavailable",
                )
            provider = self.models(listed)
            context = compacting(provider, self.history, listed.context_budget, self.audit)
            self._listed[listed] = (provider, context)
        return (*self._listed[listed], listed)

    async def _ask(
        self,
        state: RunState,
        provider: Provider,
        messages: Sequence[Message],
        specs: Sequence[ToolSpec],
    ) -> AssistantMessage:
        """The model's answer; a provider that streams tells the chat what it writes."""
        if not isinstance(provider, Streaming):
            return await provider.complete(messages, specs)

        async def writing(text: str) -> None:
            await state.emit(Writing(text))

        return await provider.complete_streaming(messages, specs, writing)

    def result(self, state: RunState, reason: StopReason, **extra: str) -> RunResult:
        return RunResult(session=state.session, stop_reason=reason, steps=state.step, **extra)

    async def run(self, state: RunState) -> tuple[RunResult, Suspension | None]:
        while state.step < self.max_steps:
            if state.ctx.cancelled.is_set():
                return self.result(state, StopReason.CANCELLED), None
            state.step += 1
            tracing.begin_step(state.step)
            specs = await self._offered(state)
            tracing.tools_offered([spec.name for spec in specs])
            try:
                provider, context, listed = self._model(state)
                view, state.summary = await context.view(
                    self.system, state.session, state.history, state.base, state.summary
                )
                messages = paired_tool_results(view.messages)
                with (
                    LLM_SECONDS.labels(provider.name).time(),
                    tracing.llm_call(provider.name, messages, view.chars) as llm,
                ):
                    reply = await self._ask(state, provider, messages, specs)
            except ProviderError as exc:
                await state.emit(Reply(f"Sorry, I could not get an answer from the model: {exc}."))
                return self.result(state, StopReason.ERROR, error=str(exc)), None
            tracing.llm_replied(llm, reply, self.registry.known)
            if not reply.tool_calls:
                await self.append(state, [reply])
                text = reply.content or EMPTY_ANSWER
                key = answer_key(state.session, state.end - 1)
                # A conversation that switched models is told which one answered.
                shown = text if listed is None else f"{text}\n\n(model: {listed.name})"
                await state.emit(Reply(shown, key=key))
                return self.result(state, StopReason.FINAL, final_text=text), None
            if reply.content:
                await state.emit(Reply(reply.content))
            repeated = [c for c in reply.tool_calls if fingerprint(c) in state.rejected]
            if repeated:
                return await self._stop_repeat(state, reply, repeated[0]), None
            await self._read_policy(state)  # if the model took a while: a deny may be new
            stop = await self.run_batch(state, reply.tool_calls, 0, [], head=[reply])
            if stop is not None:
                return stop
            await self._steer(state)
        await state.emit(
            Reply(f"Stopped after {state.step} steps without a final answer (max_steps).")
        )
        return self.result(state, StopReason.MAX_STEPS), None

    async def _steer(self, state: RunState) -> None:
        """At the boundary after the tools' results, messages the requester sent meanwhile
        join the run, or a `/cancel` sent meanwhile stops it (one Redis read when there is
        neither). Not when no step is left to answer them, nor once the run is cancelled:
        they run after it instead."""
        if state.steer is None or state.step >= self.max_steps or state.ctx.cancelled.is_set():
            return
        steered = await state.steer(state.end)
        if steered.cancel:
            state.ctx.cancelled.set()
        elif steered.joined:
            state.history.extend(steered.joined)
            tracing.annotate(steered=len(steered.joined))  # on the step they follow

    async def run_batch(
        self,
        state: RunState,
        calls: list[ToolCall],
        start: int,
        prior: list[ToolResult],
        head: Sequence[Message] = (),
        grants: dict[str, str] | None = None,
    ) -> tuple[RunResult, Suspension | None] | None:
        """Run `calls[start:]` and append `head` plus their results to history: what is done
        so far before each call with side effects, the rest at the end (on suspension the
        caller writes it with the checkpoint). Returns how the run stopped, or None when the
        loop should ask the model again."""
        unsaved, saved = list(head), 0  # what is not yet in history: head, results from `saved`

        async def save(results: Sequence[ToolResult]) -> None:
            nonlocal saved
            await self.append(state, [*unsaved, *(r.to_message() for r in results[saved:])])
            unsaved.clear()
            saved = len(results)

        outcome = await self._executor(state).execute(
            calls, state.ctx, start=start, prior=prior, grants=grants, save=save
        )
        done = outcome.results if outcome.suspended_at is None else outcome.results[:-1]
        produced = [*unsaved, *(r.to_message() for r in done[saved:])]
        if outcome.suspended_at is not None:
            # Not appended here: the checkpoint write appends them in the same atomic step.
            at, first = outcome.suspended_at, outcome.results[-1]
            more = []
            if first.tool != ClarifyTool.name:  # a question is asked alone
                more = await self._executor(state).judge(calls, state.ctx, at + 1, MAX_BATCH - 1)
            suspension = Suspension(
                state.step, calls, at, [*prior, *done], first, produced, tuple(more)
            )
            return self.result(state, StopReason.APPROVAL_REQUIRED), suspension
        await self.append(state, produced)
        if outcome.cancelled:
            return self.result(state, StopReason.CANCELLED), None
        if self._looping(state, calls[start:], outcome.results):
            await state.emit(Reply(state.streak.message()))
            return self.result(state, StopReason.REPEATED_CALLS), None
        return None

    def _looping(
        self, state: RunState, calls: Sequence[ToolCall], results: Sequence[ToolResult]
    ) -> bool:
        """Whether these results end a streak of identical outcomes long enough to stop."""
        rule = self.options.repeats
        if rule.limit <= 0:
            return False
        skip = self.repeats(state, calls) if len(calls) > 1 else {}
        return state.streak.observe(rule, self.registry, calls, results, skip)

    async def run_granted(
        self, state: RunState, call: ToolCall, approval_id: str | None
    ) -> ToolResult:
        """Run one call through the whole chain, as approved by `approval_id` (None: as it
        is); history is the caller's business."""
        grants = None if approval_id is None else {call.id: approval_id}
        outcome = await self._executor(state).execute([call], state.ctx, grants=grants)
        return outcome.results[0]

    def repeats(self, state: RunState, calls: Sequence[ToolCall]) -> dict[int, int]:
        """Index of each call that repeats an earlier one of `calls` -> that one's index: it
        is answered by the earlier one's result, never run (see the executor)."""
        executor = self._executor(state)
        return duplicates_in([executor.prepare(call, state.ctx) for call in calls])

    def _executor(self, state: RunState) -> ToolExecutor:
        journal = self.journal

        async def started(call: ToolCall, effects: Effects) -> None:
            if journal is not None:
                mark = CallMark(state.end, effects.kind, effects.again)
                await journal.started(state.session, call.id, mark)

        return ToolExecutor(
            self.registry,
            self.max_tool_result_chars,
            state.emit,
            audit=self.audit,
            middlewares=self.middlewares,
            started=started if journal is not None else None,
            keys=self.options.keys,
            max_parallel=self.options.max_parallel,
        )

    async def _stop_repeat(
        self, state: RunState, reply: AssistantMessage, call: ToolCall
    ) -> RunResult:
        who = state.rejected[fingerprint(call)]
        note = f"not executed: this exact call was just rejected by {who}; not asking again"
        await self.append(
            state,
            [
                reply,
                *(
                    ToolMessage(
                        tool_call_id=c.id, name=c.name, content=note, status=ToolStatus.DENIED
                    )
                    for c in reply.tool_calls
                ),
            ],
        )
        text = f"Stopped: the model asked again for the {call.name} call that {who} just rejected."
        await state.emit(Reply(text))
        return self.result(state, StopReason.FINAL, final_text=text)

    async def append(self, state: RunState, messages: Sequence[Message]) -> None:
        if messages:
            await self.history.append(state.session, *messages)
            state.history.extend(messages)
