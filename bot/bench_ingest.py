"""`clawgate bench ingest`: the real `clawgate serve` under signed chat-platform event traffic.

`--platform slack` (default): signed `app_mention` event callbacks to POST /slack/events;
`--platform feishu`: AES-256-CBC encrypted, signed `im.message.receive_v1` events (p2p text
messages from users) to POST /feishu/events. What differs between the two is one `Platform`:
the request builder, the fake API and the server's environment; the rest is shared.

Three processes: this one (load generator and end-to-end client), the server under test
(`python -m bot.cli serve` as a subprocess, demo model, its worker in process, keys under a
unique Redis prefix that is deleted afterwards) and a minimal fake of the platform's API (Slack
Web API or Feishu Open API) in its own process (multiprocessing, spawn), so neither the fake's
CPU nor the generator's runs inside the server. All three are on this machine and share its
cores with Redis.

ack: an open-loop generator sends freshly signed events, spread over many conversations (Slack
threads, Feishu chats), at fixed intervals for each rate, whatever the answers; the latency of a
request runs from its scheduled time to its HTTP 200, so queueing (in the server or in this
client) counts. Every accepted event also runs the agent in the server's worker: that is real
load on the same event loop, and the worker's backlog is drained between rates.

end-to-end: `--threads` closed loops, each posting a message in its own conversation and waiting
until the fake received the answer (the reply carrying the demo model's text, not the demo
notice or a progress message), timed from the message being sent to the answer arriving at the
fake (both on the system-wide monotonic clock). One unmeasured turn per conversation first: it
starts the conversation (and gets the demo notice).

Set CLAWGATE_BENCH_PROFILE=<file> to run the server under cProfile; the stats are written to
<file> when the server stops (`python -m pstats <file>`); with --split the worker's go to
<file>.worker.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import contextlib
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web
from Crypto.Cipher import AES  # pycryptodome: lark-oapi's own AES dependency
from redis.exceptions import RedisError
from slack_sdk.signature import SignatureVerifier

from bot.bench import _line, percentile
from bot.settings import Settings, SettingsError
from runtime.providers.demo import GRAMMAR
from runtime.store.connection import connect
from runtime.store.keys import Keys

TOKEN = "xoxb-bench"  # noqa: S105 - the fake Slack's, not a credential
SECRET = "clawgate-bench-signing-secret"  # noqa: S105 - signs only the bench's requests
TEAM = "TBENCH"
BOT_USER = "UBENCHBOT"
BOT_ID = "BBENCHBOT"
CHANNEL = "CBENCH"
FEISHU_APP_ID = "cli_bench"
FEISHU_APP_SECRET = "clawgate-bench-app-secret"  # noqa: S105 - the fake Feishu's
FEISHU_ENCRYPT_KEY = "clawgate-bench-encrypt-key"  # encrypts only the bench's requests
FEISHU_VERIFICATION_TOKEN = "clawgate-bench-verification-token"  # noqa: S105
FEISHU_TOKEN = "t-bench"  # noqa: S105 - the fake Feishu's tenant_access_token
FEISHU_BOT = "ou_bench_bot"
FEISHU_TENANT = "tenant_bench"
FEISHU_TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"  # noqa: S105
FEISHU_MESSAGES = "/open-apis/im/v1/messages"
QUESTION = "hello"  # the demo model answers it at once, without tools
ANSWER = GRAMMAR.splitlines()[0]  # how its answer starts (no characters Slack escapes)

DEFAULT_RATES = (100, 250, 500, 750, 1000, 1500)
ACK_CONVERSATIONS = 500  # conversations the ack traffic of one rate is spread over (fresh)
TARGET_RATE = 500
TARGET_ACK_P99_MS = 10.0
TARGET_E2E_P99_MS = 50.0
SUSTAINED_P99_MS = 100.0
KEPT_UP_S = 0.25
GIVE_UP_P99_MS = 1000.0  # a rate this slow ends the ramp: higher rates cannot be sustained
WARMUP_REQUESTS = 25
REQUEST_TIMEOUT = 30.0
REPLY_TIMEOUT = 30.0
DRAIN_TIMEOUT = 180.0
PROFILE_ENV = "CLAWGATE_BENCH_PROFILE"


class BenchError(Exception):
    """The bench could not run (the server did not start, a reply never came...)."""


# --- the fake platform API (its own process) ----------------------------------------------


class _FakeApi(abc.ABC):
    """What every fake shares: call counts, and when each answer (a message starting with the
    demo model's text) arrived, per conversation, which the bench can wait for."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.answers: dict[str, list[float]] = {}  # conversation -> monotonic arrival times
        self._waiters: dict[str, list[tuple[int, asyncio.Future[None]]]] = {}
        self._ids = itertools.count(1)

    @abc.abstractmethod
    def routes(self, router: web.UrlDispatcher) -> None:
        """Add the platform's API."""

    def app(self) -> web.Application:
        app = web.Application()
        self.routes(app.router)
        app.router.add_get("/bench/answers", self.wait_answers)
        app.router.add_get("/bench/stats", self.stats)
        return app

    def _answered(self, conversation: str, arrived: float) -> None:
        times = self.answers.setdefault(conversation, [])
        times.append(arrived)
        waiting = self._waiters.get(conversation, [])
        for count, future in waiting:
            if len(times) >= count and not future.done():
                future.set_result(None)
        self._waiters[conversation] = [(c, f) for c, f in waiting if not f.done()]

    async def wait_answers(self, request: web.Request) -> web.Response:
        """Arrival times of a conversation's answers, once it has `count` of them (or on
        timeout)."""
        conversation, count = request.query["conversation"], int(request.query["count"])
        timeout = float(request.query.get("timeout", REPLY_TIMEOUT))
        if len(self.answers.get(conversation, [])) < count:
            future = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(conversation, []).append((count, future))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout)
        return web.json_response({"times": self.answers.get(conversation, [])})

    async def stats(self, _: web.Request) -> web.Response:
        answers = sum(map(len, self.answers.values()))
        return web.json_response({"calls": dict(self.calls), "answers": answers})


