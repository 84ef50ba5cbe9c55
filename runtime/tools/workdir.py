"""Confinement of file tools to the work directory."""

from __future__ import annotations

from pathlib import Path, PurePath

from runtime.tools.base import ToolError


def confine(workdir: Path, user_path: str) -> Path:
    """Resolve `user_path` inside `workdir` or raise `ToolError`.

    Rejects `..` components outright (even when they would land inside), absolute paths
    outside the workdir, and symlinks whose target leaves it. The file tools open the result
    with `runtime.tools.safe_open`, which follows no symlink: one that appears after this
    resolution (swapped in meanwhile) makes the call fail.
    """
    if not user_path.strip():
        raise ToolError("path must not be empty")
    if "\x00" in user_path:
        raise ToolError("path must not contain NUL bytes")
    pure = PurePath(user_path)
    if ".." in pure.parts:
        raise ToolError(f"path {user_path!r} may not contain '..'")
    root = workdir.resolve()
    candidate = pure if pure.is_absolute() else root / pure
    try:
        resolved = Path(candidate).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on Python 3.11
        raise ToolError(f"path {user_path!r} cannot be resolved ({exc})") from exc
    if not resolved.is_relative_to(root):
        if Path(candidate).absolute().is_relative_to(root):
            raise ToolError(f"path {user_path!r} leaves the work directory through a symlink")
        raise ToolError(f"path {user_path!r} is outside the work directory")
    return resolved


def relative(workdir: Path, path: Path) -> str:
    """How a confined path is shown to users: relative to the workdir."""
    return str(path.relative_to(workdir.resolve())) or "."
