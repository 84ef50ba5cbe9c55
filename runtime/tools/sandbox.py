"""The OS boundary of the bash tool: a bubblewrap (`bwrap`) sandbox per command.

The risk judge only decides when to ask a human; what a command can reach is decided here.
A command that runs without approval sees an allow-list of the host: the system directories
(/usr, /bin, /lib*, /etc with its secrets masked) and the work directory, read-only, with
every secret in it masked at any depth and its git config files sanitized (git_view); an
empty private HOME and /tmp, a minimal /dev, its own PID namespace and /proc (clawgate's
process and environment invisible), no network and no unix sockets (seccomp). An approved
command gets the view a human agreed to: the host read-only with its credential stores
hidden, the work directory writable, the network when the settings say so (unix sockets
too only when CLAWGATE_SANDBOX_UNIX_SOCKETS=approved); it still never sees clawgate's
process or credentials.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runtime.metrics import SANDBOX_CONTAINED
from runtime.tools import masks
from runtime.tools.seccomp import SeccompUnsupported, no_unix_sockets

log = logging.getLogger(__name__)


class SandboxMode(StrEnum):
    AUTO = "auto"  # bwrap when it works; otherwise every bash call asks
    BWRAP = "bwrap"  # bwrap or refuse to start
    OFF = "off"  # the explicit opt-out: commands run with clawgate's own rights


class NetworkAccess(StrEnum):
    APPROVED = "approved"  # approved commands only
    NEVER = "never"
    ALWAYS = "always"  # auto-allowed commands too (a weaker setting)


class UnixSockets(StrEnum):
    NEVER = "never"
    APPROVED = "approved"  # approved commands (and MCP servers) that have the network


class Access(StrEnum):
    """What a call was granted: set by the approval middleware, read-only unless a human
    approved the call (once, or by an "always" rule)."""

    READ_ONLY = "read-only"
    APPROVED = "approved"


SANDBOX_HOME = "/tmp/home"  # noqa: S108 - on the sandbox's own private /tmp
# Hidden from the host view of an approved command: where hosts and containers keep
# credentials (a command without approval sees none of these directories at all).
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
# The host a command that runs without approval sees: the system, nothing of anyone's data.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# All a command prints when bwrap itself failed before running it (exit 1).
_BWRAP_FAILED = re.compile(r"bwrap: [^\n]*\n?")


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How bash commands are contained in this process (see `probe`)."""

    mode: SandboxMode
    bwrap: str | None = None  # a bwrap that works, or None: commands run uncontained
    problem: str | None = None  # why `auto` found no working bwrap
    network: NetworkAccess = NetworkAccess.APPROVED
    unix_sockets: UnixSockets = UnixSockets.NEVER
    # Files no sandboxed command may read, whatever its access: clawgate's own settings file
    # (it holds the platform tokens and model keys), wherever the operator keeps it.
    hidden: tuple[str, ...] = ()

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
            sockets = (
                "no unix sockets"
                if self.unix_sockets is UnixSockets.NEVER
                else "unix sockets for approved commands with the network"
            )
            return f"bwrap ({self.bwrap}), network for {self.network.value} commands, {sockets}"
        if self.mode is SandboxMode.OFF:
            return "off (CLAWGATE_SANDBOX=off): commands run with clawgate's own rights"
        return f"unavailable ({self.problem}): every bash call asks"

    def allows_network(self, access: Access) -> bool:
        if self.network is NetworkAccess.ALWAYS:
            return True
        return self.network is NetworkAccess.APPROVED and access is Access.APPROVED

    def allows_unix_sockets(self, access: Access) -> bool:
        return self._unix_sockets(access, self.allows_network(access))

    def view(self, access: Access) -> str:
        """What a command with `access` runs with, in a line for the approval notice."""
        if self.bwrap is None:
            return "runs uncontained, with clawgate's own rights"
        network = "network on" if self.allows_network(access) else "no network"
        if self.allows_unix_sockets(access):
            network += ", unix sockets on"
        if access is Access.APPROVED:
            host = "the host read-only (credential stores hidden)"
            return f"runs with {host}, work dir writable, {network}"
        return (
            "runs with only the system directories and the work dir read-only (its secrets "
            f"masked), a private empty HOME and /tmp, {network}"
        )

    def _unix_sockets(self, access: Access, network: bool, explicit: bool = False) -> bool:
        """Unix sockets only with the network, when the admin allows them, for a command a
        human approved (or an MCP server given the network by its own setting)."""
        granted = access is Access.APPROVED or explicit
        return network and granted and self.unix_sockets is UnixSockets.APPROVED

    def failed(self, returncode: int | None, output: str) -> bool:
        """Whether bwrap itself failed (exit 1 with only its own one-line error): the
        command never ran."""
        return (
            self.bwrap is not None
            and returncode == 1
            and _BWRAP_FAILED.fullmatch(output) is not None
        )

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
        own setting; CLAWGATE_SANDBOX_NETWORK=never still wins); `expose`: directories to
        show read-only (an MCP server installed in a home directory). Raises ScanTooLarge
        when a read-only view cannot mask every secret of the work directory."""
        if self.bwrap is None:
            return argv
        explicit = network is not None
        if network is None:
            network = self.allows_network(access)
        network = network and self.network is not NetworkAccess.NEVER
        args = [self.bwrap, *_namespaces(network)]
        if access is Access.APPROVED:
            args += _host_view(workdir, expose)
        else:
            args += _allow_list_view(workdir, expose)
        args += self._hide_own_files(access, expose)
        args += ["--chdir", str(workdir)]
        if self._unix_sockets(access, network, explicit):
            return [*args, "--", *argv]
        # bwrap reads the filter from a file descriptor: a shell opens it as fd 3, for any
        # spawner (the MCP SDK takes an argv only); bwrap closes it before the command runs.
        opener = ["/bin/sh", "-c", 'exec 3<"$0" && exec "$@"', str(masks.sources.seccomp)]
        return [*opener, *args, "--seccomp", "3", "--", *argv]

    def _hide_own_files(self, access: Access, expose: Sequence[str]) -> list[str]:
        """`hidden`, masked where the view shows it (a read-only view binds only the system
        directories, `expose` and the work directory: a file elsewhere is absent anyway)."""
        shown = None if access is Access.APPROVED else (*SYSTEM_DIRS, "/etc", *expose)
        return _hide_files(
            path
            for path in self.hidden
            if shown is None or any(path.startswith(place.rstrip("/") + "/") for place in shown)
        )


def _namespaces(network: bool) -> list[str]:
    # No capabilities (run as root, bwrap would keep them all in its user namespace, and
    # `mount -o remount,rw` would undo every read-only bind) and no nested namespaces.
    args = ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    args += ["--die-with-parent", "--new-session"]
    return [*args, "--share-net"] if network else args


def _private_tmp() -> list[str]:
    # A private, empty /tmp with the home in it, made before the work directory is bound
    # (which may be /tmp itself).
    return ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", SANDBOX_HOME]  # noqa: S108


def _host_view(workdir: Path, expose: Sequence[str]) -> list[str]:
    """What a human agreed to: the host read-only with its credential stores hidden, the
    work directory writable."""
    args = ["--ro-bind", "/", "/", *_private_tmp()]
    for directory in (*HIDDEN_DIRS, str(Path.home())):
        if os.path.isdir(directory) and directory != "/":
            args += ["--tmpfs", directory]
    args += _hide_files(HIDDEN_FILES)
    for path in expose:  # read-only, their credential stores hidden again
        args += ["--ro-bind", path, path, *_hide_credentials(Path(path))]
    args += ["--bind", str(workdir), str(workdir)]
    # The work directory may itself be a home (or hold one's credential stores).
    return args + _hide_credentials(workdir)


def _allow_list_view(workdir: Path, expose: Sequence[str]) -> list[str]:
    """Only what a read-only developer command needs: the system directories, /etc with its
    secrets masked, the work directory with its secrets masked, `expose`, all read-only."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # a merged /usr: /bin -> usr/bin
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    etc = masks.etc_masks()
    args += ["--ro-bind", "/etc", "/etc", *_masked(etc), *_private_tmp()]
    for path in expose:
        args += ["--ro-bind", path, path, *_hide_credentials(Path(path))]
    args += ["--ro-bind", str(workdir), str(workdir)]
    return args + _masked(masks.work_dir_masks(workdir, masks.sources, etc.files))


