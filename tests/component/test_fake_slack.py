"""The fake Slack works with the real slack_sdk / slack_bolt clients."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fake_slack import (
    FakeSlack,
    block_action_body,
    event_payload,
    mention_event,
    sign,
)

SECRET = "test-signing-secret"


@pytest.fixture
def fake(slack: FakeSlack) -> FakeSlack:
    """The component tier's fake Slack (tests/platform_fakes.py: proxy settings cleared)."""
    return slack


async def test_post_and_update_are_recorded(fake: FakeSlack) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=fake.base_url)
    auth = await client.auth_test()
    assert auth["user_id"] == "UBOT"

    first = await client.chat_postMessage(channel="C111", text="hello", thread_ts="1.000001")
    second = await client.chat_postMessage(channel="C111", text="again")
    assert float(second["ts"]) > float(first["ts"])
    assert first["message"]["text"] == "hello"
    await client.chat_update(channel="C111", ts=first["ts"], text="edited", blocks=[])
    with pytest.raises(SlackApiError) as missing:
        await client.chat_update(channel="C111", ts="9.999999", text="x")
    assert missing.value.response["error"] == "message_not_found"

    assert [c.params["text"] for c in fake.posts(channel="C111")] == ["hello", "again"]
    assert [c.params["text"] for c in fake.posts(thread_ts="1.000001")] == ["hello"]
    assert [c.params["ts"] for c in fake.updates()] == [first["ts"]]
    stored = fake.message("C111", first["ts"])
    assert stored is not None and stored.text == "edited" and stored.thread_ts == "1.000001"
    assert fake.calls("chat.postMessage")[0].headers["Authorization"] == "Bearer xoxb-test"

    bad = AsyncWebClient(token="xapp-wrong-kind", base_url=fake.base_url)
    with pytest.raises(SlackApiError) as denied:
        await bad.chat_postMessage(channel="C111", text="nope")
    assert denied.value.response["error"] == "invalid_auth"
    assert len(fake.posts()) == 2 and len(fake.attempts("chat.postMessage")) == 3


