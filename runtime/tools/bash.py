"""The bash tool: a shell command in the work directory, bounded in time, output and reach."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from pydantic import Field

from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput, one_line

# Only these variables reach the command: the bot's own environment holds tokens and keys.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")


def scrubbed_env(home: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=home, TERM="dumb", PAGER="cat", GIT_TERMINAL_PROMPT="0")
    return env


class BashArgs(ToolArgs):
    command: str = Field(min_length=1, description="A bash command, run in the work directory.")
    timeout: float | None = Field(
        None, gt=0, description="Seconds before the command is killed (capped by the admin)."
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    """Keep the first `cap` bytes, drain (and count) the rest so the child never blocks."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept), total


class BashTool(Tool[BashArgs]):
    name = "bash"
    description = "Run a bash command in the work directory; stdout and stderr are returned."
    args_model = BashArgs

    def __init__(self, timeout: float = 60.0, output_limit: int = 256_000) -> None:
        self.timeout = timeout
        self.output_limit = output_limit

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolOutput:
        timeout = min(args.timeout or self.timeout, self.timeout)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            args.command,
            cwd=ctx.workdir,
            env=scrubbed_env(str(ctx.workdir)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group, so we can kill all of it
        )
        assert proc.stdout is not None
        reader = asyncio.create_task(_read_capped(proc.stdout, self.output_limit))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            reader.cancel()
            raise
        # Also after a normal exit: nothing the command started in the background outlives it.
        _kill_group(proc.pid)
        await proc.wait()
        output, total = await reader
        text = output.decode("utf-8", errors="replace")
        notes = []
        if total > len(output):
            notes.append(f"[output cut at {len(output)} of {total} bytes]")
        if timed_out:
            notes.append(f"[timed out after {timeout:g}s; the process group was killed]")
        else:
            notes.append(f"[exit code {proc.returncode}]")
        body = text if text.endswith("\n") or not text else text + "\n"
        status = "timed out" if timed_out else f"exit {proc.returncode}"
        return ToolOutput(
            body + "\n".join(notes), display=f"$ {one_line(args.command, 80)} ({status})"
        )

    def summarize(self, args: BashArgs) -> str:
        return f"$ {one_line(args.command, 80)}"
