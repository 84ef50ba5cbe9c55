"""`clawgate bench ingest` in a tiny configuration: it runs the real server against its own fake
platform API (Slack or Feishu) and finishes with every request accepted and every answer seen
(no timing asserts)."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis

from bot.bench.ingest import IngestReport, bench_ingest
from bot.cli import main

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

SPLIT = pytest.mark.parametrize("split", [False, True], ids=["in-process worker", "worker process"])


async def _tiny_bench(redis_url: str, platform: str, split: bool) -> IngestReport:
    """1 step of 0.5 s at 50/s, then 2 conversations x 2 measured turns; checks what both
    platforms share and that the prefix is gone afterwards."""
    prefix = f"bench-test-{time.time_ns()}"
    lines: list[str] = []
    report = await bench_ingest(
        redis_url,
        prefix,
        platform=platform,
        rates=[50],
        duration=0.5,
        threads=2,
        turns=2,
        split=split,
        out=lines.append,
    )

    [step] = report.steps
    assert step.rate == 50
    assert step.sent == 25
    assert not step.errors, step.errors
    assert step.ok == step.sent  # every request answered 200
    assert len(report.e2e_us) == 2 * 2  # every answer seen by the fake
    assert any(line.startswith("ack at 50/s") for line in lines), lines
    assert not any("Traceback" in line for line in lines), lines

    client = aioredis.from_url(redis_url, decode_responses=True)
    try:
        assert [k async for k in client.scan_iter(match=f"{prefix}:*")] == []
    finally:
        await client.aclose()
    return report


@SPLIT
async def test_tiny_ingest_bench_completes(redis_url: str, split: bool) -> None:
    report = await _tiny_bench(redis_url, "slack", split)
    # 25 warm-up + 25 measured + 2 x (1 + 2) end-to-end mentions, one answer each
    assert report.fake_calls["auth.test"] == (2 if split else 1)  # once per process
    assert report.fake_calls["chat.postMessage"] >= 25 + 25 + 6


@SPLIT
async def test_tiny_feishu_ingest_bench_completes(redis_url: str, split: bool) -> None:
    report = await _tiny_bench(redis_url, "feishu", split)
    processes = 2 if split else 1
    assert report.fake_calls["bot_info"] == processes  # at start, in every process
    assert 1 <= report.fake_calls["token"] <= processes  # cached per process (expire 7200 s)
    # 25 warm-up + 25 measured + 2 x (1 + 2) end-to-end messages: each answered with a reply
    # to it (and the first message of each chat with the demo notice too)
    assert report.fake_calls["reply"] >= 25 + 25 + 6
    assert "send" not in report.fake_calls  # p2p messages are answered as replies


def test_ingest_bench_needs_redis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["bench", "ingest", "--rates", "10", "--duration", "0.1"]) == 2
    assert "REDIS_URL: required for `clawgate bench ingest`" in capsys.readouterr().err


def test_bench_rates_must_be_positive_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "ingest", "--rates", "100,abc"])
    assert "not a number" in capsys.readouterr().err


def test_bench_platform_is_slack_or_feishu(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "ingest", "--platform", "teams"])
    assert "invalid choice: 'teams'" in capsys.readouterr().err