async def test_signed_block_action_verifies_and_reaches_bolt(fake: FakeSlack) -> None:
    body = block_action_body(
        "approve", "ap-1", user="U_BOB", message_ts="1.000002", thread_ts="1.000001"
    )
    headers = sign(SECRET, body)
    verifier = SignatureVerifier(SECRET)
    assert verifier.is_valid_request(body, headers)
    assert headers["X-Slack-Signature"] == verifier.generate_signature(
        timestamp=headers["X-Slack-Request-Timestamp"], body=body
    )
    assert not verifier.is_valid_request(body, sign(SECRET, body, int(time.time()) - 600))

    async def authorize(**_: Any) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=None, team_id="T111", bot_token="xoxb-t", bot_user_id="UBOT"
        )

    app = AsyncApp(
        signing_secret=SECRET,
        client=AsyncWebClient(token="xoxb-t", base_url=fake.base_url),
        authorize=authorize,
    )
    seen: dict[str, Any] = {}

    @app.action("approve")
    async def on_approve(ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
        await ack()
        seen.update(
            value=body["actions"][0]["value"],
            user=context["user_id"],
            channel=context["channel_id"],
            thread=context["thread_ts"],
        )

    request = AsyncBoltRequest(
        body=body, headers={"content-type": "application/x-www-form-urlencoded", **headers}
    )
    response = await app.async_dispatch(request)
    assert response.status == 200
    assert seen == {"value": "ap-1", "user": "U_BOB", "channel": "C111", "thread": "1.000001"}


async def test_socket_mode_envelope_and_ack(fake: FakeSlack) -> None:
    client = SocketModeClient(
        app_token="xapp-1",
        web_client=AsyncWebClient(token="xoxb-x", base_url=fake.base_url),
        ping_interval=1,
    )
    received: list[SocketModeRequest] = []

    async def listener(sm: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        received.append(req)
        await sm.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    client.socket_mode_request_listeners.append(listener)
    try:
        await client.connect()  # type: ignore[no-untyped-call]  # untyped in slack_sdk
        await fake.await_connected(timeout=5)
        payload = event_payload(mention_event("hi", ts="1.000003"), event_id="Ev1")
        envelope_id = await fake.asend_envelope("events_api", payload)
        ack = await fake.await_ack(envelope_id, timeout=5)
        assert ack == {"envelope_id": envelope_id}
        assert received[0].payload["event"]["text"] == "<@UBOT> hi"

        await fake.adisconnect_all()
        await fake.await_for(lambda: fake.connects >= 2 and fake.connection_count == 1, 10)
        second = await fake.asend_envelope("events_api", payload, retry_attempt=1)
        await fake.await_ack(second, timeout=5)
        assert received[-1].retry_attempt == 1
    finally:
        await client.close()  # type: ignore[no-untyped-call]
    assert fake.calls("apps.connections.open")[0].headers["Authorization"] == "Bearer xapp-1"
    await asyncio.sleep(0)


async def test_threads_read_back_page_by_page_as_slack_sdk_asks(fake: FakeSlack) -> None:
    """conversations.replies (oldest first) and .history (newest first) between `oldest`
    and `latest`, in pages of `limit` with a cursor; users.info of the people in them."""
    client = AsyncWebClient(token="xoxb-test", base_url=fake.base_url)
    root = fake.add_message("C111", "root", user="U_BOB")
    replies = [fake.add_message("C111", f"r{n}", thread_ts=root) for n in range(5)]
    pages, cursor = [], None
    while True:
        page = await client.conversations_replies(
            channel="C111", ts=root, latest=replies[4], inclusive=False, limit=2, cursor=cursor
        )
        pages.append([m["text"] for m in page["messages"]])
        cursor = page["response_metadata"]["next_cursor"]
        if not page["has_more"]:
            break
    assert pages == [["root", "r0"], ["r1", "r2"], ["r3"]]
    assert page["messages"][0]["user"] == "U_ALICE" and page["messages"][0]["thread_ts"] == root
    history = await client.conversations_history(channel="C111", limit=1)
    assert [m["text"] for m in history["messages"]] == ["root"] and not history["has_more"]

    fake.add_user("U_BOB", "Bob Builder")
    bob = await client.users_info(user="U_BOB")
    assert bob["user"]["profile"]["display_name"] == "Bob Builder"
    with pytest.raises(SlackApiError) as unknown:
        await client.users_info(user="U_NOBODY")
    assert unknown.value.response["error"] == "user_not_found"


async def test_a_shared_file_downloads_with_the_bot_token_only(fake: FakeSlack) -> None:
    """Without the token Slack redirects to its sign-in page (HTML), as the real one does."""
    shared = fake.add_file("notes.txt", b"hello\n")
    client = AsyncWebClient(token="xoxb-test", base_url=fake.base_url)
    info = await client.files_info(file=shared["id"])
    url = info["file"]["url_private_download"]
    assert url == shared["url_private_download"]
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers={"Authorization": "Bearer xoxb-test"}) as ok:
            assert ok.status == 200 and await ok.read() == b"hello\n"
        async with http.get(url, allow_redirects=False) as anonymous:
            assert anonymous.status == 302
            assert anonymous.headers["Location"].endswith("/signin")
        async with http.get(url) as followed:
            assert followed.content_type == "text/html"
    assert [(d.status, d.completed) for d in fake.downloads()] == [
        (200, True),
        (302, False),
        (302, False),
    ]


async def test_streams_and_assistant_threads_as_slack_sdk_calls_them(fake: FakeSlack) -> None:
    """chat.startStream/appendStream/stopStream (also through slack_sdk's `chat_stream`
    helper) grow one message; assistant.threads.* are recorded; a workspace without
    streaming refuses them."""
    client = AsyncWebClient(token="xoxb-test", base_url=fake.base_url)
    started = await client.chat_startStream(
        channel="C111",
        thread_ts="1.000001",
        recipient_team_id="T111",
        recipient_user_id="U_ALICE",
        markdown_text="Hel",
    )
    ts = started["ts"]
    await client.chat_appendStream(channel="C111", ts=ts, markdown_text="lo")
    with pytest.raises(SlackApiError) as streaming:  # a stream is stopped, not updated
        await client.chat_update(channel="C111", ts=ts, text="x")
    assert streaming.value.response["error"] == "cant_update_message"
    feedback = [{"type": "context_actions", "elements": []}]
    meta = {"event_type": "clawgate_post", "event_payload": {"post": "k"}}
    await client.chat_stopStream(
        channel="C111", ts=ts, markdown_text="!", blocks=feedback, metadata=meta
    )
    stored = fake.message("C111", ts)
    assert stored is not None and stored.text == "Hello!" and not stored.streaming
    assert stored.appends == 1 and stored.metadata == meta and stored.blocks is not None
    assert stored.blocks[1:] == feedback
    with pytest.raises(SlackApiError) as stopped:
        await client.chat_appendStream(channel="C111", ts=ts, markdown_text="more")
    assert stopped.value.response["error"] == "message_not_in_streaming_state"

    stream = await client.chat_stream(
        channel="D111", thread_ts="1.000002", buffer_size=4
    )  # a DM: no recipient needed
    for piece in ("one ", "two ", "three"):
        await stream.append(markdown_text=piece)
    await stream.stop()
    (helper,) = fake.bot_messages("D111", "1.000002")
    assert helper.text == "one two three" and helper.appends >= 1

    with pytest.raises(SlackApiError) as unnamed:  # in a channel Slack needs the recipient
        await client.chat_startStream(channel="C111", thread_ts="1.000001")
    assert unnamed.value.response["error"] == "invalid_arguments"

    await client.assistant_threads_setStatus(
        channel_id="D111", thread_ts="1.000002", status="Running bash…"
    )
    await client.assistant_threads_setStatus(channel_id="D111", thread_ts="1.000002", status="")
    await client.assistant_threads_setSuggestedPrompts(
        channel_id="D111", thread_ts="1.000002", prompts=[{"title": "a", "message": "b"}]
    )
    await client.assistant_threads_setTitle(channel_id="D111", thread_ts="1.000002", title="T")
    assert fake.statuses("D111", "1.000002") == ["Running bash…", ""]
    (prompts,) = fake.calls("assistant.threads.setSuggestedPrompts")
    assert prompts.params["prompts"] == [{"title": "a", "message": "b"}]
    assert fake.calls("assistant.threads.setTitle")[0].params["title"] == "T"

    fake.refuse_streaming = "not_allowed"
    with pytest.raises(SlackApiError) as refused:
        await client.chat_startStream(channel="D111", thread_ts="1.000003")
    assert refused.value.response["error"] == "not_allowed"
