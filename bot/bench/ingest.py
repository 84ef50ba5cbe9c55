"""`clawgate bench ingest`: the real `clawgate serve` under signed chat-platform event traffic.

`--platform slack` (default): signed `app_mention` event callbacks to POST /slack/events;
`--platform feishu`: AES-256-CBC encrypted, signed `im.message.receive_v1` events (p2p text
messages from users) to POST /feishu/events. What differs between the two is one `Platform`:
the request builder, the fake API and the server's environment; the rest is shared.

Three processes: this one (load generator and end-to-end client), the server under test
(`python -m bot.cli serve` as a subprocess, demo model, its worker in process, keys under a
unique Redis prefix that is deleted afterwards) and a minimal fake of the platform's API (Slack
Web API or Feishu Open API) in its own process (multiprocessing, spawn), so neither the fake's
CPU nor the generator's runs inside the server. All three are on this machine and share its
cores with Redis.

ack: an open-loop generator sends freshly signed events, spread over many conversations (Slack
threads, Feishu chats), at fixed intervals for each rate, whatever the answers; the latency of a
request runs from its scheduled time to its HTTP 200, so queueing (in the server or in this
client) counts. Every accepted event also runs the agent in the server's worker: that is real
load on the same event loop, and the worker's backlog is drained between rates.

end-to-end: `--threads` closed loops, each posting a message in its own conversation and waiting
until the fake received the answer (the reply carrying the demo model's text, not the demo
notice or a progress message), timed from the message being sent to the answer arriving at the
fake (both on the system-wide monotonic clock). One unmeasured turn per conversation first: it
starts the conversation (and gets the demo notice).

Set CLAWGATE_BENCH_PROFILE=<file> to run the server under cProfile; the stats are written to
<file> when the server stops (`python -m pstats <file>`); with --split the worker's go to
<file>.worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bot.bench.errors import BenchError
from bot.bench.model_server import PLAIN_ANSWER, model_process
from bot.bench.monitor import redis_commands
from bot.bench.platforms import (
    ACK_CONVERSATIONS,
    ANSWER,
    DEFAULT_RATES,
    DRAIN_TIMEOUT,
    GIVE_UP_P99_MS,
    KEPT_UP_S,
    PLATFORMS,
    REPLY_TIMEOUT,
    REQUEST_TIMEOUT,
    SUSTAINED_P99_MS,
    TARGET_ACK_P99_MS,
    TARGET_E2E_P99_MS,
    TARGET_RATE,
    WARMUP_REQUESTS,
    Events,
    fake_api,
)
from bot.bench.runtime import _line, percentile
from bot.bench.server_under_test import delete_prefix, server
from bot.bench.store import BenchStore, queued, redis_cpu_s
from bot.settings import Settings, SettingsError
from runtime.store.connection import REDIS_FAILURES

# What ends a bench run with one line each and exit 1.
FAILED: tuple[type[Exception], ...] = (BenchError, aiohttp.ClientError, *REDIS_FAILURES, OSError)

# --- ack latency: open loop ---------------------------------------------------------------


@dataclass
class AckStep:
    rate: int
    sent: int
    latencies_us: list[float] = field(default_factory=list)  # of HTTP 200s, from schedule
    lag_us: list[float] = field(default_factory=list)  # how late this client sent
    errors: Counter[str] = field(default_factory=Counter)
    span_s: float = 0.0  # first scheduled send to last answer
    backlog: int = 0  # events still queued for the worker when the step ended
    drain_s: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.latencies_us)

    @property
    def achieved(self) -> float:
        return self.ok / self.span_s if self.span_s else 0.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_us, 0.99) / 1000 if self.latencies_us else float("inf")

    @property
    def sustained(self) -> bool:
        return not self.errors and self.ok == self.sent and self.p99_ms < SUSTAINED_P99_MS


async def _send(
    session: aiohttp.ClientSession,
    url: str,
    request: tuple[bytes, dict[str, str]],
    due: float,
    step: AckStep,
) -> float:
    """One request scheduled at `due`; returns when its answer came."""
    step.lag_us.append((time.monotonic() - due) * 1e6)
    body, headers = request
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        step.errors[type(exc).__name__] += 1
        return time.monotonic()
    done = time.monotonic()
    if status == 200:
        step.latencies_us.append((done - due) * 1e6)
    else:
        step.errors[f"HTTP {status}"] += 1
    return done


async def _open_loop(
    session: aiohttp.ClientSession,
    url: str,
    requests: Sequence[tuple[bytes, dict[str, str]]],
    rate: float,
) -> AckStep:
    step = AckStep(rate=int(rate), sent=len(requests))
    interval = 1.0 / rate
    start = time.monotonic() + 0.01
    tasks = []
    for i, request in enumerate(requests):
        due = start + i * interval
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_send(session, url, request, due, step)))
    finished = await asyncio.gather(*tasks)
    step.span_s = max(finished) - start if finished else 0.0
    return step


async def _drain(
    store: BenchStore, prefix: str, limit_s: float = DRAIN_TIMEOUT
) -> tuple[int, float]:
    """Wait until the worker finished every queued event (acknowledged jobs are deleted from
    the streams, so their length is what is left); returns (backlog at the start, seconds)."""
    redis = store.connect()
    streams = store.streams(prefix)
    started = time.monotonic()
    try:
        backlog = left = await queued(redis, streams)
        while left:
            if time.monotonic() - started > limit_s:
                raise BenchError(f"the worker still had {left} events queued after {limit_s:.0f} s")
            await asyncio.sleep(0.05)
            left = await queued(redis, streams)
    finally:
        await redis.aclose()
    return backlog, time.monotonic() - started


# --- end to end: closed loops ---------------------------------------------------------------


async def _conversation_loop(
    session: aiohttp.ClientSession,
    events_url: str,
    fake_url: str,
    events: Events,
    user: int,
    turns: int,
) -> list[float]:
    """One conversation: a message, wait for its answer, again; the first turn (which starts
    the conversation) is not measured."""
    conversation: str | None = None
    samples = []
    for turn in range(turns + 1):
        conversation, body, headers = events.request(user, conversation)
        sent = time.monotonic()
        async with session.post(events_url, data=body, headers=headers) as resp:
            await resp.read()
            if resp.status != 200:
                raise BenchError(f"a message was answered with HTTP {resp.status}")
        query = {"conversation": conversation, "count": str(turn + 1)}
        query["timeout"] = str(REPLY_TIMEOUT)
        async with session.get(f"{fake_url}/bench/answers", params=query) as resp:
            times = (await resp.json())["times"]
        if len(times) <= turn:
            raise BenchError(f"no answer in {conversation} within {REPLY_TIMEOUT:.0f} s")
        if turn:
            samples.append((times[turn] - sent) * 1e6)
    return samples


# --- the bench ----------------------------------------------------------------------------


@dataclass
class IngestReport:
    steps: list[AckStep]
    e2e_us: list[float]
    e2e_turns: int  # with the unmeasured first turn of each thread
    e2e_s: float
    e2e_cpu_ms: dict[str, float]  # per turn
    fake_calls: dict[str, int]
    keys_deleted: int = 0
    platform: str = "slack"
    redis_commands: dict[str, Any] | None = None  # per turn (monitor.py); None: not counted
    model_requests_per_turn: float | None = None  # with the fake model

    @property
    def ingest_worker_cpu_ms(self) -> float:
        """CPU per turn of what runs the bot: the server and its worker process, if any."""
        return sum(self.e2e_cpu_ms.get(kind, 0.0) for kind in ("server", "worker"))

    def step(self, rate: int) -> AckStep | None:
        return next((s for s in self.steps if s.rate == rate), None)

    @property
    def sustained(self) -> int | None:
        """The highest rate held (ack p99 under 100 ms, no errors) with every lower rate too."""
        return _streak(self.steps, lambda step: step.sustained)

    @property
    def worker_kept_up(self) -> int | None:
        """The highest rate after which less than a quarter second of traffic was queued."""
        return _streak(self.steps, lambda step: step.backlog <= step.rate * KEPT_UP_S)


def _streak(steps: Sequence[AckStep], held: Callable[[AckStep], bool]) -> int | None:
    best = None
    for step in sorted(steps, key=lambda s: s.rate):
        if not held(step):
            break
        best = step.rate
    return best


def _connector() -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(limit=512, limit_per_host=512)


def _ack_line(step: AckStep) -> str:
    label = f"ack at {step.rate}/s (achieved {step.achieved:.0f}/s)"
    errors = ", ".join(f"{n} {kind}" for kind, n in step.errors.items()) or "0"
    head = _line(label, step.latencies_us) if step.latencies_us else f"{label:<44} no answers"
    late = percentile(step.lag_us, 0.99) / 1000 if step.lag_us else 0.0
    tail = f"   max {max(step.latencies_us, default=0) / 1000:7.1f} ms   errors {errors}"
    return head + tail + (f"   (this client sent up to {late:.0f} ms late)" if late > 5 else "")


class _Cpu:
    """CPU seconds used so far by each process of the bench: the server and the fake (from
    /proc, Linux only), Redis (INFO, all its clients) and this client."""

    def __init__(self, store: BenchStore, pids: dict[str, int]) -> None:
        self.redis = store.connect()
        self.pids = pids

    async def read(self) -> dict[str, float]:
        used = {name: cpu for name, pid in self.pids.items() if (cpu := _proc_cpu(pid)) is not None}
        if (redis := await redis_cpu_s(self.redis)) is not None:  # a cluster: its masters'
            used["redis"] = redis
        used["bench client"] = time.process_time()
        return used

    async def per_event(self, before: dict[str, float], events: int) -> dict[str, float]:
        """CPU milliseconds per event since `before`."""
        after = await self.read()
        return {k: (after[k] - before[k]) * 1000 / max(1, events) for k in after if k in before}

    async def aclose(self) -> None:
        await self.redis.aclose()


_CPUCLOCK_SCHED = 2  # the clock id of a process's CPU time: ((~pid) << 3) | 2 (Linux)


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds of process `pid`, threads that ended included: its CPU clock (Linux's
    `clock_gettime` of another process, in nanoseconds), else utime + stime from /proc in
    clock ticks (10 ms: a short run's share could read 0)."""
    with contextlib.suppress(OSError):
        return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_line(cpu_ms: dict[str, float], wall_s: float, events: int, per: str = "event") -> str:
    """CPU per event of each process, and how busy the server's one event loop was."""
    parts = ", ".join(f"{name} {ms:.2f}" for name, ms in cpu_ms.items())
    busy = cpu_ms.get("server", 0.0) * events / 1000 / wall_s if wall_s else 0.0
    return f"     CPU ms per {per}: {parts}; server busy {busy:.0%} of one core"


