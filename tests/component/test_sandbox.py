"""The OS sandbox of the bash tool, run for real with bubblewrap: what a command that runs
without approval can and cannot reach, what an approved one gets, and the fail-closed
fallback when bwrap is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from mcp.client.stdio import StdioServerParameters
from prometheus_client import REGISTRY

from bot.settings import Settings, SettingsError
from bot.wiring import build_sandbox
from runtime.channel import ApprovalRequested
from runtime.mcp.config import StdioServer
from runtime.mcp.launch import stdio_parameters
from runtime.models import StopReason
from runtime.providers.demo import DemoProvider
from runtime.tools import masks
from runtime.tools.base import ToolContext, ToolError
from runtime.tools.bash import BashArgs, BashTool
from runtime.tools.sandbox import (
    Access,
    NetworkAccess,
    Sandbox,
    SandboxMode,
    SandboxUnavailable,
    UnixSockets,
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


def contained(mode: SandboxMode) -> float | None:
    return REGISTRY.get_sample_value("clawgate_sandbox_contained", {"mode": mode.value})


def failures(reason: str) -> float:
    return REGISTRY.get_sample_value("clawgate_sandbox_failures_total", {"reason": reason}) or 0


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
    assert not fallback.contained and contained(SandboxMode.AUTO) == 0  # the alert's gauge
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
    assert not off.contained and off.missing is None and contained(SandboxMode.OFF) == 0
    working_sandbox()
    assert contained(SandboxMode.BWRAP) == 1
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


@pytest.fixture
def outside() -> Iterator[list[Path]]:
    """Canary trees outside the work dir, where hosts keep data: /srv, /opt, another home,
    /var, /mnt (made for the test, removed after)."""
    made = []
    for parent in ("/srv", "/opt", "/home", "/var/tmp", "/mnt"):
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            continue
        root = Path(tempfile.mkdtemp(prefix="cg-canary-", dir=parent))
        (root / "app").mkdir()
        (root / ".env").write_text(f"TOKEN={CANARY}\n")
        (root / "app" / "notes.txt").write_text(f"{CANARY}\n")
        made.append(root)
    assert made, "no writable host directory to plant canaries in"
    yield made
    for root in made:
        shutil.rmtree(root, ignore_errors=True)


async def test_unapproved_commands_see_only_the_system_and_the_work_dir(
    sandbox: Sandbox, workdir: Path, outside: list[Path]
) -> None:
    """A recursive read of the host printed other checkouts' `.env` files (issue 27)."""
    (workdir / "notes.txt").write_text("mine\n")
    reads = " ".join(f"cat {root}/.env {root}/app/notes.txt;" for root in outside)
    text, _ = await bash(
        sandbox,
        workdir,
        f"{reads} grep -rs {CANARY} /srv /opt /home /var /mnt /media /root /run /tmp; "
        "ls -A /srv /opt /home /var /run /mnt; cat notes.txt; git --version; "
        "python3 -c 'print(6 * 7)'; ls /bin/sh /usr/bin/env /etc/passwd; echo $HOME",
    )
    assert CANARY not in text
    assert "mine" in text and "git version" in text and "42" in text
    assert "/etc/passwd" in text and "/tmp/home" in text
    listed, _ = await bash(sandbox, workdir, "ls -A /srv /opt /home /var /run /mnt /media")
    assert "cg-canary" not in listed
    # An approved command still sees the host read-only, as the human agreed to.
    approved, _ = await bash(sandbox, workdir, f"cat {outside[0]}/app/notes.txt", Access.APPROVED)
    assert CANARY in approved


async def test_etc_secrets_are_masked_and_the_rest_of_etc_stays(
    sandbox: Sandbox, workdir: Path
) -> None:
    text, _ = await bash(
        sandbox, workdir, "wc -c < /etc/shadow; ls -A /etc/ssh | wc -l; id -un; head -1 /etc/passwd"
    )
    lines = text.splitlines()
    assert lines[0] == "0" and lines[1] == "0"  # an empty file and an empty directory
    assert lines[3].startswith("root:")


