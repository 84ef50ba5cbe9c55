"""A CLAWGATE_ variable that is no setting (a typo) is said at start, with the setting it most
likely meant, wherever it was set; it never passes in silence."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from bot.settings import SettingsError, load_settings, unknown_variables


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name in ("OPENAI_API_KEY", "REDIS_URL"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_misspelt_setting_in_the_environment_is_named_with_the_one_meant(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWGATE_MODLE", "gpt-x")
    monkeypatch.setenv("CLAWGATE_SANDBOX_NETWROK", "never")
    warnings = io.StringIO()
    settings = load_settings(warnings)
    assert settings.model != "gpt-x"  # ignored, as before: but now said
    assert warnings.getvalue().splitlines() == [
        "clawgate: CLAWGATE_MODLE (in the environment) is not a setting and is ignored; "
        "did you mean CLAWGATE_MODEL?",
        "clawgate: CLAWGATE_SANDBOX_NETWROK (in the environment) is not a setting and is "
        "ignored; did you mean CLAWGATE_SANDBOX_NETWORK?",
    ]
    assert len(settings.unknown) == 2  # doctor shows them as failed checks


def test_a_misspelt_setting_in_the_settings_file_names_the_file(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = clean.parent / f"{clean.name}.env"
    env.write_text("CLAWGATE_ADMIN=slack:U1\nOTHER_TOOL_SETTING=1\n")
    monkeypatch.setenv("CLAWGATE_ENV_FILE", str(env))
    (clean / "work").mkdir()
    monkeypatch.setenv("CLAWGATE_WORKDIR", str(clean / "work"))
    warnings = io.StringIO()
    settings = load_settings(warnings)
    assert settings.admins == []
    assert warnings.getvalue() == (
        f"clawgate: CLAWGATE_ADMIN (in {env}) is not a setting and is ignored; did you mean "
        "CLAWGATE_ADMINS?\n"
    )


def test_known_names_and_other_programs_variables_pass_without_a_word() -> None:
    names = ["CLAWGATE_MODEL", "clawgate_port", "CLAWGATE_SERVE_PID", "PATH", "OPENAI_API_KEY"]
    assert unknown_variables(names, "(here)") == []
    assert unknown_variables(["CLAWGATE_FROBNICATE"], "(here)") == [
        "CLAWGATE_FROBNICATE (here) is not a setting and is ignored"
    ]


def test_the_terminal_chat_leaves_out_incomplete_platform_settings(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`clawgate chat` uses neither Slack nor Feishu: a half-done Slack set-up is said, not
    fatal; `serve` still stops on it."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-half-done")
    with pytest.raises(SettingsError, match="SLACK_SIGNING_SECRET: required"):
        load_settings(io.StringIO())
    warnings = io.StringIO()
    settings = load_settings(warnings, platforms=False)
    assert settings.slack_bot_token is None and not settings.slack_enabled
    assert warnings.getvalue().startswith(
        "clawgate: the chat platforms' settings are not used here: SLACK_SIGNING_SECRET: required"
    )
