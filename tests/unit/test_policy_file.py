"""The policy file: the shipped example loads, and mistakes are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy_file import PolicyFileError, load_policy_file
from bot.wiring import TOOL_NAMES

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_example_loads() -> None:
    policy = load_policy_file(REPO / "deploy" / "policy" / "clawgate.toml", TOOL_NAMES)
    assert policy.risk.ask_patterns == [r"terraform\s+apply"]
    assert policy.approvals.requester_may_approve is False


def test_a_typo_is_an_error_not_a_silently_looser_policy(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    path.write_text('[tools]\ndenny = ["bash"]\n')
    with pytest.raises(PolicyFileError, match=r"tools\.denny"):
        load_policy_file(path)


def test_generalize_arguments_names_mcp_tools_only(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    table = '[mcp.stdio.gh]\ncommand = ["gh-mcp"]\n'
    path.write_text(f'[tools]\ngeneralize_arguments = ["gh.search", "gh.*"]\n{table}')
    assert load_policy_file(path, TOOL_NAMES).tools.generalize_arguments == ["gh.search", "gh.*"]
    path.write_text(f'[tools]\ngeneralize_arguments = ["bash", "gh."]\n{table}')
    with pytest.raises(PolicyFileError, match=r"tools\.generalize_arguments: expected MCP tool"):
        load_policy_file(path, TOOL_NAMES)
    path.write_text('[tools]\ngeneralize_arguments = ["nosuch.tool"]\n')
    with pytest.raises(PolicyFileError, match=r"unknown tools nosuch\.tool"):
        load_policy_file(path, TOOL_NAMES)