async def test_secrets_are_masked_in_every_directory_at_any_depth(
    sandbox: Sandbox, workdir: Path
) -> None:
    """node_modules, .venv and .git were skipped, and depth was bounded at eight (issue 27)."""
    deep = "/".join("d" * 12)
    secrets = ("node_modules/pkg/.env", ".venv/.env", f"{deep}/key.pem", ".git-credentials")
    for name in secrets:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text(f"{CANARY}\n")
    text, _ = await bash(
        sandbox,
        workdir,
        f"cat {' '.join(secrets)}; grep -rs {CANARY} .; stat -c %F {' '.join(secrets)}",
    )
    assert CANARY not in text
    # Masked by an empty regular file, not a device (which breaks `git diff --stat`).
    assert text.count("regular empty file") == len(secrets), text


async def test_git_config_urls_lose_their_credentials_and_git_still_works(
    sandbox: Sandbox, workdir: Path
) -> None:
    """`git remote -v` put a github_pat_ token into the thread (issue 27)."""
    token = f"github_pat_{CANARY}"
    _git(workdir, "init", "-q")
    _git(workdir, "remote", "add", "origin", f"https://{token}@github.com/a/b.git")
    _git(workdir, "remote", "add", "mirror", f"https://bot:{token}@example.com/b.git")
    _git(workdir, "remote", "add", "box", f"ssh://git:{token}@example.com/b.git")
    _git(workdir, "config", "user.name", "Dev")
    (workdir / "app.py").write_text("print(1)\n")
    (workdir / ".env").write_text(f"TOKEN={CANARY}\n")  # tracked, as some projects do
    _git(workdir, "add", ".")
    _git(workdir, "commit", "-qm", "init")
    (workdir / "app.py").write_text("print(2)\n")
    text, _ = await bash(
        sandbox,
        workdir,
        "git remote -v; cat .git/config; git config user.name; git status --short; "
        "git diff --stat -- app.py; git log --oneline | wc -l",
    )
    assert CANARY not in text and "github_pat_" not in text
    assert "https://github.com/a/b.git (fetch)" in text
    assert "https://example.com/b.git" in text and "ssh://git@example.com/b.git" in text
    assert "Dev" in text and "M app.py" in text and "app.py | 2 +-" in text
    assert "unsupported file type" not in text and "[exit code 0]" in text
    approved, _ = await bash(sandbox, workdir, "git remote -v", Access.APPROVED)
    assert token in approved  # the file itself is untouched


