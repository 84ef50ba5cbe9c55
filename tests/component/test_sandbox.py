"""The OS sandbox of the bash tool, run for real with bubblewrap: what a command that runs
without approval can and cannot reach, what an approved one gets, and the fail-closed
fallback when bwrap is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.settings import Settings, SettingsError
from bot.wiring import build_sandbox
from runtime.channel import ApprovalRequested
from runtime.models import StopReason
from runtime.providers.demo import DemoProvider
from runtime.tools.base import ToolContext
from runtime.tools.bash import BashArgs, BashTool
from runtime.tools.sandbox import (
    Access,
    NetworkAccess,
    Sandbox,
    SandboxMode,
    SandboxUnavailable,
    probe,
)
from tests.support import ADMIN, ALICE, HERE, make_runtime, working_sandbox

CANARY = "CANARY-SANDBOX-7f3a9c"


@pytest.fixture
def sandbox() -> Sandbox:
    return working_sandbox()


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it gets."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    server = Listener()
    await server.start()
    yield server
    assert server.server is not None
    server.server.close()


async def bash(
    sandbox: Sandbox,
    workdir: Path,
    command: str,
    access: Access = Access.READ_ONLY,
    timeout: float = 60.0,
) -> tuple[str, str]:
    tool = BashTool(timeout=timeout, sandbox=sandbox)
    ctx = ToolContext(session="t", workdir=workdir, access=access)
    out = await asyncio.wait_for(tool.run(BashArgs(command=command), ctx), 30)
    return out.text, out.display or ""


async def test_unapproved_commands_cannot_write_the_work_dir(
    sandbox: Sandbox, workdir: Path
) -> None:
    (workdir / "keep.txt").write_text("keep")
    text, display = await bash(sandbox, workdir, "touch pwned; rm -f keep.txt; echo x > out")
    assert sorted(p.name for p in workdir.iterdir()) == ["keep.txt"]
    assert "Read-only file system" in text
    assert "[blocked by the sandbox: read-only" in text
    assert "request_approval=true" in text  # the model is told how to ask
    assert "blocked by the sandbox: read-only" in display  # and so is the chat


async def test_a_work_directory_of_tmp_itself_still_starts_the_sandbox(sandbox: Sandbox) -> None:
    """`clawgate chat` started in /tmp: the sandbox's home is made before /tmp is bound."""
    text, _ = await bash(sandbox, Path("/tmp"), "pwd; echo started")
    assert text.split()[:2] == ["/tmp", "started"] and "[exit code 0]" in text


async def test_no_capabilities_so_no_remount_even_as_root(sandbox: Sandbox, workdir: Path) -> None:
    """Run as root, bwrap would keep every capability in its user namespace and `mount -o
    remount,rw` would undo the read-only binds (found by our red team)."""
    (workdir / ".env").write_text(f"API_TOKEN={CANARY}\n")
    text, _ = await bash(
        sandbox,
        workdir,
        "grep CapEff /proc/self/status; mount -o remount,rw,bind $PWD; touch pwned; "
        "umount .env; cat .env; unshare -r true && echo nested",
    )
    assert "CapEff:\t0000000000000000" in text
    assert not (workdir / "pwned").exists()
    assert CANARY not in text
    assert "nested" not in text.split("[exit code")[0].splitlines()  # no user namespace inside


async def test_unapproved_commands_cannot_reach_loopback(
    sandbox: Sandbox, workdir: Path, listener: Listener
) -> None:
    text, display = await bash(
        sandbox, workdir, f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo connected"
    )
    assert listener.connections == 0
    assert "connected" not in text.splitlines()[0:1]
    assert "blocked by the sandbox: no network" in display


