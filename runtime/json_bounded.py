"""JSON from people and the network, parsed with bounded nesting: Python's json recurses once
per level, so a deep enough text (`[[[[…`) raises RecursionError, which no caller expects.
The depth is checked before parsing, in one linear pass."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

MAX_DEPTH = 64  # far deeper than any tool's arguments or platform payload
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """The text nests arrays and objects deeper than allowed."""


def depth(text: str) -> int:
    """How deep the text's arrays and objects nest (brackets inside strings do not count)."""
    steps = (_STEP[m[0]] for m in _BRACKET.finditer(_STRING.sub("", text)))
    return max(itertools.accumulate(steps, initial=0))


def loads_bounded(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing with `TooDeep` a text nested deeper than `max_depth`. Every
    failure is a ValueError: `TooDeep`, `json.JSONDecodeError`, or UnicodeDecodeError for
    bytes that are not UTF-8."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    found = depth(text)
    if found > max_depth:
        raise TooDeep(f"nested {found} levels deep (at most {max_depth})")
    return json.loads(text)
