"""The floor app of `clawgate bench ingest --floor`: the least code doing clawgate's durable
Slack turn with the same libraries, for its CPU and Redis round trips per turn to be a
yardstick. Ingest: aiohttp, slack_sdk's SignatureVerifier, one Lua script (dedupe on the
event id + XADD), HTTP 200. Worker: XREADGROUP, one plain HTTP call of the model
(POST …/chat/completions), chat.postMessage with slack_sdk's AsyncWebClient into the thread,
then one Lua script (XACK + XDEL). No history, policy, audit, retries or reclaim: what is
left is what any durable Slack bot pays.

`python -m bot.bench.floor [both|serve|worker]` (both: the worker is a task of the server's
process), configured like `clawgate serve` by the bench: REDIS_URL, CLAWGATE_REDIS_CLUSTER,
CLAWGATE_REDIS_PREFIX, CLAWGATE_HOST, CLAWGATE_PORT, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET,
SLACK_API_URL, OPENAI_BASE_URL, CLAWGATE_MODEL, CLAWGATE_WORKER_CONCURRENCY. It uses the
stream the bench drains (Keys.inbox_stream, one partition)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from typing import Any

import aiohttp
from aiohttp import web
from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.exceptions import ResponseError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from runtime.store.keys import Keys

GROUP = "floor"
SEEN_TTL_S = 3600
# KEYS: seen marker, stream; ARGV: the event, the marker's TTL. Queued once per event id.
ENQUEUE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[2]) then
  return redis.call('XADD', KEYS[2], '*', 'event', ARGV[1])
end
return false
"""
# KEYS: stream; ARGV: group, entry id. Done: acknowledged and removed.
ACK = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])
"""


def _redis() -> Redis:
    url = os.environ["REDIS_URL"]
    if os.environ.get("CLAWGATE_REDIS_CLUSTER", "").lower() == "true":
        return RedisCluster.from_url(url, max_connections=512)  # type: ignore[return-value]
    # As clawgate's: under a burst a command waits for a connection rather than failing.
    return Redis.from_pool(BlockingConnectionPool.from_url(url, max_connections=100))


class Floor:
    def __init__(self, redis: Redis, http: aiohttp.ClientSession) -> None:
        keys = Keys(os.environ["CLAWGATE_REDIS_PREFIX"])
        self.stream = keys.inbox_stream()
        self.seen = keys.inbox_seen("")  # + the event id: same slot as the stream
        self.redis = redis
        self.http = http
        self.enqueue = redis.register_script(ENQUEUE)
        self.ack = redis.register_script(ACK)
        self.verifier = SignatureVerifier(os.environ["SLACK_SIGNING_SECRET"])
        self.slack = AsyncWebClient(
            token=os.environ["SLACK_BOT_TOKEN"], base_url=os.environ["SLACK_API_URL"], session=http
        )
        self.model_url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
        self.model = os.environ.get("CLAWGATE_MODEL", "bench")
        self.concurrency = int(os.environ.get("CLAWGATE_WORKER_CONCURRENCY", "64"))

    # --- ingest

    async def events(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            return web.Response(status=401)
        envelope = json.loads(body)
        if envelope.get("type") == "url_verification":
            return web.json_response({"challenge": envelope.get("challenge")})
        if envelope.get("event", {}).get("type") == "app_mention":
            keys = [self.seen + str(envelope["event_id"]), self.stream]
            await self.enqueue(keys=keys, args=[body, SEEN_TTL_S])
        return web.Response()

    # --- worker

    async def work(self) -> None:
        with contextlib.suppress(ResponseError):  # BUSYGROUP: made by the other process
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        running: set[asyncio.Task[None]] = set()
        consumer = f"floor-{os.getpid()}"
        while True:
            if len(running) >= self.concurrency:
                await asyncio.wait(set(running), return_when=asyncio.FIRST_COMPLETED)
            reply: list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]
            reply = await self.redis.xreadgroup(  # type: ignore[assignment]  # redis-py's Any
                GROUP,
                consumer,
                {self.stream: ">"},
                count=self.concurrency - len(running),
                block=1000,
            )
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    task = asyncio.create_task(self.turn(entry_id, fields[b"event"]))
                    running.add(task)
                    task.add_done_callback(running.discard)

    async def turn(self, entry_id: bytes, raw: bytes) -> None:
        event = json.loads(raw)["event"]
        answer = await self.complete(event.get("text", ""))
        thread = event.get("thread_ts") or event["ts"]
        await self.slack.chat_postMessage(channel=event["channel"], thread_ts=thread, text=answer)
        await self.ack(keys=[self.stream], args=[GROUP, entry_id])

    async def complete(self, text: str) -> str:
        request = {"model": self.model, "messages": [{"role": "user", "content": text}]}
        async with self.http.post(self.model_url, json=request) as resp:
            resp.raise_for_status()
            body: dict[str, Any] = await resp.json()
        return str(body["choices"][0]["message"]["content"])


async def _ready(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def main(role: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    redis = _redis()
    async with aiohttp.ClientSession() as http:
        floor = Floor(redis, http)
        runner = None
        worker = asyncio.create_task(floor.work()) if role in ("both", "worker") else None
        if role in ("both", "serve"):
            app = web.Application()
            app.router.add_post("/slack/events", floor.events)
            app.router.add_get("/readyz", _ready)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            port = int(os.environ["CLAWGATE_PORT"])
            await web.TCPSite(runner, os.environ.get("CLAWGATE_HOST", "127.0.0.1"), port).start()
        await stop.wait()
        if worker is not None:
            worker.cancel()
        if runner is not None:
            await runner.cleanup()
    await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "both"))
