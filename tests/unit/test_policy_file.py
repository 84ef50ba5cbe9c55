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


MODEL = """
[[models]]
name = "big"
base_url = "https://models.example/v1"
api_key_env = "BIG_KEY"
model = "big-1"
context_window = 200000
images = true
"""


def _problems(tmp_path: Path, text: str) -> str:
    path = tmp_path / "clawgate.toml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as raised:
        load_policy_file(path, TOOL_NAMES)
    return str(raised.value)


def test_modes_and_models_load(tmp_path: Path) -> None:
    path = tmp_path / "clawgate.toml"
    scoped = '[conversations."slack:T1".modes]\nmax = "ask"\ndefault = "plan"\n'
    path.write_text(f'[modes]\nmax = "edits"\ndefault = "auto"\n{scoped}{MODEL}')
    policy = load_policy_file(path, TOOL_NAMES)
    assert (policy.modes.max, policy.modes.default) == ("edits", "auto")
    assert policy.conversations["slack:T1"].modes.max == "ask"
    (big,) = policy.models
    assert (big.name, big.model, big.images, big.api_key_env) == ("big", "big-1", True, "BIG_KEY")
    assert big.context_budget == 400_000  # characters: half of 200,000 tokens
    assert policy.listed_model("big") == big
    path.write_text(MODEL + "enabled = false\n")
    off = load_policy_file(path, TOOL_NAMES)
    assert off.models and not off.offered_models and off.listed_model("big") is None


def test_mode_mistakes_are_named(tmp_path: Path) -> None:
    assert "modes.max: Input should be 'plan', 'ask', 'auto' or 'edits'" in _problems(
        tmp_path, '[modes]\nmax = "yolo"\n'
    )
    assert "modes: default 'edits' is looser than max 'ask'" in _problems(
        tmp_path, '[modes]\nmax = "ask"\ndefault = "edits"\n'
    )
    assert "modes.maximum: no such key here; did you mean modes.max?" in _problems(
        tmp_path, '[modes]\nmaximum = "ask"\n'
    )


def test_model_mistakes_are_named_and_a_key_is_never_echoed(tmp_path: Path) -> None:
    twice = _problems(tmp_path, MODEL + MODEL)
    assert "models: model names listed twice: big" in twice
    keyed = _problems(tmp_path, MODEL.replace('"BIG_KEY"', '"sk-live-0123456789abcdef"'))
    assert "models[0].api_key_env: expected the name of an environment variable" in keyed
    assert "sk-live" not in keyed
    assert "models[0].name: invalid model name 'no spaces'" in _problems(
        tmp_path, MODEL.replace('"big"', '"no spaces"')
    )
    assert "'default' names the process's own model" in _problems(
        tmp_path, MODEL.replace('"big"', '"default"')
    )
    assert "models[0].base_url: expected an http(s) URL" in _problems(
        tmp_path, MODEL.replace("https://models.example/v1", "models.example")
    )
    assert "models[0].context_window: Input should be greater than or equal to 4096" in _problems(
        tmp_path, MODEL.replace("200000", "100")
    )
    missing = _problems(tmp_path, MODEL.replace('model = "big-1"\n', ""))
    assert "models[0].model: required, and missing" in missing
    per_scope = MODEL.replace("[[models]]", '[[conversations."slack:T1".models]]')
    scoped = _problems(tmp_path, per_scope)
    assert 'conversations."slack:T1".models: no such key here' in scoped
