"""`clawgate bench ingest` in a tiny configuration: it runs the real server against its own fake
platform API (Slack or Feishu) and finishes with every request accepted and every answer seen
(no timing asserts)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from typing import Any

import pytest

from bot.bench.ingest import IngestReport, bench_ingest
from bot.bench.monitor import socket_ports
from bot.bench.workers import steady_rate
from bot.cli import main
from bot.settings import CLUSTER_INBOX_PARTITIONS
from tests.conftest import CLUSTER, client_for

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier

# serve's default worker (its child process, with REDIS_URL), or serve alone plus a worker.
SPLIT = pytest.mark.parametrize("split", [False, True], ids=["child worker", "worker process"])
# 1 step of 0.5 s at 50/s, then 2 conversations x 2 measured turns.
TINY: dict[str, Any] = {"rates": [50], "duration": 0.5, "threads": 2, "turns": 2}


async def _tiny_bench(redis_url: str, platform: str, split: bool) -> IngestReport:
    """A TINY run; checks what both platforms share and that the prefix is gone afterwards."""
    prefix = f"bench-test-{time.time_ns()}"
    lines: list[str] = []
    report = await bench_ingest(
        redis_url,
        prefix,
        cluster=CLUSTER,  # under TEST_REDIS_CLUSTER=1, its default of 16 partitions
        partitions=CLUSTER_INBOX_PARTITIONS if CLUSTER else 1,
        platform=platform,
        **TINY,
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

    assert await _keys_left(redis_url, f"{prefix}:") == []
    return report


@SPLIT
async def test_tiny_ingest_bench_completes(redis_url: str, split: bool) -> None:
    report = await _tiny_bench(redis_url, "slack", split)
    # 25 warm-up + 25 measured + 2 x (1 + 2) end-to-end mentions, one answer each
    assert report.fake_calls["auth.test"] == 2  # once per process: serve and its worker
    assert report.fake_calls["chat.postMessage"] >= 25 + 25 + 6


@SPLIT
async def test_tiny_feishu_ingest_bench_completes(redis_url: str, split: bool) -> None:
    report = await _tiny_bench(redis_url, "feishu", split)
    processes = 2  # serve and its worker (its child, or apart)
    assert report.fake_calls["bot_info"] == processes  # at start, in every process
    assert 1 <= report.fake_calls["token"] <= processes  # cached per process (expire 7200 s)
    # 25 warm-up + 25 measured + 2 x (1 + 2) end-to-end messages: each answered with a reply
    # to it (and the first message of each chat with the demo notice too)
    assert report.fake_calls["reply"] >= 25 + 25 + 6
    assert report.fake_calls["card_create"] >= 25 + 25 + 6  # each answer a CardKit card
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


def _bench_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """`clawgate bench ingest … --json`: stdout is one JSON document, the commentary is on
    stderr."""
    assert main(["bench", "ingest", *args, "--json"]) == 0
    out, err = capsys.readouterr()
    assert "this machine has" in err and "Traceback" not in err, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_ingest_bench_json_holds_the_ramp_and_the_end_to_end_figures(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    document = _bench_json(
        capsys, "--rates", "50", "--duration", "0.5", "--threads", "2", "--turns", "2"
    )
    assert document["bench"] == "ingest" and document["topology"] == "child worker"
    [step] = document["ack"]
    assert (step["rate"], step["sent"], step["ok"], step["errors"]) == (50, 25, 25, {})
    assert step["p99_ms"] >= step["p50_ms"] > 0
    assert document["end_to_end"]["turns_per_s"] > 0


def test_workers_bench_reports_throughput_per_worker_count_and_the_spread(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--workers 1,2`: a backlog queued through serve alone, drained by 1 then 2 worker
    processes, over 4 inbox partitions; the keys are gone afterwards."""
    prefix = f"bench-workers-{time.time_ns()}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("CLAWGATE_REDIS_PREFIX", prefix)
    monkeypatch.setenv("CLAWGATE_INBOX_PARTITIONS", "4")
    document = _bench_json(
        capsys, "--workers", "1,2", "--backlog", "40", "--threads", "2", "--turns", "1"
    )
    assert document["topology"] == "workers" and document["redis"]["inbox_partitions"] == 4
    assert [step["workers"] for step in document["workers"]] == [1, 2]
    for step in document["workers"]:
        assert len(step["partitions"]) == 4 and sum(step["partitions"]) == 40
        assert step["handled_per_s"] > 0 and step["drain_s"] > 0
        assert sum(m["events"] for m in step["masters"].values()) == 40
        assert step["end_to_end"]["turns"] == 2 * 2
    assert asyncio.run(_keys_left(redis_url, prefix)) == []


async def _keys_left(redis_url: str, prefix: str) -> list[str]:
    client = client_for(redis_url)
    try:
        return [k async for k in client.scan_iter(match=f"{prefix}*")]
    finally:
        await client.aclose()


def test_worker_counts_are_small_positive_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "1,x", "65"):
        with pytest.raises(SystemExit):
            main(["bench", "ingest", "--workers", bad])
        assert "expected worker counts" in capsys.readouterr().err


