"""What the MCP tests share: the policy file that plugs the test server in (tests/mcp_server.py,
a real MCP server written with the `mcp` SDK) over stdio or HTTP, an HTTP server process the
test owns, and killing a server mid-call the way a crash would (SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port

SERVER = Path(__file__).resolve().parent / "mcp_server.py"


def server_command(transport: str, log: Path, *extra: str) -> list[str]:
    return [sys.executable, str(SERVER), transport, "--log", str(log), *extra]


def write_policy(
    path: Path,
    log: Path,
    *,
    url: str | None = None,
    tools: str = 'allow = ["read", "bash", "test.*"]',
    server: str = "",
    timeout: float = 20,
    arguments: tuple[str, ...] = (),
) -> Path:
    """A policy file with the test server as `test` (stdio, started by clawgate in its sandbox
    with the work directory writable for its log; or HTTP at `url`), and `server`'s extra
    keys in its table; `arguments` added to its command line."""
    if url is None:
        table = "[mcp.stdio.test]\n"
        table += f"command = {json.dumps(server_command('stdio', log, *arguments))}\n"
        # The test Python lives under /root (pyenv), which the sandbox hides; a clone under
        # /tmp (the sandbox has its own) needs its virtualenv and this server shown too.
        shown = list(dict.fromkeys([sys.base_prefix, sys.prefix, str(SERVER.parent)]))
        table += f"expose = {json.dumps(shown)}\nwritable_workdir = true\n"
    else:
        table = f'[mcp.http.test]\nurl = "{url}"\n'
    path.write_text(f"[tools]\n{tools}\n\n{table}timeout = {timeout:g}\n{server}\n")
    return path


def calls_in(log: Path) -> list[str]:
    """What reached the server, in order."""
    return log.read_text().splitlines() if log.exists() else []


def kill_servers(log: Path, sig: signal.Signals = signal.SIGKILL) -> int:
    """SIGKILL the test server processes that write to `log` (not their bwrap): a crash; or
    send them `sig` (SIGSTOP: a server that stops answering)."""
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(SERVER).encode() in argv and str(log).encode() in argv and b"bwrap" not in argv[0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry), sig)
                killed += 1
    return killed


@dataclass
class HttpMcp:
    """A test server on streamable HTTP, in a process of the test's own."""

    log: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        self.proc = subprocess.Popen(
            [*server_command("http", self.log), "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the HTTP MCP server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.asynccontextmanager
async def http_mcp(log: Path) -> AsyncIterator[HttpMcp]:
    server = HttpMcp(log, free_port())
    await server.start()
    try:
        yield server
    finally:
        server.kill()
