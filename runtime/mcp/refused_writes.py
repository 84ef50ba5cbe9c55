"""A stdio server runs in a read-only sandbox (runtime.mcp.launch): what it said when a write
was refused there (often a cache, on first use), found in its stderr or a tool's error, and
the fix to name with it. Light on imports: the tool module uses it too."""

from __future__ import annotations

import re

# How a program says the file system refused a write (Python, Node, Go, Rust, libc).
_REFUSED_WRITE = re.compile(
    r"read-only file system|EROFS|permission denied|EACCES|operation not permitted", re.I
)
_PATH = re.compile(r"""['"](/[^'"]+)['"]|(?:^|\s)(/[^\s:,;'"]+)""")
SANDBOX_WRITES = (
    "its sandbox is read-only but for its private $HOME and /tmp: point its cache there with "
    'env (XDG_CACHE_HOME = "/tmp/cache", npm_config_cache = "/tmp/npm"), or set '
    "writable_workdir = true if it must write the work directory"
)


def refused_write(text: str) -> str | None:
    """What a stdio server said when its sandbox refused a write: the path if it named
    one, else its words; None when it said nothing of the kind."""
    for line in reversed(text.splitlines()):
        if _REFUSED_WRITE.search(line):
            found = _PATH.search(line)
            return next(g for g in found.groups() if g) if found else line.strip()[:200]
    return None
