"""An aiohttp app of the bench served in its own process (multiprocessing, spawn), so its CPU
runs neither in the bench nor in the server under test: the fake platform API, the fake
model."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
from collections.abc import AsyncIterator, Callable
from multiprocessing.connection import Connection

from aiohttp import web

from bot.bench.errors import BenchError

AppFactory = Callable[[], web.Application]  # picklable: a module's function or a partial of one


def _main(factory: AppFactory, conn: Connection) -> None:
    """The spawned process: serve on a free port, say which, until terminated."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the bench, which stops us

    async def serve() -> None:
        runner = web.AppRunner(factory(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(runner.addresses[0][1])
        conn.close()
        await asyncio.Event().wait()

    asyncio.run(serve())


@contextlib.asynccontextmanager
async def app_process(factory: AppFactory, name: str, what: str) -> AsyncIterator[tuple[str, int]]:
    """The app's base URL (http://127.0.0.1:<port>) and its process id; `what` names it in
    errors."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_main, args=(factory, sender), name=name, daemon=True)
    process.start()
    sender.close()
    try:
        if not await asyncio.to_thread(receiver.poll, 30):
            raise BenchError(f"the {what} did not start")
        try:
            port = int(receiver.recv())
        except EOFError:
            raise BenchError(f"the {what} process died while starting") from None
        assert process.pid is not None
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        receiver.close()
        process.terminate()
        await asyncio.to_thread(process.join, 5)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join, 5)
