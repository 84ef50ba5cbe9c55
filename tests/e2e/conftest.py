"""The slow tier's shared fixture: a fake Slack for the tests that serve it (the Feishu and
Socket Mode tests define their own `fake`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_slack import FakeSlack


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """A fake Slack, with the settings that would reach past it cleared."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REDIS_URL", "CLAWGATE_POLICY_FILE"):
        monkeypatch.delenv(var, raising=False)
    with FakeSlack() as server:
        yield server
