"""The OS boundary of the bash tool: a bubblewrap (`bwrap`) sandbox per command.

The risk judge only decides when to ask a human; what a command can reach is decided here.
A command that runs without approval gets a read-only view of the system with no network,
its own PID namespace and /proc (clawgate's process and environment invisible), a minimal
/dev, an empty private HOME and /tmp, and the host's credential stores hidden. An approved
command gets exactly one more thing: the work directory writable (and the network when the
settings say so); it still never sees clawgate's process or credentials.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runtime.risk.secrets import secret_location

log = logging.getLogger(__name__)


class SandboxMode(StrEnum):
    AUTO = "auto"  # bwrap when it works; otherwise every bash call asks
    BWRAP = "bwrap"  # bwrap or refuse to start
    OFF = "off"  # the explicit opt-out: commands run with clawgate's own rights


class NetworkAccess(StrEnum):
    APPROVED = "approved"  # approved commands only
    NEVER = "never"
    ALWAYS = "always"  # auto-allowed commands too (a weaker setting)


class Access(StrEnum):
    """What a call was granted: set by the approval middleware, read-only unless a human
    approved the call (once, or by an "always" rule)."""

    READ_ONLY = "read-only"
    APPROVED = "approved"


SANDBOX_HOME = "/tmp/home"  # noqa: S108 - on the sandbox's own private /tmp
# Hidden whatever the call: where hosts and containers keep credentials.
HIDDEN_DIRS = (
    "/root",
    "/home",
    "/etc/ssh",
    "/etc/ssl/private",
    "/run/secrets",
    "/var/run/secrets",
    "/var/lib/redis",
)
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
# Credential stores inside any home-like directory (clawgate's HOME, or a work directory that
# happens to be one).
CREDENTIAL_DIRS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".password-store",
)
CREDENTIAL_FILES = (
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".vault-token",
    ".docker/config.json",
)
# Secrets of the work directory, masked for commands that run without approval: whatever the
# judge counts as a secret (runtime.risk.secrets), so that what it would ask about by name
# cannot be read by a command that never names it (`diff -r . /tmp`, `xargs cat < list`).
MASK_DEPTH = 8  # directory levels of the work directory searched
MASK_SCAN_LIMIT = 20_000  # entries looked at, at most
MASK_CACHE_SECONDS = 5.0  # a scan serves the calls of a few seconds (secrets pre-exist)
SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox"})
_scans: dict[Path, tuple[float, tuple[list[Path], list[Path]]]] = {}


def secret_paths(workdir: Path) -> tuple[list[Path], list[Path]]:
    """(secret files, secret directories) in the work directory (bounded scan, cached)."""
    now = time.monotonic()
    cached = _scans.get(workdir)
    if cached is not None and now - cached[0] < MASK_CACHE_SECONDS:
        return cached[1]
    files: list[Path] = []
    dirs: list[Path] = []
    pending = [(workdir, 0)]
    seen = 0
    while pending and seen < MASK_SCAN_LIMIT:
        directory, depth = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            relative = os.path.relpath(entry.path, workdir)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir and secret_location(relative + "/x"):
                    dirs.append(Path(entry.path))  # .ssh, .aws, .config/gh ...: all of it
                elif is_dir and depth + 1 < MASK_DEPTH and entry.name not in SKIPPED_DIRS:
                    pending.append((Path(entry.path), depth + 1))
                elif entry.is_file(follow_symlinks=False) and secret_location(relative):
                    files.append(Path(entry.path))
            except OSError:
                continue
    result = (files, dirs)
    _scans[workdir] = (now, result)
    return result


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How bash commands are contained in this process (see `probe`)."""

    mode: SandboxMode
    bwrap: str | None = None  # a bwrap that works, or None: commands run uncontained
    problem: str | None = None  # why `auto` found no working bwrap
    network: NetworkAccess = NetworkAccess.APPROVED

    @property
    def contained(self) -> bool:
        return self.bwrap is not None

    @property
    def missing(self) -> str | None:
        """Why an unapproved command may not run here, or None: with `auto` and no working
        bwrap, nothing runs without a human (fail closed)."""
        if self.mode is SandboxMode.AUTO and self.bwrap is None:
            return f"no OS sandbox to run it read-only ({self.problem}); every bash call asks"
        return None

    def describe(self) -> str:
        if self.bwrap is not None:
            return f"bwrap ({self.bwrap}), network for {self.network.value} commands"
        if self.mode is SandboxMode.OFF:
            return "off (CLAWGATE_SANDBOX=off): commands run with clawgate's own rights"
        return f"unavailable ({self.problem}): every bash call asks"

    def allows_network(self, access: Access) -> bool:
        if self.network is NetworkAccess.ALWAYS:
            return True
        return self.network is NetworkAccess.APPROVED and access is Access.APPROVED

    def wrap(
        self,
        argv: list[str],
        workdir: Path,
        access: Access,
        network: bool | None = None,
        expose: Sequence[str] = (),
    ) -> list[str]:
        """`argv` as run in the sandbox for a call with `access` (unchanged when off).
        `network`: whether it gets the network, when not as `access` says (an MCP server's
        own setting; CLAWGATE_SANDBOX_NETWORK=never still wins); `expose`: directories under
        the hidden ones to show read-only (an MCP server installed in a home directory)."""
        if self.bwrap is None:
            return argv
        return [self.bwrap, *self.arguments(workdir, access, network, expose), "--", *argv]

    def arguments(
        self,
        workdir: Path,
        access: Access,
        network: bool | None = None,
        expose: Sequence[str] = (),
    ) -> list[str]:
        args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # A private, empty /tmp with the home in it, made before the work directory is bound
        # (which may be /tmp itself, read-only).
        args += ["--tmpfs", "/tmp", "--dir", SANDBOX_HOME]  # noqa: S108
        # No capabilities (run as root, bwrap would keep them all in its user namespace, and
        # `mount -o remount,rw` would undo every read-only bind) and no nested namespaces.
        args += ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session"]
        if network is None:
            network = self.allows_network(access)
        if network and self.network is not NetworkAccess.NEVER:
            args.append("--share-net")
        home = Path.home()
        for directory in (*HIDDEN_DIRS, str(home)):
            if os.path.isdir(directory) and directory != "/":
                args += ["--tmpfs", directory]
        args += _hide_files(HIDDEN_FILES)
        for path in expose:  # read-only, their credential stores hidden again
            args += ["--ro-bind", path, path, *_hide_credentials(Path(path))]
        args += ["--bind" if access is Access.APPROVED else "--ro-bind", str(workdir), str(workdir)]
        # The work directory may itself be a home (or hold one's credential stores).
        args += _hide_credentials(workdir)
        if access is Access.READ_ONLY:
            files, dirs = secret_paths(workdir)
            args += _hide_files(str(path) for path in files)
            for secret_dir in dirs:
                args += ["--tmpfs", str(secret_dir)]
        args += ["--chdir", str(workdir)]
        return args


