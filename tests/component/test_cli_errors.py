"""One error policy for every command (bot/errors.py): a bad setting or argument is one line
and exit 2, something unavailable one line and exit 1, never a traceback unless --debug.
Each case runs the real `clawgate` entry point in this process, with the environment a user
would have."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from tests.conftest import free_port


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No CLAWGATE_/OPENAI_/SLACK_/FEISHU_ settings and no REDIS_URL but the test's own; an
    empty working directory (no .env, no clawgate.toml)."""
    for name in list(os.environ):
        if name.startswith(("CLAWGATE_", "OPENAI_", "SLACK_", "FEISHU_")) or name == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLAWGATE_SANDBOX", "off")  # no bwrap probing: not what is tested
    yield


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's way out
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


def closed_port() -> int:
    return free_port()  # nothing listens there once the probe socket is closed


@pytest.mark.parametrize(
    ("url", "line"),
    [
        ("foo", "REDIS_URL: expected redis://host:6379/0, rediss://… (TLS) or unix:///path"),
        ("http://x", "REDIS_URL: expected redis://host:6379/0, rediss://… (TLS) or unix:///path"),
        ("redis://:nine/0", "REDIS_URL: bad port in 'redis://:nine/0'"),
    ],
)
@pytest.mark.parametrize(
    "command", [["approvals", "list"], ["approvals", "stats"], ["chat"], ["worker"], ["serve"]]
)
def test_a_malformed_redis_url_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    line: str,
    command: list[str],
) -> None:
    monkeypatch.setenv("REDIS_URL", url)
    code, out, err = run(capsys, *command)
    assert code == 2 and out == ""
    (said,) = err.splitlines()
    assert said.startswith(f"clawgate: {line}"), said


@pytest.mark.parametrize(
    "command", [["approvals", "list"], ["approvals", "stats"], ["chat"], ["worker"], ["serve"]]
)
def test_redis_down_is_one_line_and_exit_1_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    url = f"redis://:hunter2@127.0.0.1:{closed_port()}/0"
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.setattr("sys.stdin", io.StringIO())  # chat would read it
    code, _, err = run(capsys, *command)
    assert code == 1, err
    said = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert len(said) == 1, err
    masked = url.replace("hunter2", "[redacted]")
    assert said[0].startswith(f"clawgate: cannot reach Redis at {masked} ("), said
    assert "hunter2" not in err


def test_a_port_in_use_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("CLAWGATE_PORT", str(port))
        code, _, err = run(capsys, "serve")
    said = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert code == 1
    assert said == [f"clawgate: cannot listen on 127.0.0.1:{port} (Address already in use)"]


def test_a_host_that_is_not_this_machine_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAWGATE_HOST", "192.0.2.1")  # TEST-NET-1: never this machine's
    monkeypatch.setenv("CLAWGATE_PORT", str(free_port()))
    code, _, err = run(capsys, "serve")
    said = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert code == 1 and len(said) == 1, err
    assert said[0].startswith(f"clawgate: cannot listen on 192.0.2.1:{os.environ['CLAWGATE_PORT']}")


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            {"OPENAI_BASE_URL": "localhost:8000"},
            "OPENAI_BASE_URL: expected an http(s) URL like https://api.openai.com/v1",
        ),
        ({"CLAWGATE_PORT": "eighty"}, "CLAWGATE_PORT: Input should be a valid integer"),
        ({"CLAWGATE_ADMINS": "U123"}, "CLAWGATE_ADMINS: expected platform:user entries"),
    ],
)
def test_bad_settings_are_one_line_each_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: dict[str, str],
    line: str,
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    code, _, err = run(capsys, "chat")
    assert code == 2
    (said,) = err.splitlines()
    assert said.startswith(f"clawgate: {line}"), said


def test_slack_and_feishu_out_of_reach_are_named_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLAWGATE_PORT", str(free_port()))
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    slack = f"http://127.0.0.1:{closed_port()}/api/"
    monkeypatch.setenv("SLACK_API_URL", slack)
    code, _, err = run(capsys, "serve")
    said = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert code == 1 and len(said) == 1, err
    assert said[0].startswith(f"clawgate: cannot reach Slack at {slack} ("), said

    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL"):
        monkeypatch.delenv(name)
    feishu = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("FEISHU_APP_ID", "cli_test")
    monkeypatch.setenv("FEISHU_APP_SECRET", "secret")
    monkeypatch.setenv("FEISHU_MODE", "websocket")
    monkeypatch.setenv("FEISHU_DOMAIN", feishu)
    code, _, err = run(capsys, "serve")
    said = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert code == 1 and len(said) == 1, err
    assert said[0].startswith(f"clawgate: cannot reach Feishu at {feishu} ("), said
    assert "FEISHU_APP_SECRET" not in err  # the secret is not to blame


def test_bad_arguments_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, line in (
        (["approvals", "frob"], "clawgate: argument verb: invalid choice: 'frob'"),
        (["nosuch"], "clawgate: argument <command>: invalid choice: 'nosuch'"),
        (["bench", "runtime", "--turns", "x"], "clawgate: argument --turns: not a number: 'x'"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2
        (said,) = err.splitlines()
        assert said.startswith(line) and said.endswith("--help)"), said


def test_an_unexpected_error_is_one_line_unless_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_: object) -> int:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr("bot.cli_run.run_policy_command", broken)
    code, _, err = run(capsys, "policy", "show")
    assert code == 1
    assert err.splitlines() == [
        "clawgate: RuntimeError: the disk is on fire (clawgate --debug … shows the traceback)"
    ]
    with pytest.raises(RuntimeError, match="the disk is on fire"):
        main(["--debug", "policy", "show"])


def test_help_version_and_completion(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)  # a bare `clawgate`
    assert code == 0 and out.startswith("usage: clawgate") and "approvals" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("clawgate ")
    code, out, _ = run(capsys, "completion", "bash")
    assert code == 0 and "complete" in out and "approvals" in out


def fish_completes(script: Path, typed: str) -> list[str]:
    """What fish offers after `typed`, the words only."""
    fish = shutil.which("fish")
    assert fish is not None, "fish is needed (`.ci/run` installs it)"
    done = subprocess.run(
        [fish, "--no-config", "-c", f"source {script}; complete -C {shlex.quote(typed)}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert done.stderr == ""
    return [line.split("\t", 1)[0] for line in done.stdout.splitlines()]


def test_fish_completes_commands_their_options_and_choices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "completion", "fish")
    assert code == 0
    script = tmp_path / "clawgate.fish"
    script.write_text(out)
    assert fish_completes(script, "clawgate ser") == ["serve"]
    assert fish_completes(script, "clawgate serve --") == [
        "--help", "--host", "--port", "--workdir",
    ]  # fmt: skip
    assert fish_completes(script, "clawgate approvals ") == [
        "approve", "list", "reject", "show", "stats",
    ]  # fmt: skip
    assert fish_completes(script, "clawgate approvals list --status ") == [
        "executing", "pending",
    ]  # fmt: skip
    assert fish_completes(script, "clawgate completion ") == ["bash", "fish", "tcsh", "zsh"]
    assert fish_completes(script, "clawgate --") == ["--debug", "--help", "--version"]


def test_bench_peers_is_for_approval_on_redis_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Said before any peer library is imported: the same with or without the extra."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    for argv, line in (
        (["bench", "runtime", "--peers"], "clawgate: --peers: only for `clawgate bench approval`"),
        (["bench", "approval", "--peers"], "clawgate: --peers: needs REDIS_URL"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2
        (said,) = err.splitlines()
        assert said.startswith(line), said
