"""The processes a `clawgate bench ingest` measures: `clawgate serve` (with its worker, or
without it plus one `clawgate worker`), or the floor app in their place, each in a subprocess
with the bench's environment, logging to the bench's temporary directory; and the throwaway
Redis prefix they used, deleted afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from bot.bench.errors import BenchError
from bot.bench.platforms import PROFILE_ENV, Platform
from bot.bench.store import BenchStore

CLI = "bot.cli"  # `python -m bot.cli serve` is `clawgate serve`
FLOOR = "bot.bench.floor"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(
    platform: Platform,
    store: BenchStore,
    prefix: str,
    fake_url: str,
    port: int,
    workdir: Path,
    model_url: str | None = None,
) -> dict[str, str]:
    """This environment without platform, model and proxy settings (the platform clients
    would send 127.0.0.1 through a proxy), plus the bench's own: the demo model, or with
    `model_url` the `openai` provider against the bench's fake model (not streamed: one plain
    request per answer, as the floor makes it)."""
    dropped = ("SLACK_", "FEISHU_", "OPENAI_", "CLAWGATE_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(dropped) and not k.lower().endswith("_proxy")
    }
    # Tunables worth comparing:
    keep = (
        "CLAWGATE_WORKER_CONCURRENCY",
        "CLAWGATE_RECLAIM_IDLE",
        "CLAWGATE_INGEST_DURABILITY",
        "CLAWGATE_WORKER_MODE",  # serve's own worker: child (the default), or inprocess
    )
    env |= {k: os.environ[k] for k in keep if k in os.environ}
    # `-m bot.cli` from the temporary working directory: this checkout, installed or not
    source = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    if model_url:
        env |= {
            "OPENAI_BASE_URL": f"{model_url}/v1",
            "OPENAI_API_KEY": "bench",
            "CLAWGATE_MODEL": "bench",
            "CLAWGATE_STREAM": "false",
        }
    return (
        env
        | platform.env(fake_url)
        | store.env()
        | {
            "CLAWGATE_REDIS_PREFIX": prefix,
            "CLAWGATE_HOST": "127.0.0.1",
            "CLAWGATE_PORT": str(port),
            "CLAWGATE_WORKDIR": str(workdir),
            "CLAWGATE_LOG_LEVEL": "WARNING",
            "CLAWGATE_SHUTDOWN_GRACE": "5",
        }
    )


@contextlib.asynccontextmanager
async def process(
    command: str, env: dict[str, str], workdir: Path, name: str | None = None, module: str = CLI
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m <module> <command>` (`clawgate <command>`) in a subprocess logging to
    <workdir>/<name or command>.log; terminated (SIGTERM, then SIGKILL after 30 s) on exit."""
    name = name or command
    argv = [sys.executable, "-m", module, command]
    profile = os.environ.get(PROFILE_ENV)
    if profile:
        target = os.path.abspath(profile if name == "serve" else f"{profile}.{name}")  # noqa: ASYNC240
        argv[1:1] = ["-m", "cProfile", "-o", target]
    with (workdir / f"{name}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=workdir, stdout=log, stderr=asyncio.subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


@contextlib.asynccontextmanager
async def server(
    platform: Platform,
    store: BenchStore,
    prefix: str,
    fake_url: str,
    workdir: Path,
    split: bool,
    model_url: str | None = None,
    floor: bool = False,
) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """`clawgate serve` in a subprocess (with `split`: without its worker, plus one
    `clawgate worker` process), or the floor app (bot/bench/floor.py) the same way; yields its
    base URL and the pids once /readyz answers."""
    port = free_port()
    env = server_env(platform, store, prefix, fake_url, port, workdir, model_url)
    url = f"http://127.0.0.1:{port}"
    module = FLOOR if floor else CLI
    if not split:
        command = "both" if floor else "serve"
        async with process(command, env, workdir, "serve", module) as serve:
            await wait_ready(url, serve, workdir / "serve.log")
            yield url, {"server": serve.pid} | _child_worker(serve.pid)
        return
    env["CLAWGATE_WORKER_MODE"] = "none"
    async with (
        process("worker", env, workdir, module=module) as worker,
        process("serve", env, workdir, module=module) as serve,
    ):
        await wait_ready(url, serve, workdir / "serve.log")
        yield url, {"server": serve.pid, "worker": worker.pid}


def _child_worker(serve: int) -> dict[str, int]:
    """serve's child worker (CLAWGATE_WORKER_MODE=child, its default), whose CPU counts too."""
    try:
        children = Path(f"/proc/{serve}/task/{serve}/children").read_text().split()
    except OSError:
        return {}
    return {"worker": int(children[0])} if children else {}


def tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


async def wait_ready(
    url: str, process: asyncio.subprocess.Process, log: Path, path: str = "/readyz"
) -> None:
    """Until `path` answers 200 (/healthz: up, whether a worker polls or not)."""
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise BenchError(f"the server exited ({process.returncode}):\n{tail(log)}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}{path}") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise BenchError(f"the server was not ready within 60 s:\n{tail(log)}")


async def delete_prefix(store: BenchStore, prefix: str) -> int:
    redis = store.connect()  # on a cluster, the scan covers every master
    deleted = 0
    try:
        batch: list[str] = []
        async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await redis.delete(*batch)
                batch.clear()
        if batch:
            deleted += await redis.delete(*batch)
    finally:
        await redis.aclose()
    return deleted
