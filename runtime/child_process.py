"""What the tools and hooks that run a program share: its output read to a cap without ever
blocking it, and its whole process group killed (its children with it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (started with `start_new_session=True`)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    """Keep the first `cap` bytes, drain (and count) the rest so the child never blocks."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept), total
