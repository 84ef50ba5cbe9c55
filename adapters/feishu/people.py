"""People's display names for the thread context, through Feishu's contact API
(`contact.v3.user.get`, which needs `contact:user.base:readonly`), kept by `NameCache`: a
look-up that fails leaves the open_id as the name (and is not asked again soon)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lark_oapi.api.contact.v3 import GetUserRequest

from adapters.names import NameCache

log = logging.getLogger(__name__)

SIZE = 1024  # names kept
TTL = 3600.0  # seconds a name is kept
RETRY = 300.0  # seconds before a failed look-up is tried again


def names(client: Any) -> NameCache:
    async def look_up(open_id: str) -> str | None:
        request = GetUserRequest.builder().user_id(open_id).user_id_type("open_id").build()
        try:
            response = await asyncio.to_thread(lambda: client.contact.v3.user.get(request))
        except Exception as exc:  # requests' errors, a refused token fetch
            log.warning("feishu: cannot look up a name (%s)", type(exc).__name__)
            return None
        if not response.success():
            log.warning("feishu: cannot look up a name: code %s %s", response.code, response.msg)
            return None
        user = response.data.user if response.data is not None else None
        name = getattr(user, "name", None) or getattr(user, "en_name", None)
        return str(name) if name else None

    return NameCache(look_up, SIZE, TTL, RETRY)
