"""The slow tier of tests/component/test_audit.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import pytest
import redis.asyncio as aioredis

from tests.component.test_audit import REPO, audit_log
from tests.conftest import keeps_cluster_setting
from tests.support import PREFIX


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_follow_prints_new_entries_until_ctrl_c(
    redis_url: str, redis: aioredis.Redis
) -> None:
    audit = audit_log(redis)
    await audit.record("before", "someone")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CLAWGATE_") or keeps_cluster_setting(k)
    }
    env.update(REDIS_URL=redis_url, CLAWGATE_REDIS_PREFIX=PREFIX, PYTHONPATH=str(REPO))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "audit",
        "tail",
        "--follow",
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), timeout=30))
        assert first["event"] == "before"
        await audit.record("after", "someone", note="appended while following")
        second = json.loads(await asyncio.wait_for(proc.stdout.readline(), timeout=10))
        assert second["event"] == "after"
        assert second["fields"] == {"note": "appended while following"}
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), timeout=10) == 130
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
