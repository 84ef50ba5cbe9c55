"""A fake Feishu/Lark Open API (HTTP + long connection) plus builders of inbound event requests.

`FakeFeishu` serves on 127.0.0.1 from its own thread and event loop. That matters for Feishu:
lark-oapi fetches tenant tokens with a blocking `requests.post`, even from its `a*` methods, so a
fake sharing the client's event loop would deadlock. Point the real SDK at it:

    with FakeFeishu() as fake:
        client = (
            lark.Client.builder().app_id(APP_ID).app_secret(APP_SECRET).domain(fake.url).build()
        )  # fake.url is what FEISHU_DOMAIN is set to
        sent = fake.wait_for(lambda: fake.messages(chat_id="oc_chat1"))[0]

Open API (every answer is JSON with a `code`; errors use HTTP 400 like Feishu, or what
`fail_next` says):
  POST  /open-apis/auth/v3/tenant_access_token/internal   {app_id, app_secret} -> t-... token
  POST  /open-apis/auth/v3/app_access_token/internal      same, plus app_access_token
  GET   /open-apis/bot/v3/info                            the bot's open_id and name
  POST  /open-apis/im/v1/messages?receive_id_type=...     send (`uuid` = idempotency key)
  POST  /open-apis/im/v1/messages/{id}/reply              reply (`reply_in_thread`, `uuid`)
  PATCH /open-apis/im/v1/messages/{id}                    update a (shared) card: {content}
  PUT   /open-apis/im/v1/messages/{id}                    edit a text/post message
  DELETE /open-apis/im/v1/messages/{id}                   recall
  POST  /open-apis/im/v1/files                            upload (multipart) -> file_key
  GET   /open-apis/im/v1/messages, /messages/{id}, /messages/{id}/resources/{key},
        /open-apis/contact/v3/users/{id}                 reads: see tests/fake_feishu_history.py
  POST  /open-apis/im/v1/images                           upload (multipart) -> image_key
  POST  /open-apis/cardkit/v1/cards                       card entity {type: card_json, data}
  PUT   /open-apis/cardkit/v1/cards/{id}                  whole card {card: {type, data}, sequence}
  PATCH /open-apis/cardkit/v1/cards/{id}/settings         {settings: '{"config": ...}', sequence}
  PUT   /open-apis/cardkit/v1/cards/{id}/elements/{e}/content  {content, sequence}
  POST  /open-apis/cardkit/v1/cards/id_convert            {message_id} -> the card_id it shows
CardKit calls carry a `sequence` that must grow per card (else code 300317, as Feishu); a card
message may reference an entity (`{"type": "card", "data": {"card_id": ...}}`): `shown()` is
the card such a message shows now, `card()` an entity with every state it went through.
A `file` / `image` message must name a key uploaded here (`uploads()` holds them).
Everything under /open-apis/ needs `Authorization: Bearer <token this fake issued>`
(missing: code 99991661, unknown/expired: 99991663).

Long connection (what `lark_oapi.ws.Client` speaks): `POST /callback/ws/endpoint` hands out
`ws://127.0.0.1:PORT/ws?device_id=..&service_id=..` plus a `ClientConfig`; on `/ws` the fake
answers pings with pongs, `send_event` pushes protobuf DATA frames of type "event" and `acks()`
holds the frames the client sent back (`{"code": 200, "data": b64(handler result)}`).

The module-level builders produce what Feishu POSTs to an app's event URL: `message_event` /
`card_action_event` (the `event` part), `event_envelope` (schema 2.0), `encrypted_body`,
`signed_headers`, `challenge_body`; `encrypt` / `decrypt` are Feishu's AES-256-CBC scheme.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import BodyPartReader, WSCloseCode, WSMsgType, web
from Crypto.Cipher import AES
from lark_oapi.ws.pb.pbbp2_pb2 import Frame

from adapters.feishu.crypto import encrypt
from tests.fake_feishu_history import READ_KINDS, People
from tests.fake_feishu_history import classify as classify_read
from tests.http_client import post_bytes, post_bytes_sync
from tests.threaded_server import ThreadedServer

APP_ID = "cli_test"
APP_SECRET = "secret_test"
TENANT_KEY = "tenant1"
BOT_OPEN_ID = "ou_bot"
BOT_NAME = "clawgate"

JSON_CONTENT_TYPE = "application/json"

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
APP_TOKEN_PATH = "/open-apis/auth/v3/app_access_token/internal"
MESSAGES_PATH = "/open-apis/im/v1/messages"
UPLOAD_PATHS = {"/open-apis/im/v1/files": "file_upload", "/open-apis/im/v1/images": "image_upload"}
BOT_INFO_PATH = "/open-apis/bot/v3/info"
WS_ENDPOINT_PATH = "/callback/ws/endpoint"

# Feishu error codes the fake produces (HTTP 400 unless noted).
CODE_OK = 0
CODE_APP_SECRET_INVALID = 10014
CODE_TOKEN_MISSING = 99991661
CODE_TOKEN_INVALID = 99991663
CODE_RATE_LIMITED = 99991400  # gateway frequency limit, HTTP 429 + x-ogw-ratelimit-* headers
CODE_CHAT_RATE_LIMITED = 230020  # "This operation triggers the frequency limit."
CODE_INVALID_PARAM = 230001
CODE_MESSAGE_RECALLED = 230011
CODE_CONTENT_TOO_LONG = 230025
CODE_CARD_INVALID = 300301  # the card JSON / card id / element id is not one Feishu takes
CODE_CARD_SEQUENCE = 300317  # a CardKit sequence not above the card's last one
CARDKIT_PATH = "/open-apis/cardkit/v1/cards"

TEXT_LIMIT_BYTES = 150 * 1024  # text / post request body
CARD_LIMIT_BYTES = 30 * 1024  # interactive

# Long connection frame constants (lark_oapi/ws/enum.py, const.py).
FRAME_CONTROL = 0
FRAME_DATA = 1

_lock = threading.Lock()
_id_counter = itertools.count(1)


def _next_id() -> int:
    with _lock:
        return next(_id_counter)


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def new_message_id() -> str:
    """A fresh, process-unique `om_...` id."""
    return f"om_{_next_id():06d}{uuid.uuid4().hex[:26]}"


def new_event_id() -> str:
    return uuid.uuid4().hex


def new_thread_id() -> str:
    return f"omt_{uuid.uuid4().hex[:14]}"


# ---------------------------------------------------------------------------------------------
# Crypto and signatures (encrypting as Feishu does: adapters.feishu.crypto.encrypt)
# ---------------------------------------------------------------------------------------------


def _aes_key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode("utf-8")).digest()


def decrypt(encrypt_key: str, ciphertext: str) -> str:
    """Inverse of `encrypt` (raises ValueError on a wrong key / corrupt input)."""
    data = base64.b64decode(ciphertext)
    if len(data) < 2 * AES.block_size or len(data) % AES.block_size:
        raise ValueError("invalid ciphertext length")
    iv, body = data[: AES.block_size], data[AES.block_size :]
    plain = AES.new(_aes_key(encrypt_key), AES.MODE_CBC, iv).decrypt(body)
    pad = plain[-1]
    if not 1 <= pad <= AES.block_size or plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("invalid PKCS7 padding")
    return plain[:-pad].decode("utf-8")


def signature(encrypt_key: str, body: bytes, timestamp: str, nonce: str) -> str:
    """`X-Lark-Signature`: sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8") + body).hexdigest()


