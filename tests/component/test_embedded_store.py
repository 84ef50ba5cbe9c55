"""The zero-setup default: without REDIS_URL the same code runs on the embedded store."""

from __future__ import annotations

import logging

import pytest

from runtime.models import UserMessage
from runtime.store.connection import EMBEDDED_WARNING, connect
from runtime.store.history import HistoryStore
from runtime.store.keys import Keys, check_session_id


async def test_embedded_store_speaks_redis_including_lua(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        client = connect(None)
    assert [r.getMessage() for r in caplog.records] == [EMBEDDED_WARNING]
    try:
        history = HistoryStore(client, Keys("emb"))
        await history.append("s", UserMessage(content="hi"), UserMessage(content="there"))
        assert [m.content for m in await history.load("s")] == ["hi", "there"]
        assert await client.eval("return redis.call('LLEN', KEYS[1])", 1, "emb:{s}:history") == 2
    finally:
        await client.aclose()


@pytest.mark.parametrize("bad", ["", "a{b", "a}b", "has space", "x" * 201])
def test_session_ids_that_would_break_the_hash_tag_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid session id"):
        check_session_id(bad)
