"""The reads of FakeFeishu (tests/fake_feishu_history.py) answer the real lark-oapi client as
Feishu does: a chat's or a thread's messages (sorted, paged, the bot's own among them), one
message, a message's resource as bytes with its name, a person's name."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lark_oapi.api.contact.v3 import GetUserRequest
from lark_oapi.api.im.v1 import (
    GetMessageRequest,
    GetMessageResourceRequest,
    ListMessageRequest,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
)

from adapters.feishu.channel import feishu_client
from tests.fake_feishu import FakeFeishu, message_event, new_thread_id
from tests.fake_feishu_history import (
    CODE_INVALID_PARAM,
    CODE_MESSAGE_NOT_FOUND,
    CODE_RESOURCE_NOT_FOUND,
    CODE_USER_NOT_FOUND,
    content_event,
)


@pytest.fixture
def client(feishu: FakeFeishu) -> Any:
    app_id, secret = feishu.new_app()
    return feishu_client(app_id, secret, feishu.url)


def listed(client: Any, kind: str, container: str, **options: Any) -> Any:
    builder = ListMessageRequest.builder().container_id_type(kind).container_id(container)
    for name, value in options.items():
        builder = getattr(builder, name)(value)
    return client.im.v1.message.list(builder.build())


def test_a_thread_lists_its_replies_with_the_bots_and_a_chat_its_top_messages(
    feishu: FakeFeishu, client: Any
) -> None:
    thread = new_thread_id()
    root = message_event("root", create_time=1_000, thread_id=thread)
    root_id = root["message"]["message_id"]
    feishu.people.post(root)
    here = {"root_id": root_id, "parent_id": root_id, "thread_id": thread}
    for n in range(3):
        feishu.people.post(message_event(f"reply {n}", create_time=2_000 + n, **here))
    feishu.people.post(message_event("elsewhere", create_time=3_000))
    body = ReplyMessageRequestBody.builder().msg_type("text").content(json.dumps({"text": "bot"}))
    reply = ReplyMessageRequest.builder().message_id(root_id)
    assert client.im.v1.message.reply(
        reply.request_body(body.reply_in_thread(True).build()).build()
    ).success()

    first = listed(client, "thread", thread, sort_type="ByCreateTimeDesc", page_size=2)
    assert first.success() and first.data.has_more
    texts = [json.loads(m.body.content)["text"] for m in first.data.items]
    assert texts == ["bot", "reply 2"]  # the bot's answer is the newest
    assert first.data.items[0].sender.sender_type == "app"
    assert first.data.items[1].sender.id == "ou_alice"
    rest = listed(
        client, "thread", thread, sort_type="ByCreateTimeDesc", page_token=first.data.page_token
    )
    assert [json.loads(m.body.content)["text"] for m in rest.data.items] == ["reply 1", "reply 0"]
    assert not rest.data.has_more  # the root is not in its thread's list
    chat = listed(client, "chat", "oc_chat1")
    assert [json.loads(m.body.content)["text"] for m in chat.data.items] == ["root", "elsewhere"]

    got = client.im.v1.message.get(GetMessageRequest.builder().message_id(root_id).build())
    assert got.success() and got.data.items[0].message_id == root_id
    missing = client.im.v1.message.get(GetMessageRequest.builder().message_id("om_none").build())
    assert missing.code == CODE_MESSAGE_NOT_FOUND
    assert listed(client, "group", "oc_chat1").code == CODE_INVALID_PARAM
    assert listed(client, "chat", "oc_chat1", page_size=51).code == CODE_INVALID_PARAM


def test_resources_come_as_bytes_with_their_name_and_type(feishu: FakeFeishu, client: Any) -> None:
    event = content_event(message_event(""), "file", {"file_key": "file_1", "file_name": "a.log"})
    message_id = event["message"]["message_id"]
    feishu.people.attach(
        message_id, "file_1", b"log line\n", "application/octet-stream", "日志 a.log"
    )

    def get(key: str, kind: str) -> Any:
        request = GetMessageResourceRequest.builder().message_id(message_id).file_key(key)
        return client.im.v1.message_resource.get(request.type(kind).build())

    got = get("file_1", "file")
    assert got.success() and got.file.read() == b"log line\n" and got.file_name == "日志 a.log"
    assert got.raw.headers["Content-Type"] == "application/octet-stream"
    assert get("file_1", "image").code == CODE_INVALID_PARAM  # a file is not an image
    assert get("file_2", "file").code == CODE_RESOURCE_NOT_FOUND
    assert feishu.people.downloads() == [(message_id, "file_1")] * 2 + [(message_id, "file_2")]


def test_names_come_from_the_contact_api(feishu: FakeFeishu, client: Any) -> None:
    feishu.people.users["ou_bob"] = "Bob Builder"

    def user(open_id: str) -> Any:
        request = GetUserRequest.builder().user_id(open_id).user_id_type("open_id").build()
        return client.contact.v3.user.get(request)

    bob = user("ou_bob")
    assert bob.success() and bob.data.user.name == "Bob Builder"
    assert user("ou_nobody").code == CODE_USER_NOT_FOUND
    [call] = [c for c in feishu.calls() if c.kind == "user" and c.target_id == "ou_bob"]
    assert call.query == {"user_id_type": "open_id"}