def signed_headers(
    encrypt_key: str,
    body: bytes,
    timestamp: int | str | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """Content-Type plus the three X-Lark-* headers Feishu adds to event/callback requests.

    Sign the exact bytes you post. lark-oapi checks the signature only when it has an encrypt
    key and has no timestamp window of its own (pass an old `timestamp` to test yours).
    """
    ts = str(int(time.time())) if timestamp is None else str(timestamp)
    nonce = nonce if nonce is not None else secrets.token_hex(8)
    return {
        "Content-Type": f"{JSON_CONTENT_TYPE}; charset=utf-8",
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": signature(encrypt_key, body, ts, nonce),
    }


# ---------------------------------------------------------------------------------------------
# Inbound bodies
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Origin:
    chat_id: str
    root_id: str | None
    thread_id: str | None


# message_id -> where an inbound message (built by `message_event`) lives, so that the fake can
# answer replies to user messages with the right chat_id / root_id.
_INBOUND: dict[str, _Origin] = {}


def event_envelope(
    event_type: str,
    event: Mapping[str, Any],
    *,
    token: str,
    event_id: str | None = None,
    app_id: str = APP_ID,
    tenant_key: str = TENANT_KEY,
    create_time: int | str | None = None,
) -> dict[str, Any]:
    """A schema 2.0 event/callback: `{"schema":"2.0","header":{...},"event":{...}}`.

    `token` is the app's verification token (`header.token`). Over the long connection the same
    envelope travels in plaintext; over HTTP wrap it with `encrypted_body` when the app has an
    encrypt key. `create_time` is a string of milliseconds like Feishu's.
    """
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id or new_event_id(),
            "event_type": event_type,
            "create_time": _now_ms() if create_time is None else str(create_time),
            "token": token,
            "app_id": app_id,
            "tenant_key": tenant_key,
        },
        "event": dict(event),
    }


def plain_body(envelope: Mapping[str, Any]) -> bytes:
    return json.dumps(envelope, ensure_ascii=False).encode("utf-8")


def encrypted_body(envelope: Mapping[str, Any], encrypt_key: str) -> bytes:
    """`{"encrypt": "<b64>"}` as posted by Feishu when the app has an encrypt key."""
    return json.dumps({"encrypt": encrypt(encrypt_key, json.dumps(envelope))}).encode("utf-8")


