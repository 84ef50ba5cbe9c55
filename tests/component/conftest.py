"""Fakes of the platforms for the tests that drive a chat adapter's channel directly."""

from __future__ import annotations

from tests.platform_fakes import feishu, slack

__all__ = ["feishu", "slack"]  # the fixtures
