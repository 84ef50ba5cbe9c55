"""`clawgate serve` in its default mode with REDIS_URL (CLAWGATE_WORKER_MODE=child): its worker
runs in a child process it supervises. A mention is answered through the child; a child killed
mid-job is started again and the job completes once; serve killed takes its child with it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.e2e.test_worker_processes import (
    CHANNEL,
    Clawgate,
    Cluster,
    _bash_running,
    serve_env,
    wait_ready,
)
from tests.fake_slack import FakeSlack

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the processes in /proc"
)
CHILD = re.compile(r"worker child process (\d+) started")
RESTARTED = r"worker child process \d+ exited \(killed by SIGKILL\); starting it again"


def child_pid(serve: Clawgate) -> int:
    pids = [int(m[1]) for line in serve.lines if (m := CHILD.search(line))]
    assert pids, serve.stderr
    return pids[-1]


def alive(pid: int) -> bool:
    """Running, not a zombie (a killed child of a dead serve is reaped by init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
async def served(redis_url: str, workdir: Path) -> AsyncIterator[Cluster]:
    """serve alone, in its default mode (the Cluster's `worker` is serve itself)."""
    async with FakeSlack() as fake:
        port = free_port()
        env = serve_env(fake, redis_url, workdir, port, CLAWGATE_RECLAIM_IDLE="1")
        assert "CLAWGATE_WORKER_MODE" not in env
        serve = await Clawgate.start("serve", env, workdir)
        try:
            await serve.wait_line(r"clawgate: listening on .*worker in child process")
            url = f"http://127.0.0.1:{port}"
            await wait_ready(url)
            yield Cluster(fake, serve, serve, url)
        finally:
            await serve.stop()


async def test_a_mention_is_answered_through_the_child_worker(served: Cluster) -> None:
    child = child_pid(served.serve)
    assert child != served.serve.pid
    assert Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(
        served.serve.pid
    )
    root, _ = await served.post("run: worker-id hello")
    thread = str(root["ts"])
    await served.fake.await_for(lambda: served.answers(thread), timeout=20, what="the answer")
    assert [tag for tag, _ in served.answers(thread)] == ["hello"]
    # serve's SIGTERM stops its child too (within the grace).
    assert await served.serve.stop() == 0
    assert not alive(child)


async def test_a_killed_child_is_started_again_and_its_job_completes_once(
    served: Cluster,
) -> None:
    slow = "sleep 1; worker-id slow-done"
    root, _ = await served.post(f"run: {slow}")
    thread = str(root["ts"])
    await served.post("run: worker-id after-slow", thread_ts=thread)
    bash_pid, owner = await served.fake.await_for(
        lambda: _bash_running(slow), timeout=20, what="bash"
    )
    child = child_pid(served.serve)
    assert owner == child
    os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(bash_pid, signal.SIGKILL)  # its own process group: it outlives the kill
    await served.serve.wait_line(RESTARTED)
    deadline = time.monotonic() + 30
    while sum("clawgate: worker;" in line for line in served.serve.lines) < 2:  # the new one
        assert time.monotonic() < deadline, served.serve.stderr
        await asyncio.sleep(0.05)
    await served.fake.await_for(
        lambda: len(served.answers(thread)) >= 1, timeout=30, what="answers after the kill"
    )
    await asyncio.sleep(1.5)  # longer than the reclaim idle time: nothing runs twice
    # The slow command was running when its worker died: not run again, said once.
    assert [tag for tag, _ in served.answers(thread)] == ["after-slow"]
    texts = [str(c.params.get("text")) for c in served.fake.posts(CHANNEL, thread)]
    assert sum("outcome unknown" in t and "not run again" in t for t in texts) == 1, texts
    assert child_pid(served.serve) != child


async def test_serve_killed_leaves_no_worker_behind(served: Cluster) -> None:
    child = child_pid(served.serve)
    served.serve.proc.send_signal(signal.SIGKILL)
    await served.serve.proc.wait()
    deadline = time.monotonic() + 15  # the child's SIGTERM stop: within its grace (2 s)
    while alive(child):
        assert time.monotonic() < deadline, f"worker child {child} outlived serve"
        await asyncio.sleep(0.05)
