"""An answer's Markdown as a terminal shows it (rich): headings, emphasis, lists, quotes,
tables and highlighted code blocks; a link as its label followed by its URL, so no label
hides where a link goes. Only for a terminal: a pipe or a file gets the text as written."""

from __future__ import annotations

import io
import re
import shutil

from rich.console import Console
from rich.markdown import Markdown

from runtime.redact import controls_escaped

# rich pads every line to the width: trailing spaces (before any closing styles) go.
_PADDING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


def styled(text: str, width: int | None = None) -> str:
    """`text` rendered with ANSI styles. The model's own control characters are escaped
    first: the only escape sequences out are the styles rich writes."""
    out = io.StringIO()
    console = Console(
        file=out,
        force_terminal=True,
        color_system="standard",
        width=width or shutil.get_terminal_size().columns,
        highlight=False,
        emoji=False,
    )
    console.print(Markdown(controls_escaped(text), hyperlinks=False))
    return _PADDING.sub(r"\1", out.getvalue()).rstrip("\n")
