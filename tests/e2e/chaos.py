"""The chaos suite: `clawgate serve` plus `clawgate worker` on one Redis, bursts of mentions
over several Slack threads (a share of them needing approval, clicked by an approver as soon
as the notice shows), and processes killed with SIGKILL at random moments and restarted;
optionally Redis itself killed and restarted (AOF, `appendfsync always`). Then it counts:

- lost: an accepted message never answered;
- answered twice: a message answered more than once;
- user messages appended twice to a history;
- calls run twice: every approved call runs `tally <tag>`, which appends its tag to a log;
- outcome unknown, by kind (approved commands), and calls run again by a retake, by kind (the
  other messages' commands run in the read-only sandbox: they cannot have had an effect, so
  none of them may end unknown);
- takeover: from a kill to the moment none of the dead process's jobs is left in its hands.

By hand, with many kills:   python -m tests.e2e.chaos --messages 250 --kills 32
In CI, a small run:         tests/e2e/test_chaos.py
On a local Redis Cluster of three masters (tests/cluster.py, AOF, 16 inbox partitions):
                            python -m tests.e2e.chaos --cluster  (--redis-kills: masters)

Runs bash in the sandbox (CLAWGATE_SANDBOX=bwrap): an approved `tally` writes its log in the
work dir, the others run read-only (and so log nothing: running them again is harmless).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from adapters.slack.inbound import APPROVE_ONCE
from bot.settings import CLUSTER_INBOX_PARTITIONS
from runtime import evidence_keys
from runtime.audit_verify import verify
from runtime.store.connection import REDIS_FAILURES, connect
from runtime.store.keys import Keys
from runtime.store.streams import entries
from tests.cluster import LocalCluster
from tests.conftest import free_port
from tests.fake_slack import (
    TEAM_ID,
    Call,
    FakeSlack,
    block_action_body,
    event_body,
    mention_event,
    new_event_id,
    next_ts,
    post_signed,
)
from tests.processes import CLAWGATE, clean_env

SECRET = "chaos-signing-secret"
AUDIT_KEY = "chaos:chaos-audit-key-0123456789"
CHANNEL = "C111"
APPROVER = "U_APPROVER"
PREFIX = "chaos"
TAG = re.compile(r"\b([am]\d+) done\b")
UNFINISHED = "did not complete"


@dataclass
class Figures:
    messages: int = 0
    approvals: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    exits: Counter[str] = field(default_factory=Counter)  # stopped on their own, restarted
    lost: list[str] = field(default_factory=list)
    answered_twice: list[str] = field(default_factory=list)
    appended_twice: list[str] = field(default_factory=list)
    run_twice: list[str] = field(default_factory=list)
    unknown_outcomes: int = 0
    unknown_kinds: Counter[str] = field(default_factory=Counter)  # from the audit trail
    again_kinds: Counter[str] = field(default_factory=Counter)  # calls run again by a retake
    unknown_free: list[str] = field(default_factory=list)  # side-effect-free, yet unanswered
    takeovers: list[float] = field(default_factory=list)
    seconds: float = 0.0
    audit_chain: str = ""  # what `clawgate audit verify` says of the trail after the kills

    def percentile(self, q: float) -> float:
        if not self.takeovers:
            return 0.0
        ordered = sorted(self.takeovers)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def report(self) -> str:
        kills = ", ".join(f"{n} {what}" for what, n in sorted(self.kills.items())) or "none"
        exits = ", ".join(f"{n} {what}" for what, n in sorted(self.exits.items()))
        lines = [
            f"messages {self.messages} ({self.approvals} needing approval), kills: {kills}, "
            + (f"exited on their own and restarted: {exits}, " if exits else "")
            + f"{self.seconds:.0f} s",
            f"lost {len(self.lost)}  answered twice {len(self.answered_twice)}  "
            f"user messages appended twice {len(self.appended_twice)}  "
            f"calls run twice {len(self.run_twice)}  outcome unknown {self.unknown_outcomes}",
            f"unknown: {_split(self.unknown_kinds)}  re-run: {_split(self.again_kinds)}",
        ]
        if self.audit_chain:
            lines.append(f"audit chain: {self.audit_chain}")
        if self.takeovers:
            lines.append(
                f"takeover after a kill (s): n={len(self.takeovers)} "
                f"p50 {statistics.median(self.takeovers):.2f}  p99 {self.percentile(0.99):.2f}  "
                f"max {max(self.takeovers):.2f}"
            )
        for name in ("lost", "answered_twice", "appended_twice", "run_twice", "unknown_free"):
            if getattr(self, name):
                lines.append(f"  {name}: {getattr(self, name)[:20]}")
        return "\n".join(lines)


def _split(kinds: Counter[str]) -> str:
    """`3 (bash-approved 2, write 1)`."""
    parts = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
    return f"{kinds.total()}" + (f" ({parts})" if parts else "")


def approve_buttons(fake: FakeSlack) -> list[tuple[Call, dict[str, Any]]]:
    """(notice, its Approve button) of every approval notice posted."""
    found = []
    for call in fake.posts(CHANNEL):
        for block in call.params.get("blocks") or []:
            if block.get("type") != "actions":
                continue
            for button in block.get("elements", []):
                if button.get("action_id") == APPROVE_ONCE:
                    found.append((call, button))
    return found


class RedisServer:
    """A throwaway redis-server with AOF (`appendfsync always`) that can be killed and
    restarted on the same port and data."""

    cluster = False
    partitions = 1

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="chaos-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "always"]
        self.proc = subprocess.Popen(
            [binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterServers:
    """As RedisServer, a local Redis Cluster of three masters: `kill` kills one master (each
    in turn), `start` then brings it back on its port, data and cluster config."""

    cluster = True
    partitions = CLUSTER_INBOX_PARTITIONS  # clawgate's default on a cluster

    def __init__(self) -> None:
        self.local = LocalCluster(aof=True)
        self.down: int | None = None
        self.kills = 0

    @property
    def url(self) -> str:
        return self.local.url

    def start(self) -> None:
        if self.down is None:
            self.local.start()
            return
        self.local.start_node(self.local.ports[self.down])
        self.local.wait_ok()
        self.down = None

    def kill(self) -> None:
        self.down = self.kills % len(self.local.ports)
        self.kills += 1
        self.local.kill(self.down)

    def stop(self) -> None:
        self.local.stop()


class Process:
    """One `clawgate serve|worker`; stderr goes to a log file (read when something fails)."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path, logs: Path) -> None:
        self.command = command
        self.env = env
        self.cwd = cwd
        self.logs = logs
        self.proc: asyncio.subprocess.Process | None = None
        self.started: list[asyncio.subprocess.Process] = []
        self.starts = 0
        # Held by whoever stops and starts it (a kill, the supervisor): one at a time, or a
        # process started twice leaves one running untracked, and it lives on after the run.
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        self.starts += 1
        log = (self.logs / f"{self.command}-{self.starts}.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            *CLAWGATE,
            self.command,
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )
        self.started.append(self.proc)
        log.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def worker_pid(self) -> int:
        """The process whose worker holds jobs: serve's child worker (its default mode, dying
        with serve when serve is killed), else this one."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        with contextlib.suppress(OSError):
            if pids := children.read_text().split():
                return int(pids[0])
        return self.pid

    async def kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> None:
        """Stop every process it started that still runs (one alone, unless a bug here started
        one twice: an untracked process would live on after the run, on a port reused later)."""
        for proc in self.started:
            if proc.returncode is not None:
                continue
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
                await proc.wait()


class Chaos:
    def __init__(
        self,
        root: Path,
        fake: FakeSlack,
        redis_server: RedisServer | ClusterServers,
        port: int,
        durability: str,
        call_seconds: float = 0.3,
    ) -> None:
        """`call_seconds`: how long each call takes after its effect (kills land there)."""
        self.root = root
        self.fake = fake
        self.redis_server = redis_server
        self.url = f"http://127.0.0.1:{port}"
        self.workdir = root / "work"
        self.workdir.mkdir()
        # In the work dir: the only place an approved command may write, and a command without
        # approval sees (read-only).
        self.tally = self.workdir / "tally.log"
        self.tally.touch()
        bin_dir = self.workdir / "bin"
        bin_dir.mkdir()
        script = bin_dir / "tally"  # an approved call's one effect: its tag appended to the log
        log = f'case "$1" in a*) echo "$1" >> {self.tally} ;; esac'
        script.write_text(f'#!/bin/sh\n{log}\nsleep {call_seconds}\necho "$1 done"\n')
        script.chmod(0o755)
        policy = root / "clawgate.toml"
        policy.write_text('[risk]\nsafe_programs = ["tally"]\n')
        logs = root / "logs"
        logs.mkdir()
        env = clean_env(
            REDIS_URL=redis_server.url,
            CLAWGATE_REDIS_PREFIX=PREFIX,
            CLAWGATE_AUDIT_KEY=AUDIT_KEY,
            CLAWGATE_PORT=str(port),
            CLAWGATE_WORKDIR=str(self.workdir),
            CLAWGATE_POLICY_FILE=str(policy),
            CLAWGATE_WORKER_CONCURRENCY="8",
            CLAWGATE_SHUTDOWN_GRACE="2",
            CLAWGATE_SANDBOX="bwrap",
            # Every message its own run, answered under its tag (steering's crash safety:
            # tests/component/test_steering.py).
            CLAWGATE_STEERING="queue",
            CLAWGATE_APPROVERS=f"slack:{APPROVER}",
            CLAWGATE_INGEST_DURABILITY=durability,
            CLAWGATE_REDIS_CLUSTER=str(redis_server.cluster).lower(),
            CLAWGATE_LOG_LEVEL="INFO",
            CLAWGATE_LOG_FORMAT="json",
            SLACK_BOT_TOKEN="xoxb-test",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=fake.base_url,
        )
        env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        self.processes = {
            "serve": Process("serve", env, self.workdir, logs),
            "worker": Process("worker", env, self.workdir, logs),
        }
        self.redis = connect(redis_server.url, cluster=redis_server.cluster)
        keys, partitions = Keys(PREFIX), redis_server.partitions
        self.streams = [keys.inbox_stream(p, partitions) for p in range(partitions)]
        self.clicked: set[str] = set()
        self.figures = Figures()
        self.measuring = False  # a takeover is being measured (or was)
        self.sent: dict[str, str] = {}  # tag -> thread ts
        self.roots: list[str] = []

    # --- sending --------------------------------------------------------------------------

    async def post(self, body: str, *, retry: bool = True) -> bool:
        """POST to serve as Slack does: retried (same body, a retry number) until accepted."""
        attempt = 0
        while True:
            with contextlib.suppress(OSError, TimeoutError, aiohttp.ClientError):
                status, _ = await post_signed(
                    f"{self.url}/slack/events",
                    SECRET,
                    body,
                    retry_num=attempt or None,
                    timeout=5,
                )
                if status == 200:
                    return True
            if not retry:
                return False
            attempt += 1
            await asyncio.sleep(0.2)

    async def send(self, tag: str, thread: str | None) -> str:
        command = f"tally {tag} | tee {tag}.out" if tag.startswith("a") else f"tally {tag}"
        ts = next_ts()
        event = mention_event(f"run: {command}", channel=CHANNEL, ts=ts, thread_ts=thread)
        await self.post(event_body(event, event_id=new_event_id()))
        root = thread or ts
        self.sent[tag] = root
        return root

    async def workload(
        self, messages: int, threads: int, approvals: float, rng: random.Random
    ) -> None:
        for n in range(messages):
            k = rng.randrange(threads)
            needs = rng.random() < approvals
            tag = f"{'a' if needs else 'm'}{n}"
            self.figures.approvals += needs
            root = self.roots[k] if k < len(self.roots) else None
            sent = await self.send(tag, root)
            if root is None:
                self.roots.append(sent)
            self.figures.messages += 1
            if n % 10 == 9:
                await asyncio.sleep(rng.uniform(0.2, 0.6))  # bursts of ten

    async def approve_forever(self) -> None:
        """Click "Approve" on every approval notice as soon as it shows."""
        while True:
            for call, button in approve_buttons(self.fake):
                approval_id = str(button["value"])
                if approval_id in self.clicked:
                    continue
                body = block_action_body(
                    str(button["action_id"]),
                    approval_id,
                    user=APPROVER,
                    message_ts=str(call.response["ts"]),
                    thread_ts=str(call.params.get("thread_ts")),
                    message_blocks=call.params.get("blocks"),
                )
                if await self.post(body, retry=False):
                    self.clicked.add(approval_id)
            await asyncio.sleep(0.1)

    # --- killing --------------------------------------------------------------------------

    async def consumer_of(self, pid: int) -> str | None:
        with contextlib.suppress(Exception):
            for stream in self.streams:  # a worker reads (so joins the group of) every one
                for consumer in await self.redis.xinfo_consumers(stream, "workers"):
                    if f":{pid}:" in str(consumer["name"]):
                        return str(consumer["name"])
        return None

    async def held_by(self, consumer: str) -> set[str] | None:
        """The jobs `consumer` holds (partition/id); None while Redis does not answer (it, or
        one of its masters, may be killed)."""
        held = set()
        try:
            for partition, stream in enumerate(self.streams):
                entries = await self.redis.xpending_range(
                    stream, "workers", "-", "+", 1000, consumername=consumer
                )
                held |= {f"{partition}/{e['message_id']!s}" for e in entries}
        except REDIS_FAILURES:
            return None
        return held

    async def measure_takeover(self, consumer: str, jobs: set[str], killed_at: float) -> None:
        while (held := await self.held_by(consumer)) is None or held & jobs:
            if time.monotonic() - killed_at > 120:
                return
            await asyncio.sleep(0.05)
        self.figures.takeovers.append(time.monotonic() - killed_at)

    async def holding(self, process: Process) -> tuple[str | None, set[str]]:
        """The process's consumer and the jobs it holds. Until a takeover is being measured,
        it waits up to 3 s for the process to hold some, so every run measures one (on a fast
        machine a kill at a random moment may find it idle every time)."""
        deadline = time.monotonic() + (0.0 if self.measuring else 3.0)
        while True:
            consumer = await self.consumer_of(process.worker_pid)
            jobs = (await self.held_by(consumer) or set()) if consumer else set()
            if jobs or time.monotonic() >= deadline:
                return consumer, jobs
            await asyncio.sleep(0.05)

    async def kill_one(self, name: str) -> None:
        process = self.processes[name]
        consumer, jobs = await self.holding(process)
        async with process.lock:
            await process.kill()
            killed_at = time.monotonic()
            self.figures.kills[name] += 1
            await process.start()
        if jobs and consumer:
            self.measuring = True
            asyncio.get_running_loop().create_task(self.measure_takeover(consumer, jobs, killed_at))

    async def supervise(self) -> None:
        """As compose's `restart: unless-stopped` (or Kubernetes) does: a process that stopped
        on its own is started again a second later. A process starting while Redis (on a
        cluster: the node REDIS_URL names) is down exits 1, as it should."""
        while True:
            await asyncio.sleep(0.25)
            for name, process in self.processes.items():
                async with process.lock:
                    proc = process.proc
                    if proc is None or proc.returncode is None:
                        continue
                    self.figures.exits[name] += 1
                    await asyncio.sleep(1.0)
                    await process.start()

    async def freeze_one(self, name: str, seconds: float) -> None:
        """A process stalled but alive (a paused VM or container, a long GC pause): SIGSTOP
        for longer than a takeover takes, then SIGCONT. Its jobs were taken over meanwhile;
        it must not go on with them."""
        process = self.processes[name]
        async with process.lock:
            assert process.proc is not None
            with contextlib.suppress(ProcessLookupError):
                process.proc.send_signal(signal.SIGSTOP)
                self.figures.kills[f"{name} frozen"] += 1
                await asyncio.sleep(seconds)
                process.proc.send_signal(signal.SIGCONT)

    async def kill_redis(self) -> None:
        await asyncio.to_thread(self.redis_server.kill)  # a cluster: one of its masters
        self.figures.kills["redis"] += 1
        await asyncio.sleep(0.5)
        await asyncio.to_thread(self.redis_server.start)

    async def killer(
        self, kills: int, redis_kills: int, freezes: int, interval: float, rng: random.Random
    ) -> None:
        order = ["serve", "worker"] * (kills // 2) + [rng.choice(["serve", "worker"])] * (kills % 2)
        order += ["redis"] * redis_kills + ["freeze"] * freezes
        rng.shuffle(order)
        for name in order:
            await asyncio.sleep(rng.uniform(0.3, 2 * interval))
            if name == "redis":
                await self.kill_redis()
            elif name == "freeze":
                await self.freeze_one(rng.choice(["serve", "worker"]), rng.uniform(3.0, 6.0))
            else:
                await self.kill_one(name)

    # --- counting -------------------------------------------------------------------------

    def answers(self) -> tuple[Counter[str], Counter[str]]:
        """Answers by tag, and answers about an unfinished call by thread."""
        tagged: Counter[str] = Counter()
        unfinished: Counter[str] = Counter()
        for call in self.fake.posts(CHANNEL):
            text = str(call.params.get("text", ""))
            thread = str(call.params.get("thread_ts"))
            if call.is_notice:
                continue  # approval notices are not answers
            for tag in TAG.findall(text):
                tagged[tag] += 1
            if UNFINISHED in text:
                unfinished[thread] += 1
        return tagged, unfinished

    def all_answered(self) -> bool:
        tagged, unfinished = self.answers()
        missing = Counter(self.sent[t] for t in self.sent if not tagged[t])
        return all(unfinished[thread] >= n for thread, n in missing.items())

    async def count(self) -> None:
        tagged, unfinished = self.answers()
        missing: dict[str, list[str]] = {}
        for tag, thread in self.sent.items():
            if tagged[tag] > 1:
                self.figures.answered_twice.append(tag)
            if not tagged[tag]:
                missing.setdefault(thread, []).append(tag)
                if tag.startswith("m"):  # ran in the read-only sandbox: never unknown
                    self.figures.unknown_free.append(tag)
        for thread, tags in missing.items():
            explained = unfinished[thread]
            self.figures.unknown_outcomes += min(explained, len(tags))
            self.figures.lost += tags[explained:]
        for thread, n in unfinished.items():
            extra = n - len(missing.get(thread, []))
            if extra > 0:
                self.figures.answered_twice += [f"unfinished in {thread}"] * extra
        runs = Counter(self.tally.read_text().split())
        self.figures.run_twice = sorted(tag for tag, n in runs.items() if n > 1)
        # A fresh client: a pooled connection may have been cut by the last Redis kill.
        await self.redis.aclose()
        self.redis = connect(self.redis_server.url, cluster=self.redis_server.cluster)
        for root in self.roots:
            session = f"{PREFIX}:{{slack:{TEAM_ID}:{CHANNEL}:{root}}}:history"
            users: Counter[str] = Counter()
            for raw in await self.redis.lrange(session, 0, -1):
                message = json.loads(raw)
                if message.get("role") == "user":
                    users[message["content"]] += 1
            self.figures.appended_twice += [text for text, n in users.items() if n > 1]
        await self.count_kinds()
        report = await verify(self.redis, Keys(PREFIX), evidence_keys.load(AUDIT_KEY), 100_000)
        broken = f"BROKEN: {report.broken.kind} at seq {report.broken.seq}" if report.broken else ""
        self.figures.audit_chain = broken or f"intact, {report.entries} entries"

    async def count_kinds(self) -> None:
        """Calls run again and outcomes unknown, by kind, as the audit trail says."""
        for _, entry in entries(await self.redis.xrange(Keys(PREFIX).audit())):
            event = entry.get("event")
            if event in ("call_outcome_unknown", "approval_outcome_unknown"):
                self.figures.unknown_kinds[entry.get("kind") or entry.get("tool", "?")] += 1
            elif event == "call_run_again":
                self.figures.again_kinds[entry.get("kind", "?")] += 1

    async def run(
        self,
        messages: int,
        threads: int,
        approvals: float,
        kills: int,
        redis_kills: int,
        freezes: int,
        seed: int,
        settle: float,
    ) -> Figures:
        rng = random.Random(seed)
        begun = time.monotonic()
        for process in self.processes.values():
            await process.start()
        approver = asyncio.get_running_loop().create_task(self.approve_forever())
        supervisor = asyncio.get_running_loop().create_task(self.supervise())
        try:
            await asyncio.sleep(2.0)  # both up before traffic (a kill may come at once)
            interval = max(0.5, messages / 12 / max(1, kills + redis_kills + freezes))
            await asyncio.gather(
                self.workload(messages, threads, approvals, rng),
                self.killer(kills, redis_kills, freezes, interval, rng),
            )
            deadline = time.monotonic() + settle
            while not self.all_answered() and time.monotonic() < deadline:
                await asyncio.sleep(0.25)
            await asyncio.sleep(1.0)  # anything answered twice shows by now
        finally:
            for task in (approver, supervisor):
                task.cancel()
            await asyncio.gather(approver, supervisor, return_exceptions=True)
            await asyncio.gather(*(p.stop() for p in self.processes.values()))
        await self.count()
        posts = [
            {"thread": c.params.get("thread_ts"), "text": c.params.get("text")}
            for c in self.fake.posts()
        ]
        (self.root / "posts.json").write_text(json.dumps(posts, indent=1))
        self.figures.seconds = time.monotonic() - begun
        await self.redis.aclose()
        return self.figures


async def chaos(
    *,
    messages: int = 250,
    threads: int = 12,
    approvals: float = 0.4,
    kills: int = 32,
    redis_kills: int = 0,
    freezes: int = 0,
    seed: int = 1,
    settle: float = 120.0,
    durability: str = "fsync",
    keep: Path | None = None,
    cluster: bool = False,
) -> Figures:
    root = Path(tempfile.mkdtemp(prefix="chaos-", dir=keep))
    redis_server = ClusterServers() if cluster else RedisServer()
    redis_server.start()
    try:
        with FakeSlack() as fake:
            run = Chaos(root, fake, redis_server, free_port(), durability)
            return await run.run(
                messages, threads, approvals, kills, redis_kills, freezes, seed, settle
            )
    finally:
        redis_server.stop()
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=250)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--approvals", type=float, default=0.4)
    parser.add_argument("--kills", type=int, default=32, help="SIGKILLs of serve and worker")
    parser.add_argument("--redis-kills", type=int, default=0, help="SIGKILLs of redis-server")
    parser.add_argument(
        "--freezes", type=int, default=0, help="SIGSTOPs of serve or worker for 3-6 s"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle", type=float, default=120.0)
    parser.add_argument("--durability", default="fsync", choices=["fsync", "default"])
    parser.add_argument("--keep", type=Path, help="keep logs and files under this directory")
    parser.add_argument(
        "--cluster", action="store_true", help="on a local Redis Cluster of three masters"
    )
    args = parser.parse_args()
    figures = asyncio.run(chaos(**vars(args)))  # the options are chaos()'s parameters
    print(figures.report())
    bad = figures.lost or figures.answered_twice or figures.appended_twice or figures.run_twice
    bad = bad or figures.unknown_free
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