def event_request(
    envelope: Mapping[str, Any],
    *,
    encrypt_key: str | None,
    timestamp: int | str | None = None,
    nonce: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of an event POST: encrypted when `encrypt_key` is set, always signed
    (with an empty key when there is none, which lark-oapi then does not check)."""
    body = plain_body(envelope) if not encrypt_key else encrypted_body(envelope, encrypt_key)
    return body, signed_headers(encrypt_key or "", body, timestamp=timestamp, nonce=nonce)


def challenge_body(token: str, challenge: str, encrypt_key: str | None = None) -> bytes:
    """The `url_verification` request Feishu posts when the event URL is saved.

    Plaintext `{"challenge","token","type":"url_verification"}`, or `{"encrypt":...}` when an
    encrypt key is set. Feishu sends it WITHOUT signature headers; answer `{"challenge": ...}`.
    """
    payload = json.dumps({"challenge": challenge, "token": token, "type": "url_verification"})
    if encrypt_key:
        return json.dumps({"encrypt": encrypt(encrypt_key, payload)}).encode("utf-8")
    return payload.encode("utf-8")


def _user_id(open_id: str) -> dict[str, str]:
    suffix = open_id.removeprefix("ou_")
    return {"open_id": open_id, "user_id": f"u_{suffix}", "union_id": f"on_{suffix}"}


def message_event(
    text: str,
    *,
    chat_id: str = "oc_chat1",
    chat_type: str = "group",
    sender_open_id: str = "ou_alice",
    message_id: str | None = None,
    root_id: str | None = None,
    parent_id: str | None = None,
    thread_id: str | None = None,
    mentions: Iterable[tuple[str, str, str]] = (),
    tenant_key: str = TENANT_KEY,
    sender_type: str = "user",
    create_time: int | str | None = None,
) -> dict[str, Any]:
    """The `event` of an `im.message.receive_v1` text message.

    `text` is the raw text as Feishu delivers it: a mention is a placeholder key such as
    `"@_user_1 /approve abc"`, resolved through `mentions` = [(key, open_id, name), ...], e.g.
    `[("@_user_1", "ou_bot", "clawgate")]`. `chat_type` is "group" or "p2p". root_id /
    parent_id / thread_id are left out unless given (a top-level message has none). The message
    is remembered process-wide so that a `FakeFeishu` reply to it lands in `chat_id`.
    """
    message_id = message_id or new_message_id()
    created = _now_ms() if create_time is None else str(create_time)
    message: dict[str, Any] = {
        "message_id": message_id,
        "create_time": created,
        "update_time": created,
        "chat_id": chat_id,
        "chat_type": chat_type,
        "message_type": "text",
        "content": json.dumps({"text": text}, ensure_ascii=False),
        "mentions": [
            {"key": key, "id": _user_id(open_id), "name": name, "tenant_key": tenant_key}
            for key, open_id, name in mentions
        ],
        "user_agent": "Mozilla/5.0 Lark/7.0.0",
    }
    for key, value in (("root_id", root_id), ("parent_id", parent_id), ("thread_id", thread_id)):
        if value:
            message[key] = value
    with _lock:
        _INBOUND[message_id] = _Origin(chat_id, root_id or None, thread_id)
    return {
        "sender": {
            "sender_id": _user_id(sender_open_id),
            "sender_type": sender_type,
            "tenant_key": tenant_key,
        },
        "message": message,
    }


def card_action_event(
    value: Mapping[str, Any],
    *,
    operator_open_id: str = "ou_alice",
    open_message_id: str,
    open_chat_id: str = "oc_chat1",
    token: str | None = None,
    tag: str = "button",
    tenant_key: str = TENANT_KEY,
    form_value: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """The `event` of a `card.action.trigger` callback (button click on a card message):
    `value` is the clicked button's callback behaviour's (JSON 2.0), `name` the button's,
    `form_value` its form's inputs by name when it submits one.

    `token` is the callback's own `event.token` ("c-..."), used for delayed card updates; the
    verification token goes into `event_envelope(..., token=...)`. A handler answers with
    `P2CardActionTriggerResponse({"toast": {...}, "card": {"type": "raw", "data": {...}}})`.
    """
    action: dict[str, Any] = {"value": dict(value), "tag": tag}
    if form_value is not None:
        action["form_value"] = dict(form_value)
    if name is not None:
        action["name"] = name
    return {
        "operator": {"tenant_key": tenant_key, **_user_id(operator_open_id)},
        "token": token or f"c-{uuid.uuid4().hex}",
        "action": action,
        "host": "im_message",
        "context": {"open_message_id": open_message_id, "open_chat_id": open_chat_id},
    }


async def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    *,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """POST raw bytes (e.g. an event) to an app's endpoint; returns (status, response text)."""
    return await post_bytes(url, body, _json_headers(headers), timeout=timeout)


def post_sync(
    url: str,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    *,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """Blocking `post` (urllib, no proxies); HTTP errors are returned, not raised."""
    return post_bytes_sync(url, body, _json_headers(headers), timeout=timeout)


def _json_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    return {"Content-Type": f"{JSON_CONTENT_TYPE}; charset=utf-8", **(headers or {})}


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def _markdown_of(content: Any) -> str | None:
    """The markdown elements of a card (JSON 2.0 `body.elements`), joined; None if none."""
    body = content.get("body") if isinstance(content, dict) else None
    elements = body.get("elements") if isinstance(body, dict) else None
    found = [
        str(e["content"])
        for e in elements or []
        if isinstance(e, dict) and e.get("tag") == "markdown" and isinstance(e.get("content"), str)
    ]
    return "\n".join(found) if found else None


def _text_of(content: Any) -> str | None:
    """What decoded message content says in words: a text message's `text`, else the
    markdown of a card that holds some (an answer); None for other content."""
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return _markdown_of(content)


@dataclass(frozen=True)
class Call:
    """One HTTP request to the fake.

    `kind` is "token", "app_token", "bot_info", "send", "reply", "patch", "update", "delete",
    "endpoint", a read's, an upload's, "card_create", "card_update", "card_settings",
    "card_content", "card_id_convert" or "other"; `target_id` the message id in the path
    (reply/patch/update/delete; a CardKit call's card id, `card_id/element_id` for content);
    `body` the decoded JSON body. `duplicate` marks a send/reply answered from the uuid memory.
    """

    kind: str
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    target_id: str | None = None
    duplicate: bool = False
    at: float = field(default_factory=time.monotonic, compare=False)  # when it was answered

    @property
    def code(self) -> int | None:
        code = self.response.get("code")
        return code if isinstance(code, int) else None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.code == 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)

    @property
    def content(self) -> Any:
        """`body["content"]` decoded from its JSON string (None when absent or not JSON)."""
        raw = self.body.get("content")
        if not isinstance(raw, str):
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    @property
    def receive_id(self) -> str | None:
        return self.body.get("receive_id")

    @property
    def receive_id_type(self) -> str | None:
        return self.query.get("receive_id_type")

    @property
    def msg_type(self) -> str | None:
        return self.body.get("msg_type")

    @property
    def uuid(self) -> str | None:
        return self.body.get("uuid")

    @property
    def reply_in_thread(self) -> bool:
        return bool(self.body.get("reply_in_thread"))

    @property
    def message_id(self) -> str | None:
        """The message the call produced (send/reply) or targeted (patch/update/delete)."""
        data = self.response.get("data")
        if isinstance(data, dict) and isinstance(data.get("message_id"), str):
            return str(data["message_id"])
        return self.target_id

    @property
    def text(self) -> str | None:
        return _text_of(self.content)

    @property
    def markdown(self) -> str | None:
        """What a card's markdown elements say (an answer), None for other messages."""
        return _markdown_of(self.content)


@dataclass(frozen=True)
class StoredMessage:
    """A message the bot sent, with its current content (`content` is the decoded JSON)."""

    message_id: str
    chat_id: str | None
    msg_type: str
    content: Any
    raw_content: str
    app_id: str
    root_id: str | None = None
    parent_id: str | None = None
    thread_id: str | None = None
    uuid: str | None = None
    create_time: str = ""
    update_time: str = ""
    edits: int = 0
    history: tuple[Any, ...] = ()
    deleted: bool = False

    @property
    def text(self) -> str | None:
        return _text_of(self.content)

    @property
    def markdown(self) -> str | None:
        return _markdown_of(self.content)

    @property
    def is_reply(self) -> bool:
        return self.parent_id is not None


@dataclass(frozen=True)
class CardEntity:
    """A CardKit card entity: its JSON 2.0 card now, the last sequence, every state so far."""

    card_id: str
    app_id: str
    card: dict[str, Any]
    sequence: int = 0
    history: tuple[dict[str, Any], ...] = ()

    @property
    def streaming(self) -> bool:
        config = self.card.get("config")
        return isinstance(config, dict) and config.get("streaming_mode") is True

    def element(self, element_id: str) -> dict[str, Any] | None:
        return find_element(self.card, element_id)

    def content(self, element_id: str) -> str | None:
        found = self.element(element_id)
        return None if found is None else str(found.get("content", ""))


def find_element(card: Any, element_id: str) -> dict[str, Any] | None:
    """The element of a JSON 2.0 card with that `element_id`, at any depth."""
    if isinstance(card, dict):
        if card.get("element_id") == element_id:
            return card
        children = [v for k, v in card.items() if k in ("body", "elements", "columns")]
    elif isinstance(card, list):
        children = list(card)
    else:
        return None
    for child in children:
        found = find_element(child, element_id)
        if found is not None:
            return found
    return None


def _card_reference(content: Any) -> str | None:
    """The card_id of a message content sending a card entity, else None."""
    if isinstance(content, dict) and content.get("type") == "card":
        data = content.get("data")
        if isinstance(data, dict) and isinstance(data.get("card_id"), str):
            return str(data["card_id"])
    return None


def _classify_cardkit(method: str, path: str) -> tuple[str, str | None]:
    """CardKit's kinds; the target is `card_id`, or `card_id/element_id` for an element."""
    parts = path[len(CARDKIT_PATH) :].strip("/").split("/") if path != CARDKIT_PATH else []
    shapes = {
        ("POST", 0): "card_create",
        ("PUT", 1): "card_update",
        ("PATCH", 2): "card_settings",
        ("PUT", 4): "card_content",
    }
    if parts == ["id_convert"] and method == "POST":
        return "card_id_convert", None
    kind = shapes.get((method, len(parts)), "other")
    if kind == "card_settings" and parts[1] != "settings":
        return "other", None
    if kind == "card_content":
        if parts[1] != "elements" or parts[3] != "content":
            return "other", None
        return kind, f"{parts[0]}/{parts[2]}"
    return kind, parts[0] if parts else None


def _changed_card(
    kind: str, current: dict[str, Any], element_id: str, body: dict[str, Any]
) -> dict[str, Any] | str:
    """The card after a CardKit update, or why Feishu refuses it."""
    card: dict[str, Any] = json.loads(json.dumps(current))
    if kind == "card_content":
        element = find_element(card, element_id)
        if element is None or element.get("tag") not in ("markdown", "plain_text"):
            return f"no text element {element_id}"
        if not isinstance(body.get("content"), str):
            return "content is required"
        element["content"] = body["content"]
    elif kind == "card_settings":
        try:
            settings = json.loads(str(body.get("settings")))
        except ValueError:
            return "settings is not a JSON string"
        if not isinstance(settings, dict) or not isinstance(settings.get("config"), dict):
            return "settings.config is required"
        card["config"] = {**card.get("config", {}), **settings["config"]}
    else:  # card_update
        whole = body.get("card")
        if not isinstance(whole, dict) or whole.get("type") != "card_json":
            return "card.type must be card_json"
        try:
            card = json.loads(str(whole.get("data")))
        except ValueError:
            return "card.data is not a JSON string"
    return card


def _card_problem(card: Any) -> str | None:
    """Why CardKit refuses a card JSON, or None: JSON 2.0 only, unique element ids."""
    if not isinstance(card, dict) or str(card.get("schema", "")) != "2.0":
        return "cardkit takes card JSON 2.0 only"
    body = card.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("elements"), list):
        return "card body.elements is required"
    ids: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if "element_id" in node:
                ids.append(str(node["element_id"]))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(body)
    if len(ids) != len(set(ids)):
        return "element_id must be unique in a card"
    if len(json.dumps(card, ensure_ascii=False).encode()) > CARD_LIMIT_BYTES:
        return "card is too large"
    return None


