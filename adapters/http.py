"""What every platform endpoint does first: read the body, refusing oversized ones (413) and
ones that trickle in too slowly (408); parse it as a JSON object of bounded nesting (else 400)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

MAX_BODY = 1024 * 1024
# Seconds a request's body may take to arrive once its headers have (`clawgate serve` sets
# CLAWGATE_HTTP_BODY_TIMEOUT here); a client that sends slower holds a connection for nothing.
BODY_TIMEOUT = web.AppKey("body_timeout", float)
DEFAULT_BODY_TIMEOUT = 10.0
# Slack's and Feishu's payloads nest about ten levels (blocks, card forms); deeper is no
# platform's, and Python's own parser fails with a RecursionError near 1000.
MAX_DEPTH = 64


class NotJson(ValueError):
    """Not a JSON object, or one nested deeper than MAX_DEPTH: the text says which."""


async def read_body(request: web.Request, limit: int = MAX_BODY) -> bytes | web.Response:
    """The raw body, or the 413 answer for one over `limit` bytes, the 408 answer for one
    that does not arrive within the app's BODY_TIMEOUT."""
    too_large = web.Response(status=413, text="request body too large")
    if (request.content_length or 0) > limit:
        return too_large
    try:
        async with asyncio.timeout(request.app.get(BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT)):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return too_large
    except TimeoutError:
        # Closed after the answer: the rest of the body is never read.
        return web.Response(
            status=408, text="request body too slow", headers={"Connection": "close"}
        )
    return too_large if len(raw) > limit else raw


def json_object(text: str | bytes) -> dict[str, Any]:
    """`text` parsed, if it is a JSON object nested at most MAX_DEPTH deep; else `NotJson`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise NotJson(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise NotJson("not JSON") from exc
    if not isinstance(value, dict):
        raise NotJson("not a JSON object")
    if _depth(value) > MAX_DEPTH:
        raise NotJson(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    """How deep containers nest in `value` (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, level)
        if level <= MAX_DEPTH:  # beyond it the answer is known: stop looking
            stack.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest
