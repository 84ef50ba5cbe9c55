"""`/mode` and `/model`: a conversation's choices, kept in Redis (one small hash per
conversation, read with its policy) so they hold in every process and across restarts.

Anyone who may use clawgate in the conversation (its `[access]`) may switch, within what the
admins allow there: a mode no looser than `[modes] max`, a model the file lists. Every switch
and every refusal is audited."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn, cast

from runtime.models import Actor, ConversationRef
from runtime.policy.listed_models import DEFAULT_MODEL, ListedModel
from runtime.policy.model import Choice
from runtime.policy.modes import MODE_WORDS, MODES, Mode, strictness
from runtime.policy.resolve import EffectivePolicy
from runtime.policy.service import PolicyService


class ChoiceRefused(Exception):
    """A switch that was refused; the text says why, for the person asking."""


@dataclass(frozen=True, slots=True)
class Switched:
    text: str  # what the conversation is told
    changed: bool  # False: it already was so


def fenced(rows: list[str], block: bool) -> list[str]:
    """Aligned columns, in a code block when `block` (chats whose font is proportional)."""
    return ["```", *rows, "```"] if block and rows else rows


def describe_mode(policy: EffectivePolicy, block: bool = False) -> str:
    """`/mode` without a name: the current mode, where it comes from, and the choices
    (`block`: their columns in a code block)."""
    lines = [f"Mode here: {policy.mode} ({policy.sources['mode']}): {MODE_WORDS[policy.mode]}."]
    lines.append(
        f"Allowed here, strictest first (up to {policy.mode_max}, {policy.sources['mode_max']}):"
    )
    rows = [
        f"  {mode:<6} {MODE_WORDS[mode]}"
        for mode in MODES
        if strictness(mode) <= strictness(policy.mode_max)
    ]
    lines += fenced(rows, block)
    lines.append("Switch with /mode <name>.")
    return "\n".join(lines)


def describe_models(policy: EffectivePolicy, models: Sequence[ListedModel]) -> str:
    """`/model` without a name: the current model and the list."""
    lines = [f"Model here: {policy.model_name} ({policy.sources['model']})."]
    lines.append("Models (/model <name> switches):")
    lines.append(f"  {DEFAULT_MODEL}  the process's own model (CLAWGATE_MODEL)")
    for model in models:
        images = "images" if model.images else "no images"
        lines.append(
            f"  {model.name}  {model.model} at {model.base_url} "
            f"({model.context_window:,} tokens, {images})"
        )
    return "\n".join(lines)


class ConversationChoices:
    def __init__(self, policies: PolicyService) -> None:
        self.policies = policies
        self.redis = policies.redis
        self.audit = policies.audit

    async def switch_mode(self, word: str, actor: Actor, conversation: ConversationRef) -> Switched:
        """Set the conversation's mode, or raise `ChoiceRefused` (audited) saying why not."""
        policy = await self._usable(actor, conversation, "mode", word)
        if word.lower() not in MODES:
            why = f"unknown mode {word!r}; modes, strictest first: {', '.join(MODES)}"
            await self._refuse(actor, conversation, "mode", word, why)
        mode = cast(Mode, word.lower())
        if strictness(mode) > strictness(policy.mode_max):
            await self._refuse(
                actor,
                conversation,
                "mode",
                mode,
                f"{mode} is above the limit here, {policy.mode_max} "
                f"({policy.sources['mode_max']}); an admin sets it ([modes] max)",
            )
        # Stored even when it already is the mode here (a default, or a limit lowered
        # under a looser choice): the choice then holds if the default or limit changes.
        await self._store(actor, conversation, "mode", mode, policy.mode)
        if mode == policy.mode:
            return Switched(f"The mode here is {mode}, now as your choice.", False)
        return Switched(
            f"Mode: {mode}, set by {actor.key} (was {policy.mode}): {MODE_WORDS[mode]}.", True
        )

    async def switch_model(
        self, name: str, actor: Actor, conversation: ConversationRef
    ) -> Switched:
        """Set the conversation's model, or raise `ChoiceRefused` (audited) saying why not."""
        policy = await self._usable(actor, conversation, "model", name)
        listed = [DEFAULT_MODEL, *(m.name for m in self.policies.document.offered_models)]
        if name not in listed:
            await self._refuse(
                actor,
                conversation,
                "model",
                name,
                f"{name!r} is not among the models the admins list here: {', '.join(listed)}",
            )
        await self._store(actor, conversation, "model", name, policy.model_name)
        if name == policy.model_name:
            return Switched(f"The model here is {name}, now as your choice.", False)
        return Switched(f"Model: {name}, set by {actor.key} (was {policy.model_name}).", True)

    async def _usable(
        self, actor: Actor, conversation: ConversationRef, what: str, value: str
    ) -> EffectivePolicy:
        refusal = await self.policies.admit(actor, conversation)
        if refusal is not None:
            why = f"you cannot use clawgate here: {refusal}"
            await self._refuse(actor, conversation, what, value, why)
        return await self.policies.effective(conversation.id)

    async def _store(
        self, actor: Actor, conversation: ConversationRef, what: str, value: str, old: str
    ) -> None:
        choice = Choice(value=value, by=actor.key, at=int(time.time() * 1000))
        key = self.policies.keys.choices(conversation.id)
        await self.redis.hset(key, what, choice.model_dump_json())
        if self.audit is not None:
            await self.audit.record(
                f"{what}_changed", actor.key, conversation=conversation.id, old=old, new=value
            )

    async def _refuse(
        self, actor: Actor, conversation: ConversationRef, what: str, value: str, why: str
    ) -> NoReturn:
        if self.audit is not None:
            await self.audit.record(
                f"{what}_refused", actor.key, conversation=conversation.id, new=value[:80], why=why
            )
        raise ChoiceRefused(why)
