"""The fake Feishu works with the real lark-oapi clients (HTTP API, event dispatcher, ws)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import lark_oapi as lark
import lark_oapi.ws.client as lark_ws_client
import pytest
from aiohttp import web
from lark_oapi.api.cardkit.v1 import (
    Card,
    ContentCardElementRequest,
    ContentCardElementRequestBody,
    CreateCardRequest,
    CreateCardRequestBody,
    IdConvertCardRequest,
    IdConvertCardRequestBody,
    SettingsCardRequest,
    SettingsCardRequestBody,
    UpdateCardRequest,
    UpdateCardRequestBody,
)
from lark_oapi.api.im.v1 import (
    CreateMessageRequest,
    CreateMessageRequestBody,
    PatchMessageRequest,
    PatchMessageRequestBody,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
    UpdateMessageRequest,
    UpdateMessageRequestBody,
)
from lark_oapi.core.exception import ObtainAccessTokenException
from lark_oapi.core.model import RawRequest
from lark_oapi.core.utils import AESCipher
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse
from lark_oapi.ws.exception import ClientException

from adapters.feishu.crypto import encrypt
from tests.fake_feishu import (
    CODE_CARD_INVALID,
    CODE_CARD_SEQUENCE,
    CODE_INVALID_PARAM,
    CODE_RATE_LIMITED,
    CODE_TOKEN_INVALID,
    CODE_TOKEN_MISSING,
    FakeFeishu,
    card_action_event,
    challenge_body,
    decrypt,
    event_envelope,
    event_request,
    message_event,
    post,
    post_sync,
    reset_lark_token_cache,
    signed_headers,
)

ENCRYPT_KEY = "test-encrypt-key"
VERIFICATION_TOKEN = "test-verification-token"
SHARED_CARD = {
    "config": {"update_multi": True},
    "elements": [{"tag": "markdown", "content": "approve `rm -rf build`?"}],
}


@pytest.fixture
def fake(feishu: FakeFeishu) -> FakeFeishu:
    """The component tier's fake Feishu (tests/platform_fakes.py)."""
    return feishu


def lark_client(fake: FakeFeishu, app_id: str, app_secret: str) -> Any:
    return (
        lark.Client.builder()
        .app_id(app_id)
        .app_secret(app_secret)
        .domain(fake.url)
        .timeout(5)
        .build()
    )


def send_request(chat_id: str, msg_type: str, content: Any, uuid: str | None = None) -> Any:
    body = (
        CreateMessageRequestBody.builder()
        .receive_id(chat_id)
        .msg_type(msg_type)
        .content(json.dumps(content))
    )
    if uuid is not None:
        body = body.uuid(uuid)
    return (
        CreateMessageRequest.builder().receive_id_type("chat_id").request_body(body.build()).build()
    )


def reply_request(message_id: str, text: str, *, uuid: str, in_thread: bool) -> Any:
    body = (
        ReplyMessageRequestBody.builder()
        .msg_type("text")
        .content(json.dumps({"text": text}))
        .reply_in_thread(in_thread)
        .uuid(uuid)
        .build()
    )
    return ReplyMessageRequest.builder().message_id(message_id).request_body(body).build()


def patch_request(message_id: str, card: dict[str, Any]) -> Any:
    body = PatchMessageRequestBody.builder().content(json.dumps(card)).build()
    return PatchMessageRequest.builder().message_id(message_id).request_body(body).build()


def raw_request(body: bytes, headers: dict[str, str]) -> Any:
    request = RawRequest()
    request.uri = "/feishu/events"
    request.body = body
    request.headers = headers
    return request


# ---------------------------------------------------------------------------------------------
# Open API through lark.Client
# ---------------------------------------------------------------------------------------------


