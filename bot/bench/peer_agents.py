"""The OpenAI Agents SDK's side of `clawgate bench approval --peers` (bot/bench/peers.py).

The human-in-the-loop pattern of its docs: a function tool with `needs_approval=True`; the run
stops with the call among `result.interruptions`; the application keeps `result.to_state()`
serialized (here: one SET in Redis, compact JSON, the same bytes `to_string()` writes less its
indentation) and later loads it (`RunState.from_json`), approves the interruption and runs the
state on. The model is an in-process fake, so no HTTP: a gated call for a user message last,
a final text after the tool's output. Tracing is off (no exporter to pay for)."""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from bot.bench.approval import filler
from bot.bench.peer_sample import PeerSample, missing_peer
from runtime.models import AssistantMessage, Message, ToolMessage, UserMessage

try:
    from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
    from agents.items import ModelResponse, TResponseInputItem
    from agents.models.interface import Model, ModelTracing
    from agents.run_state import RunState
    from agents.tracing import set_tracing_disabled
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError as exc:  # pragma: no cover - the extra is optional
    raise missing_peer("openai-agents") from exc

ASK = "please call noop and tell me when it is done"
FINAL = "noop ran; nothing else to do."


def responses_items(messages: list[Message]) -> list[TResponseInputItem]:
    """clawgate's filler turns as the Responses items the SDK keeps as a run's input."""
    items: list[Any] = []
    for m in messages:
        if isinstance(m, UserMessage):
            items.append({"role": "user", "content": m.content})
        elif isinstance(m, AssistantMessage):
            if m.content:
                items.append({"role": "assistant", "content": m.content})
            for call in m.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
        elif isinstance(m, ToolMessage):
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
    return items


class ScriptedModel(Model):
    """The gated call when the user spoke last, else the final answer: as the bench's demo
    model does for clawgate."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        self.calls += 1
        last: Any = input[-1] if isinstance(input, list) else {"role": "user"}
        if last.get("role") == "user":
            output: Any = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"call_peer_{self.calls}",
                name="noop",
                arguments="{}",
                id=f"fc_{self.calls}",
                status="completed",
            )
        else:
            output = ResponseOutputMessage(
                id=f"msg_{self.calls}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])],
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bench does not stream")


@function_tool(needs_approval=True)
def noop() -> str:
    """Does nothing; gated like clawgate's bench tool."""
    return "ok"


class AgentsPeer:
    """One history length: its prior items and the Redis keys a round writes."""

    name = "openai-agents"

    def __init__(self, redis: Redis, prior: int) -> None:
        set_tracing_disabled(True)
        self.redis = redis
        self.prior = prior
        self.history = responses_items(filler(prior))
        self.agent = Agent(name="bench", instructions="You are a helpful agent.", tools=[noop])
        self.config = RunConfig(model=ScriptedModel(), tracing_disabled=True)

    async def round(self, i: int) -> PeerSample:
        state_key = f"bench:peers:agents:h{self.prior}:{i}:state"
        history_key = f"bench:peers:agents:h{self.prior}:{i}:history"
        turn_input: list[TResponseInputItem] = [*self.history, {"role": "user", "content": ASK}]
        t0 = time.perf_counter_ns()
        asked = await Runner.run(self.agent, turn_input, run_config=self.config)
        if not asked.interruptions:
            raise RuntimeError("the Agents SDK round did not stop for approval")
        t_save = time.perf_counter_ns()
        state = json.dumps(asked.to_state().to_json(), separators=(",", ":"))
        await self.redis.set(state_key, state)
        t1 = time.perf_counter_ns()
        kept = await self.redis.get(state_key)
        if kept is None:
            raise RuntimeError("the Agents SDK state was not kept")
        loaded = await RunState.from_json(self.agent, json.loads(kept))
        for interruption in loaded.get_interruptions():
            loaded.approve(interruption)
        done = await Runner.run(self.agent, loaded, run_config=self.config)
        if done.final_output != FINAL:
            raise RuntimeError(f"the Agents SDK round ended with {done.final_output!r}")
        # The turn (the ask, the call, its output, the answer) joins the session's history;
        # the state is spent.
        turn = done.to_input_list()[len(self.history) :]
        await self.redis.rpush(history_key, *(json.dumps(item) for item in turn))
        await self.redis.delete(state_key)
        t2 = time.perf_counter_ns()
        await self.redis.delete(history_key)
        return PeerSample((t1 - t0) / 1e6, (t1 - t_save) / 1e6, (t2 - t1) / 1e6, len(state))
