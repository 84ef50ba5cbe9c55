"""`clawgate bench approval` (bot/bench/approval.py) at a tiny scale: where `--peers` hooks in
beside clawgate's rounds, and the whole round it reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from bot.bench.approval import run_approval_bench, warm_rounds
from bot.settings import Settings
from tests.conftest import CLUSTER


async def test_beside_runs_after_each_round_of_each_length_in_turn_and_nothing_is_left(
    redis_url: str, redis: Redis, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(REDIS_URL=redis_url, CLAWGATE_WORKDIR=str(workdir))
    calls: list[tuple[int, int]] = []

    async def beside(prior: int, i: int) -> None:
        calls.append((prior, i))

    figures = await run_approval_bench(settings, workdir, 2, [4, 9], beside)

    played = range(warm_rounds(2) + 2)
    assert calls == [(prior, i) for i in played for prior in (4, 9)]
    for prior in ("4", "9"):
        row = figures["history"][prior]
        assert row["messages"] > int(prior)  # the previous turn's round joined the thread
        # A round is its ask and its resume: its p50 lies between the larger p50 and the sum.
        ask, resume, whole = (row[k]["p50_ms"] for k in ("ask", "resume", "round"))
        assert max(ask, resume) <= whole <= ask + resume + 5e-3  # each rounded to 0.001
        # Counted on a single server's connections only (a cluster client has no one pool).
        sent = row["bytes_per_suspension"]
        assert sent is None if CLUSTER else sent > 0
    assert [key async for key in redis.scan_iter()] == []
