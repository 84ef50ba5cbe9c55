"""The run journal: which job a session's latest run belongs to, where its turn begins in
history, and whether it finished. History itself is written step by step (the user message
once, each model answer, each tool result before the next call with side effects), so a run
taken over after a crash continues from what is recorded instead of starting again.

A job is an inbox entry (a message or a decision) or a held message (its own inbox entry's
id): the same job entering twice is a retake, never a second run. Held messages stay in
their list until their run is finished, so a crash while one runs loses nothing.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from runtime.models import Message
from runtime.ownership.lease import guard
from runtime.store.closing import later
from runtime.store.history import WINDOW_LUA, Window, read_window, returned_window
from runtime.store.keys import Keys
from runtime.store.summary import Summary

# A run that goes on gets its window with the answer, in the same trip: the history's length,
# the session's context summary, then where the window begins and its messages (from where the
# summary ends, or the run's own first message if earlier, to that length). Never more: the
# rest of a long history stays in Redis (runtime/store/history.py).
_MARK = (
    WINDOW_LUA
    + """
local function again(mark, job)
  if mark[1] == job then
    local length = redis.call('LLEN', KEYS[3])
    local reply = {'again', length, mark[2], mark[3], redis.call('HGET', KEYS[6], 'record') or ''}
    if mark[3] == '1' then return reply end
    return window(reply, KEYS[3], KEYS[6], length, tonumber(mark[2]))
  end
  -- An earlier run of the session's: it ended before the latest began.
  if redis.call('HEXISTS', KEYS[5], job) == 1 then return {'again', 0, '0', '1', ''} end
  return false
end
local function enter(user, job, ttl)
  local length = redis.call('RPUSH', KEYS[3], user)
  -- A new run: the calls of the one before are no business of its retake.
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[4], 'job', job, 'start', length - 1, 'done', '0', 'marked', '1')
  redis.call('HSET', KEYS[5], job, '1')
  redis.call('PEXPIRE', KEYS[5], ttl)
  local reply = {'entered', length, length - 1, '0', redis.call('HGET', KEYS[6], 'record') or ''}
  return window(reply, KEYS[3], KEYS[6], length, length - 1)
end
"""
)

# KEYS: pending, held, history, run, jobs, summary
# ARGV: held message json, ttl ms, user message json, job, '1' to ask
# A retake of the session's latest run: {'again', history length, start, done, summary, window
# start, window...} (no window once done); of an earlier one (delivered again after the session
# moved on): {'again', 0, 0, done, ''}. A message that must wait (the session waits for a
# decision, or messages held by an interrupted wait are still queued) is held, once however
# often its job is delivered: {'held', position, approval id}; asked to, while the session
# waits for a decision it leaves the message alone (it may answer that): {'asked', approval
# id}. Otherwise it enters the history in the same step: {'entered', history length, start,
# '0', summary, window start, window...}.
ENTER = (
    _MARK
    + """
local seen = again(redis.call('HMGET', KEYS[4], 'job', 'start', 'done'), ARGV[4])
if seen then return seen end
local id = redis.call('GET', KEYS[1])
if id and ARGV[5] == '1' then return {'asked', id} end
if id or redis.call('LLEN', KEYS[2]) > 0 then
  local at = redis.call('LPOS', KEYS[2], ARGV[1])
  if not at then at = redis.call('RPUSH', KEYS[2], ARGV[1]) - 1 end
  -- Kept at least as long as the wait itself (a conversation's timeout may exceed the default).
  redis.call('PEXPIRE', KEYS[2], math.max(tonumber(ARGV[2]), redis.call('PTTL', KEYS[1])))
  return {'held', at + 1, id or ''}
end
return enter(ARGV[3], ARGV[4], ARGV[2])
"""
)

# KEYS: pending, held, history, run, jobs, summary
# ARGV: the held message heading the list, user message, job, ttl ms
# Starts (or retakes) the run of the first held message, unless the session waits again.
# A retake comes before the wait: the run that died may be the one the session waits for
# (it suspended, then died before its notice was posted and it left the list).
START_HELD = (
    _MARK
    + """
if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[1] then return {'moved'} end
local seen = again(redis.call('HMGET', KEYS[4], 'job', 'start', 'done'), ARGV[3])
if seen then return seen end
if redis.call('EXISTS', KEYS[1]) == 1 then return {'waiting'} end
return enter(ARGV[2], ARGV[3], ARGV[4])
"""
)

# KEYS: run, held   ARGV: job, the held message it ran ('' = none)
FINISH = """
if redis.call('HGET', KEYS[1], 'job') == ARGV[1] then redis.call('HSET', KEYS[1], 'done', '1') end
if ARGV[2] ~= '' and redis.call('LINDEX', KEYS[2], 0) == ARGV[2] then
  redis.call('LPOP', KEYS[2])
end
"""

# KEYS: run, history, jobs   ARGV: the running job, the history length it knows, ttl ms, then
# (job, user message) pairs.  Messages queued behind a running run join it (steering): each
# appended to history with its job recorded as run, in one step, so that entering that job
# later finds an earlier run of the session's that finished (nothing happens) and a crash
# anywhere neither loses nor doubles one. Only while that run is the latest and unfinished
# and history is as it knows it; else false. Per job: 1 joined now, 0 joined before.
JOIN = """
local mark = redis.call('HMGET', KEYS[1], 'job', 'done')
if mark[1] ~= ARGV[1] or mark[2] ~= '0' or redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[2]) then
  return false
