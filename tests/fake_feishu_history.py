"""What people posted, attached and are called, for `FakeFeishu` to answer the reads clawgate
makes through lark-oapi (`FakeFeishu.people`):

  GET /open-apis/im/v1/messages?container_id_type=chat|thread&container_id=..
      &sort_type=ByCreateTimeAsc|ByCreateTimeDesc&page_size=1..50&page_token=..
                                     a chat (its top-level messages) or a thread (its replies,
                                     not the root, which `GET /messages/{root}` gives)
  GET /open-apis/im/v1/messages/{id}                 {"items": [the message]}
  GET /open-apis/im/v1/messages/{id}/resources/{key}?type=image|file
                                     the bytes, with Content-Type and Content-Disposition
  GET /open-apis/contact/v3/users/{open_id}?user_id_type=open_id   {"user": {"name", ...}}

Messages are listed with the bot's own (what the fake stored for its sends and replies), in
the shape of Feishu's message API: `sender` {id, id_type, sender_type}, `body.content`,
`mentions` [{key, id, id_type, name}]. A person's message gets here by `post(event)` with
the `event` of `message_event` (or `content_event`), the message clawgate is reading too.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from aiohttp import web

READ_KINDS = ("list", "get", "user")
CODE_INVALID_PARAM = 230001
CODE_MESSAGE_NOT_FOUND = 230002
CODE_RESOURCE_NOT_FOUND = 234003  # the key is not one of the message's resources
CODE_USER_NOT_FOUND = 41050  # outside the app's contact scope
SORTS = ("ByCreateTimeAsc", "ByCreateTimeDesc")


@dataclass(frozen=True)
class Resource:
    data: bytes
    content_type: str
    name: str
    kind: str  # "image" or "file": the `type` a download must ask for


@dataclass
class People:
    """Thread-safe: tests call it from their loop, the fake's thread answers from it."""

    tenant_key: str = "tenant1"
    users: dict[str, str] = field(default_factory=dict)  # open_id -> name
    _posted: dict[str, dict[str, Any]] = field(default_factory=dict)
    _resources: dict[tuple[str, str], Resource] = field(default_factory=dict)
    _held: dict[str, threading.Event] = field(default_factory=dict)
    _downloads: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- what tests set up --------------------------------------------------------------------

    def post(self, event: Mapping[str, Any]) -> str:
        """Record a person's message (an `im.message.receive_v1` event's `event`)."""
        message, sender = event["message"], event["sender"]
        item: dict[str, Any] = {
            "message_id": message["message_id"],
            "msg_type": message["message_type"],
            "create_time": str(message["create_time"]),
            "update_time": str(message.get("update_time", message["create_time"])),
            "deleted": False,
            "updated": False,
            "chat_id": message["chat_id"],
            "sender": {  # another app's message names it by its app id
                "id": sender["sender_id"]["open_id"],
                "id_type": "app_id" if sender.get("sender_type") == "app" else "open_id",
                "sender_type": sender.get("sender_type", "user"),
                "tenant_key": self.tenant_key,
            },
            "body": {"content": message["content"]},
            "mentions": [
                {
                    "key": m["key"],
                    "id": m["id"]["open_id"],
                    "id_type": "open_id",
                    "name": m["name"],
                    "tenant_key": self.tenant_key,
                }
                for m in message.get("mentions", [])
            ],
        }
        for key in ("root_id", "parent_id", "thread_id"):
            if message.get(key):
                item[key] = message[key]
        with self._lock:
            self._posted[item["message_id"]] = item
        return str(item["message_id"])

    def attach(
        self,
        message_id: str,
        key: str,
        data: bytes,
        content_type: str,
        name: str = "",
        kind: str = "file",
    ) -> None:
        """A resource of `message_id` (an image: `kind="image"`)."""
        with self._lock:
            self._resources[(message_id, key)] = Resource(data, content_type, name or key, kind)

    def hold(self, key: str) -> threading.Event:
        """Downloads of `key` wait until the returned event is set (a slow transfer)."""
        with self._lock:
            return self._held.setdefault(key, threading.Event())

    def downloads(self, key: str | None = None) -> list[tuple[str, str]]:
        """(message_id, key) of every download asked for, answered or not."""
        with self._lock:
            return [d for d in self._downloads if key is None or d[1] == key]

    # -- what the fake answers ----------------------------------------------------------------

    def answer(
        self,
        kind: str,
        target: str | None,
        query: Mapping[str, str],
        bots: Sequence[dict[str, Any]],
    ) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of a list/get/user call; `bots`: the bot's messages, as
        Feishu's message API shows them."""
        with self._lock:
            items = [*bots, *self._posted.values()]
            if kind == "user":
                return self._user(str(target), query)
            if kind == "get":
                found = [i for i in items if i["message_id"] == target]
                if not found:
                    return _error(CODE_MESSAGE_NOT_FOUND, "message not found")
                return 200, _ok({"items": found})
            return self._list(items, query)

    def _list(
        self, items: list[dict[str, Any]], query: Mapping[str, str]
    ) -> tuple[int, dict[str, Any]]:
        kind, container = query.get("container_id_type"), query.get("container_id")
        sort = query.get("sort_type", SORTS[0])
        try:
            size, start = int(query.get("page_size", "20")), int(query.get("page_token") or 0)
        except ValueError:
            return _error(CODE_INVALID_PARAM, "invalid page_size or page_token")
        if kind not in ("chat", "thread") or not container or sort not in SORTS:
            return _error(
                CODE_INVALID_PARAM, "invalid container_id_type, container_id or sort_type"
            )
        if not 1 <= size <= 50:
            return _error(CODE_INVALID_PARAM, "page_size must be 1 to 50")
        if kind == "thread":
            chosen = [i for i in items if i.get("thread_id") == container and i.get("root_id")]
        else:  # a chat lists thread roots, not the replies in them
            chosen = [
                i
                for i in items
                if i["chat_id"] == container and not (i.get("thread_id") and i.get("root_id"))
            ]
        chosen.sort(key=lambda i: int(i["create_time"]), reverse=sort == SORTS[1])
        page = chosen[start : start + size]
        more = start + size < len(chosen)
        return 200, _ok(
            {"has_more": more, "page_token": str(start + size) if more else "", "items": page}
        )

    def _user(self, open_id: str, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        if query.get("user_id_type", "open_id") != "open_id":
            return _error(99992402, "field validation failed: user_id_type")
        name = self.users.get(open_id)
        if name is None:
            return _error(CODE_USER_NOT_FOUND, "no user authority")
        return 200, _ok({"user": {"open_id": open_id, "name": name, "en_name": name}})

    async def resource(self, message_id: str, key: str, query: Mapping[str, str]) -> web.Response:
        """The download, after any `hold` on it is released."""
        with self._lock:
            self._downloads.append((message_id, key))
            found = self._resources.get((message_id, key))
            held = self._held.get(key)
        while held is not None and not held.is_set():
            await asyncio.sleep(0.02)
        if found is None:
            return web.json_response(
                _error(CODE_RESOURCE_NOT_FOUND, "resource not found")[1], status=400
            )
        if query.get("type") != found.kind:
            return web.json_response(
                _error(CODE_INVALID_PARAM, f"type must be {found.kind}")[1], status=400
            )
        disposition = f"attachment; filename*=UTF-8''{quote(found.name)}"
        return web.Response(
            body=found.data,
            headers={"Content-Type": found.content_type, "Content-Disposition": disposition},
        )


def classify(method: str, path: str) -> tuple[str, str | None, str | None]:
    """(kind, message or user id, resource key) of a read, or ("", None, None)."""
    if method != "GET":
        return "", None, None
    if path == "/open-apis/im/v1/messages":
        return "list", None, None
    users = "/open-apis/contact/v3/users/"
    if path.startswith(users) and "/" not in path[len(users) :]:
        return "user", path[len(users) :], None
    rest = path.removeprefix("/open-apis/im/v1/messages/")
    if rest == path or not rest:
        return "", None, None
    parts = rest.split("/")
    if len(parts) == 1:
        return "get", parts[0], None
    if len(parts) == 3 and parts[1] == "resources":
        return "resource", parts[0], parts[2]
    return "", None, None


def content_event(event: dict[str, Any], message_type: str, content: Any) -> dict[str, Any]:
    """`event` (from `message_event`) as a message of another type: `content` is its JSON
    (an image's {"image_key"}, a file's {"file_key", "file_name"}, a post's body...)."""
    event["message"]["message_type"] = message_type
    event["message"]["content"] = json.dumps(content, ensure_ascii=False)
    return event


def _ok(data: dict[str, Any]) -> dict[str, Any]:
    return {"code": 0, "msg": "success", "data": data}


def _error(code: int, msg: str) -> tuple[int, dict[str, Any]]:
    return 400, {"code": code, "msg": msg, "error": {"log_id": "fake"}}
