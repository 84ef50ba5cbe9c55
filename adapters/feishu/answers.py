"""The model's Markdown answer as Feishu shows it: a card (JSON 2.0) holding one markdown
element, which renders headings, bold, italic, links, lists, quotes, tables and fenced code
(a `post` message's `md` tag does not render tables reliably).

Outside code, `<` goes as `&lt;`: the card's markdown reads HTML-like tags (`<at id=all>`
mentions everyone, `<font>`, `<link>`), and an answer must not mention anyone nor style
itself. Code is left as written. Links show their host (adapters/markdown.honest_links)."""

from __future__ import annotations

import json
from typing import Any

from adapters.markdown import fitted, honest_links, outside_code

CARD_BYTES = 28_000  # of the card's JSON: Feishu takes cards up to 30 KB
PIECE = 8_000  # characters of the answer per card
TABLES = 3  # per markdown element (Feishu renders a few, and refuses more)


def markdown_text(piece: str) -> str:
    return outside_code(honest_links(piece), lambda part: part.replace("<", "&lt;"))


def answer_card(piece: str) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "body": {"elements": [{"tag": "markdown", "content": markdown_text(piece)}]},
    }


def _fits(piece: str) -> bool:
    return len(json.dumps(answer_card(piece), ensure_ascii=False).encode()) <= CARD_BYTES


def answer_pieces(text: str) -> list[str]:
    """The answer cut between blocks into pieces whose card fits a message."""
    return fitted(text, PIECE, _fits, max_tables=TABLES)
