"""Slack calls tried once, for what a later call makes good (an append to a streamed answer,
an edit of one being written, the thread's status): made without slack_sdk's retries, and a
rate limit pauses them for what Slack says (the final answer waits it out instead, as
slack_sdk's retry handler says)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.posting import slack_error

log = logging.getLogger(__name__)

CALM_DOWN = 30.0  # seconds without previews after a rate limit that named no Retry-After
PAUSED = "paused after a rate limit"


class QuickCalls:
    def __init__(self, client: AsyncWebClient) -> None:
        """`client`: the channel's, whose token, base URL and session these calls share."""
        self.client = AsyncWebClient(
            token=client.token,
            base_url=client.base_url,
            session=client.session,
            timeout=client.timeout,
            retry_handlers=[],
        )
        self._paused_until = 0.0

    async def once(
        self, method: str, call: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> str | None:
        """None when `call` (made through `self.client`) went through, else why not: PAUSED
        (not made, after a rate limit), Slack's error, or the failure's name."""
        if time.monotonic() < self._paused_until:
            return PAUSED
        try:
            await call()
            return None
        except SlackApiError as exc:
            error, status = slack_error(exc)
            if status == 429:
                sent = getattr(exc.response, "headers", None) or {}
                headers = {str(k).lower(): v for k, v in sent.items()}
                try:
                    pause = float(headers.get("retry-after", CALM_DOWN))
                except (TypeError, ValueError):
                    pause = CALM_DOWN
                self._paused_until = time.monotonic() + max(pause, 1.0)
        except (ClientError, TimeoutError) as exc:
            error = type(exc).__name__
        log.warning("%s failed: %s", method, error)
        return error