def _hide_files(paths: Iterable[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _hide_credentials(root: Path) -> list[str]:
    args: list[str] = []
    for name in CREDENTIAL_DIRS:
        if (root / name).is_dir():
            args += ["--tmpfs", str(root / name)]
    args += _hide_files(str(root / name) for name in CREDENTIAL_FILES)
    return args


def probe(mode: SandboxMode, network: NetworkAccess = NetworkAccess.APPROVED) -> Sandbox:
    """Find out once, at start, whether bwrap works here. `bwrap` mode raises when it does
    not (the operator asked for it); `auto` falls back to asking for every call."""
    if mode is SandboxMode.OFF:
        return Sandbox(mode, network=network)
    binary = shutil.which("bwrap")
    problem = "bwrap is not installed" if binary is None else _try(binary)
    if problem is None:
        return Sandbox(mode, bwrap=binary, network=network)
    if mode is SandboxMode.BWRAP:
        raise SandboxUnavailable(f"CLAWGATE_SANDBOX=bwrap, but {problem}")
    log.warning("no OS sandbox for bash (%s): every bash call will ask for approval", problem)
    return Sandbox(mode, problem=problem, network=network)


class SandboxUnavailable(RuntimeError):
    """CLAWGATE_SANDBOX=bwrap on a machine where bwrap cannot run."""


def _try(binary: str) -> str | None:
    """None if a read-only sandbox starts here, else why not (bwrap's own words)."""
    sandbox = Sandbox(SandboxMode.BWRAP, bwrap=binary)
    workdir = Path.cwd()
    try:
        done = subprocess.run(
            sandbox.wrap(["/bin/sh", "-c", "exit 0"], workdir, Access.READ_ONLY),
            capture_output=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run ({type(exc).__name__}: {exc})"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap failed: {said[-1] if said else f'exit {done.returncode}'}"
    return None
