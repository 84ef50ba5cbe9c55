"""`clawgate chat`: the console adapter. In a terminal (stdin and stdout), line editing,
history and a status line (terminal.py); with piped stdin, one message per line, output
flushed per event, exit 0 at end of input."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from typing import TextIO, cast

from redis.exceptions import RedisError

from adapters.console.channel import ConsoleChannel
from adapters.console.terminal import PROMPT, Status, Terminal, typed_history
from adapters.dispatch import dispatch
from adapters.help import HELP as DISPATCH_HELP
from runtime.agent import Runtime
from runtime.channel import ApprovalNotice
from runtime.models import Actor, ConversationRef, RunResult
from runtime.outage import OUTAGE, OUTAGES
from runtime.providers.demo import GRAMMAR

log = logging.getLogger(__name__)
REDIS_DOWN = "Cannot reach the store (Redis) right now; try again when it is back."
GREETING = "Type a message, /help for the commands. Ctrl-C stops a running request, Ctrl-D quits."

HELP = DISPATCH_HELP.replace(
    "Anything else is a message to the assistant.",
    "Anything else is a message to the assistant. Ctrl-C stops a running request, Ctrl-D quits.",
)


def _start_line_reader(stdin: TextIO, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str | None]:
    """Read stdin on a daemon thread: a blocked read must never keep the process alive."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def pump() -> None:
        for line in stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()
    return queue