def _git(workdir: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", *args], cwd=workdir, check=True)


PROGRAMS = {
    # key: a program that says it ran (on stderr, or in the diff git prints)
    "core.fsmonitor": "sh -c 'echo RAN-fsmonitor >&2'",
    "diff.external": "sh -c 'echo RAN-external'",
    "diff.x.textconv": "sh -c 'echo RAN-textconv'",
    "filter.f.clean": "sh -c 'echo RAN-clean >&2; cat'",
    "filter.f.smudge": "sh -c 'echo RAN-smudge >&2; cat'",
    "core.pager": "sh -c 'echo RAN-pager'",
    "gpg.program": "sh -c 'echo RAN-gpg >&2'",
    "log.showSignature": "true",
    "alias.st": "!echo RAN-alias",
}


async def test_git_runs_no_program_the_repository_configures_without_approval(
    sandbox: Sandbox, workdir: Path
) -> None:
    _git(workdir, "init", "-q")
    (workdir / ".gitattributes").write_text("*.txt diff=x filter=f\n")
    (workdir / "a.txt").write_text("one\n")
    _git(workdir, "add", ".")
    _git(workdir, "-c", "user.name=t", "commit", "-qm", "init")
    (workdir / "a.txt").write_text("two\n")
    # Also through a file the config includes, and a hook where hooksPath points.
    (workdir / "extra.cfg").write_text("[core]\n\tfsmonitor = sh -c 'echo RAN-include >&2'\n")
    for key, value in PROGRAMS.items():
        _git(workdir, "config", key, value)
    _git(workdir, "config", "include.path", str(workdir / "extra.cfg"))
    hook = workdir / ".git" / "hooks" / "post-index-change"
    hook.write_text("#!/bin/sh\necho RAN-hook >&2\n")
    hook.chmod(0o755)
    command = "git status; git diff; git log -p; git show; git st; ls -A .git/hooks"
    text, _ = await bash(sandbox, workdir, command)
    assert "RAN-" not in text, text
    assert "-one" in text and "+two" in text  # the plain diff still shows
    # The same commands approved run them: the test would see it if they ran.
    approved, _ = await bash(sandbox, workdir, command, Access.APPROVED)
    assert "RAN-textconv" in approved and "RAN-alias" in approved


class UnixListener:
    """A unix socket server (a path, or an abstract name) that counts its connections."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> UnixListener:
        def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self.server = await asyncio.start_unix_server(accept, self.path)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    def client(self) -> str:
        """A command that connects to it (python: present wherever the tests run)."""
        code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({self.path!r})"
        code += "; print('UP')"
        return f'python3 -c "{code}"'


async def test_unapproved_commands_cannot_connect_to_a_unix_socket(
    sandbox: Sandbox, workdir: Path
) -> None:
    """`redis-cli -s` wrote to a host Redis through a socket file (issue 27)."""
    async with UnixListener(str(workdir / "redis.sock")) as server:
        text, display = await bash(sandbox, workdir, server.client())
        await asyncio.sleep(0.1)
        assert server.connections == 0
        assert "Address family not supported" in text
        assert "blocked by the sandbox: no unix sockets" in display
        assert "approved or not" in text  # asking would not help: the admin's setting
        approved, _ = await bash(sandbox, workdir, server.client(), Access.APPROVED)
        await asyncio.sleep(0.1)
        assert server.connections == 0  # CLAWGATE_SANDBOX_UNIX_SOCKETS=never (the default)
        allowed = working_sandbox(unix_sockets=UnixSockets.APPROVED)
        approved, _ = await bash(allowed, workdir, server.client(), Access.APPROVED)
        await asyncio.sleep(0.1)
        assert "UP" in approved and server.connections == 1
        # Still never for a command without the network, approved or not.
        await bash(allowed, workdir, server.client())
        closed = working_sandbox(NetworkAccess.NEVER, UnixSockets.APPROVED)
        await bash(closed, workdir, server.client(), Access.APPROVED)
        await asyncio.sleep(0.1)
        assert server.connections == 1


async def test_host_sockets_and_abstract_ones_stay_out_of_reach_of_approved_commands(
    workdir: Path,
) -> None:
    """Sockets outside the work dir (where docker.sock lives) and abstract ones, which the
    host's network namespace shares with an approved command that has the network."""
    run = Path(
        tempfile.mkdtemp(prefix="cg-sock-", dir="/run" if os.access("/run", os.W_OK) else None)
    )
    try:
        async with (
            UnixListener(str(run / "docker.sock")) as host,
            UnixListener(f"\0cg-abstract-{os.getpid()}") as abstract,
        ):
            for sandbox, expected in (
                (working_sandbox(), 0),
                (working_sandbox(unix_sockets=UnixSockets.APPROVED), 1),
            ):
                for server in (host, abstract):
                    await bash(sandbox, workdir, server.client(), Access.APPROVED)
                    await asyncio.sleep(0.1)
                    assert server.connections == expected, (sandbox.unix_sockets, server.path)
    finally:
        shutil.rmtree(run, ignore_errors=True)


async def test_a_secret_deleted_between_calls_or_during_one_breaks_nothing(
    sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting `.aws` made the next unapproved call fail "blocked by the sandbox": the scan
    was cached for 5 s (issue 27). Each call scans afresh; a path gone between the scan and
    bwrap's mount is scanned again."""
    (workdir / ".aws").mkdir()
    (workdir / ".aws" / "credentials").write_text(CANARY)
    first, _ = await bash(sandbox, workdir, "ls -A")
    shutil.rmtree(workdir / ".aws")
    (workdir / ".env").write_text(CANARY)  # and a new one appears
    second, display = await bash(sandbox, workdir, "ls -A; cat .env")
    assert ".aws" in first and ".aws" not in second and CANARY not in second
    assert "[exit code 0]" in second and "blocked" not in display
    real = masks.work_dir_masks
    stale = iter([masks.Masks(files=(str(workdir / "gone.env"),), dirs=(str(workdir / "gone"),))])

    def once_stale(root: Path, sources: masks.MaskSources, etc: Iterable[str]) -> masks.Masks:
        return next(stale, None) or real(root, sources, etc)

    monkeypatch.setattr(masks, "work_dir_masks", once_stale)
    text, _ = await bash(sandbox, workdir, "echo ran")
    assert text.startswith("ran\n") and "[exit code 0]" in text


async def test_a_work_dir_too_large_to_scan_fails_closed_and_says_why(
    sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(masks, "MAX_ENTRIES", 20)
    for index in range(30):
        (workdir / f"f{index}").write_text("x")
    before = failures("scan_too_large")
    with pytest.raises(ToolError, match=r"too many to mask every secret.*request_approval=true"):
        await bash(sandbox, workdir, "cat f1")
    assert failures("scan_too_large") == before + 1
    approved, _ = await bash(sandbox, workdir, "cat f1", Access.APPROVED)
    assert approved.startswith("x")  # a human may still run it


async def test_a_bwrap_that_fails_before_the_command_runs_is_counted(
    sandbox: Sandbox, workdir: Path, tmp_path: Path
) -> None:
    """bwrap failing at run time (user namespaces turned off after the start) shows in
    `clawgate_sandbox_failures_total{reason="setup"}`; a command failing on its own does not."""
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\n"
        "exit 1\n"
    )
    broken.chmod(0o755)
    before = failures("setup")
    text, _ = await bash(Sandbox(SandboxMode.BWRAP, bwrap=str(broken)), workdir, "echo ran")
    assert text.startswith("bwrap: Creating new namespace failed") and "ran\n" not in text
    assert failures("setup") == before + 1
    text, _ = await bash(sandbox, workdir, "echo 'bwrap: no' >&2; ls /nowhere")
    assert "[exit code 2]" in text
    assert failures("setup") == before + 1


def flaky_bwrap(sandbox: Sandbox, place: Path) -> tuple[Path, Path]:
    """A bwrap at `place`/bwrap that fails its first call as bwrap did in CI, when a security
    test removed its planted /etc/cg-…/app/.env while bwrap bound over it, then runs the real
    one; and the file that counts its calls, a line each."""
    assert sandbox.bwrap is not None
    tries, flaky = place / "tries", place / "bwrap"
    said = (
        "bwrap: Can't bind mount /oldroot/tmp/e on /newroot/etc/cg-1/app/.env: Unable to remount "
        'destination \\"/newroot/etc/cg-1/app/.env\\" with correct flags: Invalid argument'
    )
    flaky.write_text(
        f'#!/bin/sh\necho x >> {tries}\nif [ "$(wc -l < {tries})" = 1 ]; then\n'
        f'echo "{said}" >&2\nexit 1\nfi\nexec {sandbox.bwrap} "$@"\n'
    )
    flaky.chmod(0o755)
    return flaky, tries


async def test_a_secret_deleted_under_bwrap_as_it_mounts_costs_one_more_try(
    sandbox: Sandbox, workdir: Path, tmp_path: Path
) -> None:
    """bwrap failed before running anything: the call is scanned afresh and made once more."""
    flaky, tries = flaky_bwrap(sandbox, tmp_path)
    text, _ = await bash(Sandbox(SandboxMode.BWRAP, bwrap=str(flaky)), workdir, "echo ran")
    assert text == "ran\n[exit code 0]"
    assert len(tries.read_text().splitlines()) == 2


def test_a_probe_that_meets_a_secret_deleted_under_bwrap_tries_once_more(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At start the same race would leave clawgate without its sandbox (every call asking)."""
    _, tries = flaky_bwrap(sandbox, tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert probe(SandboxMode.AUTO).contained
    assert len(tries.read_text().splitlines()) == 2


async def test_a_secret_deleted_between_the_scan_and_the_mount_twice_is_shown(
    sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path to mask gone both times (a read-only view cannot re-create it): one retry, on a
    fresh scan, then the chat sees bwrap's words and the failure is counted."""
    real = masks.work_dir_masks
    scans: list[Path] = []

    def scan(root: Path, sources: masks.MaskSources, outside: Iterable[str] = ()) -> masks.Masks:
        scans.append(root)
        found = real(root, sources, outside)
        return masks.Masks((*found.files, str(root / "gone.env")), found.dirs, found.git_configs)

    monkeypatch.setattr(masks, "work_dir_masks", scan)
    before = failures("setup")
    text, _ = await bash(sandbox, workdir, "echo ran")
    assert text.startswith("bwrap: Can't create file at") and "ran\n" not in text
    assert len(scans) == 2
    assert failures("setup") == before + 1


def test_the_view_of_each_access_in_a_line(sandbox: Sandbox) -> None:
    assert sandbox.view(Access.APPROVED) == (
        "runs with the host read-only (credential stores hidden), work dir writable, network on"
    )
    assert "no network" in sandbox.view(Access.READ_ONLY)
    assert "secrets masked" in sandbox.view(Access.READ_ONLY)
    never = working_sandbox(NetworkAccess.NEVER)
    assert never.view(Access.APPROVED).endswith("work dir writable, no network")
    sockets = working_sandbox(unix_sockets=UnixSockets.APPROVED)
    assert sockets.view(Access.APPROVED).endswith("network on, unix sockets on")


async def test_hard_links_and_a_git_dir_under_another_name_show_no_secret(
    sandbox: Sandbox, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approved `tar -xf` planted `docs/guide.md` as a hard link to `.git/config`
    (issue 27); a hard link to clawgate's own AWS credentials; a symlink `.git -> realgit`
    hides a repository's directory by its name."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"{CANARY}\n")
    monkeypatch.setenv("HOME", str(home))
    os.link(home / ".aws" / "credentials", workdir / "keys.txt")
    _git(workdir, "init", "-q")
    _git(workdir, "remote", "add", "origin", f"https://{CANARY}@example.com/x.git")
    (workdir / ".env").write_text(f"{CANARY}\n")
    (workdir / "docs").mkdir()
    os.link(workdir / ".git" / "config", workdir / "docs" / "guide.md")
    os.link(workdir / ".env", workdir / "docs" / "notes.txt")
    sub = workdir / "sub"
    sub.mkdir()
    _git(sub, "init", "-q")
    _git(sub, "config", "core.fsmonitor", "sh -c 'echo RAN-fsmonitor >&2'")
    (sub / ".git").rename(sub / "realgit")
    (sub / ".git").symlink_to("realgit")
    text, _ = await bash(
        sandbox, workdir, "cat keys.txt docs/guide.md docs/notes.txt; cd sub && git status -s"
    )
    assert CANARY not in text and "RAN-" not in text, text
    approved, _ = await bash(
        sandbox, workdir, "cat keys.txt; cd sub && git status -s", Access.APPROVED
    )
    assert CANARY in approved and "RAN-fsmonitor" in approved  # they are real


async def test_an_mcp_stdio_server_without_network_cannot_reach_a_unix_socket(
    sandbox: Sandbox, workdir: Path
) -> None:
    """The MCP SDK spawns a server from its argv alone: the filter reaches it too."""
    async with UnixListener(str(workdir / "app.sock")) as server:
        for network in (False, True):  # with the network too, unless the admin allows them
            config = StdioServer(command=["sh", "-c", server.client()], network=network)
            said = await _start(stdio_parameters(config, sandbox, workdir))
            assert server.connections == 0, said
            assert "Address family not supported" in said
        allowed = working_sandbox(unix_sockets=UnixSockets.APPROVED)
        config = StdioServer(command=["sh", "-c", server.client()], network=True)
        said = await _start(stdio_parameters(config, allowed, workdir))
        assert server.connections == 1, said


async def _start(params: StdioServerParameters) -> str:
    """Run a stdio server's argv as the SDK would, to its end; what it printed."""
    proc = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        env=params.env,
        cwd=params.cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said, _ = await asyncio.wait_for(proc.communicate(), 30)
    await asyncio.sleep(0.1)  # a connection in flight lands
    return said.decode(errors="replace")


async def test_a_work_dir_reached_through_a_symlink_is_masked_too(
    sandbox: Sandbox, workdir: Path
) -> None:
    (workdir / ".env").write_text(f"{CANARY}\n")
    link = workdir.parent / "link"
    link.symlink_to(workdir)
    text, _ = await bash(sandbox, link, "cat .env; pwd")
    assert CANARY not in text and str(link) in text


async def test_clawgates_own_settings_file_is_hidden_from_every_command(workdir: Path) -> None:
    """The settings file holds the platform tokens and model keys: wherever the operator keeps
    it (under /etc, which unapproved commands see; under /srv, which approved ones see), no
    sandboxed command reads it, approved or not."""
    places = [Path(tempfile.mkdtemp(prefix="cg-settings-", dir=root)) for root in ("/etc", "/srv")]
    try:
        files = []
        for place in places:
            place.chmod(0o755)
            (place / "env").write_text(f"SLACK_BOT_TOKEN={CANARY}\n")
            (place / "env").chmod(0o644)  # world-readable: not masked as an unreadable file
            files.append(str(place / "env"))
        plain = working_sandbox()
        seen, _ = await bash(plain, workdir, f"cat {files[0]}")
        assert CANARY in seen  # the file is really readable without the rule
        sandbox = probe(SandboxMode.BWRAP, hidden=files)
        for access in Access:
            text, _ = await bash(sandbox, workdir, f"cat {' '.join(files)}; echo done", access)
            assert CANARY not in text and "done" in text
    finally:
        for place in places:
            shutil.rmtree(place, ignore_errors=True)
