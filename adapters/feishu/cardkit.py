"""CardKit (cardkit/v1) for the streamed answer: the card's JSON 2.0 (a `steps` element for
tool lines and status above the `answer` element), and the calls that create a card entity,
find the one a message shows, stream an element's content, switch streaming mode and replace
the card whole. Each update carries a `sequence` that must grow per card; it is read from the
clock (tenths of a second since 2026) so that a process taking over a card another one left
(kill -9) goes on above the dead one's numbers without knowing them."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

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

from adapters.feishu.answers import markdown_text

STEPS = "steps"  # element ids
ANSWER = "answer"
STEPS_CHARS = 2_000
_EPOCH = 1_767_225_600  # 2026-01-01: sequences (int32) last until 2032 at ten a second
Call = Callable[[Callable[[], Any], str], Awaitable[Any]]


def stream_card(steps: str, answer: str) -> dict[str, Any]:
    """The card while it streams: Feishu types the answer's growth out (streaming mode)."""
    return {
        "schema": "2.0",
        "config": {
            "update_multi": True,
            "streaming_mode": True,
            "summary": {"content": "Working…"},
            "streaming_config": {
                "print_frequency_ms": {"default": 30},
                "print_step": {"default": 2},
                "print_strategy": "fast",
            },
        },
        "body": {"elements": [_steps(steps), _answer(answer)]},
    }


def final_card(lines: list[str], status: str, answer: str) -> dict[str, Any]:
    """The finished card, streaming off: the tool lines (when any) folded in a panel, how
    the run stopped (when it says more than the answer), the answer as said."""
    elements: list[dict[str, Any]] = []
    if lines:
        calls = f"{len(lines)} tool call{'s' if len(lines) > 1 else ''}"
        elements.append(
            {
                "tag": "collapsible_panel",
                "expanded": False,
                "header": {"title": {"tag": "markdown", "content": calls}},
                "elements": [_steps("\n".join(lines))],
            }
        )
    if status:
        elements.append({"tag": "markdown", "content": markdown_text(status)})
    if answer or not elements:
        elements.append(_answer(answer))
    summary = " ".join((answer or status).split())[:60] or "Done"
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "streaming_mode": False, "summary": {"content": summary}},
        "body": {"elements": elements},
    }


def _steps(text: str) -> dict[str, Any]:
    content = steps_text(text)
    return {"tag": "markdown", "element_id": STEPS, "content": content, "text_size": "notation"}


def steps_text(text: str) -> str:
    """Tool lines as the card shows them: their last `STEPS_CHARS` (the answer needs the
    card's 30 KB), escaped like an answer (a tool's summary must not mention anyone)."""
    if len(text) > STEPS_CHARS:
        text = "…" + text[-STEPS_CHARS:].partition("\n")[2]
    return markdown_text(text)


def _answer(text: str) -> dict[str, Any]:
    return {"tag": "markdown", "element_id": ANSWER, "content": markdown_text(text)}


def next_sequence(last: int) -> int:
    return max(last + 1, int((time.time() - _EPOCH) * 10))


class CardKit:
    """The calls, through the channel's `call` (retries, logging); each says whether it
    worked (False, or None for an id, when Feishu refused or could not be reached)."""

    def __init__(self, client: Any, call: Call) -> None:
        self.client = client
        self.call = call

    async def create(self, card: dict[str, Any]) -> str | None:
        body = CreateCardRequestBody.builder().type("card_json").data(_json(card)).build()
        request = CreateCardRequest.builder().request_body(body).build()
        data = await self.call(lambda: self.client.cardkit.v1.card.create(request), "card create")
        return str(data.card_id) if data and getattr(data, "card_id", None) else None

    async def card_of(self, message_id: str) -> str | None:
        """The card entity a card message shows (what a retake needs to finish it)."""
        body = IdConvertCardRequestBody.builder().message_id(message_id).build()
        request = IdConvertCardRequest.builder().request_body(body).build()
        data = await self.call(
            lambda: self.client.cardkit.v1.card.id_convert(request), "card id_convert"
        )
        return str(data.card_id) if data and getattr(data, "card_id", None) else None

    async def content(self, card_id: str, element: str, text: str, sequence: int) -> bool:
        body = ContentCardElementRequestBody.builder().content(text).sequence(sequence).build()
        request = (
            ContentCardElementRequest.builder()
            .card_id(card_id)
            .element_id(element)
            .request_body(body)
            .build()
        )
        return bool(
            await self.call(
                lambda: self.client.cardkit.v1.card_element.content(request), "card content"
            )
        )

    async def streaming(self, card_id: str, on: bool, sequence: int) -> bool:
        settings = _json({"config": {"streaming_mode": on}})
        body = SettingsCardRequestBody.builder().settings(settings).sequence(sequence).build()
        request = SettingsCardRequest.builder().card_id(card_id).request_body(body).build()
        return bool(
            await self.call(lambda: self.client.cardkit.v1.card.settings(request), "card settings")
        )

    async def replace(self, card_id: str, card: dict[str, Any], sequence: int) -> bool:
        whole = Card.builder().type("card_json").data(_json(card)).build()
        body = UpdateCardRequestBody.builder().card(whole).sequence(sequence).build()
        request = UpdateCardRequest.builder().card_id(card_id).request_body(body).build()
        return bool(
            await self.call(lambda: self.client.cardkit.v1.card.update(request), "card update")
        )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