class ConsoleChat:
    """`channel`: the runtime's console channel, whose events drive the status line; `about`:
    the first line at a terminal (terminal.start_line)."""

    def __init__(
        self,
        runtime: Runtime,
        session: str,
        actor: Actor,
        stdin: TextIO,
        stdout: TextIO,
        channel: ConsoleChannel | None = None,
        about: str = "",
        embedded: bool = False,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.actor = actor
        self.conversation = ConversationRef(platform="console", id=session)
        self.stdin = stdin
        self.stdout = stdout
        self.channel = channel
        self.about = about
        self.embedded = embedded  # the in-process store: what waits is lost at the end
        self.waiting: list[ApprovalNotice] = []  # requests waiting here, as last read
        self._offered: set[str] = set()  # ids of requests offered to single keys already
        self.interactive = stdin.isatty()
        self.status = Status()
        if channel is not None:
            channel.watch = self.status.see
        self.terminal = (
            Terminal(self.status, self._stop, self._ids, self._leaving, typed_history())
            if self.interactive and stdout.isatty()
            else None
        )
        self._current: asyncio.Task[RunResult | None] | None = None
        self._lock = asyncio.Lock()

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        await self._read_waiting()
        if self.interactive:
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
            self._say(self.about or "clawgate chat")
            self._say(GREETING)
        try:
            if self.terminal is not None:
                return await self._at_terminal(self.terminal)
            lines = _start_line_reader(self.stdin, loop)
            return await self._converse(lines, PROMPT if self.interactive else "")
        finally:
            if self.interactive:
                loop.remove_signal_handler(signal.SIGINT)

    async def _converse(self, lines: asyncio.Queue[str | None], prompt: str = "") -> int:
        while True:
            if prompt:
                self.stdout.write(prompt)
                self.stdout.flush()
            line = await lines.get()
            if line is None:
                return 0
            await self.handle(line.strip())

    async def _at_terminal(self, terminal: Terminal) -> int:
        """Output goes above the prompt while it is shown: the chat's, the channel's."""
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        stdout = self.stdout
        with terminal as out:
            self.stdout = cast(TextIO, out)
            if self.channel is not None:
                self.channel.out = self.stdout
            reader = asyncio.create_task(terminal.read(lines))
            try:
                await self._converse(lines)
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
                self.stdout = stdout
                if self.channel is not None:
                    self.channel.out = stdout
        return 130 if terminal.interrupted else 0

    def _stop(self) -> bool:
        """Stop the running request, if one runs."""
        if self._current is not None and not self._current.done():
            self._current.cancel()
            return True
        return False

    def _interrupt(self) -> None:
        if not self._stop():
            raise KeyboardInterrupt

    async def handle(self, text: str) -> None:
        if not text:
            return
        if text in ("/approve", "/reject"):  # the one request waiting here, if one is
            text = await self._the_one(text)
            if not text:
                return
        help_text = HELP + ("\n\n" + GRAMMAR if self.runtime.provider.offline_demo else "")
        work = dispatch(
            self.runtime, self.session, text, self.actor, self.conversation, self._tell, help_text
        )
        async with self._lock:  # one thing at a time, also against the sweeper
            self._current = current = asyncio.ensure_future(work)
            self.status.start("working" if text.startswith("/") else "thinking")
            try:
                await current
            except asyncio.CancelledError:
                pass
            except RedisError as exc:  # nothing half-done is lost: the journal keeps it
                log.error("Redis unavailable: %s", exc)
                self._say(REDIS_DOWN)
            finally:
                self._current = None
                self.status.stop()
        await self._read_waiting()
        self._offer_newest()

    def _offer_newest(self) -> None:
        """A request made by what was just typed: single keys may decide it (terminal.offer);
        each is offered once."""
        asked = [n for n in self.waiting if n.kind == "approval" and n.status == "pending"]
        if self.terminal is None or not asked:
            return
        newest = asked[-1]
        key = newest.batch or newest.approval_id
        if key not in self._offered:
            self._offered.add(key)
            self.terminal.offer(newest)

    async def _read_waiting(self) -> None:
        # Redis away: as last read (Tab and the quit warning may be a step behind).
        with contextlib.suppress(RedisError):
            self.waiting = await self.runtime.pending(self.conversation)

    async def _the_one(self, command: str) -> str:
        """`/approve` or `/reject` with the id of the one request waiting here; "" (and why,
        said) when none or several wait."""
        await self._read_waiting()
        ids = self._ids()
        if len(ids) == 1:
            return f"{command} {ids[0]}"
        if not ids:
            self._say("Nothing waits for a decision here.")
        else:
            self._say(f"{len(ids)} requests wait; name one: {command} <id> ({', '.join(ids)})")
        return ""

    def _ids(self) -> list[str]:
        """The ids a decision may name here: each request's, or its batch's."""
        return list(dict.fromkeys(n.batch or n.approval_id for n in self.waiting))

    async def _leaving(self) -> str | None:
        """What quitting now leaves undecided, said before a second Ctrl-D quits."""
        await self._read_waiting()
        ids = self._ids()
        if not ids:
            return None
        which = f"{len(ids)} request{'s' if len(ids) > 1 else ''} wait{'' if len(ids) > 1 else 's'}"
        them = "them" if len(ids) > 1 else "it"
        fate = (
            f"the embedded store keeps nothing: quitting loses {them}"
            if self.embedded
            else f"Redis keeps {them}: decide later here, in another chat or with "
            "`clawgate approvals approve <id>`"
        )
        return f"{which} for a decision ({', '.join(ids)}); {fate}. Ctrl-D again quits."

    async def _tell(self, text: str) -> None:
        self._say(text)

    def show_relayed(self, line: str) -> None:
        """A line of this conversation's run resumed in another process (see relay.py)."""
        if self.interactive and self.terminal is None:  # on a line of its own, then the prompt
            self.stdout.write(f"\r{line}\n{PROMPT}")
            self.stdout.flush()
        else:
            self._say(line)

    async def sweep_forever(self, interval: float) -> None:
        """Expire overdue approvals and settle crashed executions while the chat is open."""
        while True:
            await asyncio.sleep(interval)
            async with self._lock:
                try:
                    await self.runtime.sweep()
                except OUTAGES as exc:  # said once for the whole outage, no traceback
                    OUTAGE.failed("approval sweep", exc)
                except Exception:
                    log.exception("approval sweep failed")
