"""`clawgate doctor` as a user runs it: a real process against a real Redis (durable and
not), the fake model, the fake Slack and Feishu. ✓ for what works, ✗ and the fix for what
does not, exit 0 only when everything passes."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.e2e.test_worker_processes import Clawgate
from tests.fake_feishu import FakeFeishu
from tests.fake_openai import FakeOpenAI
from tests.fake_slack import FakeSlack
from tests.processes import chat, clean_env

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


def start_redis(tmp_path: Path, *config: str) -> Iterator[str]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is needed (`.ci/run` installs it)"
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir"]
    proc = subprocess.Popen([*argv, str(tmp_path), *config], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as probe, contextlib.suppress(OSError):
                probe.connect(("127.0.0.1", port))
                break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[str]:
    yield from start_redis(tmp_path, "--appendonly", "yes", "--appendfsync", "always")


@pytest.fixture
def forgetful_redis(tmp_path: Path) -> Iterator[str]:
    yield from start_redis(tmp_path, "--appendonly", "no")


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    await fake.start()
    yield fake
    await fake.stop()


async def doctor(env: dict[str, str], cwd: Path) -> tuple[int, list[str]]:
    code, out, err = await chat("", cwd, env, "doctor")
    assert "Traceback" not in err, err
    return code, out.splitlines()


def base_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in clean_env().items() if not k.startswith(("SLACK_", "FEISHU_"))}
    return env | {"CLAWGATE_LOG_LEVEL": "ERROR", **settings}


def marks(lines: list[str]) -> dict[str, list[str]]:
    """Check name → its marks, in order (a name can have several lines)."""
    found: dict[str, list[str]] = {}
    for line in lines:
        if line[:2] in ("✓ ", "✗ "):
            found.setdefault(line[2:].split(":", 1)[0], []).append(line[0])
    return found


async def test_everything_in_order_passes(
    durable_redis: str,
    model: FakeOpenAI,
    slack: FakeSlack,
    feishu: FakeFeishu,
    tmp_path: Path,
    workdir: Path,
) -> None:
    policy = tmp_path / "clawgate.toml"
    policy.write_text('[approvals]\napprovers = ["slack:U0CAROL"]\n')
    app_id, secret = feishu.new_app()
    env = base_env(
        REDIS_URL=durable_redis,
        CLAWGATE_AUDIT_KEY="k1:doctor-test-secret-0123456789",
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=model.base_url,
        CLAWGATE_MODEL="fake-model",
        CLAWGATE_ADMINS="slack:U0ADMIN,feishu:ou_admin1",
        CLAWGATE_POLICY_FILE=str(policy),
        CLAWGATE_PORT=str(free_port()),
        CLAWGATE_WORKDIR=str(workdir),
        SLACK_BOT_TOKEN="xoxb-test",
        SLACK_SIGNING_SECRET="secret",
        SLACK_API_URL=slack.base_url,
        FEISHU_APP_ID=app_id,
        FEISHU_APP_SECRET=secret,
        FEISHU_MODE="websocket",
        FEISHU_DOMAIN=feishu.url,
    )
    code, lines = await doctor(env, tmp_path)
    assert code == 0, "\n".join(lines)
    found = marks(lines)
    assert set(found) == {
        "settings",
        "security settings",
        "policy",
        "sandbox",
        "people",
        "redis",
        "redis durability",
        "audit key",
        "model",
        "slack",
        "feishu",
        "worker",
        "port",
    }, lines
    assert all(m == ["✓"] for m in found.values()), lines
    worker = next(line for line in lines if line.startswith("✓ worker:"))
    assert "CLAWGATE_WORKER_MODE=child (default)" in worker, worker
    assert "not served (set CLAWGATE_METRICS_PORT)" in worker, worker
    assert lines[-1] == f"{len(found)} checks passed."
    assert [c.method for c in slack.calls()] == ["auth.test"]


async def test_each_problem_is_a_cross_with_its_fix(
    forgetful_redis: str,
    model: FakeOpenAI,
    slack: FakeSlack,
    feishu: FakeFeishu,
    tmp_path: Path,
    workdir: Path,
) -> None:
    policy = tmp_path / "clawgate.toml"
    policy.write_text('[tools]\nallow = ["bsh"]\n')  # a tool that does not exist
    app_id, _ = feishu.new_app()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = base_env(
            REDIS_URL=forgetful_redis,
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=model.base_url,
            CLAWGATE_MODEL="gpt-9",
            CLAWGATE_ADMINS="slack:carol",  # a name, not a member id
            CLAWGATE_POLICY_FILE=str(policy),
            CLAWGATE_PORT=str(taken.getsockname()[1]),
            CLAWGATE_WORKDIR=str(workdir),
            SLACK_BOT_TOKEN="xoxb-test",
            SLACK_SIGNING_SECRET="secret",
            SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/",  # nothing there
            FEISHU_APP_ID=app_id,
            FEISHU_APP_SECRET="not-the-secret",
            FEISHU_MODE="websocket",
            FEISHU_DOMAIN=feishu.url,
        )
        code, lines = await doctor(env, tmp_path)
    text = "\n".join(lines)
    assert code == 1, text
    found = marks(lines)
    assert found["redis"] == ["✓"] and found["redis durability"] == ["✗"], text
    assert "appendonly no" in text and "fix: redis-cli CONFIG SET appendonly yes" in text
    assert found["audit key"] == ["✗"] and "fix: set CLAWGATE_AUDIT_KEY=k1:" in text
    assert found["model"] == ["✗"] and "does not list gpt-9" in text
    assert "fix: set CLAWGATE_MODEL to one it serves (fake-model, gpt-4o-mini)" in text
    assert found["slack"] == ["✗"] and "cannot reach http://127.0.0.1:" in text
    assert found["feishu"] == ["✗"] and "the tenant token was refused" in text
    assert found["port"] == ["✗"] and "Address already in use" in text
    assert found["policy"] == ["✗"] and "bsh" in text
    assert "✗ people: not ids: slack:carol" in text
    assert lines[-1].endswith(f"of {sum(len(m) for m in found.values())} failed.")


async def test_bad_settings_are_crosses_too(tmp_path: Path) -> None:
    code, lines = await doctor(base_env(REDIS_URL="foo", CLAWGATE_PORT="x"), tmp_path)
    assert code == 1
    assert lines[0].startswith("✗ settings: REDIS_URL: expected redis://")
    assert any(line.startswith("✗ settings: CLAWGATE_PORT:") for line in lines)


async def test_a_misspelt_setting_is_a_cross_naming_the_one_meant(tmp_path: Path) -> None:
    code, lines = await doctor(base_env(CLAWGATE_MODLE="gpt-x"), tmp_path)
    assert code == 1
    at = lines.index(
        "✗ setting name: CLAWGATE_MODLE (in the environment) is not a setting and is ignored; "
        "did you mean CLAWGATE_MODEL?"
    )
    assert lines[at + 1] == "    fix: docs/configuration.md names every setting"


async def test_a_settings_file_in_the_work_dir_is_ignored_and_the_sources_are_shown(
    tmp_path: Path,
) -> None:
    """The default layout: the work dir is the current directory, whose `.env` an approved
    command may have written to turn the sandbox off and add an admin."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    planted = "CLAWGATE_SANDBOX=off\nCLAWGATE_ADMINS=slack:UEVIL\nCLAWGATE_MODEL=evil\n"
    (workdir / ".env").write_text(planted)
    code, lines = await doctor(base_env(), workdir)
    text = "\n".join(lines)
    assert code == 1
    assert f"✗ settings file: ignoring the settings file {workdir / '.env'}: it is inside" in text
    assert "CLAWGATE_ENV_FILE=/etc/clawgate/env" in text  # the fix
    assert "CLAWGATE_SANDBOX=auto (default)" in text
    assert "CLAWGATE_ADMINS=none (default)" in text
    assert "✗ people: no admins" in text

    # A link in the work dir to a file outside: the agent may repoint it, so ignored too.
    outside = tmp_path / "clawgate.env"
    outside.write_text("CLAWGATE_SANDBOX=bwrap\nCLAWGATE_MODEL=gpt-4o\n")
    (workdir / ".env").unlink()
    (workdir / ".env").symlink_to(outside)
    code, lines = await doctor(base_env(), workdir)
    assert any(line.startswith("✗ settings file: ignoring") for line in lines), lines

    # Named from outside the work dir, it is read; the doctor says which setting came whence.
    (workdir / ".env").unlink()
    env = base_env(CLAWGATE_ENV_FILE=str(outside), CLAWGATE_APPROVERS="slack:UCAROL")
    code, lines = await doctor(env, workdir)
    text = "\n".join(lines)
    assert "settings file" not in text
    assert f"from {outside}: CLAWGATE_MODEL" in text
    assert f"CLAWGATE_SANDBOX=bwrap ({outside})" in text
    assert "CLAWGATE_APPROVERS=slack:UCAROL (environment)" in text
    assert f"CLAWGATE_WORKDIR={workdir} (default)" in text


