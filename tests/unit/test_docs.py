"""The documentation stays true to the code: every setting documented (and nothing documented
that is not a setting), the README short, every link between the pages resolving."""

from __future__ import annotations

import re
from pathlib import Path

from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SETTING = re.compile(r"`((?:CLAWGATE|SLACK|FEISHU|OPENAI|REDIS)_[A-Z_]+)`")


def test_configuration_documents_every_setting_and_only_settings() -> None:
    text = (DOCS / "configuration.md").read_text()
    aliases = {field.alias for field in Settings.model_fields.values() if field.alias}
    assert sorted(a for a in aliases if f"`{a}`" not in text) == []
    assert sorted(set(SETTING.findall(text)) - aliases) == []


def test_the_readme_is_short_and_every_link_resolves() -> None:
    readme = ROOT / "README.md"
    assert len(readme.read_bytes()) <= 10 * 1024
    broken = []
    for page in [readme, *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    titles = re.findall(r"(?m)^#+ (.+)$", page.read_text())
    return {re.sub(r"[^\w\- ]", "", t).strip().lower().replace(" ", "-") for t in titles}


def test_every_anchor_between_the_pages_exists() -> None:
    missing = []
    for page in DOCS.glob("*.md"):
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            if anchor not in anchors(page.parent / target if target else page):
                missing.append(f"{page.name}: {target}#{anchor}")
    assert missing == []
