"""What a model provider is to the loop: messages and tool specs in, one assistant message out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from runtime.models import AssistantMessage, Message, ToolSpec

if TYPE_CHECKING:
    from runtime.policy.listed_models import ListedModel

# The system prompt of a request for a summary (runtime/context): a provider answers it like
# any request (a real model writes the summary); the demo model recognizes it and answers
# something deterministic.
SUMMARY_PROMPT = (
    "You keep the memory of a long conversation between a team and their engineering "
    "assistant. Older messages no longer fit what the assistant is shown, so you replace them "
    "by a summary. Given the summary so far and the messages that follow it, write the new "
    "summary: what was asked and decided, what was done with which tools and what came out "
    "(files, commands, errors, approvals), open questions and promises. Facts, names, paths "
    "and numbers; no preamble. Stay within the length you are given."
)


class ProviderError(Exception):
    """The model could not answer; the message is safe and useful to show in chat. `code`:
    a short machine code for traces (runtime/error_codes.py)."""

    def __init__(self, message: str, code: str = "provider_error") -> None:
        super().__init__(message)
        self.code = code


class Provider(Protocol):
    name: str
    # True only for the offline demo model, so the chat can say so once.
    offline_demo: bool

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec]
    ) -> AssistantMessage: ...


async def close(provider: Provider) -> None:
    """Closes the connections a provider keeps open, if it keeps any (the `openai` one)."""
    aclose = getattr(provider, "aclose", None)
    if aclose is not None:
        await aclose()


# Makes the provider of a model the policy file lists (`[[models]]`, bot/wiring.py).
ProviderFactory = Callable[["ListedModel"], Provider]

# Told the answer's text so far, each time it grows while the model writes.
OnText = Callable[[str], Awaitable[None]]


@runtime_checkable
class Streaming(Protocol):
    """A provider that can stream its answer. `complete_streaming` answers exactly what
    `complete` would, calling `on_text` as the answer's text grows (not at all when the text
    is empty, or when streaming is off)."""

    async def complete_streaming(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], on_text: OnText
    ) -> AssistantMessage: ...
