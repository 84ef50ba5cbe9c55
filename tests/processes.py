"""Running `clawgate` as a user does: a real process, with a clean environment."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLAWGATE = [sys.executable, "-m", "bot.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWGATE_", "OPENAI_"))}
    env.pop("REDIS_URL", None)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


async def chat(stdin: str, cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *CLAWGATE,
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