@dataclass
class _Run:
    """What the phases of one run share: the processes under test, and how to reach them."""

    store: BenchStore
    prefix: str
    session: aiohttp.ClientSession
    events: Events
    events_url: str
    fake_url: str
    model_url: str | None
    pids: dict[str, int]  # the processes under test: "server" and, split, "worker"
    cpu: _Cpu
    out: Callable[[str], None]

    async def ramp(self, rates: Sequence[int], duration: float) -> list[AckStep]:
        warmup = self.events.spread(WARMUP_REQUESTS, WARMUP_REQUESTS)
        warm = await _open_loop(self.session, self.events_url, warmup, 50)
        if warm.errors:
            raise BenchError(f"warm-up requests failed: {dict(warm.errors)}")
        await _drain(self.store, self.prefix)
        steps = []
        for rate in rates:
            count = max(1, round(rate * duration))
            requests = self.events.spread(count, min(ACK_CONVERSATIONS, count))
            before, started = await self.cpu.read(), time.monotonic()
            step = await _open_loop(self.session, self.events_url, requests, rate)
            step.backlog, step.drain_s = await _drain(self.store, self.prefix)
            cpu_ms = await self.cpu.per_event(before, count)
            steps.append(step)
            self.out(_ack_line(step))
            self.out(_cpu_line(cpu_ms, time.monotonic() - started, count))
            self.out(
                f"     worker backlog at the end: {step.backlog} events, "
                f"drained in {step.drain_s:.1f} s"
            )
            if step.p99_ms >= GIVE_UP_P99_MS:
                self.out(f"     (stopping the ramp: p99 >= {GIVE_UP_P99_MS:.0f} ms)")
                break
        return steps

    async def end_to_end(self, steps: list[AckStep], threads: int, turns: int) -> IngestReport:
        """The closed loops, their CPU and (MONITOR) Redis commands, until the last turn's
        job was acknowledged."""
        all_turns = threads * (turns + 1)
        asked = await self.model_requests()
        async with redis_commands(self.store, self.pids) as seen:
            before, started = await self.cpu.read(), time.monotonic()
            loops = [
                _conversation_loop(
                    self.session, self.events_url, self.fake_url, self.events, 10_000 + i, turns
                )
                for i in range(threads)
            ]
            e2e = [s for samples in await asyncio.gather(*loops) for s in samples]
            e2e_s = time.monotonic() - started
            await _drain(self.store, self.prefix)  # the last turns' acknowledgements
            e2e_cpu = await self.cpu.per_event(before, all_turns)
        asked = await self.model_requests() - asked
        async with self.session.get(f"{self.fake_url}/bench/stats") as resp:
            calls = (await resp.json())["calls"]
        report = IngestReport(steps, e2e, all_turns, e2e_s, e2e_cpu, calls)
        if seen:
            report.redis_commands = seen[0].per_turn(all_turns)
        if self.model_url:
            report.model_requests_per_turn = round(asked / all_turns, 2)
        return report

    async def model_requests(self) -> int:
        """Requests the fake model answered so far (0 without it)."""
        if self.model_url is None:
            return 0
        async with self.session.get(f"{self.model_url}/bench/stats") as resp:
            return int((await resp.json())["requests"])