def test_send_is_idempotent_by_uuid_reply_patch_and_edit(fake: FakeFeishu) -> None:
    app_id, secret = fake.new_app()
    client = lark_client(fake, app_id, secret)

    first = client.im.v1.message.create(send_request("oc_chat1", "text", {"text": "hi"}, "k-1"))
    again = client.im.v1.message.create(send_request("oc_chat1", "text", {"text": "hi"}, "k-1"))
    assert first.success() and again.success()
    assert first.data.message_id == again.data.message_id
    assert first.data.chat_id == "oc_chat1" and first.get_log_id()
    assert [m.text for m in fake.messages(chat_id="oc_chat1")] == ["hi"]
    sends = fake.sends(chat_id="oc_chat1")
    assert [(c.uuid, c.duplicate) for c in sends] == [("k-1", False), ("k-1", True)]
    assert sends[0].content == {"text": "hi"} and sends[0].receive_id_type == "chat_id"
    assert sends[0].headers["Authorization"].startswith("Bearer t-")

    # A reply in thread to the bot's own message, and one to an inbound user message.
    root = first.data.message_id
    reply = client.im.v1.message.reply(reply_request(root, "in thread", uuid="k-2", in_thread=True))
    assert reply.success()
    assert (reply.data.root_id, reply.data.parent_id) == (root, root) and reply.data.thread_id
    inbound = message_event("@_user_1 hello", chat_id="oc_chat2")["message"]["message_id"]
    answer = client.im.v1.message.reply(reply_request(inbound, "yo", uuid="k-3", in_thread=False))
    assert answer.success() and answer.data.chat_id == "oc_chat2"
    assert [c.reply_in_thread for c in fake.replies()] == [True, False]
    assert fake.replies(message_id=root)[0].text == "in thread"
    assert [m.text for m in fake.messages(root_id=root)] == ["in thread"]

    # Cards: PATCH replaces the content of a shared card; a non-shared card is refused.
    card = client.im.v1.message.create(send_request("oc_chat1", "interactive", SHARED_CARD))
    card_id = card.data.message_id
    approved = {**SHARED_CARD, "elements": [{"tag": "markdown", "content": "approved"}]}
    patched = client.im.v1.message.patch(patch_request(card_id, approved))
    assert patched.success()
    stored = fake.message(card_id)
    assert stored is not None and stored.content == approved and stored.edits == 1
    assert stored.history == (SHARED_CARD, approved)
    assert [c.content for c in fake.patches(card_id)] == [approved]
    plain = client.im.v1.message.create(send_request("oc_chat1", "interactive", {"elements": []}))
    refused = client.im.v1.message.patch(patch_request(plain.data.message_id, approved))
    assert refused.code == CODE_INVALID_PARAM and refused.raw.status_code == 400

    # PUT edits a text message.
    edit = (
        UpdateMessageRequest.builder()
        .message_id(root)
        .request_body(
            UpdateMessageRequestBody.builder()
            .msg_type("text")
            .content(json.dumps({"text": "edited"}))
            .build()
        )
        .build()
    )
    assert client.im.v1.message.update(edit).success()
    edited = fake.message(root)
    assert edited is not None and edited.text == "edited"
    assert len(fake.updates(root)) == 1
    assert len(fake.token_fetches(app_id)) == 1  # one tenant token for all of the above


STREAMING = {
    "schema": "2.0",
    "config": {"update_multi": True, "streaming_mode": True},
    "body": {"elements": [{"tag": "markdown", "element_id": "answer", "content": ""}]},
}


def content_request(card_id: str, element: str, text: str, sequence: int) -> Any:
    body = ContentCardElementRequestBody.builder().content(text).sequence(sequence).build()
    return (
        ContentCardElementRequest.builder()
        .card_id(card_id)
        .element_id(element)
        .request_body(body)
        .build()
    )