class _FakeSlack(_FakeApi):
    """auth.test, chat.postMessage (increasing ts), chat.update, chat.postEphemeral; an answer
    is a post in a thread, counted for that thread's root ts."""

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post("/api/{method}", self.api)

    def _next_ts(self) -> str:
        n = next(self._ids)
        return f"{1_700_000_000 + n // 1_000_000}.{n % 1_000_000:06d}"

    async def api(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        method = request.match_info["method"]
        if not request.headers.get("Authorization", "").startswith("Bearer xoxb-"):
            return web.json_response({"ok": False, "error": "invalid_auth"})
        params: dict[str, Any] = dict(request.query)
        raw = await request.text()
        if raw.lstrip().startswith("{"):
            params.update(json.loads(raw))
        elif raw:
            params.update(parse_qsl(raw, keep_blank_values=True))
        self.calls[method] += 1
        channel = str(params.get("channel", ""))
        if method == "auth.test":
            body = {"ok": True, "user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM}
        elif method == "chat.postMessage":
            ts = self._next_ts()
            text = str(params.get("text", ""))
            if params.get("thread_ts") and text.startswith(ANSWER):
                self._answered(str(params["thread_ts"]), arrived)
            message = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": text}
            body = {"ok": True, "channel": channel, "ts": ts, "message": message | {"ts": ts}}
        elif method == "chat.update":
            body = {"ok": True, "channel": channel, "ts": params.get("ts", "")}
        elif method == "chat.postEphemeral":
            body = {"ok": True, "message_ts": self._next_ts()}
        else:
            body = {"ok": True}
        return web.json_response(body)


class _FakeFeishu(_FakeApi):
    """The tenant token (expire 7200 s), /bot/v3/info, message create / reply / update / patch;
    an answer is a text message sent or replied into a chat, counted for that chat (the bench's
    message ids end with their chat id: `om_<n>_<chat id>`). Calls are counted by kind: token,
    bot_info, send, reply, update, patch."""

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(FEISHU_TOKEN_PATH, self.token)
        for method, path, kind in (
            ("GET", "/open-apis/bot/v3/info", "bot_info"),
            ("POST", FEISHU_MESSAGES, "send"),
            ("POST", f"{FEISHU_MESSAGES}/{{id}}/reply", "reply"),
            ("PUT", f"{FEISHU_MESSAGES}/{{id}}", "update"),
            ("PATCH", f"{FEISHU_MESSAGES}/{{id}}", "patch"),
        ):
            router.add_route(method, path, functools.partial(self.open_api, kind))

    async def token(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        self.calls["token"] += 1
        if body.get("app_id") != FEISHU_APP_ID or body.get("app_secret") != FEISHU_APP_SECRET:
            return web.json_response({"code": 10014, "msg": "app secret invalid"}, status=400)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": FEISHU_TOKEN, "expire": 7200}
        )

    async def open_api(self, kind: str, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        if request.headers.get("Authorization") != f"Bearer {FEISHU_TOKEN}":
            return web.json_response({"code": 99991663, "msg": "invalid token"}, status=400)
        self.calls[kind] += 1
        if kind == "bot_info":
            bot = {"open_id": FEISHU_BOT, "app_name": "clawgate"}
            return web.json_response({"code": 0, "msg": "ok", "bot": bot})
        body = json.loads(await request.read() or b"{}")
        message_id = request.match_info.get("id", "")
        if kind in ("send", "reply"):
            chat = str(body.get("receive_id", "")) if kind == "send" else _chat_of(message_id)
            if chat and body.get("msg_type") == "text" and _feishu_text(body).startswith(ANSWER):
                self._answered(chat, arrived)
            message_id = f"om_{next(self._ids)}_{chat}"
        return web.json_response({"code": 0, "msg": "success", "data": {"message_id": message_id}})


def _chat_of(message_id: str) -> str:
    """The chat of a message id of the bench's or this fake's: `om_<n>_<chat id>`."""
    return message_id.split("_", 2)[2] if message_id.count("_") >= 2 else ""


def _feishu_text(body: dict[str, Any]) -> str:
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        return str(json.loads(body["content"]).get("text", ""))
    return ""


def _fake_main(platform: str, conn: Connection) -> None:
    """The fake's process (spawned): serve on a free port, say which, until terminated."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the bench, which stops us

    async def serve() -> None:
        runner = web.AppRunner(PLATFORMS[platform].fake().app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(runner.addresses[0][1])
        conn.close()
        await asyncio.Event().wait()

    asyncio.run(serve())


@contextlib.asynccontextmanager
async def _fake(platform: Platform) -> AsyncIterator[tuple[str, int]]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_fake_main,
        args=(platform.name, sender),
        name=f"clawgate-bench-fake-{platform.name}",
        daemon=True,
    )
    process.start()
    sender.close()
    try:
        if not await asyncio.to_thread(receiver.poll, 30):
            raise BenchError(f"the fake {platform.api} did not start")
        try:
            port = int(receiver.recv())
        except EOFError:
            raise BenchError(f"the fake {platform.api} process died while starting") from None
        assert process.pid is not None
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        receiver.close()
        process.terminate()
        await asyncio.to_thread(process.join, 5)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join, 5)


# --- the server under test ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_env(
    platform: Platform, redis_url: str, prefix: str, fake_url: str, port: int, workdir: Path
) -> dict[str, str]:
    """This environment without platform, model and proxy settings (the demo model answers;
    the platform clients would send 127.0.0.1 through a proxy), plus the bench's own."""
    dropped = ("SLACK_", "FEISHU_", "OPENAI_", "CLAWGATE_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(dropped) and not k.lower().endswith("_proxy")
    }
    keep = ("CLAWGATE_WORKER_CONCURRENCY", "CLAWGATE_RECLAIM_IDLE")  # tunables worth comparing
    env |= {k: os.environ[k] for k in keep if k in os.environ}
    # `-m bot.cli` from the temporary working directory: this checkout, installed or not
    source = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    return (
        env
        | platform.env(fake_url)
        | {
            "REDIS_URL": redis_url,
            "CLAWGATE_REDIS_PREFIX": prefix,
            "CLAWGATE_HOST": "127.0.0.1",
            "CLAWGATE_PORT": str(port),
            "CLAWGATE_WORKDIR": str(workdir),
            "CLAWGATE_LOG_LEVEL": "WARNING",
            "CLAWGATE_SHUTDOWN_GRACE": "5",
        }
    )


@contextlib.asynccontextmanager
async def _process(
    command: str, env: dict[str, str], workdir: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`clawgate <command>` in a subprocess logging to <workdir>/<command>.log; terminated
    (SIGTERM, then SIGKILL after 30 s) on exit."""
    argv = [sys.executable, "-m", "bot.cli", command]
    profile = os.environ.get(PROFILE_ENV)
    if profile:
        target = os.path.abspath(profile if command == "serve" else f"{profile}.{command}")  # noqa: ASYNC240
        argv[1:1] = ["-m", "cProfile", "-o", target]
    with (workdir / f"{command}.log").open("wb") as log:
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
async def _server(
    platform: Platform, redis_url: str, prefix: str, fake_url: str, workdir: Path, split: bool
) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """`clawgate serve` in a subprocess (with `split`: without its worker, plus one
    `clawgate worker` process); yields its base URL and the pids once /readyz answers."""
    port = _free_port()
    env = _server_env(platform, redis_url, prefix, fake_url, port, workdir)
    url = f"http://127.0.0.1:{port}"
    if not split:
        async with _process("serve", env, workdir) as serve:
            await _wait_ready(url, serve, workdir / "serve.log")
            yield url, {"server": serve.pid}
        return
    env["CLAWGATE_INPROCESS_WORKER"] = "false"
    async with _process("worker", env, workdir) as worker, _process("serve", env, workdir) as serve:
        await _wait_ready(url, serve, workdir / "serve.log")
        yield url, {"server": serve.pid, "worker": worker.pid}


def _tail(path: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


async def _wait_ready(url: str, process: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise BenchError(f"the server exited ({process.returncode}):\n{_tail(log)}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(f"{url}/readyz") as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise BenchError(f"the server was not ready within 60 s:\n{_tail(log)}")


async def _delete_prefix(redis_url: str, prefix: str) -> int:
    redis = connect(redis_url)
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


# --- signed requests ----------------------------------------------------------------------


class _Events(abc.ABC):
    """Freshly signed event requests of one platform, each with unique ids: a user asks
    QUESTION in a conversation (a Slack thread, a Feishu chat)."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    @abc.abstractmethod
    def request(self, user: int, conversation: str | None) -> tuple[str, bytes, dict[str, str]]:
        """(conversation, body, headers) of a message in `conversation`, or starting a new one
        (None): the conversation is what the fake records the answers under."""

    def spread(self, count: int, conversations: int) -> list[tuple[bytes, dict[str, str]]]:
        """`count` messages round-robin over `conversations` new conversations."""
        started: list[str] = []
        requests = []
        for i in range(count):
            index = i % conversations
            key, body, headers = self.request(index, started[index] if i >= conversations else None)
            if i < conversations:
                started.append(key)
            requests.append((body, headers))
        return requests


class _SlackMentions(_Events):
    """Signed `app_mention` event callbacks with unique event ids and message ts; a new
    conversation is a new thread, named by its root's ts."""

    def __init__(self) -> None:
        super().__init__()
        self._verifier = SignatureVerifier(SECRET)
        self._base_us = int(time.time()) * 1_000_000

    def request(self, user: int, conversation: str | None) -> tuple[str, bytes, dict[str, str]]:
        micros = self._base_us + next(self._n)
        ts = f"{micros // 1_000_000}.{micros % 1_000_000:06d}"
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": f"U{user:08d}",
            "text": f"<@{BOT_USER}> {QUESTION}",
            "ts": ts,
            "team": TEAM,
            "channel": CHANNEL,
            "event_ts": ts,
        }
        if conversation is not None:
            event["thread_ts"] = conversation
        now = int(time.time())
        body = json.dumps(
            {
                "token": "bench",
                "team_id": TEAM,
                "api_app_id": "ABENCH",
                "event": event,
                "type": "event_callback",
                "event_id": f"Ev{ts.replace('.', '')}",
                "event_time": now,
                "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
            }
        )
        signature = self._verifier.generate_signature(timestamp=str(now), body=body)
        assert signature is not None
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": signature,
        }
        return conversation or ts, body.encode(), headers


class _FeishuMessages(_Events):
    """Schema 2.0 `im.message.receive_v1` events as Feishu posts them to an app with an
    encrypt key: `{"encrypt": base64(IV + AES-256-CBC(PKCS7(json)))}` with the key
    sha256(encrypt key), signed with X-Lark-Signature = sha256(timestamp + nonce + encrypt key
    + body). Text messages from a user in a p2p chat (answered with a reply to the message); a
    new conversation is a new chat."""

    def __init__(self) -> None:
        super().__init__()
        self._key = hashlib.sha256(FEISHU_ENCRYPT_KEY.encode()).digest()
        self._chats = itertools.count(1)

    def _encrypt(self, plain: bytes) -> str:
        pad = AES.block_size - len(plain) % AES.block_size
        iv = os.urandom(AES.block_size)
        sealed = AES.new(self._key, AES.MODE_CBC, iv).encrypt(plain + bytes([pad]) * pad)
        return base64.b64encode(iv + sealed).decode()

    def request(self, user: int, conversation: str | None) -> tuple[str, bytes, dict[str, str]]:
        chat = conversation or f"oc_bench{next(self._chats):08d}"
        n, now = next(self._n), time.time()
        millis, sender = str(int(now * 1000)), f"ou_user{user:08d}"
        envelope = {
            "schema": "2.0",
            "header": {
                "event_id": f"bench{n:012d}",
                "event_type": "im.message.receive_v1",
                "create_time": millis,
                "token": FEISHU_VERIFICATION_TOKEN,
                "app_id": FEISHU_APP_ID,
                "tenant_key": FEISHU_TENANT,
            },
            "event": {
                "sender": {
                    "sender_id": {"open_id": sender, "union_id": f"on_{user:08d}"},
                    "sender_type": "user",
                    "tenant_key": FEISHU_TENANT,
                },
                "message": {
                    "message_id": f"om_{n}_{chat}",  # the fake finds the chat of a reply here
                    "create_time": millis,
                    "update_time": millis,
                    "chat_id": chat,
                    "chat_type": "p2p",
                    "message_type": "text",
                    "content": json.dumps({"text": QUESTION}),
                    "mentions": [],
                },
            },
        }
        body = json.dumps({"encrypt": self._encrypt(json.dumps(envelope).encode())}).encode()
        timestamp, nonce = str(int(now)), f"{n:016x}"
        signed = (timestamp + nonce + FEISHU_ENCRYPT_KEY).encode() + body
        headers = {
            "Content-Type": "application/json",
            "X-Lark-Request-Timestamp": timestamp,
            "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": hashlib.sha256(signed).hexdigest(),
        }
        return chat, body, headers


# --- the platforms ------------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """What the bench does differently per platform."""

    name: str
    label: str
    api: str  # the fake's name
    events_path: str
    traffic: str  # what the ack load is
    conversation: str  # what one end-to-end loop talks in
    fake: type[_FakeApi]
    events: type[_Events]
    env: Callable[[str], dict[str, str]]  # the server's settings, given the fake's URL


def _slack_env(fake_url: str) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": f"{fake_url}/api/",
    }


def _feishu_env(fake_url: str) -> dict[str, str]:
    return {
        "FEISHU_APP_ID": FEISHU_APP_ID,
        "FEISHU_APP_SECRET": FEISHU_APP_SECRET,
        "FEISHU_ENCRYPT_KEY": FEISHU_ENCRYPT_KEY,
        "FEISHU_VERIFICATION_TOKEN": FEISHU_VERIFICATION_TOKEN,
        "FEISHU_DOMAIN": fake_url,  # lark-oapi takes http:// for 127.0.0.1 only
    }


PLATFORMS = {
    platform.name: platform
    for platform in (
        Platform(
            "slack",
            "Slack",
            "Slack Web API",
            "/slack/events",
            "signed app_mention events",
            "thread",
            _FakeSlack,
            _SlackMentions,
            _slack_env,
        ),
        Platform(
            "feishu",
            "Feishu",
            "Feishu Open API",
            "/feishu/events",
            "encrypted, signed im.message.receive_v1 events (p2p text messages)",
            "chat",
            _FakeFeishu,
            _FeishuMessages,
            _feishu_env,
        ),
    )
}


# --- ack latency: open loop ---------------------------------------------------------------


@dataclass
class AckStep:
    rate: int
    sent: int
    latencies_us: list[float] = field(default_factory=list)  # of HTTP 200s, from schedule
    lag_us: list[float] = field(default_factory=list)  # how late this client sent
    errors: Counter[str] = field(default_factory=Counter)
    span_s: float = 0.0  # first scheduled send to last answer
    backlog: int = 0  # events still queued for the worker when the step ended
    drain_s: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.latencies_us)

    @property
    def achieved(self) -> float:
        return self.ok / self.span_s if self.span_s else 0.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_us, 0.99) / 1000 if self.latencies_us else float("inf")

    @property
    def sustained(self) -> bool:
        return not self.errors and self.ok == self.sent and self.p99_ms < SUSTAINED_P99_MS


