"""People's display names for the thread context, looked up through Feishu's contact API
(`contact.v3.user.get`, which needs `contact:user.base:readonly`) and cached, bounded, in the
process; a look-up that fails leaves the open_id as the name (and is not asked again soon)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from lark_oapi.api.contact.v3 import GetUserRequest

log = logging.getLogger(__name__)

SIZE = 1024  # names kept
TTL = 3600.0  # seconds a name is kept
RETRY = 300.0  # seconds before a failed look-up is tried again


class Names:
    def __init__(self, client: Any) -> None:
        self.client = client
        self._cache: OrderedDict[str, tuple[float, str]] = OrderedDict()

    async def name(self, open_id: str) -> str:
        now = time.monotonic()
        cached = self._cache.get(open_id)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(open_id)
            return cached[1]
        found = await self._look_up(open_id)
        self._cache[open_id] = (now + (TTL if found else RETRY), found or open_id)
        self._cache.move_to_end(open_id)
        while len(self._cache) > SIZE:
            self._cache.popitem(last=False)
        return found or open_id

    async def _look_up(self, open_id: str) -> str | None:
        request = GetUserRequest.builder().user_id(open_id).user_id_type("open_id").build()
        try:
            response = await asyncio.to_thread(lambda: self.client.contact.v3.user.get(request))
        except Exception as exc:  # requests' errors, a refused token fetch
            log.warning("feishu: cannot look up a name (%s)", type(exc).__name__)
            return None
        if not response.success():
            log.warning("feishu: cannot look up a name: code %s %s", response.code, response.msg)
            return None
        user = response.data.user if response.data is not None else None
        name = getattr(user, "name", None) or getattr(user, "en_name", None)
        return str(name) if name else None
