"""The bash tool: a shell command in the work directory, bounded in time, output and reach."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from pydantic import Field

from runtime.tools.base import Tool, ToolArgs, ToolContext, ToolOutput, one_line

# Only these variables reach the command: the bot's own environment holds tokens and keys.
DRAIN_SECONDS = 2.0
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")


def scrubbed_env(home: str) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=home, TERM="dumb", PAGER="cat", GIT_TERMINAL_PROMPT="0")
    return env


class BashArgs(ToolArgs):
    command: str = Field(
        min_length=1, max_length=16_000, description="A bash command, run in the work directory."
    )
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
        # Our own pipe rather than PIPE: asyncio's Process.wait() would also wait for the pipe
        # to close, i.e. for any background child still holding it.
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                args.command,
                cwd=ctx.workdir,
                env=scrubbed_env(str(ctx.workdir)),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,  # its own process group, so we can kill all of it
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        stream = asyncio.StreamReader()
        pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
        )
        reader = asyncio.create_task(_read_capped(stream, self.output_limit))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            pipe.close()
            reader.cancel()
            await asyncio.shield(proc.wait())
            raise
        # Also after a normal exit: nothing the command started in the background outlives it.
        _kill_group(proc.pid)
        await proc.wait()
        escaped = False
        try:
            # A child that left the group (setsid) may still hold the pipe: stop reading soon.
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
        except TimeoutError:
            escaped = True
            pipe.close()  # feeds EOF to the reader
        output, total = await reader
        text = output.decode("utf-8", errors="replace")
        notes = []
        if total > len(output):
            notes.append(f"[output cut at {len(output)} of {total} bytes]")
        if escaped:
            notes.append("[a background process still held the output; stopped reading]")
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
