"""One MCP server, supervised: connected (a stdio server started) with the official `mcp` SDK,
its tool list read and re-read (on its change notifications, on a periodic health check, and
right before every call), restarted with backoff when it stops or stops answering, and its
state kept for /readyz, `clawgate doctor`, the logs and the metrics.

Calls fail plainly, never silently and never twice: a server that is down is not sent the
call; one that stops during a call makes it fail with "whether it took effect is unknown"
(the call is not sent again); one that answers too late makes it fail the same way. A tool
that vanished, or changed, since the call was checked is not called."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REQUEST_TIMEOUT,
    ToolListChangedNotification,
)

from runtime.mcp.config import ServerConfig
from runtime.mcp.launch import LaunchError, StderrTail, open_transport
from runtime.mcp.listing import Unusable, listed
from runtime.mcp.refused_writes import SANDBOX_WRITES
from runtime.mcp.state import ServerState
from runtime.mcp.tool import McpTool
from runtime.metrics import MCP_CALLS, MCP_RESTARTS, MCP_UP
from runtime.redact import one_line, redact_text
from runtime.tools.base import ToolError
from runtime.tools.sandbox import Sandbox

log = logging.getLogger(__name__)

STARTUP_TIMEOUT = 30.0  # seconds to start, connect and list the tools
HEALTH_INTERVAL = 15.0  # seconds between health checks (a tools/list) of an idle server
HEALTH_TIMEOUT = 10.0  # seconds a health check may take before the server counts as hung
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0  # restart delays, doubling in between
STABLE_AFTER = 10.0  # seconds up after which the next failure restarts after BACKOFF_FIRST
CALL_WAIT = 5.0  # seconds a call waits for a server that is (re)starting
MAX_PAGES = 20  # tools/list pages read at most


class Broken(Exception):
    """The connection is unusable: restart it."""


class Connection:
    """One server's supervised connection. `run()` is its task (started by the supervisor);
    `call()` may be used from any task of the same event loop."""

    def __init__(self, name: str, rules: ServerConfig, sandbox: Sandbox, workdir: Path) -> None:
        self.name = name
        self.rules = rules
        self.sandbox = sandbox
        self.workdir = workdir
        self.tools: dict[str, McpTool] = {}  # by qualified name; the last listing read
        self.skipped: list[str] = []  # listed tools that cannot be offered, and why
        # Tools a call showed need what clawgate's client lacks (sampling, elicitation, roots):
        # why, by name and signature, so that the next listing does not offer them again.
        self._lacking: dict[tuple[str, str], str] = {}
        self.state = "starting"
        self.problem: str | None = None
        self.restarts = 0
        self.retry_at: float | None = None
        self.attempted = asyncio.Event()  # the first connection attempt ended (either way)
        self._client: Client | None = None
        self._up = asyncio.Event()
        self._broken = asyncio.Event()
        self._relist = asyncio.Event()
        self._tail = StderrTail(name)
        self._stopping = False

    @property
    def sandboxed(self) -> bool:
        return self.rules.transport == "stdio" and self.sandbox.contained

    # --- supervision --------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, restart with backoff; until cancelled."""
        backoff = BACKOFF_FIRST
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._serve()
                why = "the connection ended"
            except LaunchError as exc:
                why = str(exc)
            except (Exception, ExceptionGroup) as exc:
                why = self._describe(exc)
            finally:
                self._down()
            if self._stopping:
                break
            if time.monotonic() - began > STABLE_AFTER:
                backoff = BACKOFF_FIRST
            self.problem, self.state = why, "down"
            self.retry_at = time.monotonic() + backoff
            self.attempted.set()
            MCP_UP.labels(self.name).set(0)
            log.warning("mcp %s: down (%s); restarting in %g s", self.name, why, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)
            self.restarts += 1
            MCP_RESTARTS.labels(self.name).inc()
            self.state = "starting"

    async def stop(self) -> None:
        self._stopping = True
        self._broken.set()
        self.state, self.problem = "stopped", None
        self.tools = {}
        MCP_UP.labels(self.name).set(0)

    def _down(self) -> None:
        self._client = None
        self._up.clear()

    async def _serve(self) -> None:
        self._broken.clear()
        self._tail.lines.clear()  # what this start says, not the last one
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(STARTUP_TIMEOUT):
                transport = await open_transport(
                    self.rules, stack, self.sandbox, self.workdir, self._tail
                )
                client = Client(transport, message_handler=self._on_message, cache=None)
                await stack.enter_async_context(client)
                await self._read_tools(client)
            self._client = client
            self.state, self.problem, self.retry_at = "up", None, None
            self._up.set()
            self.attempted.set()
            MCP_UP.labels(self.name).set(1)
            log.info("mcp %s: up, %d tools", self.name, len(self.tools))
            watchers = [
                asyncio.create_task(self._health(client)),
                asyncio.create_task(self._listen(client)),
            ]
            try:
                await self._broken.wait()
            finally:
                for task in watchers:
                    task.cancel()
                await asyncio.gather(*watchers, return_exceptions=True)
                self._down()
        if not self._stopping:
            raise Broken(self.problem or "the connection broke")

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, ExceptionGroup) and exc.exceptions:
            return self._describe(exc.exceptions[0])
        if isinstance(exc, Broken):
            return str(exc)
        if isinstance(exc, TimeoutError):
            why = f"did not start and list its tools within {STARTUP_TIMEOUT:g} s"
        elif isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            why = "it closed the connection"
        else:
            why = f"{type(exc).__name__}: {one_line(str(exc), 200)}"
        if self.sandboxed and (refused := self._tail.refused_write):
            why += f"; it could not write {refused}: {SANDBOX_WRITES}"
        said = self._tail.last
        return redact_text(f"{why} (it said: {one_line(said, 200)})" if said else why)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._relist.set()
        elif isinstance(message, Exception):
            log.debug("mcp %s: %s", self.name, type(message).__name__)

    async def _health(self, client: Client) -> None:
        """Re-read the tool list when the server says it changed, and every HEALTH_INTERVAL:
        a server that does not answer in time is restarted."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._relist.wait(), HEALTH_INTERVAL)
            self._relist.clear()
            try:
                async with asyncio.timeout(HEALTH_TIMEOUT):
                    await self._read_tools(client)
            except TimeoutError:
                self._break(f"no answer to a health check within {HEALTH_TIMEOUT:g} s")
                return
            except Exception as exc:
                self._break(self._describe(exc))
                return

    async def _listen(self, client: Client) -> None:
        """On a 2026 connection the server's change events come through
        `subscriptions/listen` (older servers notify through `_on_message`). A lost stream
        may be a dead server: the health check runs at once and finds out."""
        while True:
            try:
                async with client.listen(tools_list_changed=True) as events:
                    async for _ in events:
                        self._relist.set()
            except SubscriptionLost:
                self._relist.set()
            except (ListenNotSupportedError, MCPError):
                return  # not supported by this server: the health check polls instead
            await asyncio.sleep(1.0)

    def _break(self, why: str) -> None:
        if not self._broken.is_set():
            self.problem = why
            self._broken.set()

    # --- the tool list ------------------------------------------------------------------------

    async def _read_tools(self, client: Client) -> None:
        listing: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            listing += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        tools: dict[str, McpTool] = {}
        skipped = []
        for raw in listing:
            try:
                checked = listed(raw)
            except Unusable as exc:
                skipped.append(str(exc))
                continue
            tool = McpTool(self, checked)
            if lacking := self._lacking.get((tool.name, tool.signature)):
                skipped.append(lacking)
                continue
            old = self.tools.get(tool.name)
            tools[tool.name] = old if old and old.signature == tool.signature else tool
        if skipped and skipped != self.skipped:
            log.warning("mcp %s: tools not offered: %s", self.name, "; ".join(skipped))
        gone, new = set(self.tools) - set(tools), set(tools) - set(self.tools)
        changed = {n for n in set(tools) & set(self.tools) if tools[n] is not self.tools[n]}
        if self.tools and (gone or new or changed):
            log.warning(
                "mcp %s: tool list changed (new: %s; gone: %s; changed: %s)",
                self.name,
                ", ".join(sorted(new)) or "-",
                ", ".join(sorted(gone)) or "-",
                ", ".join(sorted(changed)) or "-",
            )
        self.tools, self.skipped = tools, skipped

    # --- calls --------------------------------------------------------------------------------

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> Any:
        """The call within the server's `timeout`, the tool list read first included."""
        client = await self._connected(tool)
        timeout = self.rules.timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        listing = min(timeout, HEALTH_TIMEOUT)
        try:
            async with asyncio.timeout(listing):
                await self._read_tools(client)  # never a call to a tool that is no more
        except TimeoutError:
            restart = ""
            if listing >= HEALTH_TIMEOUT:  # as a health check would: restart it
                self._break(f"it stopped answering: no tool list within {listing:g} s")
                restart = "; the server is being restarted"
            self._count(tool, "down")
            raise ToolError(
                f"the MCP server {self.name} stopped answering (no tool list within "
                f"{listing:g} s); the call was not sent{restart}",
                "timeout",
            ) from None
        except Exception as exc:
            self._break(self._describe(exc))
            self._count(tool, "down")
            raise ToolError(
                self._unreachable("its tools could not be listed: the call was not sent"),
                "unreachable",
            ) from None
        current = self.tools.get(tool.name)
        if current is None:
            self._count(tool, "vanished")
            raise ToolError(f"{tool.name} is no longer offered by its MCP server; not run")
        if current.signature != tool.signature:
            self._count(tool, "changed")
            raise ToolError(
                f"{tool.name} changed on its MCP server since this call was checked (signature "
                f"{tool.signature} -> {current.signature}); not run; call it again"
            )
        try:
            async with asyncio.timeout_at(deadline):
                result = await client.session.call_tool(tool.listing.name, arguments)
        except TimeoutError:
            self._count(tool, "timeout")
            raise ToolError(
                f"no answer from the MCP server {self.name} within {timeout:g} s; the call may "
                "still complete there, and it was not sent again",
                "timeout",
            ) from None
        except MCPError as exc:
            if exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
                self._count(tool, "refused")
                raise ToolError(self._lacks(tool, exc)) from None
            if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                self._count(tool, "refused")
                raise ToolError(
                    f"the MCP server {self.name} refused the call: {one_line(exc.error.message)}"
                ) from None
            return self._lost(tool, exc)
        except RuntimeError as exc:  # the SDK found its answer unusable (after it ran)
            self._count(tool, "invalid")
            raise ToolError(
                f"the MCP server {self.name} answered in a way clawgate cannot use: "
                f"{one_line(str(exc), 200)}"
            ) from None
        except Exception as exc:  # the transport: whether it ran is unknown
            return self._lost(tool, exc)
        self._count(tool, "error" if result.is_error else "completed")
        return result

    def _lacks(self, tool: McpTool, exc: MCPError) -> str:
        """The server refused, before running it, a call needing what clawgate's client does
        not do (MCP sampling, elicitation, roots): the tool is offered no more (until it
        changes), and the model is told why."""
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        needed = data.get("requiredCapabilities")
        needs = ", ".join(sorted(needed)) if isinstance(needed, dict) and needed else None
        why = f"{tool.listing.name}: it needs {needs or 'a client capability'} (MCP), which "
        why += "clawgate does not provide"
        self._lacking[(tool.name, tool.signature)] = why
        self.tools = {name: t for name, t in self.tools.items() if name != tool.name}
        self.skipped = [*self.skipped, why]
        log.warning("mcp %s: tool not offered from now on: %s", self.name, why)
        return (
            f"{tool.name} needs {needs or 'a client capability'} from MCP clients, which "
            "clawgate does not provide: it did not run, and it is not offered any more"
        )

    def _lost(self, tool: McpTool, exc: BaseException) -> Any:
        why = self._describe(exc)
        self._break(f"it stopped during a call ({why})")
        self._count(tool, "lost")
        raise ToolError(
            f"the MCP server {self.name} stopped during the call ({why}); whether it took "
            "effect is unknown, and it was not sent again; the server is being restarted"
        )

    async def _connected(self, tool: McpTool) -> Client:
        if self.state == "starting":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._up.wait(), CALL_WAIT)
        client = self._client
        if client is None or self._broken.is_set():
            self._count(tool, "down")
            raise ToolError(self._unreachable("the call was not sent"), "unreachable")
        return client

    def _unreachable(self, what: str) -> str:
        retry = ""
        if self.retry_at is not None:
            retry = f"; next restart in {max(0.0, self.retry_at - time.monotonic()):.0f} s"
        why = f" ({self.problem})" if self.problem else ""
        return f"the MCP server {self.name} is down{why}{retry}; {what}"

    def _count(self, tool: McpTool, outcome: str) -> None:
        MCP_CALLS.labels(self.name, tool.listing.name, outcome).inc()

    def describe(self) -> ServerState:
        warning = None
        if self.state == "up":
            detail = f"{len(self.tools)} tools"
            if self.skipped:
                detail += f", {len(self.skipped)} not offered ({self.skipped[0]})"
            if self.sandboxed and (refused := self._tail.refused_write):
                # Up, but it said a write failed: its first real use may fail the same way.
                warning = redact_text(f"it could not write {refused}: {SANDBOX_WRITES}")
        elif self.state == "down":
            retry = ""
            if self.retry_at is not None:
                retry = f"; restart in {max(0.0, self.retry_at - time.monotonic()):.0f} s"
            detail = f"{self.problem}{retry}"
        else:
            detail = "starting" if self.state == "starting" else "stopped"
        if self.restarts:
            detail += f" ({self.restarts} restarts)"
        return ServerState(self.name, self.rules.transport, self.state, detail, warning)
