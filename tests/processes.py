"""Running `clawgate` as a user does: a real process, with a clean environment."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLAWGATE = [sys.executable, "-m", "bot.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without clawgate's settings, plus `extra`; under
    TEST_REDIS_CLUSTER=1 a test given the tests' Redis tells its processes that REDIS_URL
    names a cluster (see tests/conftest.py; without REDIS_URL the setting says nothing)."""
    cluster = os.environ.get("CLAWGATE_REDIS_CLUSTER")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAWGATE_", "OPENAI_"))}
    env.pop("REDIS_URL", None)
    # A terminal's size is its own (a pty's), not the test runner's: pytest-xdist's workers
    # export COLUMNS=80 and LINES=24, which rich would take over the pty's size.
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env["PYTHONPATH"] = str(REPO)
    if cluster:
        env["CLAWGATE_REDIS_CLUSTER"] = cluster
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