def test_cardkit_cards_stream_in_sequence_and_messages_show_them(fake: FakeFeishu) -> None:
    app_id, secret = fake.new_app()
    client = lark_client(fake, app_id, secret)
    create = CreateCardRequestBody.builder().type("card_json").data(json.dumps(STREAMING))
    created = client.cardkit.v1.card.create(
        CreateCardRequest.builder().request_body(create.build()).build()
    )
    assert created.success(), created.msg
    card_id = created.data.card_id
    content = {"type": "card", "data": {"card_id": card_id}}
    sent = client.im.v1.message.create(send_request("oc_chat1", "interactive", content, "k-c"))
    assert sent.success()
    message_id = sent.data.message_id

    first = client.cardkit.v1.card_element.content(content_request(card_id, "answer", "Hel", 5))
    stale = client.cardkit.v1.card_element.content(content_request(card_id, "answer", "He", 5))
    missing = client.cardkit.v1.card_element.content(content_request(card_id, "steps", "x", 6))
    assert first.success() and (stale.code, missing.code) == (CODE_CARD_SEQUENCE, CODE_CARD_INVALID)
    settings = json.dumps({"config": {"streaming_mode": False}})
    closed = client.cardkit.v1.card.settings(
        SettingsCardRequest.builder()
        .card_id(card_id)
        .request_body(SettingsCardRequestBody.builder().settings(settings).sequence(7).build())
        .build()
    )
    final = STREAMING | {"config": {"update_multi": True, "streaming_mode": False}}
    final["body"] = {"elements": [{"tag": "markdown", "element_id": "answer", "content": "Hi"}]}
    whole = Card.builder().type("card_json").data(json.dumps(final)).build()
    replaced = client.cardkit.v1.card.update(
        UpdateCardRequest.builder()
        .card_id(card_id)
        .request_body(UpdateCardRequestBody.builder().card(whole).sequence(8).build())
        .build()
    )
    convert = IdConvertCardRequestBody.builder().message_id(message_id).build()
    converted = client.cardkit.v1.card.id_convert(
        IdConvertCardRequest.builder().request_body(convert).build()
    )
    assert closed.success() and replaced.success() and converted.data.card_id == card_id
    entity = fake.card(card_id)
    assert entity is not None and not entity.streaming and entity.sequence == 8
    states = [card["body"]["elements"][0]["content"] for card in entity.history]
    assert states == ["", "Hel", "Hel", "Hi"]  # created, streamed, streaming off, replaced
    (shown,) = fake.messages("oc_chat1")  # the message shows the card as it is now
    assert shown.markdown == "Hi" and fake.shown(message_id) == final


def test_tokens_cache_expiry_and_bad_credentials(fake: FakeFeishu) -> None:
    app_id, secret = fake.new_app()
    client = lark_client(fake, app_id, secret)
    assert client.im.v1.message.create(send_request("oc_1", "text", {"text": "a"})).success()

    # Server-side expiry: lark-oapi does not drop its cached token on 99991663.
    fake.expire_tokens(app_id)
    expired = client.im.v1.message.create(send_request("oc_1", "text", {"text": "b"}))
    assert expired.code == CODE_TOKEN_INVALID
    assert client.im.v1.message.create(send_request("oc_1", "text", {"text": "c"})).code == (
        CODE_TOKEN_INVALID
    )
    reset_lark_token_cache()
    assert client.im.v1.message.create(send_request("oc_1", "text", {"text": "d"})).success()
    assert len(fake.token_fetches(app_id)) == 2
    assert [m.text for m in fake.messages("oc_1")] == ["a", "d"]

    # The token cache is keyed by app_id only: a wrong secret for a cached app still works.
    wrong = lark_client(fake, app_id, "not-the-secret")
    assert wrong.im.v1.message.create(send_request("oc_1", "text", {"text": "e"})).success()
    other_app, _ = fake.new_app()
    with pytest.raises(ObtainAccessTokenException) as denied:
        lark_client(fake, other_app, "not-the-secret").im.v1.message.create(
            send_request("oc_1", "text", {"text": "f"})
        )
    assert denied.value.code == 10014

    status, text = post_sync(f"{fake.url}/open-apis/im/v1/messages?receive_id_type=chat_id", b"{}")
    assert (status, json.loads(text)["code"]) == (400, CODE_TOKEN_MISSING)


