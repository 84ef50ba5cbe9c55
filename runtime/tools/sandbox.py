"""The OS boundary of the bash tool: a bubblewrap (`bwrap`) sandbox per command.

The risk judge only decides when to ask a human; what a command can reach is decided here.
A command that runs without approval gets a read-only view of the system with no network,
its own PID namespace and /proc (clawgate's process and environment invisible), a minimal
/dev, an empty private HOME and /tmp, and the host's credential stores hidden. An approved
command gets exactly one more thing: the work directory writable (and the network when the
settings say so); it still never sees clawgate's process or credentials.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

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
# Secret-looking files of the work directory, masked for commands that run without approval
# (the judge asks before such a file is named; this covers what it cannot see).
MASKED_NAMES = (".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*",
                "id_dsa*", "id_ecdsa*", "id_ed25519*", "*secret*", "credentials*",
                ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".pgpass")  # fmt: skip
UNMASKED_NAMES = (".env.example", ".env.sample", ".env.template", ".env.dist")
MASK_DEPTH = 4  # directory levels of the work directory searched for secret files
MASK_SCAN_LIMIT = 5_000  # entries looked at, at most, per call
SKIPPED_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox"})


def _is_masked(name: str) -> bool:
    lowered = name.lower()
    if lowered in UNMASKED_NAMES:
        return False
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in MASKED_NAMES)


def secret_files(workdir: Path) -> list[Path]:
    """Secret-looking files in the top `MASK_DEPTH` levels of `workdir` (bounded)."""
    found: list[Path] = []
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
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 < MASK_DEPTH and entry.name not in SKIPPED_DIRS:
                        pending.append((Path(entry.path), depth + 1))
                elif _is_masked(entry.name) and entry.is_file(follow_symlinks=False):
                    found.append(Path(entry.path))
            except OSError:
                continue
    return found


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

    def wrap(self, argv: list[str], workdir: Path, access: Access) -> list[str]:
        """`argv` as run in the sandbox for a call with `access` (unchanged when off)."""
        if self.bwrap is None:
            return argv
        return [self.bwrap, *self.arguments(workdir, access), "--", *argv]

    def arguments(self, workdir: Path, access: Access) -> list[str]:
        args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--tmpfs", "/tmp"]  # noqa: S108 - a private, empty /tmp
        # No capabilities (run as root, bwrap would keep them all in its user namespace, and
        # `mount -o remount,rw` would undo every read-only bind) and no nested namespaces.
        args += ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session"]
        if self.allows_network(access):
            args.append("--share-net")
        home = Path.home()
        for directory in (*HIDDEN_DIRS, str(home)):
            if os.path.isdir(directory) and directory != "/":
                args += ["--tmpfs", directory]
        args += _hide_files(HIDDEN_FILES)
        args += ["--bind" if access is Access.APPROVED else "--ro-bind", str(workdir), str(workdir)]
        # The work directory may itself be a home (or hold one's credential stores).
        args += _hide_credentials(workdir)
        if access is Access.READ_ONLY:
            args += _hide_files(str(path) for path in secret_files(workdir))
        args += ["--dir", SANDBOX_HOME, "--chdir", str(workdir)]
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
