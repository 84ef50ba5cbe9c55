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


def is_system(place: str) -> bool:
    """A place outside the work dir that a single read may reach unasked: `/` itself (its
    listing) or anything in a system directory."""
    return place == "/" or any(place == d or place.startswith(d + "/") for d in SYSTEM_DIRS)
