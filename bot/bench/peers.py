"""`clawgate bench approval --peers`: the same approval round in clawgate, the OpenAI Agents
SDK and LangGraph, side by side in one run, for each history length N of `--history`.

Each round of each system: a user message into a thread already holding N prior messages
(clawgate's filler turns: a request, a bash call, its output, an answer), the model's call of a
gated tool, the run durably suspended; then the approval, the call run once, the final answer.
The models are in-process fakes (no HTTP). After each of clawgate's rounds at N (as
`clawgate bench approval` times it, bot/bench/approval.py), the peers run their round at N,
so a slower moment of the shared machine weighs on all of them alike.

What is timed, per system:

- ask: message in -> durably suspended. clawgate: `runtime.run` until it returns the
  approval id (history read, model, policy, suspension script). Agents SDK: `Runner.run`
  until `result.interruptions`, then `result.to_state()` serialized (compact JSON) and SET in
  the same Redis. LangGraph: `ainvoke` until `__interrupt__`, its SQLite checkpointer
  (AsyncSqliteSaver, WAL, synchronous=NORMAL) having written the thread's checkpoints.
  THIS is the fair comparison of suspending: each system's whole way to a durable suspension.
- suspend (clawgate) / save (peers): the write of the suspension alone. clawgate: its
  suspension step (approval record, checkpoint and the turn's history in one script, the
  notice). Agents SDK: serialize the RunState and SET it. LangGraph: the time at least one
  checkpointer write was under way during the ask. Narrower, and not quite alike: clawgate's
  step also writes the turn's history and the approval record, the peers' only the state.
- resume: decision -> the approved call run -> final answer, kept. clawgate: `runtime.decide`.
  Agents SDK: GET and `RunState.from_json`, approve, `Runner.run(agent, state)`, the turn's
  items RPUSHed to the session's history, the state deleted. LangGraph: `ainvoke(Command(
  resume="approve"))` to the end (checkpointed).
- round: ask + resume of the same round.
- bytes per suspension: clawgate, what the client sent Redis for the suspension step; Agents
  SDK, the serialized RunState's length; LangGraph, the bytes of the checkpoints and pending
  writes the ask added to the SQLite file (the thread's prior checkpoint excluded).

Where the set-up favours a peer: the Agents SDK gets its N prior items in memory (clawgate
reads its history from Redis each ask), and neither peer traces (clawgate's audit trail and
tracing stay on, as `clawgate serve` runs). clawgate compacts a thread over its context
budget, so at large N its runs read only the window after the summary; the peers carry all N.

The peers run fewer rounds at large N (each takes seconds at 10,000): `peer_rounds`, spread
evenly over clawgate's rounds."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Protocol

from redis.asyncio import Redis

from bot.bench.approval import latency_figures, run_approval_bench, warm_rounds
from bot.bench.peer_sample import PeerSample
from bot.settings import Settings, SettingsError

PEER_WORK = 500_000  # prior messages x rounds a peer runs at most per history length
MIN_PEER_ROUNDS = 30


class Peer(Protocol):
    name: str

    async def round(self, i: int) -> PeerSample: ...


def peer_rounds(rounds: int, prior: int) -> int:
    """How many timed rounds the peers run at `prior` messages."""
    return min(rounds, max(MIN_PEER_ROUNDS, PEER_WORK // max(prior, 1)))


def peer_figures(samples: list[PeerSample]) -> dict[str, Any]:
    stored = sorted(s.stored for s in samples)
    return {
        "rounds": len(samples),
        "ask": latency_figures([s.ask for s in samples]),
        "save": latency_figures([s.save for s in samples]),
        "resume": latency_figures([s.resume for s in samples]),
        "round": latency_figures([s.ask + s.resume for s in samples]),
        "bytes_per_suspension": stored[len(stored) // 2],
    }


async def run_peers_bench(
    settings: Settings, workdir: Path, rounds: int, history: list[int]
) -> dict[str, Any]:
    """`clawgate bench approval` with the peers' rounds beside clawgate's."""
    if not settings.redis_url:
        raise SettingsError("--peers: needs REDIS_URL (the Agents SDK keeps its state there)")
    # The peers' libraries only now: the extra `peers` is optional.
    from bot.bench.peer_agents import AgentsPeer  # noqa: PLC0415
    from bot.bench.peer_langgraph import LangGraphPeer, open_saver  # noqa: PLC0415

    warm = warm_rounds(rounds)
    samples: dict[tuple[str, int], list[PeerSample]] = {}
    redis = Redis.from_url(settings.redis_url)
    try:
        async with open_saver(workdir) as saver:
            peers: dict[int, list[Peer]] = {
                prior: [AgentsPeer(redis, prior), LangGraphPeer(saver, prior)] for prior in history
            }

            async def beside(prior: int, i: int) -> None:
                # Warm-up rounds for all; then every stride-th of clawgate's timed rounds.
                stride = math.ceil(rounds / peer_rounds(rounds, prior))
                if i >= warm and (i - warm) % stride:
                    return
                for peer in peers[prior]:
                    sample = await peer.round(i)
                    if i >= warm:
                        samples.setdefault((peer.name, prior), []).append(sample)

            figures = await run_approval_bench(settings, workdir, rounds, history, beside)
    finally:
        await redis.aclose()
    figures["peers"] = {
        "openai-agents": "RunState JSON in Redis (SET), in-process fake Model",
        "langgraph": "interrupt() in the tool node, AsyncSqliteSaver (SQLite file, WAL)",
    }
    for prior in history:
        row = figures["history"][str(prior)]
        row["peers"] = {name: peer_figures(samples[(name, prior)]) for name in figures["peers"]}
        row["ratios"] = {name: ratios(row, peer) for name, peer in row["peers"].items()}
    return figures


def ratios(clawgate: dict[str, Any], peer: dict[str, Any]) -> dict[str, float]:
    """clawgate / peer at p50 (below 1: clawgate is faster or smaller)."""
    pairs = {
        "ask": ("ask", "ask"),
        "suspend_step": ("suspend", "save"),
        "resume": ("resume", "resume"),
        "round": ("round", "round"),
    }
    out = {
        name: round(clawgate[ours]["p50_ms"] / peer[theirs]["p50_ms"], 3)
        for name, (ours, theirs) in pairs.items()
    }
    if clawgate["bytes_per_suspension"]:
        out["bytes"] = round(clawgate["bytes_per_suspension"] / peer["bytes_per_suspension"], 4)
    return out


def _cells(row: dict[str, Any], suspend: str) -> str:
    cells = [f"{row[k]['p50_ms']:>8.2f} /{row[k]['p99_ms']:>8.2f}" for k in ("ask", suspend)]
    cells += [f"{row[k]['p50_ms']:>8.2f} /{row[k]['p99_ms']:>8.2f}" for k in ("resume", "round")]
    size = row["bytes_per_suspension"]
    return "  ".join(cells) + f"  {'n/a' if size is None else size:>10}"


def peers_lines(figures: dict[str, Any]) -> list[str]:
    lines = [
        f"approval side by side: clawgate ({figures['store']}, context budget "
        f"{figures['context_budget']} characters, {figures['rounds']} rounds each) and its peers",
        *(f"  {name}: {how}" for name, how in figures["peers"].items()),
        "ask: message in -> durably suspended (the fair comparison); suspend: clawgate's "
        "suspension step / the peer's save alone; round: ask + resume. p50 / p99 ms.",
        f"{'prior':>6} {'system':<14} {'rounds':>6}  {'ask':^18}  {'suspend|save':^18}  "
        f"{'resume':^18}  {'round':^18}  {'bytes':>10}",
    ]
    for prior, row in figures["history"].items():
        lines.append(
            f"{prior:>6} {'clawgate':<14} {figures['rounds']:>6}  {_cells(row, 'suspend')}"
        )
        for name, peer in row["peers"].items():
            lines.append(f"{'':>6} {name:<14} {peer['rounds']:>6}  {_cells(peer, 'save')}")
        for name, r in row["ratios"].items():
            lines.append(
                f"{'':>6} clawgate/{name}: ask {r['ask']:.2f}  suspend step {r['suspend_step']:.2f}"
                f"  resume {r['resume']:.2f}  round {r['round']:.2f}"
                + (f"  bytes {r['bytes']:.4f}" if "bytes" in r else "")
            )
    rows = list(figures["history"].items())
    if len(rows) > 1:
        (first, low), (last, high) = rows[0], rows[-1]
        growth = high["resume"]["p50_ms"] / low["resume"]["p50_ms"]
        lines.append(f"clawgate resume p50 {last} / {first} prior messages: {growth:.2f} (<= 1.5)")
    return lines
