"""What the read-only view hides inside the directories it shows: the scan for secrets (of the
work directory at any depth, and of /etc), and the files bwrap binds over them.

Secret files are covered by one empty read-only regular file (a device there breaks
`git diff --stat`: "unsupported file type"), secret directories by an empty tmpfs, git config
files by a sanitized copy (runtime.tools.git_view), and any other name (hard link) of a
secret of the work directory, /etc or a home's credential store likewise.
Nothing is cached that could be stale:
a directory's listing is reused only while its change time (ctime, which no one can set back)
is what it was when read, and only once it is older than the clock's grain; every call
checks every directory. A tree too large to scan fails closed (`ScanTooLarge`)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable
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
MAX_HOME_ENTRIES = 10_000  # files of the homes' credential stores looked at for hard links
CONFIG_STORES = ("gh", "hub", "gcloud", "op")  # tools' credentials under ~/.config
EMPTY, FILTER = "empty", "no-unix-sockets.bpf"  # in clawgate's private directory
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
    """What the scan found in one directory (paths); and, for hard links (a hard link to a
    secret shows it under a harmless name), the inode numbers of its secrets and its other
    files that have more than one name (all on the directory's filesystem, `dev`)."""

    subdirs: tuple[str, ...]
    files: tuple[str, ...]
    dirs: tuple[str, ...]
    git_configs: tuple[str, ...]
    entries: int
    dev: int
    secret_inodes: frozenset[int]
    linked: dict[int, tuple[str, ...]]  # of the files not masked


@dataclass
class _Scanner:
    listings: dict[str, tuple[tuple[int, int, int], _Listing]] = field(default_factory=dict)

    def work_dir(self, root: Path, sources: MaskSources, outside: Iterable[str]) -> Masks:
        started = time.time_ns()
        files: list[str] = []
        dirs: list[str] = []
        configs: list[tuple[str, str]] = []
        entries = 0
        listed: list[_Listing] = []
        pending = [str(root)]
        while pending:
            directory = pending.pop()
            # The work directory itself may be a symlink (bwrap binds what it leads to);
            # below it, a symlink is never followed.
            listing = self._listing(directory, started, follow=directory == str(root))
            if listing is None:
                continue  # gone, or not a directory any more: nothing to mask
            entries += listing.entries
            if entries > MAX_ENTRIES:
                raise ScanTooLarge(
                    f"the work directory holds more than {MAX_ENTRIES} files, too many to "
                    "mask every secret in it"
                )
            listed.append(listing)
            files += listing.files
            dirs += listing.dirs
            configs += ((path, str(sources.sanitized(Path(path)))) for path in listing.git_configs)
            pending += listing.subdirs
        secret = _linked_secrets(outside)
        for listing in listed:
            secret.setdefault(listing.dev, set()).update(listing.secret_inodes)
        for listing in listed:
            for inode in secret[listing.dev] & listing.linked.keys():
                files += listing.linked[inode]
        masks = Masks(tuple(files), tuple(dirs), tuple(configs))
        if len(masks) > MAX_MASKS:
            raise ScanTooLarge(f"the work directory holds more than {MAX_MASKS} secret files")
        return masks

    def _listing(self, directory: str, started: int, follow: bool) -> _Listing | None:
        try:
            info = os.stat(directory, follow_symlinks=follow)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        version = (info.st_dev, info.st_ino, info.st_ctime_ns)
        known = self.listings.get(directory)
        if known is not None and known[0] == version:
            return known[1]
        listing = _read(directory, info.st_dev)
        if listing is not None and info.st_ctime_ns < started - SETTLED_NS:
            if len(self.listings) >= MAX_LISTINGS:
                self.listings.clear()
            self.listings[directory] = (version, listing)
        return listing


def _read(directory: str, dev: int) -> _Listing | None:
    try:
        with os.scandir(directory) as found:
            entries = list(found)
    except OSError:
        return None
    names = {entry.name for entry in entries}
    # A repository's own directory (.git, a submodule's or a worktree's, a bare one, or one
    # a symlink named otherwise), told by what it holds; not its refs/heads/config branch.
    git_dir = "HEAD" in names and bool(names & {"objects", "commondir"})
    parent = os.path.basename(directory)
    subdirs: list[str] = []
    files: list[str] = []
    dirs: list[str] = []
    configs: list[str] = []
    secret_inodes: set[int] = set()
    linked: dict[int, list[str]] = {}
    for entry in entries:
        name, path = entry.name, entry.path
        try:
            if entry.is_symlink():
                continue  # its target is masked where it is, or not in the view
            is_dir = entry.is_dir(follow_symlinks=False)
            info = None if is_dir else entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # Ancestors are not secret (a secret directory is masked whole), so the name
        # decides, or a tool's directory under .config.
        secret = secret_location(name) or (
            parent == ".config" and secret_location(f".config/{name}/x")
        )
        if is_dir and (secret or (git_dir and name == "hooks")):
            dirs.append(path)
        elif is_dir:
            subdirs.append(path)
        elif info is None:
            continue
        elif secret or (git_dir and name in GIT_CONFIG_NAMES):
            (files if secret else configs).append(path)
            if info.st_nlink > 1:
                secret_inodes.add(info.st_ino)
        elif info.st_nlink > 1:
            linked.setdefault(info.st_ino, []).append(path)
    return _Listing(
        tuple(subdirs),
        tuple(files),
        tuple(dirs),
        tuple(configs),
        len(entries),
        dev,
        frozenset(secret_inodes),
        {inode: tuple(paths) for inode, paths in linked.items()},
    )


def _linked_secrets(paths: Iterable[str]) -> dict[int, set[int]]:
    """Inode numbers, by filesystem, of the secret files at `paths` and in the host's homes
    that have other names (a work directory's file may be one)."""
    found: dict[int, set[int]] = {}
    for path in (*paths, *_home_secrets()):
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            found.setdefault(info.st_dev, set()).add(info.st_ino)
    return found


def _home_secrets() -> list[str]:
    """The files of credential stores in clawgate's home, /root and /home/* (.ssh, .aws,
    .netrc, .config/gh ...), at most MAX_HOME_ENTRIES of them."""
    homes = {str(Path.home()), "/root"}
    with contextlib.suppress(OSError), os.scandir("/home") as found:
        homes.update(entry.path for entry in found if entry.is_dir(follow_symlinks=False))
    stores: list[str] = []
    for home in homes:
        with contextlib.suppress(OSError), os.scandir(home) as found:
            for entry in found:
                if entry.name == ".config":
                    stores += (f"{entry.path}/{name}" for name in CONFIG_STORES)
                elif secret_location(entry.name):
                    stores.append(entry.path)
    files: list[str] = []
    for _ in range(MAX_HOME_ENTRIES):
        if not stores:
            break
        path = stores.pop()
        try:
            with os.scandir(path) as found:
                stores += (entry.path for entry in found if not entry.is_symlink())
        except NotADirectoryError:
            files.append(path)
        except OSError:
            continue
    return files


_scanner = _Scanner()


def work_dir_masks(root: Path, sources: MaskSources, outside: Iterable[str] = ()) -> Masks:
    """What to mask in the work directory `root` for a command that runs without approval;
    `outside`: secret files elsewhere (/etc's), whose hard links in it are masked too."""
    return _scanner.work_dir(root, sources, outside)


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
        root = self._root
        if root is None or not all((root / name).is_file() for name in (EMPTY, FILTER)):
            root = Path(tempfile.mkdtemp(prefix="clawgate-sandbox-"))
            atexit.register(shutil.rmtree, root, True)
            _write(root / EMPTY, b"")
            _write(root / FILTER, no_unix_sockets())
            self._root = root
            self._sanitized.clear()
        return root

    @property
    def empty(self) -> Path:
        return self.root / EMPTY

    @property
    def seccomp(self) -> Path:
        return self.root / FILTER

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
            _write(root / name, content)
        if info.st_ctime_ns < time.time_ns() - SETTLED_NS:
            self._sanitized[version] = root / name
        return root / name


def _write(path: Path, content: bytes) -> None:
    """Atomically, read-only: a concurrent call sees the whole file or none."""
    fd, temporary = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "wb") as out:
        out.write(content)
    os.chmod(temporary, 0o444)
    os.replace(temporary, path)


sources = MaskSources()