def _masked(found: masks.Masks) -> list[str]:
    empty = str(masks.sources.empty)
    args: list[str] = []
    for path in found.files:
        args += ["--ro-bind", empty, path]
    for path in found.dirs:
        args += ["--tmpfs", path]
    for path, copy in found.git_configs:
        args += ["--ro-bind", copy, path]
    return args


def _hide_files(paths: Iterable[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            args += ["--ro-bind", str(masks.sources.empty), path]
    return args


def _hide_credentials(root: Path) -> list[str]:
    args: list[str] = []
    for name in CREDENTIAL_DIRS:
        if (root / name).is_dir():
            args += ["--tmpfs", str(root / name)]
    args += _hide_files(str(root / name) for name in CREDENTIAL_FILES)
    return args


def probe(
    mode: SandboxMode,
    network: NetworkAccess = NetworkAccess.APPROVED,
    unix_sockets: UnixSockets = UnixSockets.NEVER,
    hidden: Sequence[str] = (),
) -> Sandbox:
    """Find out once, at start, whether bwrap works here. `bwrap` mode raises when it does
    not (the operator asked for it); `auto` falls back to asking for every call."""
    sandbox = _probe(mode, network, unix_sockets, hidden)
    SANDBOX_CONTAINED.labels(mode.value).set(int(sandbox.contained))
    return sandbox


def _probe(
    mode: SandboxMode, network: NetworkAccess, unix_sockets: UnixSockets, hidden: Sequence[str]
) -> Sandbox:
    own = tuple(os.path.realpath(path) for path in hidden)
    if mode is SandboxMode.OFF:
        return Sandbox(mode, network=network, unix_sockets=unix_sockets, hidden=own)
    binary = shutil.which("bwrap")
    problem = "bwrap is not installed" if binary is None else _try(binary)
    if problem is None:
        return Sandbox(mode, bwrap=binary, network=network, unix_sockets=unix_sockets, hidden=own)
    if mode is SandboxMode.BWRAP:
        raise SandboxUnavailable(f"CLAWGATE_SANDBOX=bwrap, but {problem}")
    log.warning("no OS sandbox for bash (%s): every bash call will ask for approval", problem)
    return Sandbox(mode, problem=problem, network=network, unix_sockets=unix_sockets, hidden=own)


class SandboxUnavailable(RuntimeError):
    """CLAWGATE_SANDBOX=bwrap on a machine where bwrap cannot run."""


def _try(binary: str) -> str | None:
    """None if a read-only sandbox (with its seccomp filter) starts here, else why not. One
    more try after a failure: a secret under /etc deleted as bwrap mounted over it fails one."""
    problem = _try_once(binary)
    return None if problem is None else _try_once(binary)


def _try_once(binary: str) -> str | None:
    sandbox = Sandbox(SandboxMode.BWRAP, bwrap=binary)
    try:
        no_unix_sockets()
        with tempfile.TemporaryDirectory(prefix="clawgate-probe-") as workdir:
            done = subprocess.run(
                sandbox.wrap(["/bin/sh", "-c", "exit 0"], Path(workdir), Access.READ_ONLY),
                capture_output=True,
                timeout=10,
                env={"PATH": "/usr/bin:/bin"},
                check=False,
            )
    except SeccompUnsupported as exc:
        return str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run ({type(exc).__name__}: {exc})"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap failed: {said[-1] if said else f'exit {done.returncode}'}"
    return None
