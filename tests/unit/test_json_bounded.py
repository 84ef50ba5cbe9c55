"""JSON with its nesting bounded before parsing: a deep text is refused with a ValueError
(never RecursionError), brackets inside strings do not count, and the check is linear."""

from __future__ import annotations

import json
import time

import pytest

from runtime.json_bounded import TooDeep, depth, loads_bounded


def test_ordinary_json_parses_as_json_loads_does() -> None:
    text = '{"command": "echo \\"[[[{{\\" ]", "n": [1, [2, {"a": []}]]}'
    assert loads_bounded(text) == json.loads(text)
    assert loads_bounded(text.encode()) == json.loads(text)
    assert depth(text) == 5  # the brackets in the string do not count


@pytest.mark.parametrize("text", ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 70_000])
def test_deep_nesting_is_refused_quickly_without_recursion(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(TooDeep, match="levels deep"):
        loads_bounded(text)
    assert time.monotonic() - started < 1


def test_invalid_json_is_a_value_error_like_any_refusal() -> None:
    for text in ('{"a": ', '"unterminated', b"\xff"):
        with pytest.raises(ValueError):
            loads_bounded(text)
    assert loads_bounded("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(TooDeep):
        loads_bounded("[[[1]]]", max_depth=2)
