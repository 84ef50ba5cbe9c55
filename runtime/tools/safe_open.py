"""Opening exactly what was judged: a path `confine` resolved is opened component by component
from the work dir's descriptor, never following a symlink (one that appears after the judge
makes the call fail), only as a regular file with one name (a hard link may be another name
of a protected file such as .git/config), never blocking (O_NONBLOCK: a fifo cannot hold
`open` forever), on a bounded pool of its own with a timeout, so that no file can stall the
other conversations of the process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from typing import TypeVar

from runtime.tools.base import ToolError

T = TypeVar("T")

FILE_THREADS = 4
FILE_TIMEOUT = 10.0  # seconds one file operation may take before the call fails
# Not the default executor: what blocks here (a hung mount) must not starve anything else.
_POOL = ThreadPoolExecutor(FILE_THREADS, thread_name_prefix="clawgate-files")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEAF = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Intent(Enum):
    """How a file is opened: its flags, and the verb of its error messages."""

    READ = (os.O_RDONLY, "read")
    WRITE = (os.O_WRONLY | os.O_CREAT, "write")  # truncated only after the checks
    UPDATE = (os.O_RDWR, "edit")

    @property
    def flags(self) -> int:
        return self.value[0] | _LEAF

    @property
    def verb(self) -> str:
        return self.value[1]


async def off_loop(work: Callable[[], T], what: str) -> T:
    """Run blocking file work on the file pool; a ToolError when it takes too long (the
    thread is left to finish, the call is answered)."""
    future = asyncio.get_running_loop().run_in_executor(_POOL, work)
    try:
        return await asyncio.wait_for(future, FILE_TIMEOUT)
    except TimeoutError as exc:
        raise ToolError(
            f"{what} timed out after {FILE_TIMEOUT:g} s (it may still complete: check before "
            "trying again)"
        ) from exc


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "an unknown kind of file")


def _refusal(dir_fd: int, name: str, where: str, directory: bool) -> ToolError | None:
    """Why `name` (shown as `where`) cannot be opened as a directory or a regular file, judged
    from what it is; None when its kind does not explain the failure."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return ToolError(
            f"{where} is a symlink now (it was not when the call was checked); "
            "refusing to follow it"
        )
    if directory and not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
        return ToolError(f"{where} is {_kind(mode)}, not a directory")
    if not directory and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return ToolError(f"{where} is {_kind(mode)}, not a regular file")
    return None


def _failure(
    dir_fd: int, name: str, where: str, shown: str, intent: Intent, exc: OSError, directory: bool
) -> ToolError:
    """The message of a failed open of `name`: what it is when that explains it."""
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"{shown}: no such file")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"{shown} is a directory")
    # ELOOP: a link; ENOTDIR: a link or a file; ENXIO: a socket, or a fifo without a reader.
    refused = _refusal(dir_fd, name, where, directory)
    return refused or ToolError(f"cannot {intent.verb} {shown}: {exc.strerror}")


def _step(dir_fd: int, name: str, where: str, shown: str, intent: Intent) -> int:
    """The directory `name` below `dir_fd`, opened without following a link (created when
    a write needs it)."""
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as exc:
        if intent is not Intent.WRITE or not isinstance(exc, FileNotFoundError):
            raise _failure(dir_fd, name, where, shown, intent, exc, directory=True) from exc
    with contextlib.suppress(FileExistsError):  # made meanwhile: opened below like any other
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as exc:
        raise _failure(dir_fd, name, where, shown, intent, exc, directory=True) from exc


def _check(fd: int, shown: str) -> None:
    """Only a regular file with one name may be read or changed."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is {_kind(info.st_mode)}, not a regular file")
    if info.st_nlink > 1:
        raise ToolError(
            f"{shown} has {info.st_nlink} hard links (another name of the same file may be a "
            "protected one such as .git/config); refusing"
        )


@contextlib.contextmanager
def opened(root: Path, path: Path, intent: Intent) -> Iterator[int]:
    """A descriptor of `path` (resolved by `confine`, inside `root`), checked by `_check`.
    Blocking: run it with `off_loop`."""
    parts = path.relative_to(root).parts
    shown = "/".join(parts) or "."
    if not parts:
        raise ToolError(f"{shown} is a directory")
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, name in enumerate(parts[:-1], start=1):
            child = _step(dir_fd, name, "/".join(parts[:depth]), shown, intent)
            os.close(dir_fd)
            dir_fd = child
        try:
            fd = os.open(parts[-1], intent.flags, 0o666, dir_fd=dir_fd)
        except OSError as exc:
            raise _failure(dir_fd, parts[-1], shown, shown, intent, exc, directory=False) from exc
    finally:
        os.close(dir_fd)
    try:
        _check(fd, shown)
        yield fd
    except OSError as exc:
        raise ToolError(f"cannot {intent.verb} {shown}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def read_all(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes from `fd`'s current position."""
    chunks: list[bytes] = []
    left = limit
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def replace_all(fd: int, data: bytes) -> None:
    """The file's whole content becomes `data`, through the descriptor that was checked."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)