async def test_clawgates_process_and_environment_are_invisible(
    sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWGATE_CANARY", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    pid = os.getpid()
    text, _ = await bash(
        sandbox,
        workdir,
        f"cat /proc/{pid}/environ; cat /proc/$PPID/environ; cat /proc/1/environ; "
        "cat /proc/*/environ; echo; ls /proc | grep -c '^[0-9]'; env",
    )
    assert CANARY not in text
    assert f"/proc/{pid}/environ: No such file" in text or pid <= 3
    visible = [line for line in text.splitlines() if line.strip().isdigit()]
    assert visible and int(visible[0]) <= 4  # bwrap's init, bash and its children only


async def test_home_and_host_credentials_are_hidden(
    sandbox: Sandbox, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for name in (".ssh/id_rsa", ".aws/credentials", ".netrc", ".config/gcloud/adc.json"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"{CANARY}\n")
    monkeypatch.setenv("HOME", str(home))
    text, _ = await bash(
        sandbox,
        workdir,
        f"cat {home}/.ssh/id_rsa {home}/.aws/credentials {home}/.netrc; "
        f"grep -rs {CANARY} {home} /root /home /etc/ssh; ls -A {home}; echo HOME=$HOME; ls -A ~",
    )
    assert CANARY not in text
    assert "HOME=/tmp/home" in text  # a private, empty home


async def test_secret_files_of_the_work_dir_are_masked_until_approved(
    sandbox: Sandbox, workdir: Path
) -> None:
    (workdir / ".env").write_text(f"API_TOKEN={CANARY}\n")
    (workdir / ".env.example").write_text("API_TOKEN=changeme\n")
    text, _ = await bash(sandbox, workdir, "cat .env .env.example")
    assert CANARY not in text
    assert "changeme" in text
    approved, _ = await bash(sandbox, workdir, "cat .env", Access.APPROVED)
    assert CANARY in approved


async def test_every_secret_the_judge_knows_is_masked_however_it_is_read(
    sandbox: Sandbox, workdir: Path
) -> None:
    """Commands that never name a secret (a recursive diff, a file list) read it masked: the
    sandbox masks what the judge counts as a secret, at any depth (found by our review)."""
    secrets = ("gcp-credentials.json", ".envrc", "a/b/c/d/e/.env", "deploy/.aws/config", "x.token")
    for name in secrets:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(f"{CANARY}\n")
    (workdir / "list.txt").write_text("\n".join(secrets) + "\n")
    (workdir / "list0").write_text("\0".join(secrets) + "\0")
    text, _ = await bash(
        sandbox,
        workdir,
        "diff -rN . /tmp; xargs cat < list.txt; sort --files0-from=list0; cat deploy/.aws/*",
    )
    assert CANARY not in text


async def test_approved_commands_write_the_work_dir_and_reach_the_network(
    sandbox: Sandbox, workdir: Path, listener: Listener
) -> None:
    text, _ = await bash(
        sandbox,
        workdir,
        f"touch made && exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo connected",
        Access.APPROVED,
    )
    assert (workdir / "made").exists()
    assert "connected" in text
    await asyncio.sleep(0.1)
    assert listener.connections == 1
    # Still nothing of clawgate's: its process and the host's home stay hidden.
    text, _ = await bash(sandbox, workdir, f"cat /proc/{os.getpid()}/environ", Access.APPROVED)
    assert "No such file" in text


async def test_the_network_can_be_closed_to_approved_commands_too(
    workdir: Path, listener: Listener
) -> None:
    closed = working_sandbox(NetworkAccess.NEVER)
    _, display = await bash(
        closed, workdir, f"exec 3<>/dev/tcp/127.0.0.1/{listener.port}", Access.APPROVED
    )
    assert listener.connections == 0
    assert "no network" in display


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_a_timeout_kills_everything_the_sandboxed_command_started(
    sandbox: Sandbox, workdir: Path
) -> None:
    text, _ = await bash(
        sandbox,
        workdir,
        "(sleep 0.8; touch late) & setsid sh -c 'sleep 0.8; touch escaped' & sleep 30",
        Access.APPROVED,
        timeout=0.3,
    )
    assert "timed out" in text
    await asyncio.sleep(1.3)
    assert not (workdir / "late").exists()
    assert not (workdir / "escaped").exists()  # setsid does not leave the PID namespace


def _without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("bash", "sh", "ls", "touch", "cat"):
        found = shutil.which(name)
        assert found is not None
        (bin_dir / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))


async def test_auto_without_bwrap_asks_for_every_bash_call_and_says_why(
    redis: aioredis.Redis, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_bwrap(tmp_path, monkeypatch)
    fallback = probe(SandboxMode.AUTO)
    assert not fallback.contained
    assert fallback.missing is not None and "bwrap is not installed" in fallback.missing
    runtime, channel = make_runtime(redis, workdir, DemoProvider(), sandbox=fallback)

    result = await runtime.run("nobwrap", "run: ls", ALICE, HERE)

    assert result.stop_reason is StopReason.APPROVAL_REQUIRED  # even plain `ls`
    (notice,) = [e.notice for e in channel.of(ApprovalRequested)]
    assert any("no OS sandbox" in reason for reason in notice.reasons), notice.reasons
    assert result.approval_id is not None
    await runtime.decide(result.approval_id, True, ADMIN, HERE)  # a human may still run it


def test_bwrap_mode_without_bwrap_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_bwrap(tmp_path, monkeypatch)
    with pytest.raises(SandboxUnavailable, match="bwrap is not installed"):
        probe(SandboxMode.BWRAP)
    monkeypatch.setenv("CLAWGATE_SANDBOX", "bwrap")
    with pytest.raises(SettingsError, match="CLAWGATE_SANDBOX=bwrap, but bwrap is not"):
        build_sandbox(Settings())


def test_off_is_the_explicit_opt_out() -> None:
    off = probe(SandboxMode.OFF)
    assert not off.contained and off.missing is None
    assert "clawgate's own rights" in off.describe()
    assert off.wrap(["bash", "-c", "ls"], Path("/w"), Access.READ_ONLY) == ["bash", "-c", "ls"]


async def test_through_the_runtime_only_an_approved_call_may_write(
    redis: aioredis.Redis, workdir: Path, sandbox: Sandbox
) -> None:
    runtime, _ = make_runtime(redis, workdir, DemoProvider(), sandbox=sandbox)
    # Auto-allowed: runs, read-only.
    result = await runtime.run("s-ro", "run: ls", ALICE, HERE)
    assert result.stop_reason is StopReason.FINAL
    # The model asks for write access: a human approves, then it runs writable.
    asked = await runtime.run(
        "s-rw", 'call bash {"command": "touch made", "request_approval": true}', ALICE, HERE
    )
    assert asked.stop_reason is StopReason.APPROVAL_REQUIRED and asked.approval_id
    assert not (workdir / "made").exists()
    await runtime.decide(asked.approval_id, True, ADMIN, HERE)
    assert (workdir / "made").exists()
