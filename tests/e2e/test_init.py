"""`clawgate init` as a newcomer runs it: a real process, the settings checked live against
the fake model, the fake Slack and a real Redis, the files written where every command finds
them and the agent cannot write, ending with a `clawgate doctor` that passes; the interactive
questions answered in a real pseudo-terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.e2e import test_doctor as _doctor
from tests.fake_openai import FakeOpenAI
from tests.fake_slack import FakeSlack
from tests.processes import chat, clean_env

# Fixtures of the doctor's tests, shared here.
durable_redis = _doctor.durable_redis
model = _doctor.model

try:
    import pexpect
except ImportError:  # pragma: no cover - the dev extra installs it
    if os.environ.get("CI", "").lower() == "true":
        raise  # under CI a missing dependency is a failure, not a skip
    pytest.skip("needs pexpect (pip install -e '.[dev]')", allow_module_level=True)


async def init(cwd: Path, env: dict[str, str], *flags: str) -> tuple[int, str, str]:
    return await chat("", cwd, env, "init", "--non-interactive", *flags)


def settings_of(config: Path) -> dict[str, str]:
    lines = (config / "clawgate" / "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


async def test_non_interactive_init_writes_settings_that_doctor_passes(
    durable_redis: str, model: FakeOpenAI, slack: FakeSlack, tmp_path: Path
) -> None:
    repo, config = tmp_path / "repo", tmp_path / "config"
    repo.mkdir()
    env = clean_env(XDG_CONFIG_HOME=str(config), CLAWGATE_PORT=str(free_port()))
    flags = [
        "init",
        "--non-interactive",
        "--platform=slack",
        "--slack-bot-token=xoxb-init-test",
        "--slack-signing-secret=signing-secret",
        f"--slack-api-url={slack.base_url}",
        f"--model-base-url={model.base_url}",
        "--model-api-key=sk-test",
        "--model=fake-model",
        f"--redis-url={durable_redis}",
        "--admins=slack:U0ADMIN",
        "--policy=strict",
    ]
    code, out, err = await chat("", repo, env, *flags)
    assert code == 0, out + err
    lines = out.splitlines()
    assert "✓ slack: bot" in out and "✓ model:" in out and "✓ redis:" in out  # each, live
    assert lines[-1].endswith("checks passed."), out
    assert not [line for line in lines if line.startswith("✗")], out
    written = settings_of(config)
    assert written["CLAWGATE_WORKDIR"] == str(repo) and written["REDIS_URL"] == durable_redis
    assert written["CLAWGATE_AUDIT_KEY"].startswith("k1:")
    assert (config / "clawgate" / "env").stat().st_mode & 0o777 == 0o600
    assert 'ask = ["write", "edit", "bash"]' in (config / "clawgate" / "clawgate.toml").read_text()

    # Written already: kept, unless --force.
    code, out, _ = await chat("", repo, env, *flags)
    assert code == 2 and "exist already; --force replaces them" in out
    code, out, _ = await chat("", repo, env, *flags, "--force")
    assert code == 0, out


async def test_a_refused_answer_is_named_and_nothing_is_written(
    model: FakeOpenAI, slack: FakeSlack, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    env = clean_env(XDG_CONFIG_HOME=str(config))
    slack.error_next("auth.test", "invalid_auth")
    code, out, _ = await init(
        tmp_path,
        env,
        "--platform=slack",
        "--slack-bot-token=xoxb-revoked",
        "--slack-signing-secret=s",
        f"--slack-api-url={slack.base_url}",
        "--admins=slack:U0ADMIN",
    )
    assert code == 2
    assert "✗ slack: auth.test: invalid_auth" in out
    assert out.splitlines()[-1] == "clawgate: slack: auth.test: invalid_auth"
    assert not (config / "clawgate" / "env").exists()
    code, out, _ = await init(
        tmp_path,
        env,
        "--platform=none",
        "--model-base-url=demo",
        "--admins=ana",
    )
    assert code == 2 and "--admins: people as slack:U… or feishu:ou_…, not ['ana']" in out


def test_interactive_init_asks_and_ends_with_doctor(tmp_path: Path) -> None:
    repo, config = tmp_path / "repo", tmp_path / "config"
    repo.mkdir()
    env = clean_env(XDG_CONFIG_HOME=str(config), CLAWGATE_PORT=str(free_port()))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "bot.cli", "init"],
        cwd=str(repo),
        env={**env, "TERM": "xterm"},
        encoding="utf-8",
        timeout=30,
    )
    try:
        for question, answer in (
            ("Chat platform: slack, feishu or none", "none"),
            ("Model server URL", "demo"),
            ("Redis URL", ""),
            ("Admins", "slack:U0ADMIN"),
            ("Work dir", ""),
            ("Starting policy", "default"),
        ):
            child.expect_exact(question)
            child.sendline(answer)
        child.expect_exact("checks passed.")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    written = settings_of(config)
    assert written["CLAWGATE_ADMINS"] == "slack:U0ADMIN"
    assert written["CLAWGATE_WORKDIR"] == str(repo)
    assert "requester_may_approve = false" in (config / "clawgate" / "clawgate.toml").read_text()