async def bench_ingest(
    redis_url: str,
    prefix: str,
    *,
    cluster: bool = False,
    partitions: int = 1,
    platform: str = "slack",
    rates: Sequence[int] = DEFAULT_RATES,
    duration: float = 3.0,
    threads: int = 50,
    turns: int = 20,
    split: bool = False,
    model: bool = False,
    floor: bool = False,
    out: Callable[[str], None] = print,
) -> IngestReport:
    """`model`: the server under test calls the bench's fake model (bot/bench/model_server.py,
    its own process) with the `openai` provider instead of the demo model; `floor`: the floor
    app (bot/bench/floor.py) instead of clawgate, with the fake model."""
    spec = PLATFORMS[platform]
    store = BenchStore(redis_url, cluster, partitions)
    model = model or floor
    with tempfile.TemporaryDirectory(prefix="clawgate-bench-") as tmp:
        try:
            async with contextlib.AsyncExitStack() as stack:
                model_url, model_pid = (
                    await stack.enter_async_context(model_process()) if model else (None, None)
                )
                answer = PLAIN_ANSWER if model else ANSWER
                fake_url, fake_pid = await stack.enter_async_context(fake_api(spec, answer))
                server_url, pids = await stack.enter_async_context(
                    server(spec, store, prefix, fake_url, Path(tmp), split, model_url, floor)
                )
                session = await stack.enter_async_context(
                    aiohttp.ClientSession(
                        connector=_connector(),
                        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                    )
                )
                others = {f"fake {spec.label}": fake_pid}
                if model_pid is not None:
                    others["fake model"] = model_pid
                cpu = _Cpu(store, pids | others)
                stack.push_async_callback(cpu.aclose)
                run = _Run(
                    store,
                    prefix,
                    session,
                    spec.events(),
                    f"{server_url}{spec.events_path}",
                    fake_url,
                    model_url,
                    pids,
                    cpu,
                    out,
                )
                out(f"ack: {spec.traffic}, open loop, latency from the scheduled send to HTTP 200;")
                out(
                    "     a worker process runs the agent for every accepted event (real "
                    "load); its backlog is drained between rates"
                    if split
                    else "     the server's worker runs the agent for every accepted event "
                    "on the same event loop (real load); its backlog is drained between rates"
                )
                report = await run.end_to_end(await run.ramp(rates, duration), threads, turns)
        finally:
            deleted = await delete_prefix(store, prefix)
            for name in ("serve", "worker"):
                _show_server_log(Path(tmp) / f"{name}.log", out)
    report.keys_deleted, report.platform = deleted, platform
    return report


