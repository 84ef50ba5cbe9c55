"""Hot reload of the policy file: when its content changes (checked every 2 s) and on SIGHUP.
Work in flight is not dropped: a run keeps the policy of its current step and reads the new one
at its next. An invalid new file is rejected with one log line per problem and the old policy
stays."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from pathlib import Path

from bot.policy_file import PolicyFileError, load_policy_file
from runtime.policy.service import PolicyService

log = logging.getLogger(__name__)
POLL_INTERVAL = 2.0


class PolicyReloader:
    def __init__(self, policies: PolicyService, path: Path | None) -> None:
        self.policies = policies
        self.path = path
        # The content last loaded or rejected. None at first: the first check reloads, so an
        # edit made while the process started is not missed.
        self._seen: str | None = None
        self._unreadable = False
        self._lock = asyncio.Lock()

    def _digest(self) -> str | None:
        assert self.path is not None
        try:
            digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        except OSError as exc:
            if not self._unreadable:  # said once, not every poll
                log.error("cannot read the policy file (%s); the current policy stays", exc)
            self._unreadable = True
            return None
        self._unreadable = False
        return digest

    async def reload(self, why: str) -> bool:
        """Load the file again; True if its policy is in force now."""
        if self.path is None:
            log.warning("policy reload (%s): no policy file is configured", why)
            return False
        async with self._lock:
            self._seen = self._digest() or self._seen
            try:
                document = load_policy_file(self.path, self.policies.tools)
            except PolicyFileError as exc:
                for line in str(exc).splitlines():
                    log.error("policy file rejected, the previous policy stays: %s", line)
                return False
            if await self.policies.replace(document, f"policy file ({why})"):
                log.warning("policy file %s reloaded (%s)", self.path, why)
            return True

    async def check(self) -> None:
        """Reload if the file's content differs from what was last loaded or rejected."""
        if self.path is None:
            return
        digest = self._digest()
        if digest is not None and digest != self._seen:
            await self.reload("changed")

    async def watch(self, interval: float = POLL_INTERVAL) -> None:
        """Check now, then every `interval` seconds, until cancelled (comparing content: editors
        and Kubernetes replace the file, and timestamps can be coarse)."""
        if self.path is None:
            return
        while True:
            try:
                await self.check()
            except Exception:
                log.exception("policy reload failed; the current policy stays")
            await asyncio.sleep(interval)

    def on_sighup(self) -> None:
        """Reload on SIGHUP (`kill -HUP <pid>`)."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[bool]] = set()

        def handle() -> None:
            task = loop.create_task(self.reload("SIGHUP"))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            loop.add_signal_handler(signal.SIGHUP, handle)


async def keep_policy_fresh(policies: PolicyService, path: Path | None) -> None:
    """Run until cancelled: reload on SIGHUP and when the file changes."""
    reloader = PolicyReloader(policies, path)
    reloader.on_sighup()
    await reloader.watch()
