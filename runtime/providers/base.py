"""What a model provider is to the loop: messages and tool specs in, one assistant message out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime.models import AssistantMessage, Message, ToolSpec


class ProviderError(Exception):
    """The model could not answer; the message is safe and useful to show in chat."""


class Provider(Protocol):
    name: str
    # True only for the offline demo model, so the chat can say so once.
    offline_demo: bool

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage: ...