def _show_server_log(path: Path, out: Callable[[str], None], limit: int = 8) -> None:
    """What the server logged (warnings and worse), distinct lines first seen, counted."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return
    quiet = ("clawgate: listening", "clawgate: worker", "clawgate: stopping")
    seen = Counter(line for line in lines if line.strip() and not line.startswith(quiet))
    if not seen:
        return
    out(f"{path.stem} log: {sum(seen.values())} line(s), {len(seen)} distinct; the first ones:")
    for line, n in itertools.islice(seen.items(), limit):
        out(f"  {n:6d} x {line[:200]}")


def _verdicts(report: IngestReport, threads: int, turns: int) -> list[str]:
    lines = []
    sustained, kept_up = report.sustained, report.worker_kept_up
    conversations = f"{PLATFORMS[report.platform].conversation}s"
    lines.append(
        f"highest rate sustained (ack p99 < {SUSTAINED_P99_MS:.0f} ms, no errors, every lower "
        "rate too): " + (f"{sustained}/s" if sustained else "none of the rates tried")
    )
    lines.append(
        f"highest rate the worker kept up with (< {KEPT_UP_S} s of traffic queued at the end): "
        + (f"{kept_up}/s" if kept_up else "none of the rates tried")
    )
    if report.e2e_us:
        lines.append(
            _line(f"end to end, {threads} {conversations} x {turns} turns", report.e2e_us)
            + f"   max {max(report.e2e_us) / 1000:7.1f} ms"
            + f"   ({report.e2e_turns / report.e2e_s:.0f} turns/s)"
        )
        lines.append(_cpu_line(report.e2e_cpu_ms, report.e2e_s, report.e2e_turns, "turn"))
        lines.append(f"     CPU ms per turn, ingest + worker: {report.ingest_worker_cpu_ms:.2f}")
        lines.append(_commands_line(report.redis_commands))
        if report.model_requests_per_turn is not None:
            lines.append(f"     model requests per turn: {report.model_requests_per_turn:.2f}")
    target = report.step(TARGET_RATE)
    if target is None:
        lines.append(
            f"verdict: ack p99 at {TARGET_RATE}/s: not measured ({TARGET_RATE} not in --rates)"
        )
    else:
        ok = target.sustained and target.p99_ms <= TARGET_ACK_P99_MS
        lines.append(
            f"verdict: ack p99 at {TARGET_RATE}/s = {target.p99_ms:.1f} ms "
            f"(target <= {TARGET_ACK_P99_MS:.0f} ms): {'PASS' if ok else 'FAIL'}"
        )
    if report.e2e_us:
        p99 = percentile(report.e2e_us, 0.99) / 1000
        verdict = "PASS" if p99 <= TARGET_E2E_P99_MS else "FAIL"
        lines.append(
            f"verdict: end-to-end p99 = {p99:.1f} ms "
            f"(target <= {TARGET_E2E_P99_MS:.0f} ms): {verdict}"
        )
    return lines


def _commands_line(per_turn: dict[str, Any] | None) -> str:
    if per_turn is None:
        return "     Redis commands per turn: not counted (MONITOR needs one Redis server)"
    kinds = ", ".join(f"{kind} {n:.2f}" for kind, n in per_turn["by_process"].items())
    top = ", ".join(f"{name} {n:.2f}" for name, n in list(per_turn["commands"].items())[:8])
    return (
        f"     Redis round trips per turn (a pipeline once) {per_turn['round_trips']:.2f}, "
        f"commands {per_turn['total']:.2f} ({kinds or 'none'}; MONITOR over this phase, "
        f"Lua-internal ones not counted; it costs Redis CPU too); top: {top}"
    )


def report_figures(report: IngestReport, threads: int, turns: int) -> dict[str, Any]:
    """The figures of a run, as the one JSON document `--json` prints."""

    def ms(samples: list[float], q: float) -> float | None:
        return round(percentile(samples, q) / 1000, 2) if samples else None

    steps = [
        {
            "rate": step.rate,
            "sent": step.sent,
            "ok": step.ok,
            "errors": dict(step.errors),
            "achieved_per_s": round(step.achieved, 1),
            "p50_ms": ms(step.latencies_us, 0.5),
            "p99_ms": ms(step.latencies_us, 0.99),
            "max_ms": round(max(step.latencies_us) / 1000, 2) if step.latencies_us else None,
            "backlog": step.backlog,
            "drain_s": round(step.drain_s, 2),
        }
        for step in report.steps
    ]
    e2e: dict[str, Any] = {"threads": threads, "turns": turns}
    if report.e2e_us:
        e2e |= {
            "p50_ms": ms(report.e2e_us, 0.5),
            "p99_ms": ms(report.e2e_us, 0.99),
            "turns_per_s": round(report.e2e_turns / report.e2e_s, 1),
            "cpu_ms_per_turn": {k: round(v, 3) for k, v in report.e2e_cpu_ms.items()},
            "cpu_ms_per_turn_ingest_worker": round(report.ingest_worker_cpu_ms, 3),
            "redis_commands_per_turn": report.redis_commands,
            "model_requests_per_turn": report.model_requests_per_turn,
        }
    return {
        "ack": steps,
        "sustained_rate": report.sustained,
        "worker_kept_up_rate": report.worker_kept_up,
        "end_to_end": e2e,
    }


def _topology(app: str, split: bool, workers: Sequence[int] | None) -> str:
    if workers:
        return (
            "clawgate serve without its worker + "
            + " / ".join(map(str, workers))
            + " clawgate worker process(es)"
        )
    if app == "floor":
        return (
            "the floor app (bot/bench/floor.py) as two processes, ingest and worker"
            if split
            else "the floor app (bot/bench/floor.py), its worker a task in the same process"
        )
    if split:
        return "clawgate serve without its worker + one clawgate worker process"
    return f"clawgate serve with its {_worker_topology()}"


def _worker_topology() -> str:
    """serve's own worker, as CLAWGATE_WORKER_MODE (passed through) makes it."""
    mode = os.environ.get("CLAWGATE_WORKER_MODE") or "child"
    return "in-process worker" if mode == "inprocess" else "child worker"


