"""The platforms `clawgate bench ingest` drives: for Slack and Feishu, the fake API (run in its
own process), the signed (for Feishu, encrypted) event requests, and the server's settings."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from adapters.feishu.crypto import encrypt
from bot.bench.spawned import app_process
from runtime.providers.demo import GRAMMAR

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
FEISHU_CARDS = "/open-apis/cardkit/v1/cards"
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


# --- the fake platform API (its own process) ----------------------------------------------


class _FakeApi(abc.ABC):
    """What every fake shares: call counts, and when each answer (a message starting with
    `answer`: the demo model's text, or the bench model's) arrived, per conversation, which the
    bench can wait for."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
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
    is a post in a thread (its text, which a markdown block comes with), counted for that
    thread's root ts."""

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_route("*", "/api/{method}", self.api)  # slack_sdk GETs some (replies)

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
            if params.get("thread_ts") and text.startswith(self.answer):
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
    """The tenant token (expire 7200 s), /bot/v3/info, message create / reply / update /
    patch, CardKit's card entities (create, id_convert, content, settings, update); an answer
    is a Markdown card (or a text) sent or replied into a chat, or a card entity's answer
    once it is sent there, counted for that chat once (the bench's message ids end with
    their chat id: `om_<n>_<chat id>`). Calls are counted by kind: token, bot_info, send,
    reply, update, patch, card_create, card_id_convert, card_content, card_settings,
    card_update."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self._cards: dict[str, str] = {}  # card_id -> its answer's text, as it is now
        self._sent: dict[str, tuple[str, str]] = {}  # card_id / message id -> the other, chat

    def routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(FEISHU_TOKEN_PATH, self.token)
        for method, path, kind in (
            ("GET", "/open-apis/bot/v3/info", "bot_info"),
            ("POST", FEISHU_MESSAGES, "send"),
            ("POST", f"{FEISHU_MESSAGES}/{{id}}/reply", "reply"),
            ("PUT", f"{FEISHU_MESSAGES}/{{id}}", "update"),
            ("PATCH", f"{FEISHU_MESSAGES}/{{id}}", "patch"),
            ("POST", FEISHU_CARDS, "card_create"),
            ("POST", f"{FEISHU_CARDS}/id_convert", "card_id_convert"),
            ("PUT", f"{FEISHU_CARDS}/{{id}}/elements/{{element}}/content", "card_content"),
            ("PATCH", f"{FEISHU_CARDS}/{{id}}/settings", "card_settings"),
            ("PUT", f"{FEISHU_CARDS}/{{id}}", "card_update"),
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
        if kind.startswith("card_"):
            return web.json_response(
                {"code": 0, "msg": "success", "data": self._card(kind, body, request, arrived)}
            )
        if kind in ("send", "reply"):
            chat = str(body.get("receive_id", "")) if kind == "send" else _chat_of(message_id)
            message_id = f"om_{next(self._ids)}_{chat}"
            card_id = _card_id(body)
            if card_id is not None:
                self._sent[card_id] = self._sent[message_id] = (card_id, chat)
            text = self._cards.get(card_id, "") if card_id else _feishu_text(body)
            if chat and text.startswith(self.answer):
                self._answered(chat, arrived)
        return web.json_response({"code": 0, "msg": "success", "data": {"message_id": message_id}})

    def _card(
        self, kind: str, body: dict[str, Any], request: web.Request, arrived: float
    ) -> dict[str, str]:
        """A card entity's call: made, found, its answer changed (counted once it shows the
        demo answer in a chat)."""
        if kind == "card_id_convert":
            return {"card_id": self._sent.get(str(body.get("message_id")), ("", ""))[0]}
        card_id = request.match_info.get("id") or f"{next(self._ids):019d}"
        before = self._cards.get(card_id, "")
        if kind == "card_create":
            self._cards[card_id] = _card_answer(str(body.get("data", "")))
        elif kind == "card_update":
            self._cards[card_id] = _card_answer(str((body.get("card") or {}).get("data", "")))
        elif kind == "card_content" and request.match_info.get("element") == "answer":
            self._cards[card_id] = str(body.get("content", ""))
        chat = self._sent.get(card_id, ("", ""))[1]
        if (
            chat
            and not before.startswith(self.answer)
            and self._cards[card_id].startswith(self.answer)
        ):
            self._answered(chat, arrived)
        return {"card_id": card_id} if kind == "card_create" else {}


def _chat_of(message_id: str) -> str:
    """The chat of a message id of the bench's or this fake's: `om_<n>_<chat id>`."""
    return message_id.split("_", 2)[2] if message_id.count("_") >= 2 else ""


def _card_id(body: dict[str, Any]) -> str | None:
    """The card entity a card message sends, if it sends one."""
    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
        content = json.loads(body["content"])
        if content.get("type") == "card":
            return str(content["data"]["card_id"])
    return None


def _card_answer(data: str) -> str:
    """What a card entity's JSON says in its answer element (adapters/feishu/cardkit.py)."""
    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
        for element in json.loads(data)["body"]["elements"]:
            if element.get("element_id") == "answer":
                return str(element["content"])
    return ""


def _feishu_text(body: dict[str, Any]) -> str:
    """A text message's text, or an answer card's markdown (adapters/feishu/answers.py)."""
    with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError, IndexError):
        content = json.loads(body["content"])
        if body.get("msg_type") == "interactive":
            return str(content["body"]["elements"][0]["content"])
        return str(content.get("text", ""))
    return ""


def _fake_app(platform: str, answer: str) -> web.Application:
    return PLATFORMS[platform].fake(answer).app()


def fake_api(
    platform: Platform, answer: str = ANSWER
) -> AbstractAsyncContextManager[tuple[str, int]]:
    """The platform's fake API in its own process, counting posts starting with `answer` as
    answers: its base URL and process id."""
    factory = functools.partial(_fake_app, platform.name, answer)
    return app_process(factory, f"clawgate-bench-fake-{platform.name}", f"fake {platform.api}")


# --- signed requests ----------------------------------------------------------------------


class Events(abc.ABC):
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


class _SlackMentions(Events):
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


class _FeishuMessages(Events):
    """Schema 2.0 `im.message.receive_v1` events as Feishu posts them to an app with an
    encrypt key: `{"encrypt": base64(IV + AES-256-CBC(PKCS7(json)))}` with the key
    sha256(encrypt key), signed with X-Lark-Signature = sha256(timestamp + nonce + encrypt key
    + body). Text messages from a user in a p2p chat (answered with a reply to the message); a
    new conversation is a new chat."""

    def __init__(self) -> None:
        super().__init__()
        self._chats = itertools.count(1)

    def _encrypt(self, plain: bytes) -> str:
        return encrypt(FEISHU_ENCRYPT_KEY, plain.decode())

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
    events: type[Events]
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
