"""The shape of the Feishu events clawgate takes, checked before lark-oapi sees them: its
unmarshalling trusts the JSON's types and fails with a 500 (and a traceback) on a string
where it expects an object, which an authentic but malformed request must not cause."""

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