async def _compare(
    settings: Settings,
    apps: Sequence[str],
    model: bool,
    say: Callable[[str], None],
    rounds: int = 1,
    **bench: Any,
) -> dict[str, Any]:
    """`apps` ("clawgate", "floor") one after the other under the same load, `rounds` times
    in turn: the figures of the first round's first app, the second's under its name, and how
    they compare (over several rounds: each round's ratio and their median, as a slower
    moment of a shared VM moves both apps' figures by tens of percent)."""
    assert settings.redis_url
    document: dict[str, Any] = {}
    ratios: list[dict[str, float | None]] = []
    for round_ in range(rounds):
        reports: list[IngestReport] = []
        for app in apps:
            if len(apps) > 1:
                counted = f" (round {round_ + 1} of {rounds})" if rounds > 1 else ""
                say(f"--- {app}{counted}: {_topology(app, bench['split'], None)}")
            report = await bench_ingest(
                settings.redis_url,
                f"{settings.redis_prefix}-bench-ingest-{app}-{time.time_ns()}",
                model=model,
                floor=app == "floor",
                out=say,
                **bench,
            )
            for line in _verdicts(report, bench["threads"], bench["turns"]):
                say(line)
            figures = report_figures(report, bench["threads"], bench["turns"]) | {"app": app}
            if round_ == 0 and reports:
                document[app] = figures
            elif round_ == 0:
                document |= figures
            reports.append(report)
        if len(reports) == 2:
            comparison = _comparison(reports[0], reports[1], say)
            document.setdefault("comparison", comparison)
            ratios.append(_round(reports[0], reports[1]))
    if rounds > 1 and len(apps) == 2:
        document["comparison"] |= _median(ratios, say)
    return document


