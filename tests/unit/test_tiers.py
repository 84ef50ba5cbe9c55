"""A test's tier is its folder (tests/conftest.py marks tests/e2e and tests/browser `e2e`):
no test of the fast tiers' folders is marked slow, so `-m "not e2e"` runs exactly
tests/unit and tests/component, and a slow test is found where the slow tests are."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOW_MARK = "mark." + "e2e"  # spelt so, this file does not name it


def test_no_test_of_the_fast_folders_is_marked_slow() -> None:
    marked = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("unit", "component")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SLOW_MARK in line and not line.lstrip().startswith("#")
    ]
    assert not marked, f"slow tests outside tests/e2e: move them there: {marked}"
