"""Whether a hook can be asked at all, without asking it (`clawgate doctor`): its command is
found and executable on the PATH it runs with, or its URL's host accepts connections."""

from __future__ import annotations

import asyncio
import os
import shutil
from urllib.parse import urlsplit

from runtime.hooks.answer import HookFailure
from runtime.hooks.transport import command_env
from runtime.policy.model import HookConfig


async def reachable(config: HookConfig) -> str:
    """What was found, for people; raises `HookFailure` saying what is wrong (the caller
    bounds the time)."""
    if config.command is not None:
        program = config.command[0]
        found = shutil.which(program, os.X_OK, path=command_env([])["PATH"])
        if found is None:
            raise HookFailure(f"{program!r} is not an executable file on PATH")
        return f"command {found}"
    assert config.url is not None
    parts = urlsplit(config.url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        raise HookFailure(f"{host}:{port} cannot be reached ({exc})") from None
    writer.close()
    return f"{host}:{port} accepts connections"
