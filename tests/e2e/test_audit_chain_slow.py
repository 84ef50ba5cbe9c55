"""The slow tier of tests/component/test_audit_chain.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from runtime.audit_chain import ChainConfig, head_message, seal
from runtime.audit_verify import verify
from tests.component import test_audit_chain as _audit_chain
from tests.component.test_audit_chain import (
    FILL,
    KEYS,
    RING,
    STREAM,
    delete,
    write,
)
from tests.conftest import sync_client_for

# Fixtures of the fast tier's module, shared here.
cli_env = _audit_chain.cli_env


@pytest.mark.e2e  # a real process
def test_verify_as_a_process(cli_env: str) -> None:
    write(cli_env, 10)
    env = {k: v for k, v in os.environ.items()}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    argv = [sys.executable, "-m", "bot.cli", "audit", "verify"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "intact: 14 entries" in done.stdout, done.stderr
    client = sync_client_for(cli_env)
    try:
        delete(client)
    finally:
        client.close()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout.startswith("Audit chain BROKEN: deleted entry")
    env["REDIS_URL"] = "redis://127.0.0.1:9/0"
    env.pop("CLAWGATE_REDIS_CLUSTER", None)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("clawgate: cannot read the audit trail")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.e2e  # 100,000 entries: seconds, the slow tier
async def test_a_hundred_thousand_entries_verify_in_seconds(redis: aioredis.Redis) -> None:
    """Filled fast: typical entries sealed here in batches of 5,000, each batch appended by
    one script, and the head set as the writer sets it."""
    config, head, now = ChainConfig(RING), (0, ""), str(int(time.time() * 1000))
    started = time.perf_counter()
    for start in range(0, 100_000, 5000):
        batch = [
            {
                "event": "tool_executed",
                "actor": "slack:U0ALICE",
                "trace": "4bf92f3577b34da6a3ce929d0e0e4736",
                "at": now,
                "tool": "bash",
                "call": f"call_{i}",
                "status": "completed",
                "duration_ms": "12",
                "session": f"slack:T1:C1:{i % 50}",
                "conversation": "slack:T1:C1",
                "args_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "arg_keys": "command",
            }
            for i in range(start, start + 5000)
        ]
        sealed = seal(STREAM, config, batch, head, {})
        flat = [[item for pair in fields.items() for item in pair] for fields in sealed.entries]
        await redis.eval(FILL, 1, STREAM, json.dumps(flat))
        head = (sealed.seq, sealed.mac)
    hmac = RING.mac(head_message(STREAM, *head))
    fields = {"seq": str(head[0]), "mac": head[1], "kid": "k1", "hmac": hmac}
    await redis.hset(KEYS.audit_head(), mapping=fields)  # type: ignore[arg-type]
    filled = time.perf_counter() - started
    started = time.perf_counter()
    report = await verify(redis, KEYS, RING, 100_000)
    elapsed = time.perf_counter() - started
    print(f"\nfilled in {filled:.2f} s, verified {report.entries:,} entries in {elapsed:.2f} s")
    assert report.ok and report.entries == 100_100  # and a checkpoint every 1000
    assert elapsed < 10