def test_fail_next_rate_limit(fake: FakeFeishu) -> None:
    app_id, secret = fake.new_app()
    client = lark_client(fake, app_id, secret)
    fake.fail_next("send", retry_after=2)
    limited = client.im.v1.message.create(send_request("oc_1", "text", {"text": "x"}, "k-9"))
    assert (limited.code, limited.raw.status_code) == (CODE_RATE_LIMITED, 429)
    assert limited.raw.headers["x-ogw-ratelimit-reset"] == "2"
    fake.fail_next("send", code=230020, http_status=400, msg="chat rate limit")
    assert client.im.v1.message.create(send_request("oc_1", "text", {"text": "x"})).code == 230020
    retried = client.im.v1.message.create(send_request("oc_1", "text", {"text": "x"}, "k-9"))
    assert retried.success()
    assert len(fake.sends()) == 1 and len(fake.attempts("/open-apis/im/v1/messages")) == 3
    assert len(fake.messages()) == 1


async def test_async_client_from_event_loop(fake: FakeFeishu) -> None:
    """`acreate` fetches its token with blocking `requests`: fine since the fake has its own
    thread (a fake on this loop would deadlock)."""
    app_id, secret = fake.new_app()
    client = lark_client(fake, app_id, secret)
    response = await client.im.v1.message.acreate(send_request("oc_a", "text", {"text": "async"}))
    assert response.success()
    message = await fake.await_for(lambda: fake.messages(chat_id="oc_a"))
    assert message[0].text == "async" and fake.token_fetch_count == 1


# ---------------------------------------------------------------------------------------------
# Inbound HTTP events through EventDispatcherHandler.do
# ---------------------------------------------------------------------------------------------


def test_crypto_round_trip_with_lark_aes_cipher() -> None:
    for text in ("", "x", "0123456789abcdef", "飞书 ✓ " * 20):
        sealed = encrypt(ENCRYPT_KEY, text)
        assert AESCipher(ENCRYPT_KEY).decrypt_str(sealed) == text
        assert decrypt(ENCRYPT_KEY, sealed) == text
    with pytest.raises(ValueError, match=r"padding|utf-8"):
        decrypt("another-key", encrypt(ENCRYPT_KEY, "secret text"))
    headers = signed_headers(ENCRYPT_KEY, b"{}", timestamp=1700000000, nonce="n1")
    assert headers["X-Lark-Request-Timestamp"] == "1700000000"
    assert headers["X-Lark-Request-Nonce"] == "n1"


def test_signed_encrypted_events_pass_the_sdk_dispatcher() -> None:
    received: list[Any] = []

    def on_message(data: Any) -> None:
        received.append(data)

    def on_card(data: Any) -> Any:
        received.append(data)
        return P2CardActionTriggerResponse(
            {
                "toast": {"type": "success", "content": "approved"},
                "card": {"type": "raw", "data": {"elements": []}},
            }
        )

    handler = (
        lark.EventDispatcherHandler.builder(ENCRYPT_KEY, VERIFICATION_TOKEN)
        .register_p2_im_message_receive_v1(on_message)
        .register_p2_card_action_trigger(on_card)
        .build()
    )
    event = message_event(
        "@_user_1 /approve abc", chat_type="p2p", mentions=[("@_user_1", "ou_bot", "clawgate")]
    )
    envelope = event_envelope("im.message.receive_v1", event, token=VERIFICATION_TOKEN)
    body, headers = event_request(envelope, encrypt_key=ENCRYPT_KEY)
    assert set(json.loads(body)) == {"encrypt"}

    ok = handler.do(raw_request(body, headers))
    assert (ok.status_code, json.loads(ok.content)) == (200, {"msg": "success"})
    data = received[-1]
    assert data.header.event_id == envelope["header"]["event_id"]
    assert json.loads(data.event.message.content) == {"text": "@_user_1 /approve abc"}
    assert data.event.message.mentions[0].id.open_id == "ou_bot"
    assert data.event.message.chat_type == "p2p" and data.event.sender.sender_id.open_id

    # Every failure is HTTP 500 {"msg": ...}.
    bad = handler.do(raw_request(body, {**headers, "X-Lark-Signature": "0" * 64}))
    assert (bad.status_code, json.loads(bad.content)) == (
        500,
        {"msg": "signature verification failed"},
    )
    lowered = handler.do(raw_request(body, {k.lower(): v for k, v in headers.items()}))
    assert lowered.status_code == 500  # RawRequest.headers lookups are case-sensitive
    forged = event_envelope("im.message.receive_v1", event, token="wrong-token")
    denied = handler.do(raw_request(*event_request(forged, encrypt_key=ENCRYPT_KEY)))
    assert json.loads(denied.content) == {"msg": "invalid verification_token"}
    assert len(received) == 1

    # url_verification: unsigned, encrypted, answered with the challenge.
    challenge = handler.do(raw_request(challenge_body(VERIFICATION_TOKEN, "c-1", ENCRYPT_KEY), {}))
    assert (challenge.status_code, json.loads(challenge.content)) == (200, {"challenge": "c-1"})

    # card.action.trigger: the handler's response is the HTTP body (toast + card update).
    click = card_action_event(
        {"action": "approve", "id": "abc"}, open_message_id="om_card", operator_open_id="ou_bob"
    )
    card_envelope = event_envelope("card.action.trigger", click, token=VERIFICATION_TOKEN)
    answered = handler.do(raw_request(*event_request(card_envelope, encrypt_key=ENCRYPT_KEY)))
    assert answered.status_code == 200
    assert json.loads(answered.content) == {
        "toast": {"type": "success", "content": "approved"},
        "card": {"type": "raw", "data": {"elements": []}},
    }
    assert received[-1].event.action.value == {"action": "approve", "id": "abc"}
    assert received[-1].event.operator.open_id == "ou_bob"
    assert received[-1].event.context.open_message_id == "om_card"


