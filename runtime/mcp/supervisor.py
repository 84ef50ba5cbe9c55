"""Every MCP server the policy file configures, supervised in this process: started on the
first use of the runtime (in its event loop), followed when the policy file changes (servers
added, removed or changed are started, stopped, restarted), and stopped with the process.

It is what the registry reads the MCP tools from (a `ToolSource`) and what the policy waits
for before a first run (a `ToolCatalog`), so a tool that vanished is unknown at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.mcp.config import ServerConfig
from runtime.mcp.state import ServerState
from runtime.mcp.tool import McpTool
from runtime.tools.sandbox import Sandbox

if TYPE_CHECKING:  # the policy reads runtime.mcp.config: no import back
    from runtime.mcp.connection import Connection
    from runtime.policy.model import PolicyDocument

log = logging.getLogger(__name__)

FIRST_LISTING_WAIT = 10.0  # seconds a first run waits, at most, for the servers' tool lists
STOP_GRACE = 5.0  # seconds a stopping server gets (the SDK closes stdin, then kills)


class McpServers:
    def __init__(self, document: PolicyDocument, sandbox: Sandbox, workdir: Path) -> None:
        self.sandbox = sandbox
        self.workdir = workdir
        self._wanted = self._configured(document)
        self._running: dict[str, tuple[Connection, asyncio.Task[None]]] = {}
        self._started = False
        self._settled = False

    @staticmethod
    def _configured(document: PolicyDocument) -> dict[str, ServerConfig]:
        return {name: rules for name, (_, rules) in document.mcp_servers().items() if rules.enabled}

    # --- ToolSource / ToolCatalog ---------------------------------------------------------------

    def tools(self) -> dict[str, McpTool]:
        found: dict[str, McpTool] = {}
        for connection, _ in self._running.values():
            found.update(connection.tools)
        return found

    def names(self) -> list[str]:
        return list(self.tools())

    async def settled(self) -> None:
        """Start the servers (once), and wait until each tried to connect, at most
        FIRST_LISTING_WAIT in all: a server slower than that joins when it is up."""
        if self._settled:
            return  # a server added later (a reloaded file) joins when it is up
        if not self._started:
            self._started = True
            self._reconcile()
        waits = [c.attempted.wait() for c, _ in self._running.values() if not c.attempted.is_set()]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), FIRST_LISTING_WAIT)
        self._settled = True

    # --- following the policy file ------------------------------------------------------------

    def update(self, document: PolicyDocument) -> None:
        """A new policy file: start, stop or restart servers to match it (from the event
        loop; before the first use it only remembers)."""
        self._wanted = self._configured(document)
        if self._started:
            self._reconcile()

    def _reconcile(self) -> None:
        for name, (connection, task) in list(self._running.items()):
            if self._wanted.get(name) != connection.rules:
                log.warning("mcp %s: stopped (the policy file changed)", name)
                del self._running[name]
                asyncio.get_running_loop().create_task(self._stop(connection, task))
        # Imported here: the `mcp` SDK adds most of a second to every process's start (a
        # takeover after a kill -9 waits for it), and only processes with servers need it.
        from runtime.mcp.connection import Connection  # noqa: PLC0415

        for name, rules in self._wanted.items():
            if name not in self._running:
                connection = Connection(name, rules, self.sandbox, self.workdir)
                task = asyncio.get_running_loop().create_task(connection.run(), name=f"mcp:{name}")
                self._running[name] = (connection, task)

    @staticmethod
    async def _stop(connection: Connection, task: asyncio.Task[None]) -> None:
        await connection.stop()
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_GRACE)
        except (TimeoutError, Exception):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def aclose(self) -> None:
        running, self._running = list(self._running.values()), {}
        await asyncio.gather(*(self._stop(c, t) for c, t in running))

    # --- state --------------------------------------------------------------------------------

    def states(self) -> list[ServerState]:
        """Each configured server's state (those not started yet say so)."""
        found = []
        for name, rules in self._wanted.items():
            running = self._running.get(name)
            if running is None:
                found.append(ServerState(name, rules.transport, "starting", "not started yet"))
            else:
                found.append(running[0].describe())
        return found
