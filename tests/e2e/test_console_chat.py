"""`clawgate chat` as a user runs it: a real process, piped stdin, output on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import CLUSTER
from tests.fake_openai import FakeOpenAI, calls, reply
from tests.processes import chat, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


async def test_piped_read_prints_the_file_and_exits_zero(workdir: Path) -> None:
    (workdir / "README.md").write_text("# clawgate readme sentinel\nline two\n")
    code, out, err = await chat("read README.md\n", workdir, clean_env(), "chat")
    assert code == 0
    assert "clawgate readme sentinel\nline two" in out
    assert "offline demo model" in out
    # One warning line about the embedded store, nothing else on stderr.
    assert err.strip().splitlines() == [err.strip()]
    assert "REDIS_URL is not set" in err


async def test_each_line_is_one_message_and_help_lists_commands(workdir: Path) -> None:
    code, out, _ = await chat(
        "write a.txt: first\n\n/help\nread a.txt\n", workdir, clean_env(), "chat"
    )
    assert code == 0
    assert (workdir / "a.txt").read_text() == "first\n"
    assert "/help" in out and "read <path>" in out
    assert out.count("[notice]") == 1
    assert out.index("wrote a.txt") < out.index("Commands:") < out.rindex("first")


async def test_openai_compatible_server_drives_tools_in_chat(
    workdir: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script = [
        calls(("call_1", "bash", {"command": "echo tool-ran-42"})),
        reply("The command printed tool-ran-42."),
    ]
    env = clean_env(OPENAI_BASE_URL=fake_openai.base_url, CLAWGATE_MODEL="fake-model")
    code, out, _ = await chat("please run it\n", workdir, env, "chat")
    assert code == 0
    assert "The command printed tool-ran-42." in out
    assert "offline demo model" not in out
    assert "tool-ran-42" in fake_openai.requests[1]["messages"][-1]["content"]
    assert fake_openai.requests[0]["model"] == "fake-model"


async def test_chat_keeps_history_in_redis_across_processes(workdir: Path, redis_url: str) -> None:
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX="cgchat")
    await chat("write a.txt: persisted\n", workdir, env, "chat", "--session", "p1")
    code, out, err = await chat("read a.txt\n", workdir, env, "chat", "--session", "p1")
    assert code == 0
    assert "persisted" in out
    assert "[notice]" not in out  # the session already existed: the demo notice is not repeated
    assert "REDIS_URL is not set" not in err


async def test_bad_settings_fail_at_start_with_one_line_each(workdir: Path) -> None:
    env = clean_env(CLAWGATE_PORT="eighty", CLAWGATE_WORKDIR=str(workdir / "missing"))
    code, out, err = await chat("", workdir, env, "chat")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert any(line.startswith("clawgate: CLAWGATE_PORT:") for line in lines)
    assert any(line.startswith("clawgate: CLAWGATE_WORKDIR:") for line in lines)
    assert out == ""


async def test_unknown_enabled_tool_is_a_settings_error(workdir: Path) -> None:
    env = clean_env(CLAWGATE_ENABLED_TOOLS="read,teleport")
    code, _, err = await chat("", workdir, env, "chat")
    assert code == 2
    assert "CLAWGATE_ENABLED_TOOLS: unknown tools teleport" in err


async def test_policy_file_denies_a_tool(workdir: Path) -> None:
    (workdir / "clawgate.toml").write_text('[tools]\ndeny = ["bash"]\n')
    code, out, _ = await chat("run: touch pwned\n", workdir, clean_env(), "chat")
    assert code == 0
    assert not (workdir / "pwned").exists()
    assert "not enabled" in out


async def test_bench_runtime_prints_percentiles(workdir: Path) -> None:
    code, out, _ = await chat(
        "",
        workdir,
        clean_env(),
        "bench",
        "runtime",
        *("--calls", "200", "--turns", "20", "--bash-calls", "5"),
    )
    assert code == 0
    assert "chain overhead per call" in out
    assert "turns per second" in out and "p99" in out
    assert "bash call, uncontained" in out and "bash call, bwrap, read-only" in out
    assert "sandbox cost per bash call" in out
    assert "audit entry, chained (unkeyed, one EVALSHA)" in out
    assert "audit chain cost per entry: p50" in out


async def test_bench_approval_reports_suspend_and_resume_by_history_length(
    workdir: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX="cgbench")
    bench = ("bench", "approval", "--turns", "10", "--history", "10,2000")
    code, out, err = await chat("", workdir, env, *bench, "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert list(figures["history"]) == ["10", "2000"]
    for row in figures["history"].values():
        for measure in ("ask", "suspend", "resume"):
            assert 0 < row[measure]["p50_ms"] <= row[measure]["p99_ms"]
        assert 1_000 < row["bytes_per_suspension"] < 10_000
    long = figures["history"]["2000"]
    assert long["summary"] and long["window"] < 1_000  # compacted: runs read a window
    code, out, err = await chat("", workdir, env, *bench)
    assert code == 0, err
    assert "resume p50 ratio 2000 / 10 prior messages" in out
    assert [key async for key in redis.scan_iter("cgbench*")] == []  # nothing left behind


async def test_bench_runtime_model_server_reports_the_real_model_path(
    workdir: Path, redis_url: str, redis: aioredis.Redis
) -> None:
    """The real openai client against the bench's own fake model server, per history length:
    CPU, Redis round trips and the requests the fake answered (two per turn: the tool call,
    then the answer, each with the history); on the embedded store trips are not counted."""
    env = clean_env(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX="cgmodel")
    bench = ("bench", "runtime", "--model-server", "--turns", "5", "--history", "10,60")
    code, out, err = await chat("", workdir, env, *bench, "--json")
    assert code == 0, err
    figures = json.loads(out)["model_server_turn"]
    assert figures["store"] == "redis" and list(figures["history"]) == ["10", "60"]
    assert figures["model_requests"] == 2 * (5 + 3 + 1) * 2  # timed, warm-up, prototype turns
    for prior, row in figures["history"].items():
        assert row["turns"] == 5 and row["model_requests_per_turn"] == 2
        assert row["messages_per_model_request"] > int(prior)  # the history reached the model
        assert 0 < row["wall_p50_us"] <= row["wall_p99_us"] and row["turns_per_second"] > 0
        assert row["cpu_ms_per_turn"] > 0 and row["model_server_cpu_ms_per_turn"] > 0
        trips = row["redis_round_trips_per_turn"]
        assert trips is None if CLUSTER else trips > 0
    assert [key async for key in redis.scan_iter("cgmodel*")] == []  # nothing left behind
    code, out, err = await chat(
        "", workdir, clean_env(), *bench[:3], "--turns", "2", "--history", "10"
    )
    assert code == 0, err
    assert "CPU ms/turn" in out and "not counted" in out


async def test_policy_file_risk_and_approver_tables_take_effect(workdir: Path) -> None:
    (workdir / "clawgate.toml").write_text(
        '[risk]\nsafe_programs = ["sleep"]\nask_patterns = ["echo\\\\s+launch"]\n\n'
        '[conversations."console:local".approvals]\napprovers = ["slack:U1"]\n'
    )
    code, out, _ = await chat("run: sleep 0\nrun: echo launch\n", workdir, clean_env(), "chat")
    assert code == 0
    assert out.count("[approval needed]") == 1  # sleep is now safe; the ask pattern asks
    assert "matches the ask pattern" in out


async def test_policy_file_mistakes_fail_at_start(workdir: Path) -> None:
    (workdir / "clawgate.toml").write_text('[risk]\nask_patterns = ["("]\nunknown = 1\n')
    code, _, err = await chat("", workdir, clean_env(), "chat")
    assert code == 2
    assert "risk.unknown" in err and "ask_patterns" in err
