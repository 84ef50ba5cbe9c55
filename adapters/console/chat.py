"""`clawgate chat`: the console adapter. Interactive in a terminal; with piped stdin, one
message per line, output flushed per event, exit 0 at end of input."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from typing import TextIO

from redis.exceptions import RedisError

from adapters.dispatch import HELP as DISPATCH_HELP
from adapters.dispatch import dispatch
from runtime.agent import Runtime
from runtime.models import Actor, ConversationRef, RunResult
from runtime.providers.demo import GRAMMAR

log = logging.getLogger(__name__)
REDIS_DOWN = "Cannot reach the store (Redis) right now; try again when it is back."

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
    def __init__(
        self, runtime: Runtime, session: str, actor: Actor, stdin: TextIO, stdout: TextIO
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.actor = actor
        self.conversation = ConversationRef(platform="console", id=session)
        self.stdin = stdin
        self.stdout = stdout
        self.interactive = stdin.isatty()
        self._current: asyncio.Task[RunResult | None] | None = None
        self._lock = asyncio.Lock()

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        lines = _start_line_reader(self.stdin, loop)
        if self.interactive:
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
            self._say("clawgate chat: type a message, /help for commands, Ctrl-D to quit.")
        try:
            while True:
                if self.interactive:
                    self.stdout.write("you> ")
                    self.stdout.flush()
                line = await lines.get()
                if line is None:
                    return 0
                await self.handle(line.strip())
        finally:
            if self.interactive:
                loop.remove_signal_handler(signal.SIGINT)

    def _interrupt(self) -> None:
        if self._current is not None and not self._current.done():
            self._current.cancel()
        else:
            raise KeyboardInterrupt

    async def handle(self, text: str) -> None:
        if not text:
            return
        help_text = HELP + ("\n\n" + GRAMMAR if self.runtime.provider.offline_demo else "")
        work = dispatch(
            self.runtime, self.session, text, self.actor, self.conversation, self._tell, help_text
        )
        async with self._lock:  # one thing at a time, also against the sweeper
            self._current = current = asyncio.ensure_future(work)
            try:
                await current
            except asyncio.CancelledError:
                pass
            except RedisError as exc:  # nothing half-done is lost: the journal keeps it
                log.error("Redis unavailable: %s", exc)
                self._say(REDIS_DOWN)
            self._current = None

    async def _tell(self, text: str) -> None:
        self._say(text)

    def show_relayed(self, line: str) -> None:
        """A line of this conversation's run resumed in another process (see relay.py)."""
        if self.interactive:  # on a line of its own, then the prompt again
            self.stdout.write(f"\r{line}\nyou> ")
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
                except Exception:
                    log.exception("approval sweep failed")
