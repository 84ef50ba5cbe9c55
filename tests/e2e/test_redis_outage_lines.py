"""Redis killed for 30 s under `clawgate serve` (with its worker child) and `clawgate chat`:
each says so in at most two lines, the first failure and the return, with no traceback; a
message typed meanwhile is told Redis is away, not lost."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.e2e.test_worker_processes import Clawgate
from tests.processes import CLAWGATE, clean_env

pytestmark = pytest.mark.e2e  # real processes and a real outage: the slow tier

OUTAGE_SECONDS = 30


def redis_on(port: int, workdir: Path) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is needed (`.ci/run` installs it)"
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir"]
    return subprocess.Popen([*argv, str(workdir), "--appendonly", "no"], stdout=subprocess.DEVNULL)


async def until(found: object, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(found) or not found():
        assert time.monotonic() < deadline, f"never saw {what}"
        await asyncio.sleep(0.1)


async def test_a_30_second_outage_is_two_lines_for_serve_and_for_chat(tmp_path: Path) -> None:
    port = free_port()
    redis = redis_on(port, tmp_path)
    env = clean_env(
        REDIS_URL=f"redis://127.0.0.1:{port}/0",
        CLAWGATE_PORT=str(free_port()),
    )
    serve = await Clawgate.start("serve", env, tmp_path)
    chat = await asyncio.create_subprocess_exec(
        *CLAWGATE,
        "chat",
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    chat_lines: list[str] = []

    async def pump() -> None:
        assert chat.stderr is not None
        while line := await chat.stderr.readline():
            chat_lines.append(line.decode(errors="replace"))

    pumping = asyncio.create_task(pump())
    try:
        await serve.wait_line(r"platforms: ")
        await asyncio.sleep(3)  # both at work: serve's worker reads, the chat sweeps
        serve_from, chat_from = len(serve.lines), len(chat_lines)
        redis.kill()
        redis.wait(10)
        await asyncio.sleep(OUTAGE_SECONDS)
        redis = redis_on(port, tmp_path)

        def back(lines: list[str]) -> bool:
            return any("Redis is back after" in line for line in lines)

        await until(lambda: back(serve.lines) and back(chat_lines), "both say Redis is back")
        await asyncio.sleep(2)  # anything said late would show now
        for who, said in (("serve", serve.lines[serve_from:]), ("chat", chat_lines[chat_from:])):
            about = [line for line in said if "redis" in line.lower() or "Traceback" in line]
            assert len(about) <= 2, f"{who} said:\n{''.join(said)}"
            assert "Redis unreachable" in about[0] and "Redis is back after" in about[-1], about
            assert not any("Traceback" in line for line in said), f"{who}:\n{''.join(said)}"
    finally:
        await serve.stop()
        with contextlib.suppress(ProcessLookupError):
            chat.terminate()
        await asyncio.wait_for(chat.wait(), 20)
        pumping.cancel()
        redis.kill()
        redis.wait(10)
