"""What the read-only view hides inside the directories it shows: the scan for secrets (of the
work directory at any depth, and of /etc), and the files bwrap binds over them.

Secret files are covered by one empty read-only regular file (a device there breaks
`git diff --stat`: "unsupported file type"), secret directories by an empty tmpfs, git config
files by a sanitized copy (runtime.tools.git_view). Nothing is cached that could be stale:
a directory's listing is reused only while its change time (ctime, which no one can set back)
is what it was when read, and only once it is older than the clock's grain; every call
checks every directory. A tree too large to scan fails closed (`ScanTooLarge`)."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from runtime.risk.secrets import secret_location
from runtime.tools import git_view
from runtime.tools.seccomp import no_unix_sockets

MAX_ENTRIES = 200_000  # entries of a work directory scanned for one call, at most
MAX_MASKS = 4_000  # binds over secrets (each a mount in bwrap)
SETTLED_NS = 2_000_000_000  # a directory changed this recently is read again
MAX_LISTINGS = 100_000  # directories remembered, at most
GIT_CONFIG_NAMES = frozenset({"config", "config.worktree"})
# In /etc besides what is not world-readable and what secret_location names: where
# services keep passwords and keys in world-readable files.
ETC_SECRETS = (
    "ssh",
    "ssl/private",
    "sudoers",
    "sudoers.d",
    "shadow-",
    "gshadow-",
    "security/opasswd",
    "npmrc",
    "pip.conf",
    "docker",
    "containers/auth.json",
    "mysql",
    "redis",
    "postgresql",
    "NetworkManager/system-connections",
    "wireguard",
    "openvpn",
    "letsencrypt",
    "krb5.keytab",
    "ppp",
)


class ScanTooLarge(Exception):
    """The work directory has more entries (or secrets) than the sandbox masks per call:
    a command that runs without approval could read what the scan did not reach."""


@dataclass(frozen=True, slots=True)
class Masks:
    """Absolute paths: files to cover with the empty file, directories with a tmpfs, git
    config files with (their path, the sanitized copy's path)."""

    files: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    git_configs: tuple[tuple[str, str], ...] = ()

    def __len__(self) -> int:
        return len(self.files) + len(self.dirs) + len(self.git_configs)


class _Listing(NamedTuple):
    """What the scan found in one directory (names)."""

    subdirs: tuple[str, ...]
    files: tuple[str, ...]
    dirs: tuple[str, ...]
    git_configs: tuple[str, ...]
    entries: int


@dataclass
class _Scanner:
    listings: dict[tuple[str, bool], tuple[tuple[int, int, int], _Listing]] = field(
        default_factory=dict
    )

    def work_dir(self, root: Path, sources: MaskSources) -> Masks:
        started = time.time_ns()
        files: list[str] = []
        dirs: list[str] = []
        configs: list[tuple[str, str]] = []
        entries = 0
        pending = [(str(root), False)]
        while pending:
            directory, in_git = pending.pop()
            listing = self._listing(directory, in_git, started)
            if listing is None:
                continue  # gone, or not a directory any more: nothing to mask
            entries += listing.entries
            if entries > MAX_ENTRIES:
                raise ScanTooLarge(
                    f"the work directory holds more than {MAX_ENTRIES} files, too many to "
                    "mask every secret in it"
                )
            files += (os.path.join(directory, name) for name in listing.files)
            dirs += (os.path.join(directory, name) for name in listing.dirs)
            for name in listing.git_configs:
                path = os.path.join(directory, name)
                configs.append((path, str(sources.sanitized(Path(path)))))
            pending += ((os.path.join(directory, name), in_git or name == ".git")
                        for name in listing.subdirs)  # fmt: skip
        masks = Masks(tuple(files), tuple(dirs), tuple(configs))
        if len(masks) > MAX_MASKS:
            raise ScanTooLarge(f"the work directory holds more than {MAX_MASKS} secret files")
        return masks

    def _listing(self, directory: str, in_git: bool, started: int) -> _Listing | None:
        try:
            info = os.stat(directory, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        version = (info.st_dev, info.st_ino, info.st_ctime_ns)
        key = (directory, in_git)
        known = self.listings.get(key)
        if known is not None and known[0] == version:
            return known[1]
        listing = _read(directory, in_git)
        if listing is not None and info.st_ctime_ns < started - SETTLED_NS:
            if len(self.listings) >= MAX_LISTINGS:
                self.listings.clear()
            self.listings[key] = (version, listing)
        return listing


def _read(directory: str, in_git: bool) -> _Listing | None:
    subdirs: list[str] = []
    files: list[str] = []
    dirs: list[str] = []
    configs: list[str] = []
    count = 0
    try:
        with os.scandir(directory) as found:
            for entry in found:
                count += 1
                name = entry.name
                try:
                    if entry.is_symlink():
                        continue  # its target is masked where it is, or not in the view
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                # Ancestors are not secret (a secret directory is masked whole), so the name
                # decides, or a tool's directory under .config.
                parent = os.path.basename(directory)
                secret = secret_location(name) or (
                    parent == ".config" and secret_location(f".config/{name}/x")
                )
                if is_dir and (secret or (name == "hooks" and _git_dir(directory, in_git))):
                    dirs.append(name)
                elif is_dir:
                    subdirs.append(name)
                elif secret:
                    files.append(name)
                elif name in GIT_CONFIG_NAMES and _git_dir(directory, in_git):
                    configs.append(name)
    except OSError:
        return None
    return _Listing(tuple(subdirs), tuple(files), tuple(dirs), tuple(configs), count)


def _git_dir(directory: str, in_git: bool) -> bool:
    """A repository's own directory (.git, .git/modules/x, .git/worktrees/y): not its refs."""
    return in_git and os.path.isfile(os.path.join(directory, "HEAD"))


_scanner = _Scanner()


def work_dir_masks(root: Path, sources: MaskSources) -> Masks:
    """What to mask in the work directory `root` for a command that runs without approval."""
    return _scanner.work_dir(root, sources)


def etc_masks(root: str = "/etc") -> Masks:
    """What to mask in /etc: what an unprivileged user could not read, what secret_location
    names, and ETC_SECRETS. Small, and read afresh each call (a chmod changes no listing)."""
    files: list[str] = []
    dirs: list[str] = []
    listed = {os.path.join(root, name) for name in ETC_SECRETS}
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            found = list(os.scandir(directory))
        except OSError:
            continue
        for entry in found:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            hidden = (
                entry.path in listed
                or not info.st_mode & stat.S_IROTH
                or secret_location(entry.name) is not None
            )
            if stat.S_ISDIR(info.st_mode):
                (dirs if hidden or not info.st_mode & stat.S_IXOTH else pending).append(entry.path)
            elif hidden:
                files.append(entry.path)
    return Masks(tuple(files), tuple(dirs))


class MaskSources:
    """clawgate's private directory of what is bound over secrets: the empty file, the
    seccomp filter, sanitized git configs (by content). Made again if a tmp cleaner took it."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._sanitized: dict[tuple[int, int, int, int], Path] = {}

    @property
    def root(self) -> Path:
        if self._root is None or not (self._root / "empty").is_file():
            self._root = Path(tempfile.mkdtemp(prefix="clawgate-sandbox-"))
            self._sanitized.clear()
            atexit.register(shutil.rmtree, self._root, True)
            self._write("empty", b"")
            self._write("no-unix-sockets.bpf", no_unix_sockets())
        return self._root

    @property
    def empty(self) -> Path:
        return self.root / "empty"

    @property
    def seccomp(self) -> Path:
        return self.root / "no-unix-sockets.bpf"

    def sanitized(self, config: Path) -> Path:
        """A sanitized copy of the git config file `config` (empty if it vanished)."""
        root = self.root
        try:
            info = config.stat()
        except OSError:
            return self.empty
        version = (info.st_dev, info.st_ino, info.st_ctime_ns, info.st_size)
        known = self._sanitized.get(version)
        if known is not None and known.is_file():
            return known
        content = git_view.sanitized(config)
        name = "git-" + hashlib.sha256(content).hexdigest()[:32]
        if not (root / name).is_file():
            self._write(name, content)
        if info.st_ctime_ns < time.time_ns() - SETTLED_NS:
            self._sanitized[version] = root / name
        return root / name

    def _write(self, name: str, content: bytes) -> None:
        assert self._root is not None
        fd, temporary = tempfile.mkstemp(dir=self._root)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.chmod(temporary, 0o444)
        os.replace(temporary, self._root / name)


sources = MaskSources()
