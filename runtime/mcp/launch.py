"""How a server is reached: a stdio server is started in the bash sandbox (bubblewrap: read-only,
only the system directories, the work directory and `expose` unless `writable_workdir`, a
private /tmp and HOME, the host's credentials hidden, its own PID namespace, no network and
no unix sockets unless its `network` says so, dying with clawgate) with only the
environment the policy file gives it; an HTTP server is reached at its URL with its headers.
Its stderr is kept (the last lines) to say why it stopped."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any, TextIO

import httpx2
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from runtime.mcp.config import HttpServer, ServerConfig, StdioServer, resolve_value
from runtime.mcp.refused_writes import refused_write
from runtime.tools.bash import scrubbed_env
from runtime.tools.masks import ScanTooLarge
from runtime.tools.sandbox import SANDBOX_HOME, Access, Sandbox, SandboxMode

log = logging.getLogger(__name__)
STDERR_LINES = 20  # kept of a server's stderr, for the reason it stopped
# The variables a stdio server gets besides the policy file's: nothing secret.
BASICS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
Transport = AbstractAsyncContextManager[Any]


class LaunchError(Exception):
    """Why a server cannot be started at all (its configuration, the machine)."""


class StderrTail:
    """A pipe for a child's stderr, read into the log and its last lines kept."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)

    @property
    def last(self) -> str | None:
        return self.lines[-1] if self.lines else None

    @property
    def refused_write(self) -> str | None:
        return refused_write("\n".join(self.lines))

    @contextlib.asynccontextmanager
    async def pipe(self) -> AsyncIterator[TextIO]:
        """The write end to give the child; read until the child closes it."""
        read_fd, write_fd = os.pipe()
        writer = os.fdopen(write_fd, "w")
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
        )
        task = asyncio.create_task(self._read(reader))
        try:
            yield writer
        finally:
            writer.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 1.0)
            task.cancel()
            transport.close()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            text = line.decode(errors="replace").rstrip()
            if text:
                self.lines.append(text[:300])
                log.debug("mcp %s: %s", self.server, text)


def environment(config: StdioServer, home: str) -> dict[str, str]:
    """What the server's process sees: PATH, the locale, HOME and the policy's variables
    (`${NAME}` read from clawgate's environment now)."""
    env = {name: value for name, value in scrubbed_env(home).items() if name in BASICS}
    env["HOME"] = home
    for name, value in config.env.items():
        try:
            env[name] = resolve_value(value)
        except KeyError as exc:
            raise LaunchError(f"env.{name}: ${{{exc.args[0]}}} is not set for clawgate") from None
    return env


def stdio_parameters(config: StdioServer, sandbox: Sandbox, workdir: Path) -> StdioServerParameters:
    if sandbox.mode is SandboxMode.AUTO and not sandbox.contained:
        raise LaunchError(
            f"no OS sandbox to start it in ({sandbox.problem}); install bubblewrap, or set "
            "CLAWGATE_SANDBOX=off to run MCP servers uncontained"
        )
    env = environment(config, SANDBOX_HOME if sandbox.contained else str(workdir))
    # The SDK adds some of clawgate's own variables (USER, SHELL, ...): unset by name, so
    # that no value shows on a command line.
    unset = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
    argv = ["env", *(arg for name in unset for arg in ("-u", name)), "--", *config.command]
    access = Access.APPROVED if config.writable_workdir else Access.READ_ONLY
    missing = [path for path in config.expose if not Path(path).is_dir()]
    if missing:
        raise LaunchError(f"expose: no such directories {missing}")
    try:
        wrapped = sandbox.wrap(argv, workdir, access, network=config.network, expose=config.expose)
    except ScanTooLarge as exc:
        raise LaunchError(f"cannot start it read-only: {exc}") from None
    return StdioServerParameters(command=wrapped[0], args=wrapped[1:], env=env, cwd=workdir)


async def open_transport(
    config: ServerConfig, stack: AsyncExitStack, sandbox: Sandbox, workdir: Path, tail: StderrTail
) -> Transport:
    """The transport to hand `mcp.Client`; what it needs is closed with `stack`."""
    if isinstance(config, HttpServer):
        try:
            headers = {name: resolve_value(value) for name, value in config.headers.items()}
        except KeyError as exc:
            raise LaunchError(f"headers: ${{{exc.args[0]}}} is not set for clawgate") from None
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(config.url, http_client=http)
    parameters = stdio_parameters(config, sandbox, workdir)
    errlog = await stack.enter_async_context(tail.pipe())
    return stdio_client(parameters, errlog=errlog)
