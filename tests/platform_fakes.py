"""Fixtures of the fake platforms, Slack's and Feishu's, for a conftest or a test module to
import: `slack` (with the proxy settings slack_sdk would obey cleared) and `feishu`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_feishu import FakeFeishu
from tests.fake_slack import FakeSlack

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    """A fake Slack; slack_sdk would send to a proxy instead (it ignores NO_PROXY)."""
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    with FakeSlack() as server:
        yield server


@pytest.fixture
def feishu() -> Iterator[FakeFeishu]:
    with FakeFeishu() as server:
        yield server
