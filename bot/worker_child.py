"""`serve`'s worker in a supervised child process (CLAWGATE_WORKER_MODE=child): `clawgate
worker` with serve's environment and working directory, so an agent run never holds the event
loop that acknowledges the platforms' requests. Started once serve's own checks passed,
started again with backoff when it exits on its own, stopped with SIGTERM (SIGKILL after the
grace) when serve stops, and ended with serve even when serve is killed (`die_with_parent`)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time

from runtime.shutdown import cancel

log = logging.getLogger(__name__)

# Set in the child's environment: the pid of the serve it belongs to.
PARENT_VARIABLE = "CLAWGATE_SERVE_PID"
FIRST_BACKOFF = 1.0  # seconds before the first restart, doubled up to MAX_BACKOFF
MAX_BACKOFF = 30.0
STEADY = 60.0  # a child that ran this long restarts after FIRST_BACKOFF again
# Beyond the grace its jobs get: the child's own start (imports, Redis) and close.
STOP_MARGIN = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class WorkerChild:
    """The child process, supervised from `start` to `stop`."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def start(self) -> None:
        """The first child, and the task that starts it again whenever it exits."""
        await self._spawn()
        self._supervisor = asyncio.create_task(self._supervise())

    async def _spawn(self) -> None:
        env = {**os.environ, PARENT_VARIABLE: str(os.getpid())}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "worker", env=env, stdin=asyncio.subprocess.DEVNULL
        )
        log.info("worker child process %d started", self.process.pid)

    async def _supervise(self) -> None:
        """Start the child again whenever it exits, waiting longer after each exit that came
        soon after its start (a setting it refuses, Redis away)."""
        backoff = FIRST_BACKOFF
        while True:
            assert self.process is not None
            started = time.monotonic()
            code = await self.process.wait()
            if time.monotonic() - started >= STEADY:
                backoff = FIRST_BACKOFF
            log.warning(
                "worker child process %d exited (%s); starting it again in %g s",
                self.process.pid,
                _exit_status(code),
                backoff,
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            self.restarts += 1
            await self._spawn()

    async def stop(self) -> None:
        """SIGTERM: the child finishes or hands back its jobs within the grace; SIGKILL after."""
        if self._supervisor is not None:
            await cancel([self._supervisor])
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), self.grace + STOP_MARGIN)
        except TimeoutError:
            log.warning("worker child process %d ignored SIGTERM: killed", process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        code = await process.wait()
        log.info("worker child process %d stopped (%s)", process.pid, _exit_status(code))


def _exit_status(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


def die_with_parent() -> None:
    """In a child worker (PARENT_VARIABLE set): the kernel sends it SIGTERM when serve dies,
    however serve dies, so a `kill -9` of serve leaves no worker behind. SIGTERM, not SIGKILL:
    it hands back its jobs as on any stop. Exits at once when serve died before this ran."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    else:  # no such signal: a look every second whether serve is still the parent
        threading.Thread(target=_watch_parent, args=(int(parent),), daemon=True).start()
    if os.getppid() != int(parent):
        sys.exit(0)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
