"""The shape of the Feishu events clawgate takes, checked before lark-oapi sees them: its
unmarshalling trusts the JSON's types and fails with a 500 (and a traceback) on a string
where it expects an object, which an authentic but malformed request must not cause. And the
shapes of a message's content (a JSON string inside the event, or a history message)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Sender(_Shape):
    sender_id: dict[str, Any] | None = None


class _Message(_Shape):
    mentions: list[dict[str, Any]] | None = None


class _MessageEvent(_Shape):
    sender: _Sender
    message: _Message


class _Action(_Shape):
    value: dict[str, Any] | None = None
    form_value: dict[str, Any] | None = None
    name: str | None = None


class _Context(_Shape):
    open_message_id: str = Field(min_length=1)
    open_chat_id: str = Field(min_length=1)


class _CardEvent(_Shape):
    operator: dict[str, Any]
    action: _Action | None = None
    context: _Context | None = None


class MessageEnvelope(_Shape):
    schema_: Literal["2.0"] = Field(alias="schema")
    event: _MessageEvent


class CardEnvelope(_Shape):
    schema_: Literal["2.0"] = Field(alias="schema")
    event: _CardEvent


# --- message content (the JSON string in `message.content`, events and history alike) ---------


class TextContent(_Shape):
    text: str = ""


class ImageContent(_Shape):
    image_key: str = Field(min_length=1)


class FileContent(_Shape):
    """A file message; a media (video) message has a cover `image_key` too."""

    file_key: str = Field(min_length=1)
    file_name: str = ""


class PostElement(_Shape):
    """One element of a rich-text (post) paragraph: `tag` says which fields it has."""

    tag: str = ""
    text: str | None = None  # text, a, code_block, md
    href: str | None = None  # a
    user_id: str | None = None  # at: a mention key ("@_user_1") in events, an open_id in history
    user_name: str | None = None  # at
    image_key: str | None = None  # img
    file_key: str | None = None  # media
    language: str | None = None  # code_block
    emoji_type: str | None = None  # emotion


class PostBody(_Shape):
    title: str = ""
    content: list[list[PostElement]] = Field(default_factory=list)
