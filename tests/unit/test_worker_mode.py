"""CLAWGATE_WORKER_MODE: where `serve`'s worker runs, its defaults, its deprecated alias
CLAWGATE_INPROCESS_WORKER, and the combinations refused at start."""

from __future__ import annotations

import io
import os

import pytest

from bot.settings import DEPRECATED_INPROCESS_WORKER, SettingsError, load_settings

REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]) -> None:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name in ("OPENAI_API_KEY", "REDIS_URL"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def mode(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(io.StringIO()).worker_topology


def test_a_child_worker_with_redis_and_one_in_process_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert mode(monkeypatch) == "inprocess"  # the embedded store cannot be shared
    assert mode(monkeypatch, REDIS_URL=REDIS) == "child"
    assert mode(monkeypatch, CLAWGATE_WORKER_MODE="inprocess") == "inprocess"
    assert mode(monkeypatch, CLAWGATE_WORKER_MODE="none") == "none"


@pytest.mark.parametrize(("alias", "expected"), [("true", "inprocess"), ("false", "none")])
def test_the_deprecated_alias_maps_and_says_so(
    monkeypatch: pytest.MonkeyPatch, alias: str, expected: str
) -> None:
    monkeypatch.setenv("REDIS_URL", REDIS)
    monkeypatch.setenv("CLAWGATE_INPROCESS_WORKER", alias)
    warnings = io.StringIO()
    assert load_settings(warnings).worker_topology == expected
    assert DEPRECATED_INPROCESS_WORKER in warnings.getvalue()
    # Agreeing with CLAWGATE_WORKER_MODE is fine; contradicting it is refused.
    assert mode(monkeypatch, CLAWGATE_WORKER_MODE=expected) == expected
    other = "child"
    with pytest.raises(SettingsError, match="contradicts CLAWGATE_WORKER_MODE=child"):
        mode(monkeypatch, CLAWGATE_WORKER_MODE=other)


@pytest.mark.parametrize("refused", ["child", "none"])
def test_a_worker_elsewhere_needs_redis(monkeypatch: pytest.MonkeyPatch, refused: str) -> None:
    with pytest.raises(SettingsError, match=f"CLAWGATE_WORKER_MODE: {refused} needs REDIS_URL"):
        mode(monkeypatch, CLAWGATE_WORKER_MODE=refused)
    monkeypatch.delenv("CLAWGATE_WORKER_MODE")
    with pytest.raises(SettingsError, match="CLAWGATE_WORKER_MODE: none needs REDIS_URL"):
        mode(monkeypatch, CLAWGATE_INPROCESS_WORKER="false")


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="CLAWGATE_WORKER_MODE"):
        mode(monkeypatch, REDIS_URL=REDIS, CLAWGATE_WORKER_MODE="thread")
