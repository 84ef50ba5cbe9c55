"""The slow tier's shared fixtures: a fake Slack for the tests that serve it (the Feishu and
Socket Mode tests define their own `fake`), a fake Feishu for the tests that serve both, and
the plain fakes `slack` and `feishu` (tests/platform_fakes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.e2e.test_feishu_serve import FEISHU_VARS
from tests.fake_feishu import FakeFeishu
from tests.fake_slack import FakeSlack
from tests.platform_fakes import feishu, slack

__all__ = ["fake", "fake_feishu", "feishu", "slack"]  # the fixtures


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """A fake Slack, with the settings that would reach past it cleared."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REDIS_URL", "CLAWGATE_POLICY_FILE"):
        monkeypatch.delenv(var, raising=False)
    with FakeSlack() as server:
        yield server


@pytest.fixture
async def fake_feishu(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeFeishu]:
    """A fake Feishu, with the model's, the policy's and Feishu's settings cleared."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CLAWGATE_POLICY_FILE", *FEISHU_VARS):
        monkeypatch.delenv(var, raising=False)
    async with FakeFeishu() as server:
        yield server
