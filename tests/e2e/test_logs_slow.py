"""The slow tier of tests/component/test_logs.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.processes import chat, clean_env


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_clawgate_chat_logs_json_lines_to_stderr(workdir: Path) -> None:
    (workdir / "x").write_text("contents of x\n")
    env = clean_env(CLAWGATE_LOG_FORMAT="json", CLAWGATE_LOG_LEVEL="INFO")
    code, out, err = await chat("read x\n", workdir, env, "chat")
    assert code == 0
    assert "contents of x" in out
    entries = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert entries
    warning = next(e for e in entries if "REDIS_URL is not set" in e["message"])
    assert warning["level"] == "WARNING"
    assert warning["logger"] == "runtime.store.connection"
    assert {"ts", "level", "logger", "message"} <= set(warning)