def _round(app: IngestReport, floor: IngestReport) -> dict[str, float | None]:
    mine, least = app.ingest_worker_cpu_ms, floor.ingest_worker_cpu_ms
    return {
        "clawgate_ms": round(mine, 3),
        "floor_ms": round(least, 3),
        "ratio": mine / least if least else None,
    }


def _median(rounds: list[dict[str, float | None]], say: Callable[[str], None]) -> dict[str, Any]:
    """The median of the rounds' CPU ratios (the document's other figures are the first
    round's), and each round's, in order."""
    ratios = [r for one in rounds if (r := one["ratio"]) is not None]
    median = round(statistics.median(ratios), 2) if ratios else None
    said = (f"{r:.1f}x" if (r := one["ratio"]) is not None else "n/a" for one in rounds)
    say(
        f"CPU per turn clawgate/floor, rounds 1 to {len(rounds)}: {', '.join(said)}"
        + (f"; median {median:.2f}x" if median is not None else "")
    )
    shown = [
        one | {"ratio": round(r, 2) if (r := one["ratio"]) is not None else None} for one in rounds
    ]
    return {"cpu_per_turn_ratio": median, "rounds": shown}


def _comparison(
    app: IngestReport, floor: IngestReport, say: Callable[[str], None]
) -> dict[str, Any]:
    cpu = _round(app, floor)["ratio"]
    seen = [r.redis_commands for r in (app, floor)]
    commands = [s["total"] if s else None for s in seen]
    trips = [s["round_trips"] if s else None for s in seen]
    say(
        "CPU per turn (ingest + worker) clawgate/floor = "
        + (f"{cpu:.1f}x" if cpu is not None else "n/a")
        + f" ({app.ingest_worker_cpu_ms:.2f} / {floor.ingest_worker_cpu_ms:.2f} ms)"
    )
    say(
        f"Redis round trips per turn clawgate vs floor: {trips[0]} vs {trips[1]} "
        f"(commands {commands[0]} vs {commands[1]})"
    )
    return {
        "cpu_per_turn_ratio": round(cpu, 2) if cpu is not None else None,
        "redis_round_trips_per_turn": {"clawgate": trips[0], "floor": trips[1]},
        "redis_commands_per_turn": {"clawgate": commands[0], "floor": commands[1]},
    }