async def _send(
    session: aiohttp.ClientSession,
    url: str,
    request: tuple[bytes, dict[str, str]],
    due: float,
    step: AckStep,
) -> float:
    """One request scheduled at `due`; returns when its answer came."""
    step.lag_us.append((time.monotonic() - due) * 1e6)
    body, headers = request
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            await resp.read()
            status = resp.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        step.errors[type(exc).__name__] += 1
        return time.monotonic()
    done = time.monotonic()
    if status == 200:
        step.latencies_us.append((done - due) * 1e6)
    else:
        step.errors[f"HTTP {status}"] += 1
    return done


async def _open_loop(
    session: aiohttp.ClientSession,
    url: str,
    requests: Sequence[tuple[bytes, dict[str, str]]],
    rate: float,
) -> AckStep:
    step = AckStep(rate=int(rate), sent=len(requests))
    interval = 1.0 / rate
    start = time.monotonic() + 0.01
    tasks = []
    for i, request in enumerate(requests):
        due = start + i * interval
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_send(session, url, request, due, step)))
    finished = await asyncio.gather(*tasks)
    step.span_s = max(finished) - start if finished else 0.0
    return step


async def _drain(redis_url: str, prefix: str, limit_s: float = DRAIN_TIMEOUT) -> tuple[int, float]:
    """Wait until the worker finished every queued event (acknowledged jobs are deleted from
    the stream, so its length is what is left); returns (backlog at the start, seconds)."""
    redis = connect(redis_url)
    stream = Keys(prefix).inbox_stream()
    started = time.monotonic()
    try:
        backlog = left = int(await redis.xlen(stream))
        while left:
            if time.monotonic() - started > limit_s:
                raise BenchError(f"the worker still had {left} events queued after {limit_s:.0f} s")
            await asyncio.sleep(0.05)
            left = int(await redis.xlen(stream))
    finally:
        await redis.aclose()
    return backlog, time.monotonic() - started


