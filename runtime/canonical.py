"""Canonical JSON: one byte-exact text per value, for duplicate detection and call hashes."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
