"""Authentic requests of any shape are answered 400 (or ignored), never 500 and never with a
traceback in the log: the real Slack and Feishu adapters behind a real aiohttp server, each
field of a valid payload replaced by a value of every other JSON type, and bodies nested
64,000 deep."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from slack_sdk.web.async_client import AsyncWebClient

from adapters.feishu.app import FeishuAdapter
from adapters.feishu.channel import FeishuChannel, feishu_client
from adapters.feishu.crypto import encrypt
from adapters.feishu.inbound import APPROVE_ONCE as FEISHU_APPROVE
from adapters.feishu.inbound import FeishuIdentity
from adapters.slack.app import SlackAdapter
from adapters.slack.inbound import APPROVE_ONCE, SlackIdentity
from runtime.queue.inbound import Inbound
from tests import fake_feishu, fake_slack
from tests.conftest import free_port

SECRET = "s"
KEY, TOKEN = "k" * 16, "tok"
WRONG = ["x", 1, [], {}, None, [1], True]
DEEP = 64_000


def paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field and list item of `value`, as a path of keys."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        yield (*path, key)
        if isinstance(child, dict | list):
            yield from paths(child, (*path, key))


def variants(base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for path in list(paths(base)):
        for wrong in WRONG:
            changed = copy.deepcopy(base)
            parent = changed
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = wrong
            yield changed


async def serve(handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/events", handler)
    server = TestServer(app, host="127.0.0.1", port=free_port())
    await server.start_server()
    try:
        yield str(server.make_url("/events"))
    finally:
        await server.close()


@pytest.fixture
def queued() -> list[Inbound]:
    return []


@pytest.fixture
async def slack_url(queued: list[Inbound]) -> AsyncIterator[str]:
    async def ingest(inbound: Inbound) -> bool:
        queued.append(inbound)
        return True

    client = AsyncWebClient(token="xoxb-x", base_url="http://127.0.0.1:9/")
    adapter = SlackAdapter(client, SlackIdentity("T0TEAM", "UBOT", "BBOT"), ingest, SECRET)
    async for url in serve(adapter.handle_http):
        yield url


@pytest.fixture
async def feishu_url(queued: list[Inbound]) -> AsyncIterator[str]:
    async def ingest(inbound: Inbound) -> bool:
        queued.append(inbound)
        return True

    async def precheck(*_: Any) -> tuple[str | None, str | None]:
        return None, "feishu:session"

    channel = FeishuChannel(feishu_client("cli_x", "secret", "http://127.0.0.1:9"), "cli_x")
    adapter = FeishuAdapter(
        FeishuIdentity(fake_feishu.BOT_OPEN_ID), ingest, precheck, KEY, TOKEN, channel
    )
    adapter.bind(asyncio.get_running_loop())
    async for url in serve(adapter.handle_http):
        yield url


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as r,
    ):
        return r.status, await r.text()


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


async def test_slack_answers_400_to_deep_json(
    slack_url: str, queued: list[Inbound], caplog: pytest.LogCaptureFixture
) -> None:
    for body in (
        "[" * DEEP,
        '{"a":' * DEEP,
        '{"type": "event_callback", "event": ' + "[" * DEEP,
        urlencode({"payload": "[" * DEEP}),
    ):
        status, text = await fake_slack.post_signed(slack_url, SECRET, body)
        assert status == 400, text
    assert queued == []
    no_tracebacks(caplog)


async def test_slack_answers_400_to_ids_slack_never_sends(
    slack_url: str, queued: list[Inbound], caplog: pytest.LogCaptureFixture
) -> None:
    """A channel or thread id with a space or a brace can be no session: 400, not a 500."""
    for channel, thread in (("C1 x", None), ("C{1}", None), ("C1", "1.2 3")):
        event = fake_slack.mention_event("hello", channel=channel, thread_ts=thread)
        body = json.dumps(fake_slack.event_payload(event))
        status, text = await fake_slack.post_signed(slack_url, SECRET, body)
        assert status == 400 and "never sends" in text, (channel, thread, text)
    assert queued == []
    no_tracebacks(caplog)


async def test_slack_answers_400_to_every_wrong_type_of_a_signed_payload(
    slack_url: str, queued: list[Inbound], caplog: pytest.LogCaptureFixture
) -> None:
    click = fake_slack.block_action_payload(APPROVE_ONCE, "abc123", message_ts="1.2")
    click["response_url"] = ""
    mention = fake_slack.event_payload(fake_slack.mention_event("hello"))
    statuses = set()
    for base, encode in (
        (click, lambda p: urlencode({"payload": json.dumps(p)})),
        (mention, json.dumps),
    ):
        for variant in variants(base):
            status, text = await fake_slack.post_signed(slack_url, SECRET, encode(variant))
            assert status < 500, (variant, text)
            statuses.add(status)
    empty = {**click, "actions": []}  # reported: a 500 with bolt's IndexError
    status, text = await fake_slack.post_signed(
        slack_url, SECRET, urlencode({"payload": json.dumps(empty)})
    )
    assert status == 400 and "BlockActions" in text
    assert 400 in statuses
    no_tracebacks(caplog)


async def test_feishu_answers_400_to_deep_json_signed_or_not(
    feishu_url: str, queued: list[Inbound], caplog: pytest.LogCaptureFixture
) -> None:
    plain = {"Content-Type": "application/json"}
    assert (await post(feishu_url, b"[" * DEEP, plain))[0] == 400  # unauthenticated
    assert (await post(feishu_url, b'{"a":' * DEEP, plain))[0] == 400
    deep = json.dumps({"encrypt": encrypt(KEY, "[" * DEEP)}).encode()
    status, text = await post(feishu_url, deep, fake_feishu.signed_headers(KEY, deep))
    assert status == 400 and "nested deeper than" in text
    assert queued == []
    no_tracebacks(caplog)


async def test_feishu_answers_400_or_ignores_every_wrong_type_of_a_signed_event(
    feishu_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    message = fake_feishu.event_envelope(
        "im.message.receive_v1", fake_feishu.message_event("hello"), token=TOKEN
    )
    value = {"action": FEISHU_APPROVE, "approval_id": "abc123"}
    card = fake_feishu.event_envelope(
        "card.action.trigger",
        fake_feishu.card_action_event(value, open_message_id="om_1"),
        token=TOKEN,
    )
    for base in (message, card):
        for variant in variants(base):
            body, headers = fake_feishu.event_request(variant, encrypt_key=KEY)
            status, text = await post(feishu_url, body, headers)
            assert status < 500, (variant, text)
    no_tracebacks(caplog)
