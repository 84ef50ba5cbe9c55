"""The bash tool: a shell command in the work directory, bounded in time, output and reach.

Each command runs in the OS sandbox (runtime.tools.sandbox) with what its call was granted:
read-only unless a human approved it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass

from pydantic import Field

from runtime.child_process import kill_group, read_capped
from runtime.metrics import SANDBOX_FAILURES
from runtime.redact import one_line
from runtime.tools.base import Effects, Tool, ToolArgs, ToolContext, ToolError, ToolOutput
from runtime.tools.git_view import READ_ONLY_CONFIG, READ_ONLY_ENV
from runtime.tools.masks import ScanTooLarge
from runtime.tools.sandbox import SANDBOX_HOME, Access, Sandbox, SandboxMode, probe

# Only these variables reach the command: the bot's own environment holds tokens and keys.
DRAIN_SECONDS = 2.0
# Longer scripts belong in a file (the write tool): the judge reads every command in
# bounded time, and a human can still read what they approve.
MAX_COMMAND_CHARS = 2_000
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")


def scrubbed_env(home: str, access: Access = Access.APPROVED) -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=home, TERM="dumb", PAGER="cat", GIT_TERMINAL_PROMPT="0")
    # git obeys the config of any bare repository it finds in the directory it runs in
    # (core.fsmonitor runs a program): only one named explicitly (--git-dir, which asks).
    # Without approval, no program a repository could configure runs either (git_view).
    config = READ_ONLY_CONFIG if access is Access.READ_ONLY else READ_ONLY_CONFIG[:1]
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for index, (key, value) in enumerate(config):
        env.update({f"GIT_CONFIG_KEY_{index}": key, f"GIT_CONFIG_VALUE_{index}": value})
    if access is Access.READ_ONLY:
        env.update(READ_ONLY_ENV)
    return env


class BashArgs(ToolArgs):
    command: str = Field(
        min_length=1,
        max_length=MAX_COMMAND_CHARS,
        description="A bash command, run in the work directory (write files with the write tool).",
    )
    timeout: float | None = Field(
        None, gt=0, description="Seconds before the command is killed (capped by the admin)."
    )
    request_approval: bool = Field(
        False,
        description=(
            "Set true when the command must change files or reach the network: a human is "
            "asked first, and once approved it runs with the work directory writable. "
            "Without approval commands run read-only."
        ),
    )


# What commands print when the sandbox refused them, and what the model is told then.
READ_ONLY_SIGNS = ("Read-only file system",)
NETWORK_SIGNS = (
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Connection refused",
)
UNIX_SOCKET_SIGNS = ("Address family not supported",)  # socket(AF_UNIX) under the filter


def sandbox_note(text: str, access: Access, sandbox: Sandbox) -> str | None:
    """What the sandbox blocked, said plainly, for a command that failed; None if nothing."""
    if not sandbox.contained:
        return None
    if access is Access.READ_ONLY and any(sign in text for sign in READ_ONLY_SIGNS):
        return "blocked by the sandbox: read-only"
    if not sandbox.allows_network(access) and any(sign in text for sign in NETWORK_SIGNS):
        return "blocked by the sandbox: no network"
    if not sandbox.allows_unix_sockets(access) and any(s in text for s in UNIX_SOCKET_SIGNS):
        return "blocked by the sandbox: no unix sockets"
    return None


@dataclass(frozen=True, slots=True)
class _Run:
    output: bytes  # the first `output_limit` bytes of stdout and stderr
    total: int  # bytes it printed
    escaped: bool  # a background child still held the pipe
    returncode: int | None  # None: timed out

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")


class BashTool(Tool[BashArgs]):
    name = "bash"
    description = "Run a bash command in the work directory; stdout and stderr are returned."
    args_model = BashArgs

    def __init__(
        self, timeout: float = 60.0, output_limit: int = 256_000, sandbox: Sandbox | None = None
    ) -> None:
        self.timeout = timeout
        self.output_limit = output_limit
        self.sandbox = sandbox if sandbox is not None else default_sandbox()

    def uncontained(self) -> str | None:
        return self.sandbox.missing

    def approved_view(self) -> str:
        return self.sandbox.view(Access.APPROVED)

    def effects(self, ctx: ToolContext) -> Effects:
        """Only a command in the read-only view with no network changes nothing (its private
        /tmp dies with it); an approved one had the work dir writable, an uncontained one
        clawgate's own rights."""
        if not self.sandbox.contained:
            return Effects("bash-uncontained", again=False)
        if ctx.access is Access.APPROVED:
            return Effects("bash-approved", again=False)
        if self.sandbox.allows_network(ctx.access):
            return Effects("bash-networked", again=False)
        return Effects("bash-sandboxed", again=True)

    async def run(self, args: BashArgs, ctx: ToolContext) -> ToolOutput:
        timeout = min(args.timeout or self.timeout, self.timeout)
        done = await self._once(args.command, timeout, ctx)
        if self.sandbox.failed(done.returncode, done.text):
            # Nothing ran. Most often a path to mask changed between the scan and the mount
            # (deleted: a read-only view cannot re-create it; or unmounted under bwrap as it
            # set the bind read-only): scanned afresh, the call is made once more.
            done = await self._once(args.command, timeout, ctx)
        if self.sandbox.failed(done.returncode, done.text):
            SANDBOX_FAILURES.labels("setup").inc()
        notes = []
        if done.total > len(done.output):
            notes.append(f"[output cut at {len(done.output)} of {done.total} bytes]")
        if done.escaped:
            notes.append("[a background process still held the output; stopped reading]")
        status, end_notes, code = self._ending(done.text, done.returncode, timeout, ctx)
        text = done.text
        body = text if text.endswith("\n") or not text else text + "\n"
        return ToolOutput(
            body + "\n".join([*notes, *end_notes]),
            display=f"$ {one_line(args.command, 80)} ({status})",
            error_code=code,
        )

    async def _argv(self, command: str, ctx: ToolContext) -> list[str]:
        """The sandboxed argv; the scan of the work directory runs in a thread."""
        try:
            return await asyncio.to_thread(
                self.sandbox.wrap, ["bash", "-c", command], ctx.workdir, ctx.access
            )
        except ScanTooLarge as exc:
            SANDBOX_FAILURES.labels("scan_too_large").inc()
            raise ToolError(
                f"not run: {exc}, so it cannot run without approval; call bash again with "
                "request_approval=true to ask a human",
                "sandbox_failed",
            ) from None

    async def _once(self, command: str, seconds: float, ctx: ToolContext) -> _Run:
        argv = await self._argv(command, ctx)
        # Our own pipe rather than PIPE: asyncio's Process.wait() would also wait for the pipe
        # to close, i.e. for any background child still holding it.
        read_fd, write_fd = os.pipe()
        home = SANDBOX_HOME if self.sandbox.contained else str(ctx.workdir)
        spawning = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                cwd=ctx.workdir,
                # bwrap's own environment is visible inside: scrubbed
                env=scrubbed_env(home, ctx.access),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,  # its own process group, so we can kill all of it
            )
        )
        try:
            # Shielded: a cancellation while the process is being made (it may already run
            # and start children) still gets its group, to kill it.
            proc = await asyncio.shield(spawning)
        except BaseException:
            os.close(read_fd)
            with contextlib.suppress(Exception):  # cancelled: the process may run already
                made = await spawning
                kill_group(made.pid)
                await made.wait()
            raise
        finally:
            os.close(write_fd)
        timed_out = False
        pipe: asyncio.ReadTransport | None = None
        reader: asyncio.Task[tuple[bytes, int]] | None = None
        try:
            stream = asyncio.StreamReader()
            pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
            )
            reader = asyncio.create_task(read_capped(stream, self.output_limit))
            await asyncio.wait_for(proc.wait(), seconds)
        except TimeoutError:
            timed_out = True
        except BaseException:  # cancelled (or the pipe failed): nothing it started outlives it
            kill_group(proc.pid)
            if pipe is not None:
                pipe.close()
            if reader is not None:
                reader.cancel()
            await asyncio.shield(proc.wait())
            raise
        assert pipe is not None and reader is not None
        # Also after a normal exit: nothing the command started in the background outlives it.
        kill_group(proc.pid)
        await proc.wait()
        escaped = False
        try:
            # A child that left the group (setsid) may still hold the pipe: stop reading soon.
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
        except TimeoutError:
            escaped = True
            pipe.close()  # feeds EOF to the reader
        output, total = await reader
        returncode = None if timed_out else proc.returncode
        return _Run(output, total, escaped, returncode)

    def _ending(
        self, text: str, returncode: int | None, timeout: float, ctx: ToolContext
    ) -> tuple[str, list[str], str | None]:
        """How the command ended (None: timed out), as a short status and notes for the model
        (what the sandbox refused is said plainly, so that the model can ask for approval),
        and the error code of a timeout or of the sandbox's refusal."""
        if returncode is None:
            note = f"[timed out after {timeout:g}s; the process group was killed]"
            return "timed out", [note], "timeout"
        status, notes = f"exit {returncode}", [f"[exit code {returncode}]"]
        blocked = None if returncode == 0 else sandbox_note(text, ctx.access, self.sandbox)
        if blocked is None:
            return status, notes, None
        status += f"; {blocked}"
        if blocked.endswith("unix sockets") and not self.sandbox.allows_unix_sockets(
            Access.APPROVED
        ):
            notes.append(
                f"[{blocked}: sandboxed commands cannot connect to unix sockets here (docker, "
                "a local database), approved or not; the admin's CLAWGATE_SANDBOX_UNIX_SOCKETS "
                "setting decides]"
            )
        else:
            notes.append(
                f"[{blocked}: commands that run without approval cannot change files or reach "
                "the network; call bash again with request_approval=true to ask a human]"
            )
        return status, notes, "sandbox_blocked"

    def summarize(self, args: BashArgs) -> str:
        return f"$ {one_line(args.command, 80)}"


_default: Sandbox | None = None


def default_sandbox() -> Sandbox:
    """`auto`, probed once per process: for tools built without explicit settings."""
    global _default  # noqa: PLW0603 - one probe per process
    if _default is None:
        _default = probe(SandboxMode.AUTO)
    return _default
