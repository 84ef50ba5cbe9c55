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
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bot.bench.platforms import (
    ACK_CONVERSATIONS,
    DEFAULT_RATES,
    DRAIN_TIMEOUT,
    GIVE_UP_P99_MS,
    KEPT_UP_S,
    PLATFORMS,
    PROFILE_ENV,
    REPLY_TIMEOUT,
    REQUEST_TIMEOUT,
    SUSTAINED_P99_MS,
    TARGET_ACK_P99_MS,
    TARGET_E2E_P99_MS,
    TARGET_RATE,
    WARMUP_REQUESTS,
    BenchError,
    Events,
    Platform,
    fake_api,
)
from bot.bench.runtime import _line, percentile
from bot.bench.store import BenchStore, queued, redis_cpu_s
from bot.settings import Settings, SettingsError
from runtime.store.connection import REDIS_FAILURES

# What ends a bench run with one line each and exit 1.
FAILED: tuple[type[Exception], ...] = (BenchError, aiohttp.ClientError, *REDIS_FAILURES, OSError)

# --- the server under test ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_env(
    platform: Platform, store: BenchStore, prefix: str, fake_url: str, port: int, workdir: Path
) -> dict[str, str]:
    """This environment without platform, model and proxy settings (the demo model answers;
    the platform clients would send 127.0.0.1 through a proxy), plus the bench's own."""
    dropped = ("SLACK_", "FEISHU_", "OPENAI_", "CLAWGATE_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(dropped) and not k.lower().endswith("_proxy")
    }
    # Tunables worth comparing:
    keep = ("CLAWGATE_WORKER_CONCURRENCY", "CLAWGATE_RECLAIM_IDLE", "CLAWGATE_INGEST_DURABILITY")
    env |= {k: os.environ[k] for k in keep if k in os.environ}
    # `-m bot.cli` from the temporary working directory: this checkout, installed or not
    source = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    return (
        env
        | platform.env(fake_url)
        | store.env()
        | {
            "CLAWGATE_REDIS_PREFIX": prefix,
            "CLAWGATE_HOST": "127.0.0.1",
            "CLAWGATE_PORT": str(port),
            "CLAWGATE_WORKDIR": str(workdir),
            "CLAWGATE_LOG_LEVEL": "WARNING",
            "CLAWGATE_SHUTDOWN_GRACE": "5",
        }
    )