# --- end to end: closed loops ---------------------------------------------------------------


async def _conversation_loop(
    session: aiohttp.ClientSession,
    events_url: str,
    fake_url: str,
    events: _Events,
    user: int,
    turns: int,
) -> list[float]:
    """One conversation: a message, wait for its answer, again; the first turn (which starts
    the conversation) is not measured."""
    conversation: str | None = None
    samples = []
    for turn in range(turns + 1):
        conversation, body, headers = events.request(user, conversation)
        sent = time.monotonic()
        async with session.post(events_url, data=body, headers=headers) as resp:
            await resp.read()
            if resp.status != 200:
                raise BenchError(f"a message was answered with HTTP {resp.status}")
        query = {"conversation": conversation, "count": str(turn + 1)}
        query["timeout"] = str(REPLY_TIMEOUT)
        async with session.get(f"{fake_url}/bench/answers", params=query) as resp:
            times = (await resp.json())["times"]
        if len(times) <= turn:
            raise BenchError(f"no answer in {conversation} within {REPLY_TIMEOUT:.0f} s")
        if turn:
            samples.append((times[turn] - sent) * 1e6)
    return samples


# --- the bench ----------------------------------------------------------------------------


@dataclass
class IngestReport:
    steps: list[AckStep]
    e2e_us: list[float]
    e2e_turns: int  # with the unmeasured first turn of each thread
    e2e_s: float
    e2e_cpu_ms: dict[str, float]  # per turn
    fake_calls: dict[str, int]
    keys_deleted: int = 0
    platform: str = "slack"

    def step(self, rate: int) -> AckStep | None:
        return next((s for s in self.steps if s.rate == rate), None)

    @property
    def sustained(self) -> int | None:
        """The highest rate held (ack p99 under 100 ms, no errors) with every lower rate too."""
        return _streak(self.steps, lambda step: step.sustained)

    @property
    def worker_kept_up(self) -> int | None:
        """The highest rate after which less than a quarter second of traffic was queued."""
        return _streak(self.steps, lambda step: step.backlog <= step.rate * KEPT_UP_S)


