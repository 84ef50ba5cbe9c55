"""A job taken over after kill -9: `clawgate serve` as a real process on a free port, killed
mid-job, and the `clawgate worker` started on the same environment to take the job over."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.e2e.test_worker_processes import SECRET, Clawgate, serve_env, wait_ready
from tests.fake_slack import FakeSlack, event_body, post_signed
from tests.threaded_server import ThreadedServer


@dataclass
class Takeover:
    """The `serve` process (ready at `url`) and, once started, the `worker` after it."""

    env: dict[str, str]
    workdir: Path
    url: str
    serve: Clawgate
    worker: Clawgate | None = None

    async def post_to_slack(self, event: dict[str, Any]) -> None:
        """`event` delivered to the serve process, signed as Slack signs it."""
        status, _ = await post_signed(f"{self.url}/slack/events", SECRET, event_body(event))
        assert status == 200

    async def kill_serve(self) -> None:
        """SIGKILL the serve process mid-job, and first its child worker (which holds the job
        in serve's default mode, and would otherwise stop gracefully once serve is gone)."""
        children = Path(f"/proc/{self.serve.pid}/task/{self.serve.pid}/children")
        with contextlib.suppress(OSError):
            for pid in children.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        self.serve.proc.send_signal(signal.SIGKILL)
        await self.serve.proc.wait()

    async def start_worker(self) -> None:
        self.worker = await Clawgate.start("worker", self.env, self.workdir)


@contextlib.asynccontextmanager
async def serve_then_worker(
    slack: FakeSlack | None, redis_url: str, workdir: Path, **extra: str
) -> AsyncIterator[Takeover]:
    """`clawgate serve` with `serve_env`'s environment (Slack's settings when given its fake,
    else the platform's in `extra`), listening and ready; stopped at the end, and the worker
    too if one was started."""
    port = free_port()
    env = serve_env(slack, redis_url, workdir, port, **extra)
    serve = await Clawgate.start("serve", env, workdir)
    run = Takeover(env, workdir, f"http://127.0.0.1:{port}", serve)
    try:
        await serve.wait_line(r"clawgate: listening on")
        await wait_ready(run.url)
        yield run
    finally:
        await serve.stop()
        if run.worker is not None:
            await run.worker.stop()


async def settled(fake: ThreadedServer, found: Callable[[], Any], what: str) -> None:
    """Wait (up to 60 s) until `found` is truthy after the takeover, then a second more: time
    for a second answer or file to land, were there one."""
    await fake.await_for(found, 60, what=what)
    await asyncio.sleep(1.0)