@contextlib.asynccontextmanager
async def _process(
    command: str, env: dict[str, str], workdir: Path, name: str | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`clawgate <command>` in a subprocess logging to <workdir>/<name or command>.log;
    terminated (SIGTERM, then SIGKILL after 30 s) on exit."""
    name = name or command
    argv = [sys.executable, "-m", "bot.cli", command]
    profile = os.environ.get(PROFILE_ENV)
    if profile:
        target = os.path.abspath(profile if command == "serve" else f"{profile}.{name}")  # noqa: ASYNC240
        argv[1:1] = ["-m", "cProfile", "-o", target]
    with (workdir / f"{name}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=workdir, stdout=log, stderr=asyncio.subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


@contextlib.asynccontextmanager
async def _server(
    platform: Platform, store: BenchStore, prefix: str, fake_url: str, workdir: Path, split: bool
) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """`clawgate serve` in a subprocess (with `split`: without its worker, plus one
    `clawgate worker` process); yields its base URL and the pids once /readyz answers."""
    port = _free_port()
    env = _server_env(platform, store, prefix, fake_url, port, workdir)
    url = f"http://127.0.0.1:{port}"
    if not split:
        async with _process("serve", env, workdir) as serve:
            await _wait_ready(url, serve, workdir / "serve.log")
            yield url, {"server": serve.pid}
        return
    env["CLAWGATE_INPROCESS_WORKER"] = "false"
    async with _process("worker", env, workdir) as worker, _process("serve", env, workdir) as serve:
        await _wait_ready(url, serve, workdir / "serve.log")
        yield url, {"server": serve.pid, "worker": worker.pid}


def _tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


async def _wait_ready(
    url: str, process: asyncio.subprocess.Process, log: Path, path: str = "/readyz"
) -> None:
    """Until `path` answers 200 (/healthz: up, whether a worker polls or not)."""
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise BenchError(f"the server exited ({process.returncode}):\n{_tail(log)}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}{path}") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise BenchError(f"the server was not ready within 60 s:\n{_tail(log)}")


async def _delete_prefix(store: BenchStore, prefix: str) -> int:
    redis = store.connect()  # on a cluster, the scan covers every master
    deleted = 0
    try:
        batch: list[str] = []
        async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await redis.delete(*batch)
                batch.clear()
        if batch:
            deleted += await redis.delete(*batch)
    finally:
        await redis.aclose()
    return deleted


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


def _proc_cpu(pid: int) -> float | None:
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
    out: Callable[[str], None] = print,
) -> IngestReport:
    spec = PLATFORMS[platform]
    events = spec.events()
    store = BenchStore(redis_url, cluster, partitions)
    steps: list[AckStep] = []
    with tempfile.TemporaryDirectory(prefix="clawgate-bench-") as tmp:
        try:
            async with (
                fake_api(spec) as (fake_url, fake_pid),
                _server(spec, store, prefix, fake_url, Path(tmp), split) as (server_url, pids),
                aiohttp.ClientSession(
                    connector=_connector(),
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                ) as session,
            ):
                cpu = _Cpu(store, pids | {f"fake {spec.label}": fake_pid})
                try:
                    events_url = f"{server_url}{spec.events_path}"
                    warmup = events.spread(WARMUP_REQUESTS, WARMUP_REQUESTS)
                    warm = await _open_loop(session, events_url, warmup, 50)
                    if warm.errors:
                        raise BenchError(f"warm-up requests failed: {dict(warm.errors)}")
                    await _drain(store, prefix)
                    out(
                        f"ack: {spec.traffic}, open loop, latency from the scheduled send to "
                        "HTTP 200;"
                    )
                    out(
                        "     a worker process runs the agent for every accepted event (real "
                        "load); its backlog is drained between rates"
                        if split
                        else "     the server's worker runs the agent for every accepted event "
                        "on the same event loop (real load); its backlog is drained between rates"
                    )
                    for rate in rates:
                        count = max(1, round(rate * duration))
                        requests = events.spread(count, min(ACK_CONVERSATIONS, count))
                        before, started = await cpu.read(), time.monotonic()
                        step = await _open_loop(session, events_url, requests, rate)
                        step.backlog, step.drain_s = await _drain(store, prefix)
                        cpu_ms = await cpu.per_event(before, count)
                        steps.append(step)
                        out(_ack_line(step))
                        out(_cpu_line(cpu_ms, time.monotonic() - started, count))
                        out(
                            f"     worker backlog at the end: {step.backlog} events, "
                            f"drained in {step.drain_s:.1f} s"
                        )
                        if step.p99_ms >= GIVE_UP_P99_MS:
                            out(f"     (stopping the ramp: p99 >= {GIVE_UP_P99_MS:.0f} ms)")
                            break
                    before, started = await cpu.read(), time.monotonic()
                    loops = [
                        _conversation_loop(session, events_url, fake_url, events, 10_000 + i, turns)
                        for i in range(threads)
                    ]
                    e2e = [s for samples in await asyncio.gather(*loops) for s in samples]
                    e2e_s = time.monotonic() - started
                    all_turns = threads * (turns + 1)
                    e2e_cpu = await cpu.per_event(before, all_turns)
                    async with session.get(f"{fake_url}/bench/stats") as resp:
                        stats = await resp.json()
                finally:
                    await cpu.aclose()
        finally:
            deleted = await _delete_prefix(store, prefix)
            for name in ("serve", "worker"):
                _show_server_log(Path(tmp) / f"{name}.log", out)
    return IngestReport(steps, e2e, all_turns, e2e_s, e2e_cpu, stats["calls"], deleted, platform)


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
        }
    return {
        "ack": steps,
        "sustained_rate": report.sustained,
        "worker_kept_up_rate": report.worker_kept_up,
        "end_to_end": e2e,
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
) -> int:
    """`workers`: measure these numbers of worker processes instead (bot/bench/workers.py).
    `as_json`: one JSON document of the figures on stdout; the running commentary goes to
    stderr."""
    if not settings.redis_url:
        raise SettingsError(
            "REDIS_URL: required for `clawgate bench ingest` (the server under test and the "
            "bench share it; keys go under a throwaway prefix, deleted afterwards)"
        )
    store = BenchStore(settings.redis_url, settings.redis_cluster, settings.partitions)
    prefix = f"{settings.redis_prefix}-bench-ingest-{time.time_ns()}"

    def say(line: str) -> None:
        print(line, file=sys.stderr if as_json else sys.stdout, flush=as_json)

    if workers:
        topology = "clawgate serve without its worker + " + " / ".join(map(str, workers))
        topology += " clawgate worker process(es)"
    elif split:
        topology = "clawgate serve without its worker + one clawgate worker process"
    else:
        topology = "clawgate serve with its in-process worker"
    fake = PLATFORMS[platform].api
    say(
        f"{topology} (demo model) against a fake {fake} in its own process; "
        f"{store.describe()}, prefix {prefix} (deleted afterwards)"
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
            report = await bench_ingest(
                settings.redis_url,
                prefix,
                cluster=store.cluster,
                partitions=store.partitions,
                platform=platform,
                rates=rates,
                duration=duration,
                threads=threads,
                turns=turns,
                split=split,
                out=say,
            )
            for line in _verdicts(report, threads, turns):
                say(line)
            document |= {"topology": "split" if split else "in-process worker"}
            document |= report_figures(report, threads, turns)
    except FAILED as exc:
        for line in (str(exc) or type(exc).__name__).splitlines():
            print(f"clawgate: bench ingest: {line}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(document))
    return 0
