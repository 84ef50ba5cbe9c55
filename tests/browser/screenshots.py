"""Screenshots of the console's pages: always to tests/artifacts/console/ (gitignored, to look
at after a run), and with CLAWGATE_SCREENSHOTS=1 to docs/console/ too, the pictures
docs/console.md shows."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.async_api import Page

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "console"
DOCS = ROOT / "docs" / "console"


async def save_screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    """`page` as `<name>.png` (a lowercase slug); returns the artifact's path."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"not a screenshot name: {name!r}")
    png = await page.screenshot(type="png", full_page=full_page)
    folders = [ARTIFACTS]
    if os.environ.get("CLAWGATE_SCREENSHOTS") == "1":
        folders.append(DOCS)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.png").write_bytes(png)
    return ARTIFACTS / f"{name}.png"
