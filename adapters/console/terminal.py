"""`clawgate chat` at a terminal (stdin and stdout both one): line editing, Tab completion of
the commands and of the ids of the requests waiting, a history of the lines typed kept
(redacted) in the user's state directory (prompt_toolkit), a status line under the prompt
saying what the running request does and for how long, every output line printed above the
prompt; a second Ctrl-D (or Ctrl-C) to quit while a request waits; and the line the chat
starts with, naming the model and the store."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TextIO, cast
from urllib.parse import urlsplit

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import StdoutProxy
from prompt_toolkit.shortcuts import CompleteStyle
from prompt_toolkit.styles import Style

from adapters.help import COMMANDS
from runtime.channel import ApprovalNotice, Event, ToolFinished, ToolStarted
from runtime.redact import redact_text, shown_url

PROMPT = "you> "
OFFER_PROMPT = "decide? [y/a/e/n, Esc later] "  # while single keys decide a request (offer)
REFRESH_S = 0.5  # the status line's clock is redrawn this often
STYLE = Style.from_dict({"bottom-toolbar": "noreverse", "status": "bold", "hint": "italic"})
# `--session` names, the model, the host: nothing typed there may move the cursor.
_PRINTABLE = str.maketrans({chr(c): "?" for c in (*range(32), 127)})
HISTORY_FILE = "chat-history"  # in the state directory (state_dir)
# The commands Tab completes: each usage's first word, and /clawgate's own.
COMMAND_WORDS = sorted({usage.split()[0] for usage, _ in COMMANDS} | {"/clawgate"})
DECIDING = ("/approve", "/reject", "/answer")  # commands whose next word is a request's id


def state_dir() -> Path:
    """Where clawgate keeps a user's own state: $XDG_STATE_HOME/clawgate, by default
    ~/.local/state/clawgate."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "clawgate"


class RedactedHistory(FileHistory):
    """The lines typed, kept across chats in a file only its owner may read, with what looks
    like a secret (a token pasted into a line) redacted before it is written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
        super().__init__(path)

    def store_string(self, string: str) -> None:
        super().store_string(redact_text(string))


def typed_history() -> History:
    """The history file, or one in memory where no file can be kept (a read-only home)."""
    try:
        return RedactedHistory(state_dir() / HISTORY_FILE)
    except OSError:
        return InMemoryHistory()


class CommandCompleter(Completer):
    """Tab: a command's name as the first word; after /approve, /reject or /answer, the id of
    a request waiting here (`ids`: those known now)."""

    def __init__(self, ids: Callable[[], Sequence[str]]) -> None:
        self.ids = ids

    def get_completions(self, document: Document, _: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        words = before.split()
        if before.endswith(" "):
            words.append("")
        if len(words) == 1 and words[0].startswith("/"):
            choices: Sequence[str] = COMMAND_WORDS
        elif len(words) == 2 and words[0] in DECIDING:
            choices = self.ids()
        else:
            return
        word = words[-1]
        for choice in choices:
            if choice.startswith(word):
                yield Completion(choice, start_position=-len(word))


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

    def __init__(
        self,
        status: Status,
        interrupt: Callable[[], bool],
        ids: Callable[[], Sequence[str]] = tuple,
        leaving: Callable[[], Awaitable[str | None]] | None = None,
        history: History | None = None,
    ) -> None:
        """`ids`: the requests waiting here (Tab completes them); `leaving`: what quitting
        now would leave undecided, said once before a second Ctrl-D or Ctrl-C quits (None:
        nothing)."""
        self.status = status
        self.interrupt = interrupt
        self.leaving = leaving
        self.interrupted = False
        self.offered: ApprovalNotice | None = None  # the request the keys decide (offer)
        self.out: StdoutProxy | None = None
        self._logs: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []
        self.session: PromptSession[str] = PromptSession(
            lambda: OFFER_PROMPT if self.offered is not None else PROMPT,
            history=history if history is not None else InMemoryHistory(),
            completer=CommandCompleter(ids),
            complete_while_typing=False,  # Tab asks, as in a shell
            complete_style=CompleteStyle.READLINE_LIKE,
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

    def offer(self, notice: ApprovalNotice) -> None:
        """Let single keys decide `notice` (a request just made here): y approves it once, a
        always, e puts `/approve <id> edit <its arguments>` on the line to change, n puts
        `/reject <id> ` for the reason, Esc leaves it for later, and so does any other key,
        which is typed (a command: `/pending`). The prompt says so."""
        self.offered = notice
        self._changed()

    def _decide(self, event: KeyPressEvent, line: str, send: bool) -> None:
        assert self.offered is not None
        line = line.replace("{id}", self.offered.batch or self.offered.approval_id)
        self.offered = None
        self._changed()
        buffer = event.app.current_buffer
        buffer.text, buffer.cursor_position = line, len(line)
        if send:
            buffer.validate_and_handle()

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()
        offered = Condition(lambda: self.offered is not None)

        @keys.add("y", filter=offered)
        def _once(event: KeyPressEvent) -> None:
            self._decide(event, "/approve {id}", send=True)

        @keys.add("a", filter=offered)
        def _always(event: KeyPressEvent) -> None:
            self._decide(event, "/approve {id} always", send=True)

        @keys.add("e", filter=offered)
        def _edit(event: KeyPressEvent) -> None:
            assert self.offered is not None
            self._decide(event, "/approve {id} edit " + _one_line(self.offered.editable), False)

        @keys.add("n", filter=offered)
        def _reject(event: KeyPressEvent) -> None:
            self._decide(event, "/reject {id} ", send=False)

        @keys.add("escape", filter=offered, eager=True)
        def _later(event: KeyPressEvent) -> None:
            self.offered = None
            self._changed()

        @keys.add("<any>", filter=offered)
        def _other(event: KeyPressEvent) -> None:
            """Any other key leaves the request for later and is typed (`/pending`)."""
            self.offered = None
            self._changed()
            event.app.current_buffer.insert_text(event.data)

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
        busy = self.status.doing or self.offered is not None
        self.session.bottom_toolbar = self._toolbar if busy else None
        self.session.app.invalidate()  # nothing when no prompt is shown

    def _toolbar(self) -> StyleAndTextTuples:
        if self.offered is not None and not self.status.doing:
            notice = self.offered
            asked = f"{notice.tool}: {notice.arguments}" if not notice.items else "the batch"
            keys = "y once · a always · " + ("e edit · " if notice.editable else "")
            return [("class:status", asked), ("class:hint", f"   {keys}n reject · Esc later")]
        return [("class:status", self.status.text()), ("class:hint", "   Ctrl-C stops it")]

    async def read(self, lines: asyncio.Queue[str | None]) -> None:
        warned = False  # what quitting leaves was said: the next Ctrl-D or Ctrl-C quits
        while True:
            try:
                # Ctrl-C is a key here, and SIGINT stays with the chat; an exception in a
                # background task is logged as usual, not shown in a "press ENTER" pause.
                line = await self.session.prompt_async(
                    handle_sigint=False, set_exception_handler=False
                )
            except (EOFError, KeyboardInterrupt) as exc:
                left = None if warned or self.leaving is None else await self.leaving()
                if left is None:
                    self.interrupted = isinstance(exc, KeyboardInterrupt)
                    break
                warned = True
                if self.out is not None:
                    self.out.write(left + "\n")
                continue
            warned = False
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


def _one_line(arguments: str) -> str:
    """A call's arguments (JSON, maybe indented) on the one line a prompt edits."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return " ".join(arguments.split())


def _is_tty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # closed
        return False
