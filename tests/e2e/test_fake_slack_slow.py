"""The slow tier of tests/component/test_fake_slack.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import time

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.component import test_fake_slack as _fake_slack
from tests.fake_slack import (
    FakeSlack,
)

# Fixtures of the fast tier's module, shared here.
fake = _fake_slack.fake


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_rate_limit_is_retried_after_retry_after(fake: FakeSlack) -> None:
    client = AsyncWebClient(
        token="xoxb-test",
        base_url=fake.base_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    fake.fail_next("chat.postMessage", retry_after=0)
    started = time.monotonic()
    response = await client.chat_postMessage(channel="C111", text="eventually")
    assert response["ok"] and time.monotonic() - started < 5
    attempts = fake.attempts("chat.postMessage")
    assert [a.status for a in attempts] == [429, 200]
    assert [c.params["text"] for c in fake.posts()] == ["eventually"]

    fake.fail_next("chat.postMessage", retry_after=0, times=2)
    with pytest.raises(SlackApiError) as limited:
        await client.chat_postMessage(channel="C111", text="gives up")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "0"

    fake.error_next("chat.update", "cant_update_message")
    with pytest.raises(SlackApiError) as failed:
        await client.chat_update(channel="C111", ts=response["ts"], text="x")
    assert failed.value.response["error"] == "cant_update_message"
    assert len(fake.posts()) == 1 and fake.updates() == []
