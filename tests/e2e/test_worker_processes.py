"""`clawgate serve` plus `clawgate worker` as real processes sharing one Redis inbox: every
message answered once, in order per thread, by both processes; a worker killed mid-job has
its job taken over by the other one; one stopped past its liveness time does nothing more.

Each process finds its own `worker-id` program first on its PATH, which prints the process's
pid: that is how an answer tells who ran it. The processes run bash uncontained
(CLAWGATE_SANDBOX=off) so that the test can find their commands in /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import free_port
from tests.fake_slack import FakeSlack, event_body, mention_event, new_event_id, post_signed
from tests.processes import CLAWGATE, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

SECRET = "worker-test-signing-secret"
CHANNEL = "C111"
# `worker-id` is the test's own harmless program; the built-in policy would ask before it.
POLICY = '[risk]\nsafe_programs = ["worker-id"]\n'
ANSWER = re.compile(r"^(?P<tag>\S+) pid=(?P<pid>\d+)$")


class Clawgate:
    """One `clawgate serve|worker` process; its stderr is collected line by line."""

    def __init__(self, proc: asyncio.subprocess.Process, command: str) -> None:
        self.proc = proc
        self.command = command
        self.lines: list[str] = []
        self._pump = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, command: str, env: dict[str, str], cwd: Path) -> Clawgate:
        bin_dir = cwd.parent / f"bin-{command}"
        bin_dir.mkdir(exist_ok=True)
        env = {**env, "PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"}
        proc = await asyncio.create_subprocess_exec(
            *CLAWGATE,
            command,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        worker_id = bin_dir / "worker-id"  # found on PATH when a command runs
        worker_id.write_text(f'#!/bin/sh\necho "$1 pid={proc.pid}"\n')
        worker_id.chmod(0o755)
        return cls(proc, command)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.lines.append(line.decode(errors="replace"))

    async def wait_line(self, pattern: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines):
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"clawgate {self.command} (rc {self.proc.returncode}) never printed "
                    f"{pattern!r}:\n{self.stderr}"
                )
            await asyncio.sleep(0.02)

    async def stop(self) -> int | None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._pump, timeout=5)
        return self.proc.returncode


def serve_env(
    fake: FakeSlack | None, redis_url: str, workdir: Path, port: int, **extra: str
) -> dict[str, str]:
    """The environment of a `clawgate serve` or `worker` process; Slack's settings when given
    its fake (else the platform's settings come in `extra`)."""
    policy = workdir.parent / "clawgate.toml"
    policy.write_text(POLICY)
    env = {k: v for k, v in clean_env().items() if not k.startswith("SLACK_")}
    env.update(
        REDIS_URL=redis_url,
        CLAWGATE_REDIS_PREFIX=f"cgproc{uuid.uuid4().hex[:8]}",
        CLAWGATE_PORT=str(port),
        CLAWGATE_WORKDIR=str(workdir),
        CLAWGATE_POLICY_FILE=str(policy),
        CLAWGATE_WORKER_CONCURRENCY="8",
        CLAWGATE_SHUTDOWN_GRACE="2",
        CLAWGATE_LOG_LEVEL="INFO",
        CLAWGATE_SANDBOX="off",
        # Each message its own run: these tests follow lane order and takeovers of runs
        # (steering, where follow-ups join a run, has its own: tests/e2e/test_steering.py).
        CLAWGATE_STEERING="queue",
    )
    if fake is not None:
        env.update(
            SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=fake.base_url
        )
    env.update(extra)
    return env


async def wait_ready(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(f"{url}/readyz") as resp:
                    if resp.status == 200:
                        return
            if time.monotonic() > deadline:
                raise AssertionError(f"{url}/readyz never answered 200")
            await asyncio.sleep(0.05)


@dataclass
class Cluster:
    fake: FakeSlack
    serve: Clawgate
    worker: Clawgate
    url: str

    async def post(
        self,
        text: str,
        thread_ts: str | None = None,
        *,
        again: tuple[dict[str, Any], str] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Post a signed mention (or, with `again`, Slack's retry of an earlier one)."""
        event, event_id = again or (
            mention_event(text, channel=CHANNEL, thread_ts=thread_ts),
            new_event_id(),
        )
        body = event_body(event, event_id=event_id)
        status, answer = await post_signed(
            f"{self.url}/slack/events", SECRET, body, retry_num=1 if again else None
        )
        assert status == 200, answer
        return event, event_id

    def answers(self, thread_ts: str) -> list[tuple[str, int]]:
        """(tag, pid of the process that ran the command) of each answer, in posting order."""
        found = []
        for call in self.fake.posts(channel=CHANNEL, thread_ts=thread_ts):
            first_line = str(call.params.get("text", "")).split("\n", 1)[0]
            match = ANSWER.match(first_line)
            if match:
                found.append((match["tag"], int(match["pid"])))
        return found


@pytest.fixture
async def cluster(redis_url: str, workdir: Path) -> AsyncIterator[Cluster]:
    async with FakeSlack() as fake:
        port = free_port()
        env = serve_env(fake, redis_url, workdir, port)
        # serve's worker in serve's process: these tests tell the two workers apart by pid
        # (its child worker: tests/e2e/test_worker_child.py).
        serve = await Clawgate.start("serve", {**env, "CLAWGATE_WORKER_MODE": "inprocess"}, workdir)
        worker = await Clawgate.start("worker", env, workdir)
        try:
            await serve.wait_line(r"clawgate: listening on")
            await worker.wait_line(r"clawgate: worker;")
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url)
            yield Cluster(fake, serve, worker, url)
        finally:
            await asyncio.gather(serve.stop(), worker.stop())


async def test_messages_are_answered_once_in_thread_order_by_both_processes(
    cluster: Cluster,
) -> None:
    threads = 4
    per_thread = 5
    roots: list[str] = []
    posted: dict[str, list[str]] = {}
    events = []
    for n in range(per_thread):  # interleaved: thread 0, 1, 2, 3, thread 0, 1, ...
        for k in range(threads):
            tag = f"t{k}-{n}"
            sent = await cluster.post(f"run: worker-id {tag}", thread_ts=roots[k] if n else None)
            events.append(sent)
            if n == 0:
                roots.append(str(sent[0]["ts"]))
            posted.setdefault(roots[k], []).append(tag)

    def all_answered() -> bool:
        return all(len(cluster.answers(root)) >= per_thread for root in roots)

    await cluster.fake.await_for(all_answered, timeout=30, what="every answer")
    # A Slack retry of an answered event is acknowledged and not run again.
    await cluster.post("", again=events[0])
    await asyncio.sleep(1.5)  # longer than the reclaim idle time: nothing runs twice

    pids = set()
    for root in roots:
        answers = cluster.answers(root)
        assert [tag for tag, _ in answers] == posted[root]  # once each, in posting order
        pids |= {pid for _, pid in answers}
    assert pids == {cluster.serve.pid, cluster.worker.pid}  # both processes did work
    for proc in (cluster.serve, cluster.worker):
        assert "run stopped (final)" in proc.stderr
        assert "took over" not in proc.stderr and "reclaimed" not in proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
    # SIGTERM: both stop cleanly, with nothing left in hand.
    assert await cluster.serve.stop() == 0, cluster.serve.stderr
    assert await cluster.worker.stop() == 0, cluster.worker.stderr


def _bash_running(command: str) -> tuple[int, int] | None:
    """(pid, parent pid) of the `bash -c <command>` process, if one runs now (Linux /proc)."""
    wanted = b"\0".join([b"bash", b"-c", command.encode()]) + b"\0"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() != wanted:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        return int(entry.name), ppid
    return None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the bash in /proc")
async def test_job_of_a_killed_worker_is_taken_over_and_answered(cluster: Cluster) -> None:
    slow = "sleep 2; worker-id slow-done"
    root, _ = await cluster.post(f"run: {slow}")
    thread = str(root["ts"])
    await cluster.post("run: worker-id after-slow", thread_ts=thread)

    found = await cluster.fake.await_for(lambda: _bash_running(slow), timeout=15, what="bash")
    bash_pid, owner = found
    procs = {cluster.serve.pid: cluster.serve, cluster.worker.pid: cluster.worker}
    assert owner in procs
    victim = procs.pop(owner)
    [survivor] = procs.values()
    victim.proc.send_signal(signal.SIGKILL)
    await victim.proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(bash_pid, signal.SIGKILL)  # its own process group: it outlives the kill
    killed_at = time.monotonic()

    await cluster.fake.await_for(
        lambda: len(cluster.answers(thread)) >= 1, timeout=20, what="answers after the kill"
    )
    # Taken over once the dead worker's liveness mark lapsed (3 s), not after an idle timeout.
    assert time.monotonic() - killed_at < 6
    await asyncio.sleep(0.5)
    # The slow command was running when its worker died: it is not run again, and the
    # thread is told so once; the message after it runs as usual.
    assert cluster.answers(thread) == [("after-slow", survivor.pid)]
    assert "took over" in survivor.stderr
    texts = [str(c.params.get("text")) for c in cluster.fake.posts(CHANNEL, thread)]
    assert sum("Continuing where I stopped" in t for t in texts) == 1, texts
    assert sum("outcome unknown" in t and "not run again" in t for t in texts) == 1, texts


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the bash in /proc")
async def test_a_process_stopped_past_its_liveness_time_does_nothing_more_and_exits_1(
    cluster: Cluster,
) -> None:
    """SIGSTOP (a paused VM) of the process running a command, until the other one took its
    job over; then SIGCONT: it must not answer, and it exits 1 for its supervisor."""
    slow = "sleep 2; worker-id stalled-done"
    root, _ = await cluster.post(f"run: {slow}")
    thread = str(root["ts"])
    _, owner = await cluster.fake.await_for(lambda: _bash_running(slow), timeout=15, what="bash")
    procs = {cluster.serve.pid: cluster.serve, cluster.worker.pid: cluster.worker}
    stalled = procs.pop(owner)
    [survivor] = procs.values()
    stalled.proc.send_signal(signal.SIGSTOP)
    try:
        await survivor.wait_line(r"took over 1 jobs", timeout=15)
        await cluster.fake.await_for(
            lambda: any("outcome unknown" in t for t in texts(cluster, thread)),
            timeout=15,
            what="the survivor's answer",
        )
    finally:
        stalled.proc.send_signal(signal.SIGCONT)  # its command finished meanwhile
    assert await asyncio.wait_for(stalled.proc.wait(), 15) == 1, stalled.stderr
    assert "stalled past its liveness time" in stalled.stderr
    assert "Traceback" not in stalled.stderr, stalled.stderr
    await asyncio.sleep(0.5)
    said = texts(cluster, thread)
    assert cluster.answers(thread) == []  # the stalled process posted nothing more
    assert sum("outcome unknown" in t and "not run again" in t for t in said) == 1, said


def texts(cluster: Cluster, thread: str) -> list[str]:
    return [str(c.params.get("text")) for c in cluster.fake.posts(CHANNEL, thread)]