def _streak(steps: Sequence[AckStep], held: Callable[[AckStep], bool]) -> int | None:
    best = None
    for step in sorted(steps, key=lambda s: s.rate):
        if not held(step):
            break
        best = step.rate
    return best


def _connector() -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(limit=512, limit_per_host=512)


def _ack_line(step: AckStep) -> str:
    label = f"ack at {step.rate}/s (achieved {step.achieved:.0f}/s)"
    errors = ", ".join(f"{n} {kind}" for kind, n in step.errors.items()) or "0"
    head = _line(label, step.latencies_us) if step.latencies_us else f"{label:<44} no answers"
    late = percentile(step.lag_us, 0.99) / 1000 if step.lag_us else 0.0
    tail = f"   max {max(step.latencies_us, default=0) / 1000:7.1f} ms   errors {errors}"
    return head + tail + (f"   (this client sent up to {late:.0f} ms late)" if late > 5 else "")


class _Cpu:
    """CPU seconds used so far by each process of the bench: the server and the fake (from
    /proc, Linux only), Redis (INFO, all its clients) and this client."""

    def __init__(self, redis_url: str, pids: dict[str, int]) -> None:
        self.redis = connect(redis_url)
        self.pids = pids

    async def read(self) -> dict[str, float]:
        used = {name: cpu for name, pid in self.pids.items() if (cpu := _proc_cpu(pid)) is not None}
        with contextlib.suppress(RedisError, OSError):
            info = await self.redis.info("cpu")
            used["redis"] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        used["bench client"] = time.process_time()
        return used

    async def per_event(self, before: dict[str, float], events: int) -> dict[str, float]:
        """CPU milliseconds per event since `before`."""
        after = await self.read()
        return {k: (after[k] - before[k]) * 1000 / max(1, events) for k in after if k in before}

    async def aclose(self) -> None:
        await self.redis.aclose()


