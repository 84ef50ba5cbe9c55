"""The agent runtime's public face: `Runtime.run(session, text, actor, conversation)`.

One run appends the user's message to the session history, then loops: ask the model, run
the tool calls it made, append both to history, until the model answers without tools or a
stop condition is hit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.channel import Channel, Event, Notice, Reply, RunFinished
from runtime.executor import Emit, ToolExecutor
from runtime.models import (
    Actor,
    AssistantMessage,
    ConversationRef,
    Message,
    RunResult,
    StopReason,
    SystemMessage,
    ToolMessage,
    ToolStatus,
    UserMessage,
)
from runtime.providers.base import Provider, ProviderError
from runtime.store.history import HistoryStore
from runtime.tools.base import ToolContext
from runtime.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are clawgate, a careful engineering assistant working inside a team chat. "
    "You can use tools on the files of one work directory. Prefer reading before changing. "
    "Some tool calls need a human's approval or are denied by policy; when a call is denied or "
    "rejected, do not retry it unchanged. Answer concisely."
)
DEMO_NOTICE = (
    "Using the offline demo model (no OPENAI_API_KEY or OPENAI_BASE_URL). "
    "Try: read README.md, run: ls, write notes.txt: hello"
)
INTERRUPTED = "(no result: the run was interrupted before this call finished)"


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    workdir: Path
    max_steps: int = 12
    max_tool_result_chars: int = 16_000
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


def paired_tool_results(history: Sequence[Message]) -> list[Message]:
    """Every assistant tool call needs a tool message before the next turn, or the model API
    refuses the conversation; fill the gaps a crash may have left."""
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
            open_calls[:] = [c for c in open_calls if c[0] != message.tool_call_id]
        else:
            close_open()
        out.append(message)
        if isinstance(message, AssistantMessage):
            open_calls.extend((c.id, c.name) for c in message.tool_calls)
    close_open()
    return out


class Runtime:
    def __init__(
        self,
        config: RuntimeConfig,
        provider: Provider,
        registry: ToolRegistry,
        history: HistoryStore,
        channel: Channel,
    ) -> None:
        self.config = config
        self.provider = provider
        self.registry = registry
        self.history = history
        self.channel = channel
        self._cancels: dict[str, asyncio.Event] = {}

    def cancel(self, session: str) -> bool:
        """Ask the session's current run (in this process) to stop before its next step or call."""
        event = self._cancels.get(session)
        if event is None:
            return False
        event.set()
        return True

    async def run(
        self, session: str, text: str, actor: Actor, conversation: ConversationRef
    ) -> RunResult:
        async def emit(event: Event) -> None:
            await self.channel.send(conversation, event)

        ctx = ToolContext(
            session=session, workdir=self.config.workdir, actor=actor, conversation=conversation
        )
        self._cancels[session] = ctx.cancelled
        try:
            history = await self.history.load(session)
            if self.provider.offline_demo and not history:
                await emit(Notice(DEMO_NOTICE))
            user = UserMessage(content=text, actor=actor.key)
            await self.history.append(session, user)
            history.append(user)
            result = await self._loop(session, history, ctx, emit)
        except asyncio.CancelledError:
            await emit(RunFinished(StopReason.CANCELLED, 0))
            raise
        finally:
            self._cancels.pop(session, None)
        log.info(
            "session %s: run stopped (%s) after %d steps",
            session,
            result.stop_reason.value,
            result.steps,
        )
        await emit(RunFinished(result.stop_reason, result.steps, result.error))
        return result

    async def _loop(
        self, session: str, history: list[Message], ctx: ToolContext, emit: Emit
    ) -> RunResult:
        executor = ToolExecutor(self.registry, self.config.max_tool_result_chars, emit)
        system = SystemMessage(content=self.config.system_prompt)
        step = 0
        while step < self.config.max_steps:
            if ctx.cancelled.is_set():
                return RunResult(session=session, stop_reason=StopReason.CANCELLED, steps=step)
            step += 1
            try:
                reply = await self.provider.complete(
                    [system, *paired_tool_results(history)], self.registry.specs()
                )
            except ProviderError as exc:
                await emit(Reply(f"Sorry, I could not get an answer from the model: {exc}."))
                return RunResult(
                    session=session, stop_reason=StopReason.ERROR, steps=step, error=str(exc)
                )
            if not reply.tool_calls:
                await self.history.append(session, reply)
                history.append(reply)
                text = reply.content or "(the model returned an empty answer)"
                await emit(Reply(text))
                return RunResult(
                    session=session, stop_reason=StopReason.FINAL, steps=step, final_text=text
                )
            if reply.content:
                await emit(Reply(reply.content))
            outcome = await executor.execute(reply.tool_calls, ctx)
            produced: list[Message] = [reply, *(r.to_message() for r in outcome.results)]
            # The assistant turn and its results land in one write: history never holds half a turn.
            await self.history.append(session, *produced)
            history.extend(produced)
            if outcome.suspended_at is not None:
                return RunResult(
                    session=session, stop_reason=StopReason.APPROVAL_REQUIRED, steps=step
                )
            if outcome.cancelled:
                return RunResult(session=session, stop_reason=StopReason.CANCELLED, steps=step)
        note = f"Stopped after {step} steps without a final answer (max_steps)."
        await emit(Reply(note))
        return RunResult(session=session, stop_reason=StopReason.MAX_STEPS, steps=step)
