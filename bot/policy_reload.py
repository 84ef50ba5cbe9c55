"""Hot reload of the policy file: on change (polled) and on SIGHUP. Work in flight is not
dropped: a run keeps the policy of its current step and reads the new one at its next. An
invalid new file is rejected with one log line per problem and the old policy stays."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path

from bot.policy_file import PolicyFileError, load_policy_file
from runtime.policy.service import PolicyService

log = logging.getLogger(__name__)
POLL_INTERVAL = 2.0


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino


class PolicyReloader:
    def __init__(self, policies: PolicyService, path: Path | None) -> None:
        self.policies = policies
        self.path = path
        self._stamp = None if path is None else _stamp(path)
        self._lock = asyncio.Lock()

    async def reload(self, why: str) -> bool:
        """Load the file again; True if the new policy is in force."""
        if self.path is None:
            log.warning("policy reload (%s): no policy file is configured", why)
            return False
        async with self._lock:
            self._stamp = _stamp(self.path)
            try:
                document = load_policy_file(self.path, self.policies.tools)
            except PolicyFileError as exc:
                for line in str(exc).splitlines():
                    log.error("policy file rejected, the previous policy stays: %s", line)
                return False
            await self.policies.replace(document, f"policy file ({why})")
            log.warning("policy file %s reloaded (%s)", self.path, why)
            return True

    async def watch(self, interval: float = POLL_INTERVAL) -> None:
        """Reload whenever the file's modification time, size or inode changes (editors and
        Kubernetes ConfigMaps replace the file rather than write into it)."""
        if self.path is None:
            return
        while True:
            await asyncio.sleep(interval)
            stamp = _stamp(self.path)
            if stamp is not None and stamp != self._stamp:
                await self.reload("changed")

    def on_sighup(self) -> None:
        """Reload on SIGHUP (`kill -HUP <pid>`), where the platform has signals."""
        if not hasattr(signal, "SIGHUP") or os.name != "posix":
            return
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[bool]] = set()

        def handle() -> None:
            task = loop.create_task(self.reload("SIGHUP"))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGHUP, handle)


async def keep_policy_fresh(policies: PolicyService, path: Path | None) -> None:
    """Run until cancelled: reload on SIGHUP and when the file changes."""
    reloader = PolicyReloader(policies, path)
    reloader.on_sighup()
    await reloader.watch()
