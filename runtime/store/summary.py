"""A session's context summary: what the model wrote about the part of the history a run no
longer reads (see runtime/context). History itself is never shortened: the summary stands in
for `history[0:upto]` in what the model is sent, and the full history stays for the audit and
`clawgate trace show`.

Two keys under the session's hash tag (so the script works on Redis Cluster): `summary`, a hash
with the current record and the index it covers (`upto`), and `summaries`, every record ever
written, oldest first (what the model was shown in place of the history at any time).
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from runtime.store.keys import Keys

# KEYS: summary, summaries, history   ARGV: upto, since (the upto it replaces), record json
# Compare and set: a summary is written only over the one it was built on (two compactions of
# one session cannot both land) and only for messages history holds, together with the index
# it covers. A session whose history expires (an explorer's) has its summary expire with it.
WRITE = """
local current = tonumber(redis.call('HGET', KEYS[1], 'upto') or '0')
if current ~= tonumber(ARGV[2]) then return {'stale', tostring(current)} end
local upto = tonumber(ARGV[1])
if upto <= current or upto > redis.call('LLEN', KEYS[3]) then
  return {'refused', tostring(current)}
end
redis.call('HSET', KEYS[1], 'upto', ARGV[1], 'record', ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[3])
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {'ok', ARGV[1]}
"""


class Summary(BaseModel):
    """One compaction's record: `text` stands for `history[0:upto]`; it was written from the
    previous summary (which covered `[0:since]`) and `history[since:upto]`, less the oldest
    `omitted` of those, which did not fit the summarizer's input."""

    schema_version: int = 1
    upto: int = Field(ge=1)
    since: int = Field(ge=0)
    text: str
    omitted: int = 0
    chars: int = 0  # characters of history it newly stands for
    model: str = ""  # the provider that wrote it
    at: int = 0  # ms since the epoch
    trace: str | None = None  # the run that compacted


def parse_summary(raw: str | bytes | None) -> Summary | None:
    return Summary.model_validate_json(raw) if raw else None


class SummaryStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self._write = redis.register_script(WRITE)

    async def current(self, session: str) -> Summary | None:
        return parse_summary(await self.redis.hget(self.keys.summary(session), "record"))

    async def all(self, session: str) -> list[Summary]:
        """Every summary the session had, oldest first."""
        raw = await self.redis.lrange(self.keys.summaries(session), 0, -1)
        return [Summary.model_validate_json(item) for item in raw]

    async def write(self, session: str, summary: Summary) -> bool:
        """Store `summary` unless another landed first or history does not hold what it
        covers; True when it was written."""
        k = self.keys
        keys = [k.summary(session), k.summaries(session), k.history(session)]
        args: list[str | int] = [summary.upto, summary.since, summary.model_dump_json()]
        reply = await self._write(keys=keys, args=args)
        return str(reply[0]) == "ok"