async def test_post_helpers_through_an_http_endpoint() -> None:
    """aiohttp glue: pass `request.headers` (case-insensitive) and the raw bytes to `do`."""
    seen: list[str] = []
    handler = (
        lark.EventDispatcherHandler.builder(ENCRYPT_KEY, VERIFICATION_TOKEN)
        .register_p2_im_message_receive_v1(lambda data: seen.append(data.header.event_id))
        .build()
    )

    async def endpoint(request: web.Request) -> web.Response:
        raw = raw_request(await request.read(), request.headers)  # type: ignore[arg-type]
        response = await asyncio.to_thread(handler.do, raw)
        return web.Response(status=response.status_code, body=response.content)

    app = web.Application()
    app.router.add_post("/feishu/events", endpoint)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}/feishu/events"
    try:
        envelope = event_envelope(
            "im.message.receive_v1", message_event("hi"), token=VERIFICATION_TOKEN
        )
        body, headers = event_request(envelope, encrypt_key=ENCRYPT_KEY)
        assert await post(url, body, headers) == (200, '{"msg":"success"}')
        status, _ = await asyncio.to_thread(
            post_sync, url, body, {**headers, "X-Lark-Request-Nonce": "tampered"}
        )
        assert status == 500
        assert seen == [envelope["header"]["event_id"]]
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------------------------------------
# Long connection through lark.ws.Client
# ---------------------------------------------------------------------------------------------


class WsClientThread:
    """Runs the real `lark.ws.Client.start()` (blocking, no stop in 1.7.5) in a daemon thread
    with its own loop; `stop()` cancels the client's tasks from inside that loop."""

    def __init__(self, fake: FakeFeishu, app_id: str, app_secret: str, handler: Any) -> None:
        self._args = (app_id, app_secret, handler, fake.url)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client: Any = None
        self.error: BaseException | None = None
        self._saved_loop = lark_ws_client.loop
        self._thread = threading.Thread(target=self._run, name="lark-ws", daemon=True)

    def start(self) -> WsClientThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        app_id, app_secret, handler, domain = self._args
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # ws.Client() schedules a cache task on the current loop
        lark_ws_client.loop = loop  # start() and its tasks use this module global
        self.loop = loop
        self.client = lark.ws.Client(
            app_id,
            app_secret,
            event_handler=handler,
            domain=domain,
            log_level=lark.LogLevel.WARNING,
        )
        try:
            self.client.start()
        except BaseException as exc:  # CancelledError on stop(), ClientException on bad creds
            self.error = exc
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            conn = self.client._conn
            if conn is not None:
                loop.run_until_complete(conn.close())
            loop.close()

    def _cancel_everything(self) -> None:
        self.client._auto_reconnect = False
        for task in asyncio.all_tasks():
            task.cancel()

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "lark ws thread did not exit"
        lark_ws_client.loop = self._saved_loop

    def stop(self) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_everything)
        self.join()


