"""Where a read reaches outside the work directory: the bash judge asks for any such read the
unapproved sandbox would not show anyway, and for every recursive one.

An unapproved command sees the system directories, the work dir, an empty HOME and /tmp
(runtime.tools.sandbox); the judge holds reads to the same line, so that what runs unasked
does not depend on the sandbox alone (it may be off) and a human reads why a call asks.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

# Outside the work dir, what a developer's read-only command may read file by file: programs,
# libraries and /etc (whose secret files the judge and the sandbox know: runtime.risk.secrets).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MAX_PATH = 4096
MAX_WALK = 5_000  # entries of a tree searched for links out before the judge gives up and asks


def outside(path: str, cwd: str, workdir: Path) -> str | None:
    """Where `path` (opened in `cwd`) really is, after `..` and symlinks, when that is an
    existing place outside the work directory; None when it is inside or does not exist
    (nothing to read: a pattern such as `/api/v1`). Devices are judged elsewhere."""
    if not path or "\x00" in path or len(path) > MAX_PATH:
        return None
    joined = posixpath.normpath(posixpath.join(cwd, path))
    if joined.startswith("/dev/") or joined == "/dev":
        return None
    try:
        if not os.path.lexists(joined):
            return None
        real = os.path.realpath(joined)
    except (OSError, ValueError):
        return None
    root = os.path.realpath(workdir)  # itself reached through a link on some hosts
    if real == root or real.startswith(root + "/"):
        return None
    return real


def link_out(start: str, cwd: str, workdir: Path) -> str | None:
    """For a read that follows symlinks through the directory `start` (in the work dir): why
    it reaches outside the work dir (the first link there that leads out, `src/lib` to
    /srv/app, or a tree with more entries than are checked); None when it does not.
    Links to directories inside the work dir are walked too, each real directory once."""
    root = os.path.realpath(workdir)
    pending = [os.path.realpath(posixpath.join(cwd, start))]
    seen: set[str] = set()
    entries = 0
    while pending:
        folder = pending.pop()
        if folder in seen or not os.path.isdir(folder):
            continue
        seen.add(folder)
        try:
            with os.scandir(folder) as listing:
                found = list(listing)
        except OSError:
            continue  # unreadable here: unreadable to the command too
        for entry in found:
            entries += 1
            if entries > MAX_WALK:
                return f"follows links in a tree of more than {MAX_WALK} entries, not all checked"
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if real != root and not real.startswith(root + "/"):
                    link = posixpath.relpath(entry.path, root)
                    return f"follows the link {link} to {real}, outside the work directory"
                pending.append(real)
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return None


def is_system(place: str) -> bool:
    """A place outside the work dir that a single read may reach unasked: `/` itself (its
    listing) or anything in a system directory."""
    return place == "/" or any(place == d or place.startswith(d + "/") for d in SYSTEM_DIRS)