async def test_serve_ignores_a_planted_settings_file_and_refuses_a_policy_file_in_the_work_dir(
    tmp_path: Path, forgetful_redis: str
) -> None:
    """`clawgate serve` in the default layout (the work dir is the current directory): an
    approved command wrote `.env` and `clawgate.toml` there before this start."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    (workdir / ".env").write_text("CLAWGATE_SANDBOX=off\nCLAWGATE_ADMINS=slack:UEVIL\n")
    env = base_env(
        REDIS_URL=forgetful_redis,
        CLAWGATE_PORT=str(free_port()),
        CLAWGATE_SHUTDOWN_GRACE="1",
        CLAWGATE_LOG_LEVEL="WARNING",
    )
    serve = await Clawgate.start("serve", env, workdir)
    try:
        await serve.wait_line("listening on")
    finally:
        assert await serve.stop() == 0, serve.stderr
    assert "ignoring the settings file" in serve.stderr
    assert "CLAWGATE_SANDBOX=off" not in serve.stderr
    assert "off (CLAWGATE_SANDBOX=off)" not in serve.stderr  # the sandbox it announced
    assert "slack:UEVIL" not in serve.stderr and "✗ people: no admins" in serve.stderr

    (workdir / "clawgate.toml").write_text('[approvals]\nadmins = ["slack:UEVIL"]\n')
    code, _, err = await chat("", workdir, env, "serve")
    assert code == 2, err
    assert f"CLAWGATE_POLICY_FILE: {workdir / 'clawgate.toml'}: it is inside the work dir" in err
    assert "Traceback" not in err and "listening on" not in err


async def test_each_admin_hook_is_checked_without_being_asked(tmp_path: Path) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        policy = tmp_path / "clawgate.toml"
        policy.write_text(
            f'[hooks.python]\ncommand = ["{sys.executable}", "-c", "pass"]\n'
            '[hooks.missing]\ncommand = ["no-such-hook-program"]\n'
            f'[hooks.opa]\nurl = "http://127.0.0.1:{port}/v1/data/clawgate"\n'
            f'[hooks.gone]\nurl = "http://127.0.0.1:{free_port()}/v1/data/clawgate"\n'
            '[hooks.off]\ncommand = ["not-installed-yet"]\nenabled = false\n'
        )
        code, lines = await doctor(base_env(CLAWGATE_POLICY_FILE=str(policy)), tmp_path)
    text = "\n".join(lines)
    found = marks(lines)
    assert code == 1, text
    assert found["hook python"] == ["✓"] and f"command {sys.executable}" in text
    assert found["hook opa"] == ["✓"] and f"127.0.0.1:{port} accepts connections" in text
    assert found["hook missing"] == ["✗"] and "'no-such-hook-program' is not an executable" in text
    assert found["hook gone"] == ["✗"] and "cannot be reached" in text
    assert "hook off" not in found  # disabled: never asked, not probed
    # The example policy file's hooks (and models) are all disabled: none is probed.
    example = Path(__file__).parents[2] / "deploy" / "policy" / "clawgate.toml"
    _, lines = await doctor(base_env(CLAWGATE_POLICY_FILE=str(example)), tmp_path)
    assert not [name for name in marks(lines) if name.startswith(("hook ", "model "))], lines
    assert "fix: correct its command or url (docs/policy.md, Hooks); until then it asks" in text