def test_the_steady_rate_leaves_out_the_workers_start() -> None:
    # 1 s of start-up, then 100 events/s: 100 events between 10 % and 90 % of 125
    samples = [(0.0, 0), (1.0, 0), *((1.0 + i / 100, i) for i in range(1, 126))]
    assert steady_rate(samples, 125) == pytest.approx(100, rel=0.02)
    assert steady_rate([(0.0, 0), (1.0, 5)], 10) == 0.0  # never reached 90 %
    assert steady_rate([(0.0, 0), (0.5, 0), (0.55, 40)], 40) == pytest.approx(800)  # at once


def test_compare_floor_runs_clawgate_on_the_fake_model_then_the_floor_app(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--compare-floor`: clawgate's openai provider against the fake model, then the floor
    app, under the same load: every answer seen for both, one model request per turn, the CPU
    of ingest + worker per turn, Redis commands per turn (MONITOR; not on a cluster), the
    ratio."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    document = _bench_json(
        capsys,
        *("--rates", "50", "--duration", "0.5", "--threads", "2", "--turns", "2"),
        "--compare-floor",
    )
    assert document["model"] == "fake openai-compatible server"
    assert (document["app"], document["floor"]["app"]) == ("clawgate", "floor")
    for figures in (document, document["floor"]):
        [step] = figures["ack"]
        assert (step["sent"], step["ok"], step["errors"]) == (25, 25, {})
        e2e = figures["end_to_end"]
        assert e2e["turns_per_s"] > 0 and e2e["p99_ms"] > 0  # every answer arrived
        assert e2e["model_requests_per_turn"] == 1.0  # a plain turn: one model call
        cpu = e2e["cpu_ms_per_turn"]  # clawgate's worker: serve's child process
        both = cpu["server"] + cpu.get("worker", 0.0)
        assert e2e["cpu_ms_per_turn_ingest_worker"] == pytest.approx(both, abs=0.002)
        # CPU is read in nanoseconds (schedstat): even this tiny run's share of each shows.
        assert cpu["server"] > 0 and cpu.get("worker", 1.0) > 0
        assert ("worker" in cpu) == (figures is document)
        assert "fake model" in e2e["cpu_ms_per_turn"]
        commands = e2e["redis_commands_per_turn"]
        if CLUSTER:
            assert commands is None
        else:
            by_process = commands["by_process"]
            assert commands["total"] == pytest.approx(sum(by_process.values()), abs=0.02)
            assert by_process["server"] > 0
            assert commands["commands"]["EVALSHA"] > 0
            # a pipeline is one round trip: fewer of them than commands, never more
            assert 0 < commands["round_trips"] <= commands["total"]
    floor_commands = document["floor"]["end_to_end"]["redis_commands_per_turn"]
    if not CLUSTER:  # enqueue + ack scripts, XREADGROUP, the connections' SELECT
        assert 3 <= floor_commands["total"] < 4
    assert document["comparison"]["cpu_per_turn_ratio"] > 0


def test_compare_floor_rounds_give_each_ratio_and_their_median(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--rounds 3`: clawgate and the floor in turn three times; the ratio is the median."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    document = _bench_json(
        capsys,
        *("--rates", "50", "--duration", "0.3", "--threads", "2", "--turns", "2"),
        *("--compare-floor", "--rounds", "3"),
    )
    rounds = document["comparison"]["rounds"]
    assert len(rounds) == 3
    for one in rounds:
        assert one["ratio"] == pytest.approx(one["clawgate_ms"] / one["floor_ms"], rel=0.02)
    ratios = sorted(one["ratio"] for one in rounds)
    assert document["comparison"]["cpu_per_turn_ratio"] == ratios[1]


def test_rounds_without_compare_floor_is_a_settings_error(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert main(["bench", "ingest", "--rounds", "2"]) == 2
    assert "--rounds: with --compare-floor only" in capsys.readouterr().err


async def test_the_split_floor_app_counts_ingest_and_worker_apart(redis_url: str) -> None:
    prefix = f"bench-floor-{time.time_ns()}"
    lines: list[str] = []
    report = await bench_ingest(
        redis_url,
        prefix,
        cluster=CLUSTER,
        **TINY,
        split=True,
        floor=True,
        out=lines.append,
    )
    assert len(report.e2e_us) == 2 * 2, lines
    assert report.fake_calls["chat.postMessage"] == 25 + 25 + 2 * 3  # one post per event
    assert report.ingest_worker_cpu_ms == report.e2e_cpu_ms["server"] + report.e2e_cpu_ms["worker"]
    if not CLUSTER:
        assert report.redis_commands is not None
        by_process = report.redis_commands["by_process"]
        assert by_process["server"] >= 1 and by_process["worker"] >= 2  # enqueue; read + ack
    assert await _keys_left(redis_url, f"{prefix}:") == []


def test_the_monitor_finds_the_ports_of_a_process() -> None:
    with socket.socket() as listener, socket.socket() as client:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client.connect(listener.getsockname())
        assert client.getsockname()[1] in socket_ports(os.getpid())
