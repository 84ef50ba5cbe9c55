"""A run's answer streamed into one CardKit card per place (the message a run answers): it
opens at the run's first event saying "Thinking…", gets a line per tool call (running, then
its outcome), types the answer out as the model writes it, and closes with the answer exactly
as the `Reply` says it (redaction may have changed the last preview), streaming off.

Updates are throttled (`interval`, ≥ 0.3 s per card: CardKit takes 10 a second) and merged:
a preview within the interval waits for the next one, a tool line or the end waits out the
rest. A run waiting for approval closes the card saying so; its resumed part continues in the
same card. A card is sent with a uuid made from its place and how many cards the place had,
so a process taking over a run (kill -9) that sends it again gets the dead process's message
back (Feishu keeps a uuid an hour): it then takes that card over (found by `card_of`) and
replaces it whole, so the place never shows a second card nor one left streaming.

When CardKit refuses (a tenant without cards, the `cardkit:card:write` scope missing, an
error), the place falls back to the text working message for the rest of its run and the
answer comes as before; a card that cannot be finished is recalled before that."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from adapters.feishu.answers import PIECE, markdown_text
from adapters.feishu.cardkit import (
    ANSWER,
    STEPS,
    CardKit,
    final_card,
    next_sequence,
    steps_text,
    stream_card,
)
from adapters.progress import STOPS, ProgressEvent, Style
from runtime.channel import Reply, RunFinished, ToolFinished, ToolStarted, Writing
from runtime.models import StopReason, ToolStatus
from runtime.tools.clarify import ClarifyTool

log = logging.getLogger(__name__)

INTERVAL = 0.3  # seconds between updates of a card, at least
THINKING = "💭 Thinking…"
WRITING = "✍️ Writing…"
WAITING = "🔒 Waiting for approval"
ASKING = "💬 Waiting for the asker's answer"  # a clarify question, not an approval
MAX_LINES = 30  # tool lines shown, the last ones: the card must stay under 30 KB
SLOTS = 4096  # places whose card count is remembered
TAKEOVER_JUMP = 1000  # sequence numbers a taken-over card skips when the clock's are taken
Place = tuple[str, str]
Say = Callable[[Mapping[str, str], str, Any, str], Awaitable[str | None]]
Recall = Callable[[str], Awaitable[bool]]
Patch = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass
class Live:
    """A card streaming in a place."""

    card_id: str
    message_id: str
    sequence: int = 0
    lines: dict[str, str] = field(default_factory=dict)  # call id -> line
    running: set[str] = field(default_factory=set)  # calls started, not finished
    answer: str = ""  # the answer being written, as the model wrote it so far
    shown: dict[str, str] = field(default_factory=dict)  # element id -> content last sent
    updated_at: float = -math.inf
    # The message's card could not be looked up (`cardkit:card:read` missing): it may be a
    # dead process's, so the finished card is also patched into the message whole.
    unverified: bool = False
    asking: bool = False  # the call that suspended the run is a question to the asker


class Streams:
    def __init__(
        self,
        kit: CardKit,
        say: Say,
        recall: Recall,
        patch: Patch,
        style: Style,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kit = kit
        self.say = say
        self.recall = recall
        self.patch = patch
        self.style = style
        self.interval = interval
        self.clock = clock
        self._live: dict[Place, Live] = {}
        self._cards: OrderedDict[Place, int] = OrderedDict()  # place -> cards finished there
        self._answers: OrderedDict[str, int] = OrderedDict()  # answer key -> its card's number
        self._text: set[Place] = set()  # places fallen back to text until their run ends
        # One event of a place at a time: concurrent reads start together, and two first
        # events would each open a card (and updates would race their sequence numbers).
        self._locks: dict[Place, tuple[asyncio.Lock, int]] = {}  # place -> (lock, users)

    @asynccontextmanager
    async def _serial(self, place: Place) -> AsyncIterator[None]:
        lock, users = self._locks.get(place) or (asyncio.Lock(), 0)
        self._locks[place] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[place]
            if users == 1:
                del self._locks[place]
            else:
                self._locks[place] = (lock, users - 1)

    # --- events --------------------------------------------------------------------------------

    async def progress(self, where: Mapping[str, str], event: ProgressEvent) -> bool:
        """Show `event` in the place's card; False when the place shows runs in text (cards
        refused): the caller shows it the old way."""
        place = _place(where)
        async with self._serial(place):
            return await self._progress(where, place, event)

    async def _progress(self, where: Mapping[str, str], place: Place, event: ProgressEvent) -> bool:
        if place in self._text:
            if isinstance(event, RunFinished):
                self._text.discard(place)
            return False
        live = self._live.get(place)
        if live is None:
            if isinstance(event, RunFinished):
                # Nothing streamed: the answer or the notice says it all, else a text line.
                return event.stop_reason in (StopReason.FINAL, StopReason.APPROVAL_REQUIRED)
            if isinstance(event, Writing) and not event.text.strip():
                return True
            live = await self._open(where, place)
            if live is None:
                self._text.add(place)
                return False
        if isinstance(event, RunFinished):
            await self._end(place, live, event)
            return True
        self._apply(live, event)
        await self._flush(live, urgent=not isinstance(event, Writing))
        return True

    async def answer(self, where: Mapping[str, str], reply: Reply, piece: str) -> bool:
        """The run's answer (`piece`: the part the card holds) into the place's card, which
        it closes; False when the caller must post it (an unkeyed reply, such as text the
        model said beside tool calls, is a message of its own; cards refused)."""
        place = _place(where)
        async with self._serial(place):
            return await self._answer(where, place, reply, piece)

    async def _answer(
        self, where: Mapping[str, str], place: Place, reply: Reply, piece: str
    ) -> bool:
        live = self._live.get(place)
        if place in self._text:
            return False
        if not reply.key:
            if live is not None:  # its preview was this text: the card keeps writing after
                live.answer = ""
                await self._flush(live, urgent=True)
            return False
        if live is None:  # answered without streaming, or retaken: the card is made whole
            again = self._answers.get(reply.key)  # this process posted it: that card again
            live = await self._open(where, place, final_card([], "", piece), again)
            if live is None:
                return False
            if again is None:
                self._done(place, reply.key)
            return True
        if not await self._finish(live, final_card(self._lines(live), "", piece)):
            await self._give_up(place, live)
            return False
        self._done(place, reply.key)
        return True

    # --- the card -------------------------------------------------------------------------------

    async def _open(
        self,
        where: Mapping[str, str],
        place: Place,
        card: dict[str, Any] | None = None,
        number: int | None = None,
    ) -> Live | None:
        """Create and send the place's next card (`card`, else a streaming one saying
        "Thinking…"; `number`: the place's card to send again); a send its key already made
        (a dead process's) gives that message back, whose card is then made this one."""
        card = card or stream_card(THINKING, "")
        card_id = await self.kit.create(card)
        if card_id is None:
            return None
        number = self._cards.get(place, 0) if number is None else number
        key = f"stream/{place[0]}/{place[1]}/{number}"
        content = {"type": "card", "data": {"card_id": card_id}}
        message_id = await self.say(where, "interactive", content, key)
        if message_id is None:
            return None
        shown = await self.kit.card_of(message_id)
        live = Live(card_id, message_id, unverified=shown is None)
        if live.unverified and not card["config"]["streaming_mode"]:
            await self.patch(message_id, card)
        if shown is not None and shown != card_id:
            log.info("feishu: taking over the card of message %s", message_id)
            live.card_id = shown
            streaming = bool(card["config"]["streaming_mode"])
            # The dead process may have numbered its last updates past this clock tick.
            if not await self._finish(live, card, streaming) and not await self._finish(
                live, card, streaming, jump=TAKEOVER_JUMP
            ):
                await self.recall(message_id)  # no half-written card stays: text instead
                return None
        if card["config"]["streaming_mode"]:
            self._live[place] = live
            live.shown = {STEPS: THINKING, ANSWER: ""}
            live.updated_at = self.clock()
        return live

    def _apply(self, live: Live, event: ToolStarted | ToolFinished | Writing) -> None:
        style = self.style
        if isinstance(event, Writing):
            live.answer = event.text
        elif isinstance(event, ToolStarted):
            live.answer = ""
            text = style.escape(event.summary[:200])
            live.lines[event.call_id] = style.line(style.running, event.tool, text)
            live.running.add(event.call_id)
        else:
            mark, text = style.marks.get(event.status, ""), style.escape(event.display[:200])
            live.lines[event.call_id] = style.line(mark, event.tool, text)
            live.running.discard(event.call_id)
            live.asking = event.status is ToolStatus.SUSPENDED and event.tool == ClarifyTool.name

    def _lines(self, live: Live) -> list[str]:
        return list(live.lines.values())[-MAX_LINES:]

    def _steps(self, live: Live, status: str) -> str:
        return "\n".join([*self._lines(live), *([status] if status else [])])

    async def _flush(self, live: Live, urgent: bool) -> None:
        """Send what changed; within `interval` of the last update a preview is left for the
        next one to carry, anything else waits the rest out."""
        status = "" if live.running else WRITING if live.answer.strip() else THINKING
        wanted = {
            STEPS: steps_text(self._steps(live, status)),
            ANSWER: markdown_text(live.answer[:PIECE]),
        }
        changed = {k: v for k, v in wanted.items() if live.shown.get(k) != v}
        if not changed:
            return
        wait = live.updated_at + self.interval - self.clock()
        if wait > 0:
            if not urgent:
                return
            await asyncio.sleep(wait)
        for element, text in changed.items():
            live.sequence = next_sequence(live.sequence)
            if await self.kit.content(live.card_id, element, text, live.sequence):
                live.shown[element] = text
        live.updated_at = self.clock()

    async def _end(self, place: Place, live: Live, event: RunFinished) -> None:
        """The run stopped without an answer in the card: its lines and how it stopped. A
        run waiting for approval goes on in this card (its place's next card is this one)."""
        waiting = event.stop_reason is StopReason.APPROVAL_REQUIRED
        if waiting:
            status = ASKING if live.asking else WAITING
        elif event.stop_reason is StopReason.FINAL:
            status = ""
        else:
            status = self.style.footer(STOPS[event.stop_reason])
            if event.error:
                status += f": {self.style.escape(event.error[:300])}"
        card = final_card(self._lines(live), status, live.answer[:PIECE])
        if not await self._finish(live, card):
            await self._give_up(place, live)
            self._text.discard(place)  # the run is over: its place's next run tries cards
            return
        self._live.pop(place, None)
        if not waiting:
            self._done(place)

    async def _finish(
        self, live: Live, card: dict[str, Any], streaming: bool = False, jump: int = 0
    ) -> bool:
        """Streaming mode set (off, to finish) and the card replaced whole; `jump`: numbers
        skipped first."""
        live.sequence = next_sequence(live.sequence) + jump
        if not await self.kit.streaming(live.card_id, streaming, live.sequence):
            return False
        live.sequence = next_sequence(live.sequence)
        if not await self.kit.replace(live.card_id, card, live.sequence):
            return False
        live.updated_at = self.clock()
        if live.unverified and not streaming:
            await self.patch(live.message_id, card)
        return True

    async def _give_up(self, place: Place, live: Live) -> None:
        """The card cannot be finished: recalled (no half-written card stays), the rest of
        the run in text."""
        log.warning("feishu: cannot finish the card of message %s: recalling it", live.message_id)
        self._live.pop(place, None)
        await self.recall(live.message_id)
        self._done(place)
        self._text.add(place)

    def _done(self, place: Place, answer: str = "") -> None:
        """The place's card finished (with the answer keyed `answer`): its next is new."""
        self._live.pop(place, None)
        number = self._cards.get(place, 0)
        self._cards[place] = number + 1
        self._cards.move_to_end(place)
        if answer:
            self._answers[answer] = number
        for remembered in (self._cards, self._answers):
            while len(remembered) > SLOTS:
                remembered.popitem(last=False)


def _place(where: Mapping[str, str]) -> Place:
    return where["chat_id"], where.get("message_id", "")