end
local fates = {}
for i = 4, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], 'joined') == 1 then
    redis.call('RPUSH', KEYS[2], ARGV[i + 1])
    fates[#fates + 1] = 1
  else
    fates[#fates + 1] = 0
  end
end
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return fates
"""


MARKED = "marked"  # the run's calls are marked before they start (absent: an older version's)
CALL = "call:"  # + a call's id: its mark
NOT_STARTED = "not-started"  # the kind said of a call without a mark in a marked run
UNMARKED = "unmarked"  # of one in a run whose calls are not marked


@dataclass(frozen=True, slots=True)
class CallMark:
    """What the run journal knew of a call before it started: the session's history length
    then, its kind of effect and whether it may run again after a crash (tools/base.py
    `Effects`)."""

    at: int
    kind: str
    again: bool


@dataclass(frozen=True, slots=True)
class Entry:
    """What entering a run found: `entered` (a new run; history ends with its message),
    `again` (a retake of the latest run: continue from `history`, unless `done`), `held`
    (the message waits: `position` in the queue, `waiting_for` the approval or ""), or for a
    held message `waiting` (the session waits again) or `moved` (no longer first).

    `history` is the run's window, `history[base:]`: from the run's first message or from
    where the context summary ends, whichever comes first (indices are the session's)."""

    state: Literal["entered", "again", "held", "waiting", "moved", "asked"]
    history: list[Message] = field(default_factory=list)
    start: int = 0  # index in the session's history of the run's first message
    done: bool = False
    job: str = ""  # (latest) the job whose run it is
    position: int = 0
    waiting_for: str = ""
    base: int = 0  # index in the session's history of history[0]
    summary: Summary | None = None

    @property
    def window(self) -> Window:
        return Window(self.base, self.history, self.summary)


def new_job() -> str:
    """The id of a run that no inbox entry carries (the console chat, the operator CLI)."""
    return "local-" + secrets.token_hex(8)


def held_job(raw: str, job: str) -> str:
    """The job id of a held message: its inbox entry's, or (held before it was recorded) one
    derived from the message itself."""
    return job or "held-" + hashlib.sha256(raw.encode()).hexdigest()[:24]


class Reads(Protocol):
    """Reads that ride another command's round trip: queued after it on its pipeline, then
    handed their replies."""

    def queue(self, pipe: Any) -> None: ...

    def take(self, replies: Sequence[Any]) -> None: ...


async def with_reads(pipe: Any, reads: Reads | None) -> list[Any]:
    """Execute `pipe` with `reads` queued after its own commands; its own replies."""
    own = len(pipe)
    if reads is not None:
        reads.queue(pipe)
    replies = await pipe.execute()
    if reads is not None:
        reads.take(replies[own:])
    return list(replies[:own])


class RunJournal:
    def __init__(self, redis: Redis, keys: Keys, held_ttl_ms: int) -> None:
        self.redis = redis
        self.keys = keys
        self.held_ttl_ms = held_ttl_ms
        self._enter = redis.register_script(ENTER)
        self._start_held = redis.register_script(START_HELD)
        self._finish = redis.register_script(FINISH)
        self._join = redis.register_script(JOIN)

    def _keys(self, session: str) -> list[str]:
        k = self.keys
        return [
            k.pending(session),
            k.held(session),
            k.history(session),
            k.run(session),
            k.runs(session),
            k.summary(session),
        ]

    @staticmethod
    def _entry(reply: Sequence[Any]) -> Entry:
        """The script's answer, with the run's window when it is to go on."""
        state = str(reply[0])
        if state == "held":
            return Entry("held", position=int(reply[1]), waiting_for=str(reply[2]))
        if state == "asked":
            return Entry("asked", waiting_for=str(reply[1]))
        if state in ("waiting", "moved"):
            return Entry(state)  # type: ignore[arg-type]
        start, done = int(reply[2] or 0), reply[3] == "1"
        if done:  # nothing to continue: no history needed
            return Entry("again", start=start, done=True)
        window = returned_window(reply, 5, reply[4])
        return Entry(
            "entered" if state == "entered" else "again",
            window.messages,
            start=start,
            base=window.base,
            summary=window.summary,
        )

    async def enter(
        self,
        session: str,
        held: str,
        user_message: str,
        job: str,
        reads: Reads | None = None,
        ask: bool = False,
    ) -> Entry:
        """A message's run begins, is retaken, or the message is held (`held` is its JSON);
        with `ask`, while the session waits for a decision it is neither ("asked"). `reads`
        ride the same round trip (the run's policy)."""
        keys = self._keys(session)
        args: list[str | int] = [held, self.held_ttl_ms, user_message, job, "1" if ask else ""]
        if reads is None:
            return self._entry(await self._enter(keys=keys, args=args))
        pipe = self.redis.pipeline(transaction=False)
        pipe.evalsha(self._enter.sha, len(keys), *keys, *args)
        reads.queue(pipe)
        first, *rest = await pipe.execute(raise_on_error=False)
        if isinstance(first, NoScriptError):  # Redis lost its scripts (a restart): load, again
            await self.redis.script_load(ENTER)
            return await self.enter(session, held, user_message, job, reads, ask)
        for reply in (first, *rest):
            if isinstance(reply, Exception):
                raise reply
        reads.take(rest)
        return self._entry(first)

    async def first_held(self, session: str) -> str | None:
        value = await self.redis.lindex(self.keys.held(session), 0)
        return None if value is None else str(value)

    async def start_held(self, session: str, held: str, user_message: str, job: str) -> Entry:
        """The run of the first held message (`held`, as stored) begins or is retaken."""
        args: list[str | int] = [held, user_message, job, self.held_ttl_ms]
        reply = await self._start_held(keys=self._keys(session), args=args)
        return self._entry(reply)

    async def finish(self, session: str, job: str, held: str = "") -> None:
        """The run of `job` ended (answered, suspended or stopped); a held message's run also
        leaves the held list now, not before."""
        keys = [self.keys.run(session), self.keys.held(session)]
        # A held message leaves its list now: the session's next held one is read right after.
        if not held and later(lambda pipe: pipe.eval(FINISH, 2, *keys, job, held)):
            return
        await self._finish(keys=keys, args=[job, held])

    async def join(
        self, session: str, job: str, end: int, messages: Sequence[tuple[str, str]]
    ) -> list[bool] | None:
        """The (job, user message JSON) `messages` join the running run of `job`, whose
        history ends at `end`: per message, whether it joined now (False: it had joined
        before); None when that run cannot take them (it ended, or history moved on)."""
        await guard()
        keys = [self.keys.run(session), self.keys.history(session), self.keys.runs(session)]
        args: list[str | int] = [job, end, self.held_ttl_ms]
        args += [part for pair in messages for part in pair]
        fates = await self._join(keys=keys, args=args)
        return None if not fates else [int(fate) == 1 for fate in fates]

    async def started(self, session: str, call: str, mark: CallMark) -> None:
        """`call` (its id) is about to start: recorded first, so that whoever retakes the run
        knows it may have run, and what it may have changed."""
        value = json.dumps({"at": mark.at, "kind": mark.kind, "again": mark.again})
        await self.redis.hset(self.keys.run(session), CALL + call, value)

    async def marks(self, session: str) -> dict[str, CallMark] | None:
        """The marks of the latest run's calls by call id; None for a run whose calls are not
        marked (an older version began it): then nobody knows which of them started."""
        return await call_marks(self.redis, self.keys, session)

    async def stop_for(self, session: str, job: str) -> None:
        """A `/cancel` (`job`, queued behind the session's running run) stopped that run: its
        answer, once its turn comes, says so (`stopped_for`)."""
        await guard()
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self.keys.runs(session), job, "cancel")
        pipe.pexpire(self.keys.runs(session), self.held_ttl_ms)
        await pipe.execute()

    async def stopped_for(self, session: str, job: str) -> bool:
        return await self.redis.hget(self.keys.runs(session), job) == "cancel"

    async def is_latest(self, session: str, job: str) -> bool:
        """Whether `job` began the session's latest run (a message, or a decision that resumed
        one): delivered again, it is a retake of that run, never a new input."""
        return bool(job) and await self.redis.hget(self.keys.run(session), "job") == job

    async def latest(self, session: str) -> Entry:
        """The session's latest run, as a retake continues it (its window read only when it
        did not finish)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hmget(self.keys.run(session), ["start", "done", "job"])
        pipe.llen(self.keys.history(session))
        pipe.hget(self.keys.summary(session), "record")
        (start, done, job), length, summary = await pipe.execute()
        entry = Entry("again", start=int(start or 0), done=done == "1", job=job or "")
        if entry.done:
            return entry
        window = await read_window(
            self.redis, self.keys, session, int(length), summary, entry.start
        )
        return Entry(
            "again",
            window.messages,
            start=entry.start,
            job=entry.job,
            base=window.base,
            summary=window.summary,
        )


async def call_marks(redis: Redis, keys: Keys, session: str) -> dict[str, CallMark] | None:
    """The latest run's call marks (see RunJournal.marks)."""
    fields = {str(k): str(v) for k, v in (await redis.hgetall(keys.run(session))).items()}
    if fields.get(MARKED) != "1":
        return None
    marks = {}
    for name, value in fields.items():
        if name.startswith(CALL):
            data = json.loads(value)
            marks[name.removeprefix(CALL)] = CallMark(
                int(data["at"]), str(data["kind"]), data["again"] is True
            )
    return marks