def _proc_cpu(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_line(cpu_ms: dict[str, float], wall_s: float, events: int, per: str = "event") -> str:
    """CPU per event of each process, and how busy the server's one event loop was."""
    parts = ", ".join(f"{name} {ms:.2f}" for name, ms in cpu_ms.items())
    busy = cpu_ms.get("server", 0.0) * events / 1000 / wall_s if wall_s else 0.0
    return f"     CPU ms per {per}: {parts}; server busy {busy:.0%} of one core"


async def bench_ingest(
    redis_url: str,
    prefix: str,
    *,
    platform: str = "slack",
    rates: Sequence[int] = DEFAULT_RATES,
    duration: float = 3.0,
    threads: int = 50,
    turns: int = 20,
    split: bool = False,
    out: Callable[[str], None] = print,
) -> IngestReport:
    spec = PLATFORMS[platform]
    events = spec.events()
    steps: list[AckStep] = []
    with tempfile.TemporaryDirectory(prefix="clawgate-bench-") as tmp:
        try:
            async with (
                _fake(spec) as (fake_url, fake_pid),
                _server(spec, redis_url, prefix, fake_url, Path(tmp), split) as (server_url, pids),
                aiohttp.ClientSession(
                    connector=_connector(),
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                ) as session,
            ):
                cpu = _Cpu(redis_url, pids | {f"fake {spec.label}": fake_pid})
                try:
                    events_url = f"{server_url}{spec.events_path}"
                    warmup = events.spread(WARMUP_REQUESTS, WARMUP_REQUESTS)
                    warm = await _open_loop(session, events_url, warmup, 50)
                    if warm.errors:
                        raise BenchError(f"warm-up requests failed: {dict(warm.errors)}")
                    await _drain(redis_url, prefix)
                    out(
                        f"ack: {spec.traffic}, open loop, latency from the scheduled send to "
                        "HTTP 200;"
                    )
                    out(
                        "     a worker process runs the agent for every accepted event (real "
                        "load); its backlog is drained between rates"
                        if split
                        else "     the server's worker runs the agent for every accepted event "
                        "on the same event loop (real load); its backlog is drained between rates"
                    )
                    for rate in rates:
                        count = max(1, round(rate * duration))
                        requests = events.spread(count, min(ACK_CONVERSATIONS, count))
                        before, started = await cpu.read(), time.monotonic()
                        step = await _open_loop(session, events_url, requests, rate)
                        step.backlog, step.drain_s = await _drain(redis_url, prefix)
                        cpu_ms = await cpu.per_event(before, count)
                        steps.append(step)
                        out(_ack_line(step))
                        out(_cpu_line(cpu_ms, time.monotonic() - started, count))
                        out(
                            f"     worker backlog at the end: {step.backlog} events, "
                            f"drained in {step.drain_s:.1f} s"
                        )
                        if step.p99_ms >= GIVE_UP_P99_MS:
                            out(f"     (stopping the ramp: p99 >= {GIVE_UP_P99_MS:.0f} ms)")
                            break
                    before, started = await cpu.read(), time.monotonic()
                    loops = [
                        _conversation_loop(session, events_url, fake_url, events, 10_000 + i, turns)
                        for i in range(threads)
                    ]
                    e2e = [s for samples in await asyncio.gather(*loops) for s in samples]
                    e2e_s = time.monotonic() - started
                    all_turns = threads * (turns + 1)
                    e2e_cpu = await cpu.per_event(before, all_turns)
                    async with session.get(f"{fake_url}/bench/stats") as resp:
                        stats = await resp.json()
                finally:
                    await cpu.aclose()
        finally:
            deleted = await _delete_prefix(redis_url, prefix)
            for name in ("serve", "worker"):
                _show_server_log(Path(tmp) / f"{name}.log", out)
    return IngestReport(steps, e2e, all_turns, e2e_s, e2e_cpu, stats["calls"], deleted, platform)


def _show_server_log(path: Path, out: Callable[[str], None], limit: int = 8) -> None:
    """What the server logged (warnings and worse), distinct lines first seen, counted."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return
    quiet = ("clawgate: listening", "clawgate: worker", "clawgate: stopping")
    seen = Counter(line for line in lines if line.strip() and not line.startswith(quiet))
    if not seen:
        return
    out(f"{path.stem} log: {sum(seen.values())} line(s), {len(seen)} distinct; the first ones:")
    for line, n in itertools.islice(seen.items(), limit):
        out(f"  {n:6d} x {line[:200]}")


def _verdicts(report: IngestReport, threads: int, turns: int) -> list[str]:
    lines = []
    sustained, kept_up = report.sustained, report.worker_kept_up
    conversations = f"{PLATFORMS[report.platform].conversation}s"
    lines.append(
        f"highest rate sustained (ack p99 < {SUSTAINED_P99_MS:.0f} ms, no errors, every lower "
        "rate too): " + (f"{sustained}/s" if sustained else "none of the rates tried")
    )
    lines.append(
        f"highest rate the worker kept up with (< {KEPT_UP_S} s of traffic queued at the end): "
        + (f"{kept_up}/s" if kept_up else "none of the rates tried")
    )
    if report.e2e_us:
        lines.append(
            _line(f"end to end, {threads} {conversations} x {turns} turns", report.e2e_us)
            + f"   max {max(report.e2e_us) / 1000:7.1f} ms"
            + f"   ({report.e2e_turns / report.e2e_s:.0f} turns/s)"
        )
        lines.append(_cpu_line(report.e2e_cpu_ms, report.e2e_s, report.e2e_turns, "turn"))
    target = report.step(TARGET_RATE)
    if target is None:
        lines.append(
            f"verdict: ack p99 at {TARGET_RATE}/s: not measured ({TARGET_RATE} not in --rates)"
        )
    else:
        ok = target.sustained and target.p99_ms <= TARGET_ACK_P99_MS
        lines.append(
            f"verdict: ack p99 at {TARGET_RATE}/s = {target.p99_ms:.1f} ms "
            f"(target <= {TARGET_ACK_P99_MS:.0f} ms): {'PASS' if ok else 'FAIL'}"
        )
    if report.e2e_us:
        p99 = percentile(report.e2e_us, 0.99) / 1000
        verdict = "PASS" if p99 <= TARGET_E2E_P99_MS else "FAIL"
        lines.append(
            f"verdict: end-to-end p99 = {p99:.1f} ms "
            f"(target <= {TARGET_E2E_P99_MS:.0f} ms): {verdict}"
        )
    return lines


async def run_ingest_bench(
    settings: Settings,
    rates: Sequence[int],
    duration: float,
    threads: int,
    turns: int,
    split: bool = False,
    platform: str = "slack",
) -> int:
    if not settings.redis_url:
        raise SettingsError(
            "REDIS_URL: required for `clawgate bench ingest` (the server under test and the "
            "bench share it; keys go under a throwaway prefix, deleted afterwards)"
        )
    prefix = f"{settings.redis_prefix}-bench-ingest-{time.time_ns()}"
    topology = (
        "clawgate serve without its worker + one clawgate worker process"
        if split
        else "clawgate serve with its in-process worker"
    )
    fake = PLATFORMS[platform].api
    print(
        f"{topology} (demo model) against a fake {fake} in its own process; "
        f"redis {settings.redis_url}, prefix {prefix} (deleted afterwards)"
    )
    print(
        f"this machine has {os.cpu_count()} CPUs, shared by the server, Redis, the fake {fake} "
        "and this load generator"
    )
    try:
        report = await bench_ingest(
            settings.redis_url,
            prefix,
            platform=platform,
            rates=rates,
            duration=duration,
            threads=threads,
            turns=turns,
            split=split,
        )
    except (BenchError, aiohttp.ClientError, RedisError, OSError) as exc:
        for line in (str(exc) or type(exc).__name__).splitlines():
            print(f"clawgate: bench ingest: {line}", file=sys.stderr)
        return 1
    for line in _verdicts(report, threads, turns):
        print(line)
    return 0