def test_long_connection_delivers_acks_and_reconnects(fake: FakeFeishu) -> None:
    received: list[tuple[str, str, str]] = []

    def on_message(data: Any) -> None:
        if "boom" in data.event.message.content:
            raise RuntimeError("handler failed")
        received.append(
            (data.header.event_id, data.event.message.content, threading.current_thread().name)
        )

    def on_card(data: Any) -> Any:
        return P2CardActionTriggerResponse({"toast": {"type": "info", "content": "noted"}})

    handler = (
        lark.EventDispatcherHandler.builder("", "")
        .register_p2_im_message_receive_v1(on_message)
        .register_p2_card_action_trigger(on_card)
        .build()
    )
    app_id, secret = fake.new_app()
    runner = WsClientThread(fake, app_id, secret, handler).start()
    try:
        fake.wait_connected()
        assert len(fake.calls("/callback/ws/endpoint")) == 1
        fake.wait_for(lambda: fake.pings >= 1, what="first ping")

        # Events travel in plaintext; the header token is not checked over ws.
        envelope = event_envelope("im.message.receive_v1", message_event("hello"), token="any")
        first = fake.send_event(envelope)
        ack = fake.wait_for_ack(first)
        assert (ack.code, ack.data, ack.type) == (200, None, "event")
        assert received == [(envelope["header"]["event_id"], '{"text": "hello"}', "lark-ws")]

        failing = event_envelope("im.message.receive_v1", message_event("boom"), token="")
        assert fake.wait_for_ack(fake.send_event(failing)).code == 500

        split = fake.send_event(envelope, parts=3)
        assert fake.wait_for_ack(split).code == 200
        assert len(received) == 2 and len(fake.acks()) == 3

        click = card_action_event({"id": "abc"}, open_message_id="om_card")
        card_frame = fake.send_event(event_envelope("card.action.trigger", click, token=""))
        assert fake.wait_for_ack(card_frame).data == {"toast": {"type": "info", "content": "noted"}}

        # Server-side close: the client rediscovers the endpoint and reconnects at once
        # (ReconnectNonce 0); a redelivered event reaches the handler again.
        started = time.monotonic()
        fake.disconnect_all()
        fake.wait_for(lambda: fake.connects == 2 and fake.connection_count == 1, timeout=5)
        assert time.monotonic() - started < 3
        assert len(fake.calls("/callback/ws/endpoint")) == 2
        again = fake.send_event(envelope)
        assert fake.wait_for_ack(again).code == 200
        assert [r[0] for r in received] == [envelope["header"]["event_id"]] * 3
    finally:
        runner.stop()
    assert isinstance(runner.error, asyncio.CancelledError)
    fake.wait_for(lambda: fake.connection_count == 0, timeout=5, what="client gone")


def test_long_connection_start_raises_client_exceptions(fake: FakeFeishu) -> None:
    app_id, secret = fake.new_app()
    handler = lark.EventDispatcherHandler.builder("", "").build()
    runner = WsClientThread(fake, app_id, "wrong-secret", handler).start()
    runner.join()
    assert isinstance(runner.error, ClientException) and runner.error.code == 10014

    # Handshake refused for the connection limit: also a ClientException, no retry.
    fake.fail_next("ws_connect", code=514, http_status=403, auth_code=1000040350, msg="limit")
    runner = WsClientThread(fake, app_id, secret, handler).start()
    runner.join()
    assert isinstance(runner.error, ClientException) and str(runner.error) == "514: limit"
    assert fake.connects == 0