@dataclass(frozen=True)
class Upload:
    """A file (im/v1/files: `file_type`, `file_name`) or image (im/v1/images: `image_type`)
    uploaded; `key` is the file_key / image_key handed back."""

    key: str
    kind: str  # "file" or "image"
    name: str
    type: str
    data: bytes


@dataclass(frozen=True)
class WsAck:
    """A frame a long-connection client sent back for a DATA frame.

    `code` is the client's verdict (200, or 500 when the handler raised); `data` the handler's
    return value (b64-decoded JSON, e.g. a card action response) or None.
    """

    message_id: str
    type: str
    code: int | None
    data: Any
    headers: dict[str, str]
    payload: dict[str, Any]


@dataclass(frozen=True)
class _Fault:
    code: int
    http_status: int
    msg: str
    retry_after: int
    auth_code: int | None = None


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    device_id: str
    service_id: int


_FAULT_KINDS = frozenset(
    {
        "token",
        "app_token",
        "bot_info",
        "send",
        "reply",
        "patch",
        "update",
        "delete",
        "endpoint",
        "ws_connect",
        *READ_KINDS,
        "resource",
        "file_upload",
        "image_upload",
        "card_create",
        "card_update",
        "card_settings",
        "card_content",
        "card_id_convert",
        "any",
    }
)


def _is_shared_card(card: Any) -> bool:
    if not isinstance(card, dict):
        return False
    if str(card.get("schema", "")) == "2.0" or _card_reference(card):
        return True  # JSON 2.0 cards (card entities are 2.0) are always shared
    config = card.get("config")
    return isinstance(config, dict) and config.get("update_multi") is True


# ---------------------------------------------------------------------------------------------
# The fake server
# ---------------------------------------------------------------------------------------------


