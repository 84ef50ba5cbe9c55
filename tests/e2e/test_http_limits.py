"""What a client can hold of a real `clawgate serve` process (bot/http_limits.py): many
sockets that send half a request line and stall, from one address, while the process may open
only 256 files. Past the per-client cap they are closed at once, the others after the header
timeout, and meanwhile /healthz and a signed Slack mention from elsewhere are answered. A body
that trickles in gets 408."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import free_port
from tests.e2e.test_worker_processes import SECRET, Clawgate, serve_env
from tests.fake_slack import FakeSlack, event_body, mention_event, post_signed
from tests.processes import CLAWGATE

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

ATTACKER = "127.0.0.2"  # another address of the loopback: its own per-client count
FILES = 256  # the serve process's file limit: fewer than the sockets thrown at it
SOCKETS = 400
CAP = 40
HEADER_TIMEOUT = 2.0


def _files(limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


@contextlib.asynccontextmanager
async def serve(
    fake: FakeSlack, redis_url: str, workdir: Path, files: int = FILES
) -> AsyncIterator[tuple[str, Clawgate]]:
    port = free_port()
    env = serve_env(
        fake,
        redis_url,
        workdir,
        port,
        CLAWGATE_HTTP_HEADER_TIMEOUT=str(HEADER_TIMEOUT),
        CLAWGATE_HTTP_BODY_TIMEOUT=str(HEADER_TIMEOUT),
        CLAWGATE_HTTP_CLIENT_CONNECTIONS=str(CAP),
        CLAWGATE_HTTP_MAX_CONNECTIONS="150",
    )
    proc = await asyncio.create_subprocess_exec(
        *CLAWGATE,
        "serve",
        cwd=workdir,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_files(files),
    )
    process = Clawgate(proc, "serve")
    try:
        await process.wait_line("listening on")
        yield f"http://127.0.0.1:{port}", process
    finally:
        assert await process.stop() == 0, process.stderr
    assert "Traceback" not in process.stderr, process.stderr


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def stall(port: int, count: int = SOCKETS) -> list[socket.socket]:
    """`count` connections from ATTACKER, each with half a request line sent."""
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind((ATTACKER, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        with contextlib.suppress(OSError):  # closed by the server already
            sock.send(b"GET /healthz HT")
        sock.setblocking(False)
        sockets.append(sock)
    return sockets


def still_open(sockets: list[socket.socket]) -> int:
    count = 0
    for sock in sockets:
        try:
            count += sock.recv(1) != b""
        except BlockingIOError:
            count += 1  # nothing to read, not closed
        except OSError:
            pass  # reset by the server
    return count


async def test_stalled_connections_are_capped_and_timed_out_while_others_are_answered(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    async with serve(fake, redis_url, workdir) as (url, process):
        # The limit was said at start, with what to do.
        assert f"may open {FILES} files (`ulimit -n`)" in process.stderr
        port = int(url.rsplit(":", 1)[1])
        sockets = await asyncio.to_thread(stall, port)
        try:
            started = time.monotonic()
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
                session.get(f"{url}/healthz") as response,
            ):
                assert response.status == 200
            event = mention_event("run: echo still-answering")
            status, _ = await post_signed(f"{url}/slack/events", SECRET, event_body(event))
            assert status == 200
            # Past the cap, closed at once; the others still wait for their headers.
            assert still_open(sockets) <= CAP
            assert time.monotonic() - started < HEADER_TIMEOUT
            await fake.await_for(
                lambda: [c for c in fake.posts() if "still-answering" in str(c.params)],
                15,
                what="the answer to the mention",
            )
            deadline = time.monotonic() + HEADER_TIMEOUT + 3
            while still_open(sockets) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert still_open(sockets) == 0  # closed after the header timeout
        finally:
            for sock in sockets:
                sock.close()


async def test_a_body_that_trickles_in_gets_408(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    async with serve(fake, redis_url, workdir) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = (
            "POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{"
        )
        writer.write(head.encode())
        await writer.drain()
        started = time.monotonic()
        answer = await asyncio.wait_for(reader.readline(), HEADER_TIMEOUT + 5)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started >= HEADER_TIMEOUT - 0.5
        writer.close()


async def test_a_process_out_of_files_says_so_once_and_accepts_again(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    """With fewer files than the per-client cap, stalled sockets use them all: accepting fails
    (EMFILE). One line says so, with no traceback; once the header timeout frees the files,
    /healthz is answered again."""
    async with serve(fake, redis_url, workdir, files=CAP) as (url, process):
        port = int(url.rsplit(":", 1)[1])
        sockets = await asyncio.to_thread(stall, port, CAP + 20)
        try:
            await process.wait_line(r"http: cannot accept connections \(Too many open files")
            for sock in sockets:
                sock.close()
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session,
                session.get(f"{url}/healthz") as response,
            ):
                assert response.status == 200
        finally:
            for sock in sockets:
                sock.close()
    assert process.stderr.count("http: cannot accept connections") == 1, process.stderr
