"""One `Channel` over every enabled platform: each event goes to the adapter of the
conversation's platform."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from adapters.reading import Prompt, Reader
from runtime.channel import Channel, Event, MessageRef, Notice
from runtime.models import Actor, ConversationRef
from runtime.ownership.lease import guard
from runtime.queue.inbound import Inbound

log = logging.getLogger(__name__)


class PlatformChannel(Protocol):
    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None: ...

    async def tell(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        reply: Mapping[str, str],
        secret: bool = False,
    ) -> None:
        """Say something only `actor` sees; `reply` is what the adapter put in the Inbound.
        `secret`: what only they may ever see, even later in a group (a sign-in link)."""


class Router:
    """Platforms are added as their adapters are built (after the runtime, which needs the
    router, so an adapter can use the runtime)."""

    def __init__(self, fallback: Channel | None = None) -> None:
        """`fallback`: where events of a platform without an adapter here go (the operator
        CLI's terminal), instead of being dropped."""
        self.channels: dict[str, PlatformChannel] = {}
        self.readers: dict[str, Reader] = {}
        self.fallback = fallback

    def add(self, platform: str, channel: PlatformChannel, reader: Reader | None = None) -> None:
        self.channels[platform] = channel
        if reader is not None:
            self.readers[platform] = reader

    async def read(self, inbound: Inbound, job: str) -> Prompt:
        """The message as the model gets it: its platform's reader's, else its text."""
        reader = self.readers.get(inbound.platform)
        return Prompt(inbound.text) if reader is None else await reader.read(inbound, job)

    def _channel(self, conversation: ConversationRef) -> PlatformChannel | None:
        channel = self.channels.get(conversation.platform)
        if channel is None:
            log.error("no adapter for platform %r: event dropped", conversation.platform)
        return channel

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        # A job taken over from this process is answered by its new owner. Notices are not
        # held back: "I cannot reach my storage" must show while Redis is down (and a notice
        # said twice misleads nobody).
        if not isinstance(event, Notice):
            await guard()
        if conversation.platform not in self.channels and self.fallback is not None:
            return await self.fallback.send(conversation, event)
        channel = self._channel(conversation)
        return None if channel is None else await channel.send(conversation, event)

    async def tell(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        reply: Mapping[str, str],
        secret: bool = False,
    ) -> None:
        channel = self._channel(conversation)
        if channel is not None:
            await channel.tell(conversation, actor, text, reply, secret)
