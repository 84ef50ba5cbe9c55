"""LangGraph's side of `clawgate bench approval --peers` (bot/bench/peers.py).

The human-in-the-loop pattern of its docs: a model node, and a tool node that calls
`interrupt()` before running the call; the thread's messages live in the state, kept by a
checkpointer (here AsyncSqliteSaver from langgraph-checkpoint-sqlite, a file in the bench's
work directory, WAL as it sets up). `ainvoke` returns at the interrupt with the thread
checkpointed; `Command(resume=...)` runs it on to the end. Each round gets a fresh thread
already holding the N prior messages (seeded untimed with `aupdate_state`, as earlier turns
would have left it), and is deleted after."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from bot.bench.approval import filler
from bot.bench.peer_sample import PeerSample, missing_peer
from runtime.models import AssistantMessage, Message, ToolMessage, UserMessage

try:
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.messages import ToolMessage as LCToolMessage
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.types import Command, interrupt
except ImportError as exc:  # pragma: no cover - the extra is optional
    raise missing_peer("langgraph and langgraph-checkpoint-sqlite") from exc

ASK = "please call noop and tell me when it is done"
FINAL = "noop ran; nothing else to do."


class BenchState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def langchain_messages(messages: list[Message]) -> list[AnyMessage]:
    """clawgate's filler turns as LangChain messages, with ids as a stored thread's have."""
    out: list[AnyMessage] = []
    for i, m in enumerate(messages):
        mid = f"m{i}"
        if isinstance(m, UserMessage):
            out.append(HumanMessage(content=m.content, id=mid))
        elif isinstance(m, AssistantMessage):
            calls = [
                {"name": c.name, "args": {"raw": c.arguments}, "id": c.id, "type": "tool_call"}
                for c in m.tool_calls
            ]
            out.append(AIMessage(content=m.content, tool_calls=calls, id=mid))
        elif isinstance(m, ToolMessage):
            out.append(
                LCToolMessage(content=m.content, tool_call_id=m.tool_call_id, name=m.name, id=mid)
            )
    return out


async def model(state: BenchState) -> dict[str, Any]:
    """The gated call when the user spoke last, else the final answer."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "noop", "args": {}, "id": "call_peer", "type": "tool_call"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=FINAL)]}


async def tools(state: BenchState) -> dict[str, Any]:
    """The approval gate: interrupt before the call; run it once approved."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    call = last.tool_calls[0]
    decision = interrupt({"tool": call["name"], "args": call["args"]})
    content = "ok" if decision == "approve" else "rejected by the approver"
    return {"messages": [LCToolMessage(content=content, tool_call_id=call["id"], name="noop")]}


def _route(state: BenchState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_graph(saver: AsyncSqliteSaver) -> Any:
    graph = StateGraph(BenchState)
    graph.add_node("model", model)
    graph.add_node("tools", tools)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


class TimedSaver(AsyncSqliteSaver):
    """The saver, timing its writes: the part of a run that is the checkpoint's save. With
    the default durability ("async") a step's writes overlap the next step, so what counts is
    the time at least one write is under way."""

    writing_ns = 0
    _writing = 0
    _since = 0

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        if not self._writing:
            self._since = time.perf_counter_ns()
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
            if not self._writing:
                self.writing_ns += time.perf_counter_ns() - self._since

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        with self._timed():
            return await super().aput(*args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        with self._timed():
            await super().aput_writes(*args, **kwargs)


class LangGraphPeer:
    """One history length: its prior messages and the graph on the shared saver."""

    name = "langgraph"

    def __init__(self, saver: TimedSaver, prior: int) -> None:
        self.saver = saver
        self.prior = prior
        self.history = langchain_messages(filler(prior))
        self.graph = build_graph(saver)

    async def _stored(self, thread: str) -> int:
        """Bytes the saver holds for `thread`: its checkpoints and their pending writes."""
        query = (
            "SELECT (SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0)"
            " FROM checkpoints WHERE thread_id = ?),"
            " (SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?)"
        )
        async with self.saver.conn.execute(query, (thread, thread)) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0]) + int(row[1])

    async def round(self, i: int) -> PeerSample:
        thread = f"bench:peers:langgraph:h{self.prior}:{i}"
        config: Any = {"configurable": {"thread_id": thread}}
        if self.history:
            await self.graph.aupdate_state(config, {"messages": self.history}, as_node="model")
        seeded = await self._stored(thread)
        self.saver.writing_ns = 0
        t0 = time.perf_counter_ns()
        asked = await self.graph.ainvoke({"messages": [HumanMessage(content=ASK)]}, config)
        t1 = time.perf_counter_ns()
        save_ns = self.saver.writing_ns
        if "__interrupt__" not in asked:
            raise RuntimeError("the LangGraph round did not stop for approval")
        stored = await self._stored(thread) - seeded
        t2 = time.perf_counter_ns()
        done = await self.graph.ainvoke(Command(resume="approve"), config)
        t3 = time.perf_counter_ns()
        if done["messages"][-1].content != FINAL:
            raise RuntimeError(f"the LangGraph round ended with {done['messages'][-1]!r}")
        await self.saver.adelete_thread(thread)
        return PeerSample((t1 - t0) / 1e6, save_ns / 1e6, (t3 - t2) / 1e6, stored)


@contextlib.asynccontextmanager
async def open_saver(workdir: Path) -> AsyncIterator[TimedSaver]:
    """The checkpointer: a SQLite file in the bench's work directory. synchronous=NORMAL (in
    WAL: no fsync per commit), since the bench's Redis does not fsync its writes either."""
    async with TimedSaver.from_conn_string(str(workdir / "langgraph.sqlite")) as saver:
        assert isinstance(saver, TimedSaver)
        await saver.setup()
        await saver.conn.execute("PRAGMA synchronous=NORMAL")
        yield saver
