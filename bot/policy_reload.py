"""Hot reload of the policy file: when its content changes (checked every 2 s) and on SIGHUP.
Work in flight is not dropped: a run keeps the policy of its current step and reads the new one
at its next. An invalid new file is rejected with one log line per problem and the old policy
stays.

With no CLAWGATE_POLICY_FILE and no ./clawgate.toml at start, ./clawgate.toml is watched all
the same: one that appears later is loaded (`serve` and `worker` refuse it inside the work
dir, as at start: an approved command could have written it). A file that disappears leaves
the policy loaded from it in force (a deleted deny list must not quietly allow), said once."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from pathlib import Path

from bot.policy_file import PolicyFileError, load_policy_file
from bot.settings import DEFAULT_POLICY_FILE
from bot.settings_file import agent_may_write
from runtime.policy.service import PolicyService

log = logging.getLogger(__name__)
POLL_INTERVAL = 2.0


class PolicyReloader:
    def __init__(
        self,
        policies: PolicyService,
        path: Path | None,
        *,
        optional: bool = False,
        workdir: Path | None = None,
    ) -> None:
        """`optional`: `path` need not exist (the default ./clawgate.toml, absent at start);
        `workdir`: a file appearing inside it is refused (None: no such check)."""
        self.policies = policies
        self.path = path
        self.optional = optional
        self.workdir = workdir
        # The content last loaded or rejected. None at first: the first check reloads, so an
        # edit made while the process started is not missed.
        self._seen: str | None = None
        self._unreadable = False
        self._lock = asyncio.Lock()

    def _digest(self) -> str | None:
        assert self.path is not None
        try:
            digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        except FileNotFoundError:
            if not self._unreadable and not (self.optional and self._seen is None):
                log.warning(
                    "the policy file %s is gone: the policy loaded from it stays in force "
                    "(restart for the built-in defaults)",
                    self.path,
                )
            self._unreadable = True
            return None
        except OSError as exc:
            if not self._unreadable:  # said once, not every poll
                log.error("cannot read the policy file (%s); the current policy stays", exc)
            self._unreadable = True
            return None
        self._unreadable = False
        return digest

    async def reload(self, why: str) -> bool:
        """Load the file again; True if its policy is in force now."""
        if self.path is None or (self.optional and not self.path.exists()):
            log.warning("policy reload (%s): no policy file: the built-in defaults stay", why)
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
        if digest is None or digest == self._seen:
            return
        appeared = self._seen is None and self.optional
        why = agent_may_write(self.path, self.workdir) if self.workdir and appeared else None
        if why:
            self._seen = digest  # said once for this content
            log.error(
                "a policy file appeared at %s: not loaded, %s; move it out of the work dir "
                "and set CLAWGATE_POLICY_FILE to it",
                self.path,
                why,
            )
            return
        await self.reload("appeared" if appeared else "changed")

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


async def keep_policy_fresh(
    policies: PolicyService, path: Path | None, workdir: Path | None = None
) -> None:
    """Run until cancelled: reload on SIGHUP and when the file changes; with no `path`,
    ./clawgate.toml should it appear (refused inside `workdir`, when given)."""
    reloader = PolicyReloader(
        policies, path or DEFAULT_POLICY_FILE.resolve(), optional=path is None, workdir=workdir
    )
    reloader.on_sighup()
    await reloader.watch()
