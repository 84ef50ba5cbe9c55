"""The slow tier of tests/component/test_sandbox.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime.tools.sandbox import (
    Access,
    Sandbox,
)
from tests.component import test_sandbox as _sandbox
from tests.component.test_sandbox import (
    bash,
)

# Fixtures of the fast tier's module, shared here.
sandbox = _sandbox.sandbox


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_a_timeout_kills_everything_the_sandboxed_command_started(
    sandbox: Sandbox, workdir: Path
) -> None:
    text, _ = await bash(
        sandbox,
        workdir,
        "(sleep 0.8; touch late) & setsid sh -c 'sleep 0.8; touch escaped' & sleep 30",
        Access.APPROVED,
        timeout=0.3,
    )
    assert "timed out" in text
    await asyncio.sleep(1.3)
    assert not (workdir / "late").exists()
    assert not (workdir / "escaped").exists()  # setsid does not leave the PID namespace
