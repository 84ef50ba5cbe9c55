"""`clawgate serve --host/--port/--workdir`: the flags win over the environment."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import free_port
from tests.processes import CLAWGATE, clean_env

pytestmark = pytest.mark.e2e  # a real process: the slow tier


async def test_serve_flags_win_over_the_environment(tmp_path: Path) -> None:
    flagged, ignored = tmp_path / "flagged", tmp_path / "ignored"
    flagged.mkdir()
    ignored.mkdir()
    port, env_port = free_port(), free_port()
    env = clean_env(CLAWGATE_PORT=str(env_port), CLAWGATE_WORKDIR=str(ignored))
    proc = await asyncio.create_subprocess_exec(
        *CLAWGATE,
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workdir",
        str(flagged),
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as answer:
                        assert answer.status == 200
                        break
                except aiohttp.ClientConnectionError:
                    assert proc.returncode is None and time.monotonic() < deadline
                    await asyncio.sleep(0.1)
            with pytest.raises(aiohttp.ClientConnectionError):
                await http.get(f"http://127.0.0.1:{env_port}/healthz")
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    said = err.decode()
    assert f"CLAWGATE_WORKDIR={flagged}" in said and str(ignored) not in said
