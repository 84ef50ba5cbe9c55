"""The model's Markdown, read as blocks so that it can be cut into messages without breaking
what it shows: a piece never ends inside a fenced code block (one too long for a message is
closed and opened again, with its language, in the next) nor inside a table (one too long
repeats its header), and it is cut at blank lines between paragraphs where it can be.

Also what every chat does to the answer's text before a platform renders it: links whose
label does not show where they go are given their host, and a transform (a platform's
escaping) applied outside code."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from adapters.split import split_text

# A fence opens a code block; a backtick fence's info string has no backtick (``` `x` ``` on
# one line is a code span, CommonMark says).
_FENCE = re.compile(r"^\s*(`{3,}(?=[^`]*$)|~{3,})(.*)$")
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
# An inline code span: a run of backticks, then anything up to the same run.
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# The host of a URL urlsplit will not take (brackets that are no IPv6 address).
_AUTHORITY = re.compile(r"https?://(?:[^/?#@]*@)?([^/?#:@]+)", re.IGNORECASE)
# [label](url "title"): the label without brackets or line breaks, an http(s) URL (any case,
# with balanced parentheses one deep), a title in "", '' or ().
_LINK = re.compile(
    r"\[([^\[\]\n]+)\]\(\s*<?((?i:https?)://(?:[^\s<>()]|\([^\s<>()]*\))+)>?"
    r"(\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
# A reference link's definition, `[id]: url "title"`, and its uses `[label][id]`, `[id][]`.
_DEFINITION = re.compile(r"^ {0,3}\[([^\[\]\n]+)\]:[ \t]*<?(\S+?)>?(?:[ \t]+.*)?$", re.MULTILINE)
_REFERENCE = re.compile(r"\[([^\[\]\n]+)\]\[([^\[\]\n]*)\]")


@dataclass(frozen=True, slots=True)
class Segment:
    """A unit never cut across: a paragraph, a fenced code block, a table. `before`: the
    line breaks that separate it from the one before (kept, but not at a piece's start)."""

    text: str
    kind: str  # "text", "fence", "table"
    before: str = "\n"


def _is_table_start(lines: list[str], i: int) -> bool:
    """A header row, then a delimiter row (`|---|:-:|`)."""
    return (
        "|" in lines[i]
        and i + 1 < len(lines)
        and "|" in lines[i + 1]
        and bool(_DELIMITER_ROW.match(lines[i + 1]))
    )


def _closes(line: str, opener: str) -> bool:
    match = _FENCE.match(line)
    return bool(
        match
        and match.group(1)[0] == opener[0]
        and len(match.group(1)) >= len(opener)
        and not match.group(2).strip()
    )


def segments(text: str) -> list[Segment]:
    """`text` as its paragraphs, fenced code blocks (an unclosed one runs to the end) and
    tables, in order."""
    lines = text.split("\n")
    found: list[Segment] = []
    before, i = "", 0
    while i < len(lines):
        if not lines[i].strip():
            before += "\n"
            i += 1
            continue
        start = i
        fence = _FENCE.match(lines[i])
        if fence:
            i += 1
            while i < len(lines) and not _closes(lines[i], fence.group(1)):
                i += 1
            i = min(i + 1, len(lines))
            kind = "fence"
        elif _is_table_start(lines, i):
            i += 2
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                i += 1
            kind = "table"
        else:
            i += 1
            while (
                i < len(lines)
                and lines[i].strip()
                and not _FENCE.match(lines[i])
                and not _is_table_start(lines, i)
            ):
                i += 1
            kind = "text"
        found.append(Segment("\n".join(lines[start:i]), kind, before + "\n" if found else ""))
        before = ""
    return found


def _fence_parts(segment: Segment, limit: int) -> Iterator[Segment]:
    """A code block longer than `limit` as blocks that each fit: closed, and opened again
    with the same fence and language."""
    lines = segment.text.split("\n")
    opener = lines[0]
    match = _FENCE.match(opener)
    assert match is not None  # a fence segment starts with its fence
    fence = match.group(1)
    closed = len(lines) > 1 and _closes(lines[-1], fence)
    body = lines[1:-1] if closed else lines[1:]
    room = max(limit - len(opener) - len(fence) - 2, 1)
    chunk: list[str] = []
    size = 0
    for part in (piece for line in body for piece in split_text(line, room)):
        if chunk and size + len(part) + 1 > room:
            yield Segment("\n".join([opener, *chunk, fence]), "fence")
            chunk, size = [], 0
        chunk.append(part)
        size += len(part) + 1
    yield Segment("\n".join([opener, *chunk, fence]), "fence")


def _table_parts(segment: Segment, limit: int) -> Iterator[Segment]:
    """A table longer than `limit` as tables that each fit, each with the header rows (a
    row too long for any is cut as text)."""
    lines = segment.text.split("\n")
    head, rows = "\n".join(lines[:2]), lines[2:]
    if len(head) * 2 > limit:  # no room for rows under the header: the table as text
        yield from (Segment(piece, "text") for piece in split_text(segment.text, limit))
        return
    chunk: list[str] = []
    size = len(head)
    for row in rows:
        if chunk and size + len(row) + 1 > limit:
            yield Segment("\n".join([head, *chunk]), "table")
            chunk, size = [], len(head)
        if len(head) + len(row) + 1 > limit:
            yield from (Segment(piece, "text") for piece in split_text(row, limit))
            continue
        chunk.append(row)
        size += len(row) + 1
    if chunk:
        yield Segment("\n".join([head, *chunk]), "table")


def _fitting(segment: Segment, limit: int) -> Iterator[Segment]:
    if len(segment.text) <= limit:
        yield segment
        return
    if segment.kind == "fence":
        parts: Iterator[Segment] = _fence_parts(segment, limit)
    elif segment.kind == "table":
        parts = _table_parts(segment, limit)
    else:
        parts = (Segment(piece, "text") for piece in split_text(segment.text, limit))
    for n, part in enumerate(parts):
        yield Segment(part.text, part.kind, segment.before if n == 0 else "\n")


def split_markdown(text: str, limit: int, max_tables: int = 0) -> list[str]:
    """Pieces of at most `limit` characters, cut between blocks; `max_tables` (0: any) is
    the most tables one piece holds (Feishu's cards render a few per element)."""
    pieces: list[str] = []
    current, tables = "", 0
    for segment in (part for seg in segments(text) for part in _fitting(seg, limit)):
        full = max_tables and segment.kind == "table" and tables >= max_tables
        if current and (len(current) + len(segment.before) + len(segment.text) > limit or full):
            pieces.append(current)
            current, tables = "", 0
        current = current + segment.before + segment.text if current else segment.text
        tables += segment.kind == "table"
    if current or not pieces:
        pieces.append(current)
    return pieces


def fitted(text: str, limit: int, fits: Callable[[str], bool], max_tables: int = 0) -> list[str]:
    """`split_markdown` pieces, each split finer while `fits` (the platform's check of the
    rendered piece, escapes and all) says it does not fit."""
    out: list[str] = []
    for piece in split_markdown(text, limit, max_tables):
        if fits(piece) or limit < 200:
            out.append(piece)
        else:
            out.extend(fitted(piece, limit // 2, fits, max_tables))
    return out


def beginning(text: str, limit: int) -> str:
    """The start of `text`, at most `limit` characters, cut between blocks."""
    return split_markdown(text, limit)[0]


def outside_code(text: str, transform: Callable[[str], str], spans: bool = True) -> str:
    """`text` with `transform` applied to everything but fenced code blocks and (`spans`)
    code spans, which a renderer shows as they are."""
    out: list[str] = []
    for segment in segments(text):
        out.append(segment.before)
        if segment.kind == "fence":
            out.append(segment.text)
            continue
        last = 0
        for span in _CODE_SPAN.finditer(segment.text) if spans else ():
            out.append(transform(segment.text[last : span.start()]))
            out.append(span.group(0))
            last = span.end()
        out.append(transform(segment.text[last:]))
    lead = len(text) - len(text.lstrip("\n"))
    trail = len(text) - len(text.rstrip("\n")) if text.strip("\n") else 0
    return "\n" * lead + "".join(out) + "\n" * trail


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:  # brackets that are no IPv6 address, such as a masked `[redacted]@`
        match = _AUTHORITY.match(url)
        return match.group(1).lower() if match else ""


def _names(label: str, host: str) -> bool:
    """Whether `label` shows `host` as a host (`a.co` in `see a.co` or `https://a.co/x`, not
    in `github.com/a.co`)."""
    bare = re.escape(host.removeprefix("www."))
    shown = rf"(?:^|(?<=[\s(<\[])|(?<=://))(?:www\.)?{bare}(?![\w-]|\.[\w-])"
    return re.search(shown, label, re.IGNORECASE) is not None


def _honest(match: re.Match[str]) -> str:
    label, url, title = match.group(1), match.group(2), match.group(3) or ""
    host = _host(url)
    if not host or _names(label, host):
        return match.group(0)
    return f"[{label} ({host})]({url}{title})"


def _inline_references(text: str, urls: dict[str, str]) -> str:
    """Reference links written inline (`[label][id]`, with `[id]: url` anywhere in the
    answer: `urls`), so that their labels are checked like any link's."""
    if not urls:
        return text

    def inline(match: re.Match[str]) -> str:
        url = urls.get((match.group(2) or match.group(1)).lower())
        return match.group(0) if url is None else f"[{match.group(1)}]({url})"

    return _REFERENCE.sub(inline, text)


def honest_links(text: str) -> str:
    """Every link's label shows the host it goes to: `[docs](https://evil.example/x)` reads
    `[docs (evil.example)](…)`, so a label cannot pass a link off as going elsewhere. A label
    that names the host already is kept; code blocks are left as they are."""
    urls = {m.group(1).lower(): m.group(2) for m in _DEFINITION.finditer(text)}
    return outside_code(
        text, lambda part: _LINK.sub(_honest, _inline_references(part, urls)), spans=False
    )