class FakeFeishu(ThreadedServer):
    """Fake Feishu Open API + long-connection endpoint, served from its own thread."""

    thread_name = "fake-feishu"
    connections = "long connection(s)"

    def __init__(
        self,
        *,
        apps: Mapping[str, str] | None = None,
        latency: float = 0.0,
        token_expire: int = 7200,
        tenant_key: str = TENANT_KEY,
        bot_open_id: str = BOT_OPEN_ID,
        bot_name: str = BOT_NAME,
        service_id: int = 1,
        ping_interval: int = 120,
        reconnect_interval: int = 1,
        reconnect_nonce: int = 0,
        reconnect_count: int = -1,
        require_shared_cards: bool = True,
        patch_limit_per_second: int | None = None,
    ) -> None:
        """`apps` maps app_id -> app_secret (default {APP_ID: APP_SECRET}); `token_expire` must
        stay > 600 or lark-oapi's cache (expire - 600 s) never holds the token. `ClientConfig`
        values go to long-connection clients (ReconnectNonce 0 = reconnect without jitter).
        `require_shared_cards`: PATCH needs `config.update_multi: true` (or a schema 2.0 card).
        `patch_limit_per_second`: answer 230020 past that many PATCHes per message per second
        (Feishu's limit is 5; None = unlimited)."""
        super().__init__()
        self.latency = latency
        self.token_expire = token_expire
        self.tenant_key = tenant_key
        self.bot_open_id = bot_open_id
        self.bot_name = bot_name
        self.service_id = service_id
        self.client_config: dict[str, int] = {
            "ReconnectCount": reconnect_count,
            "ReconnectInterval": reconnect_interval,
            "ReconnectNonce": reconnect_nonce,
            "PingInterval": ping_interval,
        }
        self.require_shared_cards = require_shared_cards
        self.patch_limit_per_second = patch_limit_per_second
        self.people = People(tenant_key=tenant_key)  # what people posted, attached, are called
        self._lock = threading.Lock()
        self._apps: dict[str, str] = dict(apps) if apps is not None else {APP_ID: APP_SECRET}
        self._tokens: dict[str, str] = {}  # token -> app_id
        self._calls: list[Call] = []
        self._attempts: list[Call] = []
        self._messages: dict[str, StoredMessage] = {}
        self._by_uuid: dict[str, str] = {}
        self._uploads: dict[str, Upload] = {}
        self._cards: dict[str, CardEntity] = {}
        self.upload_delay = 0.0  # seconds an upload takes to answer (to kill a process during)
        self.uploading = 0  # uploads under way (received, not answered yet)
        self._patch_times: dict[str, deque[float]] = {}
        self._faults: dict[str, deque[_Fault]] = {}
        self._acks: list[WsAck] = []
        self._sockets: list[_Socket] = []
        self._ws_connects = 0
        self._pings = 0
        self._frames_sent = 0

    # -- addresses and routes -----------------------------------------------------------------

    @property
    def url(self) -> str:
        """Origin for `lark.Client.builder().domain(...)` / `lark.ws.Client(domain=...)`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def _routes(self, app: web.Application) -> None:
        app.router.add_post(TOKEN_PATH, self._token)
        app.router.add_post(APP_TOKEN_PATH, self._token)
        app.router.add_post(WS_ENDPOINT_PATH, self._endpoint)
        app.router.add_get("/ws", self._websocket)
        app.router.add_route("*", "/open-apis/{tail:.*}", self._open_api)

    # -- apps and tokens ----------------------------------------------------------------------

    def add_app(self, app_id: str, app_secret: str) -> None:
        with self._lock:
            self._apps[app_id] = app_secret

    def new_app(self) -> tuple[str, str]:
        """Register a fresh (app_id, app_secret): lark-oapi caches tenant tokens per app_id in a
        process-wide `TokenManager.cache`, so a fresh app_id per test avoids stale tokens."""
        n = _next_id()
        app_id, secret = f"cli_test{n:06d}{uuid.uuid4().hex[:6]}", f"secret_{uuid.uuid4().hex}"
        self.add_app(app_id, secret)
        return app_id, secret

    def expire_tokens(self, app_id: str | None = None) -> None:
        """Invalidate issued tokens server-side: the next API call answers 99991663 (lark-oapi
        keeps using its cached token until you clear `TokenManager.cache`)."""
        with self._lock:
            for token, owner in list(self._tokens.items()):
                if app_id is None or owner == app_id:
                    del self._tokens[token]

    def token_fetches(self, app_id: str | None = None) -> list[Call]:
        """Successful tenant/app token requests (what lark-oapi does on a cache miss)."""
        return [
            c
            for c in self.calls()
            if c.kind in ("token", "app_token")
            and c.ok
            and (app_id is None or c.body.get("app_id") == app_id)
        ]

    @property
    def token_fetch_count(self) -> int:
        return len(self.token_fetches())

    # -- HTTP plumbing ------------------------------------------------------------------------

    async def _read(self, request: web.Request) -> tuple[dict[str, Any], dict[str, str]]:
        body: dict[str, Any] = {}
        if request.content_type.startswith("multipart/"):  # uploads: the file part's bytes
            # lark-oapi sends the file part without a filename: read parts raw, not as a form.
            async for part in await request.multipart():
                if isinstance(part, BodyPartReader) and part.name:
                    data = bytes(await part.read())
                    body[part.name] = data if part.name in ("file", "image") else data.decode()
            raw = ""
        else:
            raw = await request.text()
        if raw:
            try:
                decoded = json.loads(raw)
            except ValueError:
                decoded = {"_raw": raw}
            body = decoded if isinstance(decoded, dict) else {"_raw": decoded}
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return body, dict(request.headers)

    def _take_fault(self, kind: str) -> _Fault | None:
        with self._lock:
            for key in (kind, "any"):
                queue = self._faults.get(key)
                if queue:
                    return queue.popleft()
        return None

    def _respond(
        self,
        call: Call,
        *,
        handled: bool,
        extra_headers: Mapping[str, str] | None = None,
    ) -> web.Response:
        with self._lock:
            self._attempts.append(call)
            if handled:
                self._calls.append(call)
        headers = {"X-Tt-Logid": f"fake{_next_id():08d}", **(extra_headers or {})}
        return web.json_response(call.response, status=call.status, headers=headers)

    def _fault_response(self, call: Call, fault: _Fault) -> web.Response:
        body = {"code": fault.code, "msg": fault.msg, "error": {"log_id": "fake"}}
        extra: dict[str, str] = {}
        if fault.http_status == 429:
            extra = {
                "x-ogw-ratelimit-limit": "50",
                "x-ogw-ratelimit-reset": str(fault.retry_after),
            }
        return self._respond(
            replace(call, status=fault.http_status, response=body),
            handled=False,
            extra_headers=extra,
        )

    # -- tokens ---------------------------------------------------------------------------------

    async def _token(self, request: web.Request) -> web.Response:
        body, headers = await self._read(request)
        kind = "app_token" if request.path == APP_TOKEN_PATH else "token"
        call = Call(kind, request.method, request.path, dict(request.query), headers, body)
        fault = self._take_fault(kind)
        if fault is not None:
            return self._fault_response(call, fault)
        app_id, secret = body.get("app_id"), body.get("app_secret")
        with self._lock:
            known = isinstance(app_id, str) and self._apps.get(app_id) == secret
            if not known:
                response: dict[str, Any] = {
                    "code": CODE_APP_SECRET_INVALID,
                    "msg": "app secret invalid",
                }
                status = 400
            else:
                token = f"t-{secrets.token_hex(20)}"
                self._tokens[token] = str(app_id)
                response = {
                    "code": 0,
                    "msg": "ok",
                    "tenant_access_token": token,
                    "expire": self.token_expire,
                }
                if kind == "app_token":
                    response["app_access_token"] = f"a-{secrets.token_hex(20)}"
                    self._tokens[response["app_access_token"]] = str(app_id)
                status = 200
        return self._respond(replace(call, status=status, response=response), handled=True)

    # -- Open API -------------------------------------------------------------------------------

    @staticmethod
    def _classify(method: str, path: str) -> tuple[str, str | None]:
        read, target, _ = classify_read(method, path)
        if read:
            return read, target
        if path == BOT_INFO_PATH and method == "GET":
            return "bot_info", None
        if path == MESSAGES_PATH and method == "POST":
            return "send", None
        if path in UPLOAD_PATHS and method == "POST":
            return UPLOAD_PATHS[path], None
        if path.startswith(CARDKIT_PATH):
            return _classify_cardkit(method, path)
        prefix = MESSAGES_PATH + "/"
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            if rest.endswith("/reply") and method == "POST":
                return "reply", rest[: -len("/reply")]
            if "/" not in rest and rest:
                by_method = {"PATCH": "patch", "PUT": "update", "DELETE": "delete"}
                if method in by_method:
                    return by_method[method], rest
        return "other", None

    async def _open_api(self, request: web.Request) -> web.Response:
        body, headers = await self._read(request)
        kind, target = self._classify(request.method, request.path)
        call = Call(
            kind, request.method, request.path, dict(request.query), headers, body, target_id=target
        )
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not auth[len("Bearer ") :].strip():
            response = {
                "code": CODE_TOKEN_MISSING,
                "msg": "Missing access token for authorization.",
            }
            return self._respond(replace(call, status=400, response=response), handled=False)
        with self._lock:
            app_id = self._tokens.get(auth[len("Bearer ") :].strip())
        if app_id is None:
            response = {
                "code": CODE_TOKEN_INVALID,
                "msg": "Invalid access token for authorization. Please make a request with token"
                " attached.",
            }
            return self._respond(replace(call, status=400, response=response), handled=False)
        fault = self._take_fault(kind)
        if fault is not None:
            return self._fault_response(call, fault)
        if kind == "file_upload" and self.upload_delay:
            await self._slow_upload()
        if kind == "resource":  # bytes, not JSON
            _, message_id, key = classify_read(request.method, request.path)
            self._respond(call, handled=True)
            return await self.people.resource(str(message_id), str(key), call.query)
        with self._lock:
            status, response, duplicate = self._handle(kind, target, call, app_id)
        return self._respond(
            replace(call, status=status, response=response, duplicate=duplicate), handled=True
        )

    async def _slow_upload(self) -> None:
        with self._lock:
            self.uploading += 1
        try:
            await asyncio.sleep(self.upload_delay)
        finally:
            with self._lock:
                self.uploading -= 1

    @staticmethod
    def _error(code: int, msg: str) -> tuple[int, dict[str, Any], bool]:
        return 400, {"code": code, "msg": msg, "error": {"log_id": "fake"}}, False

    def _handle(
        self, kind: str, target: str | None, call: Call, app_id: str
    ) -> tuple[int, dict[str, Any], bool]:
        """Method logic; runs under self._lock. Returns (http status, body, duplicate)."""
        if kind == "bot_info":
            bot = {
                "activate_status": 2,
                "app_name": self.bot_name,
                "avatar_url": "",
                "ip_white_list": [],
                "open_id": self.bot_open_id,
            }
            return 200, {"code": 0, "msg": "ok", "bot": bot}, False
        if kind in ("send", "reply"):
            return self._create(kind, target, call, app_id)
        if kind in READ_KINDS:
            bots = [self._data(m) for m in self._messages.values()]
            return (*self.people.answer(kind, target, call.query, bots), False)
        if kind in ("file_upload", "image_upload"):
            return self._upload(kind, call.body)
        if kind in ("patch", "update", "delete"):
            assert target is not None
            return self._modify(kind, target, call)
        if kind.startswith("card_"):
            return self._cardkit(kind, target, call, app_id)
        return 404, {"code": 404, "msg": f"FakeFeishu: {call.method} {call.path} not faked"}, False

    def _upload(self, kind: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], bool]:
        what = kind.removesuffix("_upload")
        data, type_ = body.get(what), body.get(f"{what}_type")
        name = body.get("file_name", "") if what == "file" else "image"
        if not isinstance(data, bytes) or not data or not type_ or not name:
            return self._error(CODE_INVALID_PARAM, f"invalid request parameter: {what}")
        key = f"{what}_v3_{uuid.uuid4().hex}"
        self._uploads[key] = Upload(key, what, str(name), str(type_), data)
        return 200, {"code": 0, "msg": "success", "data": {f"{what}_key": key}}, False

    def _validate_content(self, msg_type: Any, content: Any) -> tuple[Any, str] | str:
        if not isinstance(msg_type, str) or not msg_type:
            return "msg_type is required"
        if not isinstance(content, str) or not content:
            return "content is required"
        try:
            decoded = json.loads(content)
        except ValueError:
            return "content is not a valid JSON string"
        limit = CARD_LIMIT_BYTES if msg_type == "interactive" else TEXT_LIMIT_BYTES
        if len(content.encode("utf-8")) > limit:
            return "too long"
        if msg_type == "text" and not (isinstance(decoded, dict) and "text" in decoded):
            return 'text content must be {"text": ...}'
        card_id = _card_reference(decoded) if msg_type == "interactive" else None
        if card_id is not None and card_id not in self._cards:
            return f"card_id {card_id} is not a card entity"
        if msg_type in ("file", "image"):
            key = decoded.get(f"{msg_type}_key") if isinstance(decoded, dict) else None
            upload = self._uploads.get(key) if isinstance(key, str) else None
            if upload is None or upload.kind != msg_type:
                return f"{msg_type}_key was not uploaded"
        return decoded, content

    def _create(
        self, kind: str, target: str | None, call: Call, app_id: str
    ) -> tuple[int, dict[str, Any], bool]:
        body = call.body
        key = body.get("uuid")
        if isinstance(key, str) and key and key in self._by_uuid:
            existing = self._messages[self._by_uuid[key]]
            return 200, {"code": 0, "msg": "success", "data": self._data(existing)}, True
        checked = self._validate_content(body.get("msg_type"), body.get("content"))
        if checked == "too long":
            return self._error(
                CODE_CONTENT_TOO_LONG, "The length of the message content reaches its limit."
            )
        if isinstance(checked, str):
            return self._error(CODE_INVALID_PARAM, f"invalid request parameter: {checked}")
        decoded, raw = checked
        root_id = parent_id = thread_id = None
        if kind == "send":
            receive_id_type = call.query.get("receive_id_type")
            receive_id = body.get("receive_id")
            if receive_id_type not in ("chat_id", "open_id", "user_id", "union_id", "email"):
                return self._error(99992402, "field validation failed: receive_id_type")
            if not isinstance(receive_id, str) or not receive_id:
                return self._error(CODE_INVALID_PARAM, "invalid request parameter: receive_id")
            chat_id: str | None = (
                receive_id if receive_id_type == "chat_id" else f"oc_p2p_{receive_id}"
            )
        else:
            assert target is not None
            parent = self._messages.get(target)
            if parent is not None:
                if parent.deleted:
                    return self._error(CODE_MESSAGE_RECALLED, "The message is recalled.")
                chat_id, parent_root, parent_thread = (
                    parent.chat_id,
                    parent.root_id,
                    parent.thread_id,
                )
            else:
                origin = _INBOUND.get(target)
                chat_id = origin.chat_id if origin else None
                parent_root = origin.root_id if origin else None
                parent_thread = origin.thread_id if origin else None
            root_id = parent_root or target
            parent_id = target
            thread_id = parent_thread
            if body.get("reply_in_thread") and thread_id is None:
                thread_id = new_thread_id()
        now = _now_ms()
        message = StoredMessage(
            message_id=new_message_id(),
            chat_id=chat_id,
            msg_type=str(body["msg_type"]),
            content=decoded,
            raw_content=raw,
            app_id=app_id,
            root_id=root_id,
            parent_id=parent_id,
            thread_id=thread_id,
            uuid=key if isinstance(key, str) and key else None,
            create_time=now,
            update_time=now,
            history=(decoded,),
        )
        self._messages[message.message_id] = message
        if message.uuid:
            self._by_uuid[message.uuid] = message.message_id
        return 200, {"code": 0, "msg": "success", "data": self._data(message)}, False

    def _data(self, message: StoredMessage) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": message.message_id,
            "msg_type": message.msg_type,
            "create_time": message.create_time,
            "update_time": message.update_time,
            "deleted": message.deleted,
            "updated": message.edits > 0,
            "chat_id": message.chat_id,
            "sender": {
                "id": message.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": self.tenant_key,
            },
            "body": {"content": message.raw_content},
        }
        for key in ("root_id", "parent_id", "thread_id"):
            value = getattr(message, key)
            if value is not None:
                data[key] = value
        return data

    def _modify(self, kind: str, target: str, call: Call) -> tuple[int, dict[str, Any], bool]:
        stored = self._messages.get(target)
        if stored is None:
            return self._error(CODE_INVALID_PARAM, f"invalid request parameter: {target}")
        if stored.deleted:
            return self._error(CODE_MESSAGE_RECALLED, "The message is recalled.")
        if kind == "delete":
            self._messages[target] = replace(stored, deleted=True, update_time=_now_ms())
            return 200, {"code": 0, "msg": "success", "data": {}}, False
        msg_type = "interactive" if kind == "patch" else call.body.get("msg_type")
        checked = self._validate_content(msg_type, call.body.get("content"))
        if checked == "too long":
            return self._error(
                CODE_CONTENT_TOO_LONG, "The length of the message content reaches its limit."
            )
        if isinstance(checked, str):
            return self._error(CODE_INVALID_PARAM, f"invalid request parameter: {checked}")
        decoded, raw = checked
        if kind == "patch":
            if stored.msg_type != "interactive":
                return self._error(CODE_INVALID_PARAM, "only card messages can be patched")
            if self.require_shared_cards and not (
                _is_shared_card(stored.content) and _is_shared_card(decoded)
            ):
                return self._error(
                    CODE_INVALID_PARAM,
                    "card is not shared: set config.update_multi=true (FakeFeishu check)",
                )
            if self.patch_limit_per_second is not None:
                now = time.monotonic()
                times = self._patch_times.setdefault(target, deque())
                while times and now - times[0] > 1.0:
                    times.popleft()
                if len(times) >= self.patch_limit_per_second:
                    return self._error(
                        CODE_CHAT_RATE_LIMITED, "This operation triggers the frequency limit."
                    )
                times.append(now)
        elif stored.msg_type not in ("text", "post") or msg_type not in ("text", "post"):
            return self._error(CODE_INVALID_PARAM, "only text and post messages can be edited")
        updated = replace(
            stored,
            msg_type=str(msg_type),
            content=decoded,
            raw_content=raw,
            edits=stored.edits + 1,
            history=(*stored.history, decoded),
            update_time=_now_ms(),
        )
        self._messages[target] = updated
        data: dict[str, Any] = {} if kind == "patch" else self._data(updated)
        return 200, {"code": 0, "msg": "success", "data": data}, False

    # -- CardKit ------------------------------------------------------------------------------

    def _cardkit(
        self, kind: str, target: str | None, call: Call, app_id: str
    ) -> tuple[int, dict[str, Any], bool]:
        body = call.body
        if kind == "card_create":
            if body.get("type") != "card_json" or not isinstance(body.get("data"), str):
                return self._error(CODE_CARD_INVALID, "type must be card_json, data a string")
            return self._new_card(str(body["data"]), app_id)
        if kind == "card_id_convert":
            stored = self._messages.get(str(body.get("message_id", "")))
            card_id = _card_reference(stored.content) if stored is not None else None
            if card_id is None:
                return self._error(CODE_CARD_INVALID, "the message does not show a card entity")
            return 200, {"code": 0, "msg": "success", "data": {"card_id": card_id}}, False
        assert target is not None
        card_id, _, element_id = target.partition("/")
        entity = self._cards.get(card_id)
        if entity is None or entity.app_id != app_id:
            return self._error(CODE_CARD_INVALID, f"card {card_id} not found")
        sequence = body.get("sequence")
        if not isinstance(sequence, int) or sequence <= entity.sequence:
            return self._error(CODE_CARD_SEQUENCE, "sequence number compare failed")
        card = _changed_card(kind, entity.card, element_id, body)
        if isinstance(card, str):
            return self._error(CODE_CARD_INVALID, card)
        problem = _card_problem(card)
        if problem is not None:
            return self._error(CODE_CARD_INVALID, problem)
        self._cards[card_id] = replace(
            entity, card=card, sequence=sequence, history=(*entity.history, card)
        )
        return 200, {"code": 0, "msg": "success", "data": {}}, False

    def _new_card(self, data: str, app_id: str) -> tuple[int, dict[str, Any], bool]:
        try:
            card = json.loads(data)
        except ValueError:
            return self._error(CODE_CARD_INVALID, "data is not a JSON string")
        problem = _card_problem(card)
        if problem is not None:
            return self._error(CODE_CARD_INVALID, problem)
        card_id = str(7_300_000_000_000_000_000 + _next_id())
        self._cards[card_id] = CardEntity(card_id, app_id, card, history=(card,))
        return 200, {"code": 0, "msg": "success", "data": {"card_id": card_id}}, False

    # -- long connection ----------------------------------------------------------------------

    async def _endpoint(self, request: web.Request) -> web.Response:
        body, headers = await self._read(request)
        call = Call("endpoint", request.method, request.path, dict(request.query), headers, body)
        fault = self._take_fault("endpoint")
        if fault is not None:
            return self._fault_response(call, fault)
        with self._lock:
            app_id, secret = body.get("AppID"), body.get("AppSecret")
            known = isinstance(app_id, str) and self._apps.get(app_id) == secret
        if not known:
            # lark-oapi raises ClientException for any code but 0/1/1000040343: no retry.
            response: dict[str, Any] = {
                "code": CODE_APP_SECRET_INVALID,
                "msg": "app secret invalid",
            }
            return self._respond(replace(call, response=response), handled=True)
        device_id = f"d{_next_id()}"
        response = {
            "code": 0,
            "msg": "ok",
            "data": {
                "URL": f"{self.ws_url}?device_id={device_id}&service_id={self.service_id}",
                "ClientConfig": dict(self.client_config),
            },
        }
        return self._respond(replace(call, response=response), handled=True)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        fault = self._take_fault("ws_connect")
        if fault is not None:
            headers = {"handshake-status": str(fault.code), "handshake-msg": fault.msg}
            if fault.auth_code is not None:
                headers["handshake-autherrcode"] = str(fault.auth_code)
            return web.Response(status=fault.http_status, headers=headers, text=fault.msg)
        ws = web.WebSocketResponse(timeout=2.0, max_msg_size=0)
        await ws.prepare(request)
        try:
            service_id = int(request.query.get("service_id", self.service_id))
        except ValueError:
            service_id = self.service_id
        entry = _Socket(ws, request.query.get("device_id", ""), service_id)
        with self._lock:
            self._sockets.append(entry)
            self._ws_connects += 1
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    await self._on_frame(entry, bytes(msg.data))
        finally:
            with self._lock:
                if entry in self._sockets:
                    self._sockets.remove(entry)
        return ws

    async def _on_frame(self, entry: _Socket, data: bytes) -> None:
        frame = Frame()
        try:
            frame.ParseFromString(data)
        except Exception:
            return
        headers = {h.key: h.value for h in frame.headers}
        if frame.method == FRAME_CONTROL:
            if headers.get("type") == "ping":
                with self._lock:
                    self._pings += 1
                pong = self._frame(
                    FRAME_CONTROL,
                    {"type": "pong"},
                    json.dumps(self.client_config).encode("utf-8"),
                    entry.service_id,
                )
                with contextlib.suppress(Exception):
                    await entry.ws.send_bytes(pong.SerializeToString())
            return
        try:
            payload = json.loads(bytes(frame.payload).decode("utf-8"))
        except ValueError:
            payload = {"_raw": bytes(frame.payload).decode("utf-8", "replace")}
        if not isinstance(payload, dict):
            payload = {"_raw": payload}
        result: Any = None
        encoded = payload.get("data")
        if isinstance(encoded, str) and encoded:
            try:
                result = json.loads(base64.b64decode(encoded))
            except ValueError:
                result = encoded
        code = payload.get("code")
        ack = WsAck(
            message_id=headers.get("message_id", ""),
            type=headers.get("type", ""),
            code=code if isinstance(code, int) else None,
            data=result,
            headers=headers,
            payload=payload,
        )
        with self._lock:
            self._acks.append(ack)

    def _frame(
        self, method: int, headers: Mapping[str, str], payload: bytes, service_id: int
    ) -> Any:
        frame = Frame()
        with self._lock:
            self._frames_sent += 1
            seq_id = self._frames_sent
        frame.SeqID = seq_id
        frame.LogID = seq_id
        frame.service = service_id
        frame.method = method
        for key, value in headers.items():
            header = frame.headers.add()
            header.key = key
            header.value = value
        frame.payload = payload
        return frame

    async def _send_frames(
        self,
        payload: bytes,
        message_type: str,
        message_id: str,
        trace_id: str,
        parts: int,
        broadcast: bool,
    ) -> int:
        with self._lock:
            open_sockets = [s for s in self._sockets if not s.ws.closed]
        if not open_sockets:
            raise RuntimeError("no long-connection client is connected to FakeFeishu")
        targets = open_sockets if broadcast else open_sockets[-1:]
        parts = max(1, min(parts, len(payload)))
        size = -(-len(payload) // parts)
        chunks = [payload[i * size : (i + 1) * size] for i in range(parts)]
        chunks = [c for c in chunks if c]
        for target in targets:
            for seq, chunk in enumerate(chunks):
                headers = {
                    "type": message_type,
                    "message_id": message_id,
                    "sum": str(len(chunks)),
                    "seq": str(seq),
                    "trace_id": trace_id,
                }
                frame = self._frame(FRAME_DATA, headers, chunk, target.service_id)
                await target.ws.send_bytes(frame.SerializeToString())
        return len(targets)

    def send_event(
        self,
        envelope: Mapping[str, Any],
        *,
        message_type: str = "event",
        message_id: str | None = None,
        trace_id: str | None = None,
        parts: int = 1,
        broadcast: bool = False,
    ) -> str:
        """Push `envelope` (plaintext schema 2.0 JSON, e.g. from `event_envelope`) to the newest
        long connection (all of them with `broadcast`); returns the frame message_id.

        `parts` > 1 splits the payload over several frames (sum/seq headers) like Feishu does
        for big events. Card callbacks (`card.action.trigger`) travel as type "event" too: the
        SDK ignores type "card" frames without acking. Raises RuntimeError without a client.
        Thread-safe; do not call from the fake's own thread (use `asend_event` in async tests).
        """
        frame_message_id = message_id or f"m_{uuid.uuid4().hex}"
        payload = json.dumps(envelope, ensure_ascii=False).encode("utf-8")
        self._run(
            self._send_frames(
                payload,
                message_type,
                frame_message_id,
                trace_id or uuid.uuid4().hex,
                parts,
                broadcast,
            )
        )
        return frame_message_id

    async def asend_event(
        self,
        envelope: Mapping[str, Any],
        *,
        message_type: str = "event",
        message_id: str | None = None,
        trace_id: str | None = None,
        parts: int = 1,
        broadcast: bool = False,
    ) -> str:
        return await asyncio.to_thread(
            self.send_event,
            envelope,
            message_type=message_type,
            message_id=message_id,
            trace_id=trace_id,
            parts=parts,
            broadcast=broadcast,
        )

    async def _close_sockets(self) -> None:
        """Close every long connection (lark-oapi reconnects: endpoint discovery again, then a
        new /ws connection)."""
        with self._lock:
            sockets = list(self._sockets)
        for entry in sockets:
            with contextlib.suppress(Exception):
                await entry.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server closed")

    @property
    def connection_count(self) -> int:
        with self._lock:
            return sum(1 for s in self._sockets if not s.ws.closed)

    @property
    def connects(self) -> int:
        """How many long connections were ever accepted (grows on reconnects)."""
        with self._lock:
            return self._ws_connects

    @property
    def pings(self) -> int:
        with self._lock:
            return self._pings

    def acks(self) -> list[WsAck]:
        with self._lock:
            return list(self._acks)

    def ack_for(self, message_id: str) -> WsAck | None:
        with self._lock:
            return next((a for a in self._acks if a.message_id == message_id), None)

    def wait_for_ack(self, message_id: str, timeout: float = 10.0) -> WsAck:
        return self.wait_for(
            lambda: self.ack_for(message_id), timeout, what=f"ack of frame {message_id}"
        )

    async def await_ack(self, message_id: str, timeout: float = 10.0) -> WsAck:
        return await self.await_for(
            lambda: self.ack_for(message_id), timeout, what=f"ack of frame {message_id}"
        )

    # -- fault injection ----------------------------------------------------------------------

    def fail_next(
        self,
        kind: str,
        *,
        code: int = CODE_RATE_LIMITED,
        http_status: int = 429,
        msg: str | None = None,
        times: int = 1,
        retry_after: int = 1,
        auth_code: int | None = None,
    ) -> None:
        """Answer the next `times` requests of `kind` with `{"code": code, "msg": msg}` and HTTP
        `http_status` (default: gateway rate limit 99991400 / 429 with `x-ogw-ratelimit-reset:
        retry_after`; per-chat send limit is `code=230020, http_status=400`).

        kinds: token, app_token, bot_info, send, reply, patch, update, delete, endpoint, any
        (the next API/token/endpoint call) and ws_connect (the websocket handshake answers
        `http_status` with `handshake-status: code`, `handshake-msg`, and
        `handshake-autherrcode: auth_code` when given). Faulted requests appear in `attempts()`,
        not `calls()`. lark-oapi ignores the HTTP status and reads the body's `code`.
        """
        if kind not in _FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {sorted(_FAULT_KINDS)}")
        fault = _Fault(code, http_status, msg or "request trigger frequency limit", retry_after)
        if auth_code is not None:
            fault = replace(fault, auth_code=auth_code)
        with self._lock:
            self._faults.setdefault(kind, deque()).extend(fault for _ in range(times))

    def recall(self, message_id: str) -> None:
        """Mark a stored message as recalled (replies/patches to it answer 230011)."""
        with self._lock:
            stored = self._messages.get(message_id)
            if stored is not None:
                self._messages[message_id] = replace(stored, deleted=True)

    # -- inspection ---------------------------------------------------------------------------

    def calls(self, path_prefix: str | None = None) -> list[Call]:
        """Requests the fake answered itself (faults and token failures excluded)."""
        with self._lock:
            return [c for c in self._calls if path_prefix is None or c.path.startswith(path_prefix)]

    def attempts(self, path_prefix: str | None = None) -> list[Call]:
        """Every request, including injected faults and auth failures."""
        with self._lock:
            return [
                c for c in self._attempts if path_prefix is None or c.path.startswith(path_prefix)
            ]

    def _ok(self, kind: str) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if c.kind == kind and c.ok]

    def sends(self, chat_id: str | None = None) -> list[Call]:
        """Successful sends (a uuid repeat is here too, with `duplicate=True`)."""
        return [c for c in self._ok("send") if chat_id is None or c.receive_id == chat_id]

    def replies(self, message_id: str | None = None) -> list[Call]:
        """Successful replies, optionally to one message."""
        return [c for c in self._ok("reply") if message_id is None or c.target_id == message_id]

    def patches(self, message_id: str | None = None) -> list[Call]:
        """Successful card updates (PATCH)."""
        return [c for c in self._ok("patch") if message_id is None or c.target_id == message_id]

    def updates(self, message_id: str | None = None) -> list[Call]:
        """Successful text/post edits (PUT)."""
        return [c for c in self._ok("update") if message_id is None or c.target_id == message_id]

    def message(self, message_id: str) -> StoredMessage | None:
        with self._lock:
            stored = self._messages.get(message_id)
            return None if stored is None else self._resolved(stored)

    def _resolved(self, message: StoredMessage) -> StoredMessage:
        """A message sending a card entity, with that card's current JSON as its content."""
        card_id = _card_reference(message.content)
        return message if card_id is None else replace(message, content=self._cards[card_id].card)

    def card(self, card_id: str) -> CardEntity | None:
        with self._lock:
            return self._cards.get(card_id)

    def cards(self) -> list[CardEntity]:
        """Card entities created, in creation order."""
        with self._lock:
            return list(self._cards.values())

    def shown(self, message_id: str) -> Any:
        """The card (or other content) a message shows now: a card entity's current JSON for
        a message that sends one."""
        stored = self.message(message_id)
        return None if stored is None else stored.content

    def uploads(self, key: str | None = None) -> list[Upload]:
        """Files and images uploaded (im/v1/files, im/v1/images), in upload order."""
        with self._lock:
            return [u for u in self._uploads.values() if key is None or u.key == key]

    def messages(
        self,
        chat_id: str | None = None,
        *,
        root_id: str | None = None,
        thread_id: str | None = None,
        include_deleted: bool = False,
    ) -> list[StoredMessage]:
        """Messages the bot sent (one per uuid), in creation order, with current content."""
        with self._lock:
            return [
                self._resolved(m)
                for m in self._messages.values()
                if (chat_id is None or m.chat_id == chat_id)
                and (root_id is None or m.root_id == root_id)
                and (thread_id is None or m.thread_id == thread_id)
                and (include_deleted or not m.deleted)
            ]

    def clear(self) -> None:
        """Forget calls, messages, uuids, faults and acks (apps and tokens stay valid)."""
        with self._lock:
            self._calls.clear()
            self._attempts.clear()
            self._messages.clear()
            self._by_uuid.clear()
            self._uploads.clear()
            self._cards.clear()
            self._patch_times.clear()
            self._faults.clear()
            self._acks.clear()

    def describe(self) -> str:
        """Human-readable log of what the fake saw (used in timeout messages)."""
        with self._lock:
            attempts = list(self._attempts)
            acks = list(self._acks)
            connected = sum(1 for s in self._sockets if not s.ws.closed)
            connects, pings = self._ws_connects, self._pings
        lines = [f"{len(attempts)} HTTP request(s):"]
        for c in attempts:
            shown = {
                k: v
                for k, v in c.body.items()
                if k in ("receive_id", "msg_type", "content", "uuid", "reply_in_thread", "app_id")
            }
            result = "ok" if c.ok else f"{c.status} code={c.code}"
            lines.append(f"  {c.kind} {c.method} {c.path} [{result}] {_short(shown)}")
        lines.append(
            f"long connections: {connected} open, {connects} accepted, {pings} ping(s); "
            f"{len(acks)} ack(s):"
        )
        lines.extend(f"  {a.message_id} code={a.code} data={_short(a.data)}" for a in acks)
        return "\n".join(lines)


def reset_lark_token_cache() -> None:
    """Forget every tenant/app token lark-oapi cached (process-wide `TokenManager.cache`)."""
    from lark_oapi.core.token.manager import TokenManager  # noqa: PLC0415

    cache = getattr(TokenManager.cache, "cache", None)
    if isinstance(cache, dict):
        cache.clear()


def _short(value: object, limit: int = 160) -> str:
    text = (
        json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, str) else value
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."
