"""Where secrets live: the paths whose reading asks a human, however they are spelled.

Matched on the path's components (`~/.ssh`, `.ssh/id_rsa`, `../../root/.aws` alike) and on
the path a symlink resolves to, not on substrings of the text as typed; shared by the bash
judge and the file tools' rules.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import stat
from pathlib import Path

SSH = "SSH keys or configuration"
CLOUD = "cloud credentials"
STORED = "stored credentials"
KEY = "key material"
ENVIRONMENT = "an environment file that may hold secrets"
GIT_CONFIG = "git configuration, whose remote URLs may hold credentials"
GIT_CONFIG_NAMES = frozenset({"config", "config.worktree"})
# Directories any of whose contents count as secret.
SECRET_DIRS = {
    ".ssh": SSH,
    ".aws": CLOUD,
    ".azure": CLOUD,
    "gcloud": CLOUD,
    ".gnupg": "GnuPG keys",
    ".docker": "registry credentials",
    ".kube": "cluster credentials",
    ".password-store": STORED,
}
# Tools' credential directories under ~/.config.
SECRET_CONFIG_DIRS = (".config/gh", ".config/hub", ".config/gcloud", ".config/op")
SECRET_FILES = (
    (".netrc", STORED),
    ("_netrc", STORED),
    (".git-credentials", STORED),
    (".npmrc", "package registry tokens"),
    (".pypirc", "package registry tokens"),
    (".pgpass", STORED),
    (".vault-token", STORED),
    ("credentials", STORED),
    ("credentials.*", STORED),
    ("*credentials*.json", CLOUD),
    ("id_rsa*", SSH),
    ("id_dsa*", SSH),
    ("id_ecdsa*", SSH),
    ("id_ed25519*", SSH),
    ("ssh_host_*", SSH),
    ("authorized_keys", SSH),
    ("known_hosts", SSH),
    ("*.pem", KEY),
    ("*.key", KEY),
    ("*.p12", KEY),
    ("*.pfx", KEY),
    ("*.jks", KEY),
    (".env", ENVIRONMENT),
    (".env.*", ENVIRONMENT),
    ("*.env", ENVIRONMENT),
    (".envrc", ENVIRONMENT),
    # Tools' credential files by their well-known names.
    (".s3cfg", CLOUD),
    (".boto", CLOUD),
    ("service-account*.json", CLOUD),
    ("kubeconfig", "cluster credentials"),
    ("kubeconfig.*", "cluster credentials"),
    (".dockercfg", "registry credentials"),
    (".yarnrc.yml", "package registry tokens"),
    (".my.cnf", STORED),
    (".htpasswd", STORED),
    ("*.ppk", SSH),
    ("*secret*", "its name suggests secrets"),
    ("*.token", "its name suggests secrets"),
    ("token.json", "its name suggests secrets"),
    ("shadow", "password hashes"),
    ("gshadow", "password hashes"),
    ("sudoers", "privilege configuration"),
    ("environ", "a process environment, which may hold tokens"),
)
EXAMPLES = frozenset({".env.example", ".env.sample", ".env.template", ".env.dist"})
# Absolute places: process details (clawgate's own environment among them), kernel and raw
# devices, and where hosts keep their users and secrets.
SECRET_ROOTS = (
    ("/proc", "process details, including other processes' environments"),
    ("/sys", "kernel and device details"),
    ("/root", "the administrator's home directory"),
    ("/home", "users' home directories"),
    ("/etc/ssh", SSH),
    ("/etc/ssl/private", KEY),
    ("/run/secrets", STORED),
    ("/var/run/secrets", STORED),
    ("/var/lib/redis", "the database's files"),
)
HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty",
     "/dev/random", "/dev/urandom", "/dev/full"}
)  # fmt: skip


_FILE_PATTERNS = [(re.compile(fnmatch.translate(glob)), why) for glob, why in SECRET_FILES]
# One pass over a path component instead of one per pattern: most components match none.
_ANY_FILE = re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob, _ in SECRET_FILES))


@functools.lru_cache(maxsize=8192)
def secret_location(path: str, home: str | None = None) -> str | None:
    """Why reading `path` may expose secrets, or None. `home`: clawgate's own home directory,
    whose contents count as secret wherever it is."""
    text = path.replace("\\", "/")
    normalized = posixpath.normpath(text) if text else text
    lowered = normalized.lower()
    if lowered.startswith("/"):
        for root, why in SECRET_ROOTS:
            if lowered == root or lowered.startswith(root + "/"):
                return why
        if is_device(lowered):
            return "a device, which may expose raw disks or memory"
        if home and home != "/" and (normalized == home or normalized.startswith(home + "/")):
            return "clawgate's home directory"
    if any(f"{name}/" in lowered + "/" for name in SECRET_CONFIG_DIRS):
        return STORED
    parts = lowered.split("/")
    for index, part in enumerate(parts):
        if part in GIT_CONFIG_NAMES and any(
            p == ".git" or p.endswith(".git") for p in parts[:index]
        ):
            return GIT_CONFIG  # .git/config, .git/modules/<sub>/config
        if part in SECRET_DIRS:
            return SECRET_DIRS[part]
        if part in EXAMPLES or not _ANY_FILE.match(part):
            continue
        return next(why for pattern, why in _FILE_PATTERNS if pattern.match(part))
    return None


def is_device(path: str) -> bool:
    """A device other than the harmless ones (/dev/null ...): a disk, memory, a terminal."""
    harmless = path in HARMLESS_DEVICES or path.startswith("/dev/fd/")
    return path.startswith("/dev/") and not harmless


def resolved(path: str, cwd: str, workdir: Path, existing: bool = False) -> str | None:
    """Where `path` (opened in `cwd`) really leads when a symlink, of the file or of a
    directory on the way, makes that differ from what is written: relative to the work
    directory when inside it, else absolute. None when it is what it says, or with
    `existing` (a read: nothing to read there) when it does not exist."""
    if "\x00" in path or len(path) > 4096:
        return None
    joined = posixpath.normpath(posixpath.join(cwd, path))
    if existing and not os.path.lexists(joined):
        return None
    try:
        real = os.path.realpath(joined)
    except (OSError, ValueError):
        return None
    if real == joined:
        return None
    root = str(workdir)
    if real == root or real.startswith(root + "/"):
        return posixpath.relpath(real, root)
    return real


def home_directory() -> str | None:
    home = os.path.expanduser("~")
    return None if home in ("~", "/") else os.path.realpath(home)


MAX_INDEX_BYTES = 64 * 1024 * 1024


def tracked_secrets(workdir: Path) -> tuple[str, ...]:
    """Secret-looking files that the work directory's git repository tracks (its index):
    their committed contents can be printed by git commands that only read (`git log -p`),
    which no sandbox mask hides. Cached while the index is unchanged. An index that cannot be
    read safely counts as tracking a secret (fail closed), named by one "(why)" text: one
    that is not a regular file (a fifo planted as `.git/index` would block the judge; a link
    leads elsewhere), or one kept outside `.git` (a `.git` file pointing elsewhere)."""
    dot_git = workdir / ".git"
    index = dot_git / "index"
    try:
        if not dot_git.is_symlink() and dot_git.is_file():
            return ("(its index is kept elsewhere, where the judge does not read it)",)
        status = index.lstat()
    except OSError:
        return ()
    if not stat.S_ISREG(status.st_mode):
        return ("(its index is not a regular file, which the judge does not read)",)
    return _tracked_secrets(str(index), status.st_mtime_ns, status.st_size, status.st_ino)


@functools.lru_cache(maxsize=64)
def _tracked_secrets(index: str, _mtime: int, size: int, _inode: int) -> tuple[str, ...]:
    if size > MAX_INDEX_BYTES:
        return ("(its index is too large to read)",)
    try:
        data = _read_regular(index)
    except OSError:
        return ("(its index could not be read)",)
    if len(data) > MAX_INDEX_BYTES:
        return ("(its index is too large to read)",)
    return tuple(path for path in _index_paths(data) if secret_location(path))


def _read_regular(path: str) -> bytes:
    """The bytes of `path` if it is still the regular file it was (swapped for a fifo since
    the stat, the non-blocking open returns at once and the check refuses it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_INDEX_BYTES + 1)
    finally:
        os.close(fd)


def _index_paths(data: bytes) -> list[str]:
    """The paths of a git index (versions 2 and 3; version 4 compresses paths, so every
    NUL-ended run is taken as a possible path: more secrets found, never fewer)."""
    if data[:4] != b"DIRC" or len(data) < 12:
        return []
    version = int.from_bytes(data[4:8], "big")
    if version not in (2, 3):
        return [chunk.decode(errors="replace") for chunk in re.findall(rb"[ -~]{2,}", data)]
    count = int.from_bytes(data[8:12], "big")
    paths, pos = [], 12
    for _ in range(count):
        flags = int.from_bytes(data[pos + 60 : pos + 62], "big")
        start = pos + 62 + (2 if version == 3 and flags & 0x4000 else 0)
        end = data.find(b"\x00", start)
        if end < 0:
            break
        paths.append(data[start:end].decode(errors="replace"))
        pos += (end - pos + 8) // 8 * 8  # entries are NUL-padded to a multiple of 8 bytes
    return paths
