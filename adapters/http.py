"""What every platform endpoint does first: read the body, refusing oversized ones (413)."""

from __future__ import annotations

from aiohttp import web

MAX_BODY = 1024 * 1024


async def read_body(request: web.Request, limit: int = MAX_BODY) -> bytes | web.Response:
    """The raw body, or the 413 answer for one over `limit` bytes."""
    too_large = web.Response(status=413, text="request body too large")
    if (request.content_length or 0) > limit:
        return too_large
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return too_large
    return too_large if len(raw) > limit else raw