async def run_ingest_bench(
    settings: Settings,
    rates: Sequence[int],
    duration: float,
    threads: int,
    turns: int,
    split: bool = False,
    platform: str = "slack",
    workers: Sequence[int] | None = None,
    backlog: int | None = None,
    as_json: bool = False,
    model_server: bool = False,
    floor: bool = False,
    compare_floor: bool = False,
    rounds: int = 1,
) -> int:
    """`workers`: measure these numbers of worker processes instead (bot/bench/workers.py).
    `model_server`: clawgate's `openai` provider against the bench's fake model; `floor`: the
    floor app instead of clawgate; `compare_floor`: clawgate (with the fake model), then the
    floor (`rounds` times, in turn). `as_json`: one JSON document of the figures on stdout;
    the running commentary goes to stderr."""
    if not settings.redis_url:
        raise SettingsError(
            "REDIS_URL: required for `clawgate bench ingest` (the server under test and the "
            "bench share it; keys go under a throwaway prefix, deleted afterwards)"
        )
    if (floor or compare_floor) and (platform != "slack" or workers):
        raise SettingsError("--floor, --compare-floor: Slack only, without --workers")
    if rounds != 1 and not compare_floor:
        raise SettingsError("--rounds: with --compare-floor only")
    apps = ["clawgate", "floor"] if compare_floor else ["floor" if floor else "clawgate"]
    model = model_server or floor or compare_floor
    store = BenchStore(settings.redis_url, settings.redis_cluster, settings.partitions)
    prefix = f"{settings.redis_prefix}-bench-ingest-{time.time_ns()}"

    def say(line: str) -> None:
        print(line, file=sys.stderr if as_json else sys.stdout, flush=as_json)

    fake = PLATFORMS[platform].api
    topology = " then ".join(_topology(app, split, workers) for app in apps)
    say(
        f"{topology} ("
        + ("the openai client against a fake model in its own process" if model else "demo model")
        + f") against a fake {fake} in its own process; "
        f"{store.describe()}, prefix {prefix}… (deleted afterwards)"
    )
    say(
        f"this machine has {os.cpu_count()} CPUs, shared by the server, Redis, the fake {fake} "
        "and this load generator"
    )
    document: dict[str, Any] = {
        "bench": "ingest",
        "platform": platform,
        "cpus": os.cpu_count(),
        "redis": {"cluster": store.cluster, "inbox_partitions": store.partitions},
        "model": "fake openai-compatible server" if model else "demo",
    }
    try:
        if workers:
            from bot.bench.workers import DEFAULT_BACKLOG, bench_workers  # noqa: PLC0415

            steps = await bench_workers(
                store,
                prefix,
                counts=workers,
                backlog=backlog or DEFAULT_BACKLOG,
                platform=platform,
                threads=threads,
                turns=turns,
                out=say,
            )
            document |= {"topology": "workers", "workers": [s.figures() for s in steps]}
        else:
            document |= {"topology": "split" if split else _worker_topology()}
            document |= await _compare(
                settings,
                apps,
                model,
                say,
                rounds,
                cluster=store.cluster,
                partitions=store.partitions,
                platform=platform,
                rates=rates,
                duration=duration,
                threads=threads,
                turns=turns,
                split=split,
            )
    except FAILED as exc:
        for line in (str(exc) or type(exc).__name__).splitlines():
            print(f"clawgate: bench ingest: {line}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(document))
    return 0
