"""Long answers cut into messages a platform accepts."""

from __future__ import annotations


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at line breaks (or spaces) where possible."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    pieces.append(text)
    return [piece for piece in pieces if piece.strip()] or [text]
