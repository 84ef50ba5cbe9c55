"""`clawgate chat` at a terminal (stdin and stdout both one): line editing and an in-memory
history (prompt_toolkit), a status line under the prompt saying what the running request does
and for how long, every output line printed above the prompt; and the line the chat starts
with, naming the model and the store."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO, cast
from urllib.parse import urlsplit

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import StdoutProxy
from prompt_toolkit.styles import Style

from runtime.channel import Event, ToolFinished, ToolStarted
from runtime.redact import shown_url

PROMPT = "you> "
REFRESH_S = 0.5  # the status line's clock is redrawn this often
STYLE = Style.from_dict({"bottom-toolbar": "noreverse", "status": "bold", "hint": "italic"})
# `--session` names, the model, the host: nothing typed there may move the cursor.
_PRINTABLE = str.maketrans({chr(c): "?" for c in (*range(32), 127)})


def _host(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc.rpartition("@")[2] or url


def start_line(model: str, base_url: str | None, redis_url: str | None, demo: bool) -> str:
    """`clawgate chat · model gpt-4.1 (api.openai.com) · store redis://127.0.0.1:6379/0`."""
    if demo:
        about_model = "model offline demo"
    else:
        about_model = f"model {model} ({_host(base_url) if base_url else 'api.openai.com'})"
    store = shown_url(redis_url) if redis_url else "embedded, nothing kept"
    return f"clawgate chat · {about_model} · store {store}".translate(_PRINTABLE)


class Status:
    """What the running request is doing, from the events the console channel is sent: a
    request starts thinking, a tool call runs from ToolStarted to ToolFinished (calls of one
    step may run side by side), the request's end clears it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.doing: str | None = None  # "thinking", "working"; None: no request runs
        self.since = 0.0
        self.tools: dict[str, tuple[str, float]] = {}  # call id -> (tool, started)
        self.on_change: Callable[[], None] = lambda: None

    def start(self, doing: str = "thinking") -> None:
        self.doing, self.since = doing, self.clock()
        self.tools.clear()
        self.on_change()

    def stop(self) -> None:
        self.doing = None
        self.tools.clear()
        self.on_change()

    def see(self, event: Event) -> None:
        if self.doing is None:  # not this chat's request (the sweeper): nothing to show
            return
        if isinstance(event, ToolStarted):
            self.tools[event.call_id] = (event.tool, self.clock())
        elif isinstance(event, ToolFinished) and event.call_id in self.tools:
            del self.tools[event.call_id]
            if not self.tools:
                self.doing, self.since = "thinking", self.clock()
        else:
            return
        self.on_change()

    def text(self) -> str:
        """`thinking… 3 s`, `running bash… 12 s`; "" when no request runs."""
        if self.doing is None:
            return ""
        if self.tools:
            names = list(dict.fromkeys(tool for tool, _ in self.tools.values()))
            doing = "running " + ", ".join(names)
            since = min(started for _, started in self.tools.values())
        else:
            doing, since = self.doing, self.since
        return f"{doing}… {int(self.clock() - since)} s"


class Terminal:
    """The prompt and the status line beneath it. While it is entered, `out` prints above
    them (and so do log records that went to the terminal); `read` feeds the typed lines to a
    queue, None at Ctrl-D. Ctrl-C calls `interrupt` (it returns whether a request was
    stopped); otherwise it clears the line typed, or on an empty line quits (`interrupted`)."""

    def __init__(self, status: Status, interrupt: Callable[[], bool]) -> None:
        self.status = status
        self.interrupt = interrupt
        self.interrupted = False
        self.out: StdoutProxy | None = None
        self._logs: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []
        self.session: PromptSession[str] = PromptSession(
            PROMPT,
            history=InMemoryHistory(),
            key_bindings=self._keys(),
            refresh_interval=REFRESH_S,
            style=STYLE,
        )
        status.on_change = self._changed

    def __enter__(self) -> AbovePrompt:
        self.out = StdoutProxy(raw=True)  # raw for rendered answers; AbovePrompt escapes the rest
        above = AbovePrompt(self.out)
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and _is_tty(handler.stream):
                self._logs.append((handler, handler.stream))
                handler.setStream(cast(TextIO, above))  # file-like
        return above

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for handler, stream in self._logs:
            handler.setStream(stream)
        self._logs.clear()
        if self.out is not None:
            self.out.close()  # everything written is on the screen once this returns

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            if self.interrupt():
                return
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

        return keys

    def _changed(self) -> None:
        self.session.bottom_toolbar = self._toolbar if self.status.doing else None
        self.session.app.invalidate()  # nothing when no prompt is shown

    def _toolbar(self) -> StyleAndTextTuples:
        return [("class:status", self.status.text()), ("class:hint", "   Ctrl-C stops it")]

    async def read(self, lines: asyncio.Queue[str | None]) -> None:
        while True:
            try:
                # Ctrl-C is a key here, and SIGINT stays with the chat; an exception in a
                # background task is logged as usual, not shown in a "press ENTER" pause.
                line = await self.session.prompt_async(
                    handle_sigint=False, set_exception_handler=False
                )
            except EOFError:
                break
            except KeyboardInterrupt:
                self.interrupted = True
                break
            lines.put_nowait(line)
        lines.put_nowait(None)


class AbovePrompt:
    """What is printed above the prompt. Text written has its escape characters shown as `?`
    (what prompt_toolkit does for a proxy that is not raw), so nothing printed moves the
    cursor or restyles the screen; `write_styled` passes the styles this program rendered
    itself (an answer's Markdown, adapters/console/markdown.py)."""

    def __init__(self, proxy: StdoutProxy) -> None:
        self.proxy = proxy

    def write(self, data: str) -> int:
        return self.proxy.write(data.replace("\x1b", "?"))

    def write_styled(self, data: str) -> int:
        return self.proxy.write(data)

    def flush(self) -> None:
        self.proxy.flush()

    def isatty(self) -> bool:
        return self.proxy.isatty()


def _is_tty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # closed
        return False
