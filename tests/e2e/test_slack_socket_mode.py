"""`clawgate serve` in Socket Mode (SLACK_APP_TOKEN) against the fake Slack's websocket:
envelopes are acknowledged only once queued, answered in the thread, redeliveries run once,
slash commands answer through their response_url, and nothing is acked while Redis is down."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import free_port
from tests.e2e.test_worker_processes import Clawgate, serve_env
from tests.fake_slack import (
    FakeSlack,
    command_payload,
    event_payload,
    mention_event,
    message_event,
)

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

CHANNEL = "C111"
APP_TOKEN = "xapp-1-A111-test"


def socket_env(fake: FakeSlack, redis_url: str, workdir: Path) -> dict[str, str]:
    env = serve_env(fake, redis_url, workdir, free_port(), SLACK_APP_TOKEN=APP_TOKEN)
    del env["SLACK_SIGNING_SECRET"]  # Socket Mode needs no signing secret
    return env


@contextlib.asynccontextmanager
async def socket_serve(fake: FakeSlack, redis_url: str, workdir: Path) -> AsyncIterator[Clawgate]:
    serve = await Clawgate.start("serve", socket_env(fake, redis_url, workdir), workdir)
    try:
        await serve.wait_line(r"platforms: slack \(socket mode\)")
        await fake.await_connected(timeout=20)
        yield serve
    finally:
        assert await serve.stop() == 0, serve.stderr


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


def answers(fake: FakeSlack, thread_ts: str, prefix: str) -> list[str]:
    return [
        str(call.params["text"])
        for call in fake.posts(channel=CHANNEL, thread_ts=thread_ts)
        if str(call.params.get("text", "")).startswith(prefix)
    ]


async def test_mentions_are_acked_answered_and_run_once_across_redeliveries(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    async with socket_serve(fake, redis_url, workdir) as serve:
        opened = fake.calls("apps.connections.open")
        assert opened and opened[0].headers["Authorization"] == f"Bearer {APP_TOKEN}"

        event = mention_event("run: echo hello-socket", channel=CHANNEL)
        payload = event_payload(event, event_id="EvSocket0001")
        envelope = await fake.asend_envelope("events_api", payload)
        assert await fake.await_ack(envelope, timeout=10) == {"envelope_id": envelope}
        thread = str(event["ts"])  # a top-level mention is answered in its own thread
        await fake.await_for(lambda: answers(fake, thread, "hello-socket"), timeout=15)

        # The connection drops; Slack redelivers the same event on the new one.
        await fake.adisconnect_all()
        await fake.await_for(
            lambda: fake.connects >= 2 and fake.connection_count == 1,
            timeout=20,
            what="reconnect",
        )
        again = await fake.asend_envelope("events_api", payload, retry_attempt=1)
        assert await fake.await_ack(again, timeout=10) == {"envelope_id": again}
        # The same message delivered as a `message` event (another event id): also a duplicate.
        same_message = message_event(
            event["text"], channel=CHANNEL, ts=event["ts"], channel_type="channel"
        )
        other = await fake.asend_envelope(
            "events_api", event_payload(same_message, event_id="EvSocket0002")
        )
        await fake.await_ack(other, timeout=10)
        # A new message in the thread still runs, after the first.
        follow_up = mention_event("run: echo second-socket", channel=CHANNEL, thread_ts=thread)
        third = await fake.asend_envelope("events_api", event_payload(follow_up))
        await fake.await_ack(third, timeout=10)
        await fake.await_for(lambda: answers(fake, thread, "second-socket"), timeout=15)
        await asyncio.sleep(1.5)  # longer than the reclaim idle time

        assert len(answers(fake, thread, "hello-socket")) == 1
        assert len(answers(fake, thread, "second-socket")) == 1
        texts = [str(c.params["text"]) for c in fake.posts(channel=CHANNEL, thread_ts=thread)]
        assert texts.index(answers(fake, thread, "hello-socket")[0]) < texts.index(
            answers(fake, thread, "second-socket")[0]
        )
    assert serve.stderr.count("run stopped (final)") == 2, serve.stderr


async def test_slash_command_is_acked_and_answered_through_response_url(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    async with socket_serve(fake, redis_url, workdir):
        response_url = fake.new_response_url()
        payload = command_payload("/clawgate", "help", response_url=response_url)
        envelope = await fake.asend_envelope(
            "slash_commands", payload, accepts_response_payload=True
        )
        ack = await fake.await_ack(envelope, timeout=10)
        assert ack["envelope_id"] == envelope
        [response] = await fake.await_for(lambda: fake.responses(response_url), timeout=15)
        assert response.body["response_type"] == "ephemeral"
        help_text = response.body["text"]
        assert "/approve &lt;id&gt;" in help_text  # Slack-escaped help text
        # Slack's own forms: only its registered slash commands typed bare, the rest through
        # /clawgate (a bare /pending is "not a valid command" there); aligned in a code block.
        assert "  /clawgate pending " in help_text and "  /clawgate cancel " in help_text
        assert "  /pending " not in help_text and "  /clawgate help " in help_text
        assert help_text.count("```") == 2
        assert fake.posts() == []  # nothing in the channel itself


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    """A Redis server of this test's own, to stop and start again."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server to stop and restart it")
    server = OwnRedis(free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()


class OwnRedis:
    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", self._dir.name),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


async def test_nothing_is_acked_while_redis_is_down_and_the_retry_runs(
    fake: FakeSlack, own_redis: OwnRedis, workdir: Path
) -> None:
    async with socket_serve(fake, own_redis.url, workdir) as serve:
        own_redis.stop()
        event = mention_event("run: echo after-outage", channel=CHANNEL)
        payload = event_payload(event)
        envelope = await fake.asend_envelope("events_api", payload)
        await asyncio.sleep(2.0)
        assert fake.ack_for(envelope) is None  # not queued, so not acknowledged: Slack retries
        assert "answering 503" in serve.stderr

        own_redis.start()  # back, empty (no persistence)
        retry = await fake.asend_envelope("events_api", payload, retry_attempt=1)
        await fake.await_ack(retry, timeout=10)
        thread = str(event["ts"])
        try:
            await fake.await_for(lambda: answers(fake, thread, "after-outage"), timeout=15)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nclawgate serve stderr:\n{serve.stderr}") from None
        assert len(answers(fake, thread, "after-outage")) == 1


async def test_a_refused_app_token_stops_serve_with_one_line_and_the_fix(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    fake.respond_with("apps.connections.open", {"ok": False, "error": "invalid_auth"})
    serve = await Clawgate.start("serve", socket_env(fake, redis_url, workdir), workdir)
    try:
        code = await asyncio.wait_for(serve.proc.wait(), timeout=30)
    finally:
        await serve.stop()
    assert code == 2, serve.stderr  # a bad setting, as a refused SLACK_BOT_TOKEN
    refusals = [line for line in serve.lines if "SLACK_APP_TOKEN" in line]
    assert len(refusals) == 1, serve.stderr
    assert "Slack refused it (invalid_auth)" in refusals[0]
    assert "connections:write" in refusals[0]  # the fix
    assert "Traceback" not in serve.stderr
    assert len(fake.attempts("apps.connections.open")) == 1  # asked once, not in a loop


async def test_while_socket_mode_cannot_connect_serve_is_not_ready_and_sigterm_stops_it(
    fake: FakeSlack, redis_url: str, workdir: Path
) -> None:
    """Slack failing on its side: Socket Mode retries, /readyz says why it is not ready, and
    SIGTERM ends the process within the shutdown grace (it took SIGKILL before)."""
    fake.respond_with("apps.connections.open", {"ok": False, "error": "internal_error"})
    env = socket_env(fake, redis_url, workdir)
    serve = await Clawgate.start("serve", env, workdir)
    url = f"http://127.0.0.1:{env['CLAWGATE_PORT']}/readyz"
    try:
        await fake.await_for(
            lambda: len(fake.attempts("apps.connections.open")) >= 2, 20, what="a retry"
        )
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 503
            assert "the slack socket mode connection is down" in await response.text()
        started = time.monotonic()
        serve.proc.terminate()
        code = await asyncio.wait_for(serve.proc.wait(), timeout=15)
        grace = float(env["CLAWGATE_SHUTDOWN_GRACE"])
        assert time.monotonic() - started < grace + 3, serve.stderr
        assert code == 0, serve.stderr
    finally:
        await serve.stop()
