"""The slow tier of tests/component/test_policy.py: its tests that run real
processes, wait out timers or run many trials."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.e2e  # real processes and timeouts: the slow tier
async def test_an_agent_cannot_rewrite_the_policy_that_governs_it(workdir: Path) -> None:
    """`clawgate chat` in a directory holding its clawgate.toml: the default setup."""
    from tests.processes import chat, clean_env  # noqa: PLC0415

    policy = workdir / "clawgate.toml"
    policy.write_text('[tools]\ndeny = ["bash"]\n')
    code, out, err = await chat(
        "write clawgate.toml: [tools]\n/policy show\n", workdir, clean_env(), "chat"
    )
    assert code == 0
    assert policy.read_text() == '[tools]\ndeny = ["bash"]\n'
    assert "clawgate.toml is the policy file (admins change it outside clawgate)" in out
    assert "lies in CLAWGATE_WORKDIR" in err
