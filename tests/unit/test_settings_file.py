"""Which settings file `load_settings` reads (bot/settings_file.py): never one an approved
command could have written, i.e. none inside the work dir by any name."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from bot.settings import Settings, SettingsError, load_settings
from bot.settings_file import find_settings_file
from runtime.tools.sandbox import SandboxMode

PLANTED = "CLAWGATE_SANDBOX=off\nCLAWGATE_ADMINS=slack:UEVIL\n"
NAMES = Settings.variables()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name in ("OPENAI_API_KEY", "REDIS_URL"):
            monkeypatch.delenv(name)
    workdir = tmp_path / "project"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


def test_a_dot_env_in_the_work_dir_is_not_honoured(project: Path) -> None:
    (project / ".env").write_text(PLANTED)
    warnings = io.StringIO()
    settings = load_settings(warnings)
    assert settings.sandbox is SandboxMode.AUTO and settings.admins == []
    assert settings.source("CLAWGATE_SANDBOX") == "default"
    (line,) = warnings.getvalue().splitlines()
    assert "inside the work dir" in line and "CLAWGATE_ENV_FILE=/etc/clawgate/env" in line


def test_a_file_outside_the_work_dir_is_read_and_named_as_the_source(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = project.parent / "clawgate.env"
    outside.write_text("CLAWGATE_SANDBOX=bwrap\nOPENAI_API_KEY=sk-test\n")
    monkeypatch.setenv("CLAWGATE_ENV_FILE", str(outside))
    monkeypatch.setenv("CLAWGATE_ADMINS", "slack:UADMIN")
    settings = load_settings(io.StringIO())
    assert settings.sandbox is SandboxMode.BWRAP
    assert settings.source("CLAWGATE_SANDBOX") == str(outside)
    assert settings.source("OPENAI_API_KEY") == str(outside)
    assert settings.source("CLAWGATE_ADMINS") == "environment"
    assert settings.source("CLAWGATE_APPROVERS") == "default"


def test_a_named_file_that_does_not_exist_stops_the_start(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAWGATE_ENV_FILE", str(project.parent / "missing.env"))
    with pytest.raises(SettingsError, match=r"CLAWGATE_ENV_FILE: .*missing.env does not exist"):
        load_settings(io.StringIO())


def test_no_name_of_the_work_dir_reaches_the_file(project: Path) -> None:
    outside = project.parent / "clawgate.env"
    outside.write_text(PLANTED)
    # A symlink in the work dir (the agent may repoint it), a file linked from outside into
    # the work dir, a hard link (another name of it may be inside), a work dir given as a link.
    (project / ".env").symlink_to(outside)
    assert "inside the work dir" in str(find_settings_file({}, project, NAMES).ignored)
    (project / ".env").unlink()
    (project / "real.env").write_text(PLANTED)
    outside.unlink()
    outside.symlink_to(project / "real.env")
    found = find_settings_file({"CLAWGATE_ENV_FILE": str(outside)}, project, NAMES)
    assert "inside the work dir" in str(found.ignored)
    outside.unlink()
    os.link(project / "real.env", outside)
    found = find_settings_file({"CLAWGATE_ENV_FILE": str(outside)}, project.parent / "other", NAMES)
    assert "hard link" in str(found.ignored)
    alias = project.parent / "alias"
    alias.symlink_to(project)
    (project / ".env").write_text(PLANTED)
    found = find_settings_file({"CLAWGATE_WORKDIR": str(alias)}, project, NAMES)
    assert "inside the work dir" in str(found.ignored)


def test_a_file_that_names_another_work_dir_is_not_read_from_the_one_it_leaves(
    project: Path,
) -> None:
    """Written in an earlier run, it would move the work dir away to be read at the next."""
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    (project / ".env").write_text(f"CLAWGATE_WORKDIR={elsewhere}\n{PLANTED}")
    assert "inside the work dir" in str(find_settings_file({}, project, NAMES).ignored)
    # From outside, naming a work dir that does not contain it: read.
    outside = project.parent / "clawgate.env"
    outside.write_text(f"CLAWGATE_WORKDIR={elsewhere}\n")
    found = find_settings_file({"CLAWGATE_ENV_FILE": str(outside)}, project.parent / "x", NAMES)
    assert found.path == outside and found.ignored is None


def test_a_project_s_own_dot_env_is_left_alone_without_a_word(project: Path) -> None:
    """Not clawgate's file (none of its settings): nothing read, nothing said."""
    (project / ".env").write_text("DATABASE_URL=postgres://app@db/app\nDEBUG=1\n")
    warnings = io.StringIO()
    settings = load_settings(warnings)
    assert warnings.getvalue() == "" and settings.settings_file.path is None
