"""Operator tables: fitted to the terminal when shown in one (rich folds the widest column
instead of letting the terminal wrap whole rows), plain aligned columns for pipes and
scripts. `--json` is the form for programs."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from typing import TextIO

from runtime.redact import visible


def terminal_width(out: TextIO) -> int | None:
    """The width of the terminal `out` is, or None when it is no terminal."""
    return shutil.get_terminal_size().columns if out.isatty() else None


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO, width: int | None = None
) -> None:
    """`width`: fit a terminal that wide (default: the terminal `out` is, if it is one).
    Characters that hide or reorder text are shown escaped in every cell."""
    width = width or terminal_width(out)
    columns, rows = [visible(c) for c in columns], [[visible(c) for c in row] for row in rows]
    if width is None:
        widths = [max(len(row[i]) for row in (columns, *rows)) for i in range(len(columns) - 1)]
        for row in (columns, *rows):
            cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
            out.write("  ".join([*cells, row[-1]]) + "\n")
        return
    from rich.console import Console  # noqa: PLC0415 - only for a terminal: it loads slowly
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    table = Table(box=None, pad_edge=False, header_style="bold")
    for i, name in enumerate(columns):  # every column whole but the last, which folds
        last = i == len(columns) - 1
        table.add_column(name, no_wrap=not last, overflow="fold" if last else "ellipsis")
    for row in rows:
        table.add_row(*map(Text, row))  # as text: `[redacted]` is no markup tag
    Console(file=out, width=width, highlight=False, soft_wrap=False).print(table)


def hanging(head: str, rest: str, width: int | None) -> str:
    """`head` then `rest`; in a terminal `width` wide, `rest` wrapped under its own start
    (or, when `head` leaves it too little room, on indented lines below); hidden characters
    shown escaped."""
    head, rest = visible(head), visible(rest)
    line = f"{head}  {rest}".rstrip()
    if width is None or len(line) <= width or not rest:
        return line
    indent = len(head) + 2
    if width - indent < 30:
        indent = 4
        head_line, lines = head.rstrip() + "\n", textwrap.wrap(rest, width - indent)
        return head_line + "\n".join(" " * indent + part for part in lines)
    lines = textwrap.wrap(rest, width - indent)
    return f"{head}  " + ("\n" + " " * indent).join(lines)
