"""A fake Slack (Web API, Socket Mode, response_url) plus builders of signed inbound requests.

`FakeSlack` serves on 127.0.0.1 from its own thread and event loop, so it keeps answering while
a test blocks and is reachable from worker subprocesses. Point the real clients at it:

    with FakeSlack() as fake:
        client = AsyncWebClient(token="xoxb-test", base_url=fake.base_url)  # SLACK_API_URL
        ...
        post = fake.wait_for(lambda: fake.posts(channel="C111"))[0]

Web API: `POST /api/{method}` (JSON or form body, plus query string), needs
`Authorization: Bearer xoxb-...` (`xapp-...` for `apps.connections.open`), answers HTTP 200 JSON
like Slack. Socket Mode: `GET /socket` says hello, `send_envelope` pushes envelopes, `acks()`
holds what the client sent back. `POST /response/{id}` stands in for `response_url`s;
`POST /upload/{file_id}` for the upload URLs files.getUploadURLExternal hands out (`files()`
holds what files.completeUploadExternal shared).

The module-level builders produce the exact bodies Slack posts to an app (`event_body`,
`command_body`, `block_action_body`, `view_submission_body`) and `sign` / `signed_headers` sign them
the way Slack does. The `*_payload` variants return the dicts that Socket Mode envelopes carry.

Every `ts` handed out (bot messages here, inbound events from the builders) comes from one
process-wide counter, so they are unique and strictly increasing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ParamSpec
from urllib.parse import parse_qsl, urlencode

from aiohttp import WSCloseCode, WSMsgType, web

from tests.http_client import post_bytes
from tests.threaded_server import ThreadedServer

P = ParamSpec("P")

BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T111"
APP_ID = "A111"
BOT_NAME = "clawgate"

JSON_CONTENT_TYPE = "application/json"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
DEFAULT_RESPONSE_URL = "https://hooks.slack.com/commands/T111/1/fake"

_TS_BASE = 1_700_000_000_000_100  # microseconds; first ts is "1700000000.000101"
_counter_lock = threading.Lock()
_ts_counter = itertools.count(1)
_id_counter = itertools.count(1)


def next_ts() -> str:
    """A new message ts, unique in this process and strictly increasing ("1700000000.000101")."""
    with _counter_lock:
        micros = _TS_BASE + next(_ts_counter)
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def _next_id() -> int:
    with _counter_lock:
        return next(_id_counter)


def new_trigger_id() -> str:
    n = _next_id()
    return f"{1000000 + n}.{2000000 + n}.{uuid.uuid4().hex[:32]}"


def new_event_id() -> str:
    return f"Ev{_next_id():010d}"


# ---------------------------------------------------------------------------------------------
# Signing
# ---------------------------------------------------------------------------------------------


def sign(secret: str, body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack adds to every request it sends an app.

    `X-Slack-Signature` is `"v0=" + hmac_sha256(secret, f"v0:{ts}:{body}")`, identical to
    `slack_sdk.signature.SignatureVerifier(secret).generate_signature(timestamp=..., body=...)`:

    >>> from slack_sdk.signature import SignatureVerifier
    >>> h = sign("s3cret", '{"a":1}', timestamp=1700000000)
    >>> h["X-Slack-Signature"] == SignatureVerifier("s3cret").generate_signature(
    ...     timestamp="1700000000", body='{"a":1}')
    True

    Slack (and bolt) reject timestamps more than 300 s away from now; pass an old `timestamp` to
    test that.
    """
    ts = int(time.time()) if timestamp is None else int(timestamp)
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    digest = hmac.new(
        secret.encode("utf-8"), f"v0:{ts}:{text}".encode(), hashlib.sha256
    ).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


def content_type_of(body: bytes | str) -> str:
    """JSON for Events API bodies, form-encoded for commands and interactions (as Slack sends)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    return JSON_CONTENT_TYPE if text.lstrip().startswith("{") else FORM_CONTENT_TYPE


def signed_headers(
    secret: str,
    body: bytes | str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    retry_reason: str = "http_timeout",
) -> dict[str, str]:
    """Content-Type + signature headers (+ `X-Slack-Retry-Num/Reason` for a redelivery)."""
    headers = {"Content-Type": content_type_of(body), **sign(secret, body, timestamp)}
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason
    return headers


async def post_signed(
    url: str,
    secret: str,
    body: str,
    *,
    timestamp: int | None = None,
    retry_num: int | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> tuple[int, str]:
    """POST a signed body to an app's HTTP endpoint; returns (status, response text)."""
    headers = signed_headers(secret, body, timestamp=timestamp, retry_num=retry_num)
    headers.update(extra_headers or {})
    return await post_bytes(url, body.encode("utf-8"), headers, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Inbound bodies (HTTP mode) and payloads (Socket Mode)
# ---------------------------------------------------------------------------------------------


def mention_event(
    text: str,
    *,
    user: str = "U_ALICE",
    channel: str = "C111",
    ts: str | None = None,
    thread_ts: str | None = None,
    team_id: str = TEAM_ID,
    bot_user_id: str = BOT_USER_ID,
) -> dict[str, Any]:
    """An `app_mention` event. `<@UBOT> ` is prepended unless `text` already mentions the bot.

    Slack escapes `&`, `<`, `>` in message text (`&amp;`, `&lt;`, `&gt;`); pass text escaped
    the same way to be realistic. `ts` defaults to a fresh unique ts.
    """
    mention = f"<@{bot_user_id}>"
    full_text = text if mention in text else f"{mention} {text}"
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "app_mention",
        "client_msg_id": str(uuid.uuid4()),
        "user": user,
        "text": full_text,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def message_event(
    text: str,
    *,
    user: str = "U_ALICE",
    channel: str = "C111",
    ts: str | None = None,
    thread_ts: str | None = None,
    channel_type: str = "channel",
    bot_id: str | None = None,
    subtype: str | None = None,
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """A `message` event (`channel_type` "im" for DMs, "channel"/"group"/"mpim" otherwise)."""
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if bot_id is None:
        event["client_msg_id"] = str(uuid.uuid4())
    else:
        event["bot_id"] = bot_id
    if subtype is not None:
        event["subtype"] = subtype
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def assistant_thread_event(
    channel: str,
    thread_ts: str,
    *,
    kind: str = "assistant_thread_started",
    user: str = "U_ALICE",
    context_channel: str = "C111",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """`assistant_thread_started` (or `assistant_thread_context_changed`): a person opened the
    assistant view, a thread in their DM with the bot (`channel`), while looking at
    `context_channel`."""
    return {
        "type": kind,
        "assistant_thread": {
            "user_id": user,
            "context": {"channel_id": context_channel, "team_id": team_id, "enterprise_id": None},
            "channel_id": channel,
            "thread_ts": thread_ts,
        },
        "event_ts": next_ts(),
    }


def event_payload(
    event: dict[str, Any],
    *,
    event_id: str | None = None,
    team_id: str = TEAM_ID,
    api_app_id: str = APP_ID,
    event_time: int | None = None,
    bot_user_id: str = BOT_USER_ID,
) -> dict[str, Any]:
    """The `event_callback` body Slack posts (also the payload of an `events_api` envelope)."""
    return {
        "token": "legacy",
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(time.time()) if event_time is None else event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{uuid.uuid4().hex}",
    }


def command_payload(
    command: str,
    text: str,
    *,
    user_id: str = "U_ALICE",
    user_name: str = "alice",
    channel_id: str = "C111",
    channel_name: str = "general",
    team_id: str = TEAM_ID,
    team_domain: str = "example",
    api_app_id: str = APP_ID,
    response_url: str = DEFAULT_RESPONSE_URL,
    trigger_id: str | None = None,
) -> dict[str, str]:
    """Slash command fields (a `slash_commands` Socket Mode payload is exactly this dict)."""
    return {
        "token": "legacy",
        "team_id": team_id,
        "team_domain": team_domain,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": api_app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def block_action_payload(
    action_id: str,
    value: str,
    *,
    user: str = "U_ALICE",
    user_name: str = "alice",
    channel: str = "C111",
    message_ts: str,
    thread_ts: str | None = None,
    team_id: str = TEAM_ID,
    api_app_id: str = APP_ID,
    block_id: str = "approval",
    message_text: str = "",
    message_blocks: list[dict[str, Any]] | None = None,
    response_url: str = DEFAULT_RESPONSE_URL,
    trigger_id: str | None = None,
    action_type: str = "button",
) -> dict[str, Any]:
    """A `block_actions` payload for a button click on the message at `message_ts`
    (`action_type` "feedback_buttons": a 👍/👎 under an answer, the clicked one's value).

    bolt reads user from `user.id`, team from `team.id`, channel from `channel.id` and the thread
    from `message.thread_ts` (there is no top-level thread_ts in real payloads).
    """
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    message: dict[str, Any] = {
        "type": "message",
        "user": BOT_USER_ID,
        "bot_id": BOT_ID,
        "ts": message_ts,
        "text": message_text,
        "blocks": message_blocks or [],
    }
    if thread_ts is not None:
        container["thread_ts"] = thread_ts
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "legacy",
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": {"id": team_id, "domain": "example"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "type": action_type,
                "action_id": action_id,
                "block_id": block_id,
                **(
                    {"text": {"type": "plain_text", "text": action_id, "emoji": True}}
                    if action_type == "button"
                    else {}
                ),
                "value": value,
                "action_ts": next_ts(),
            }
        ],
    }


def view_submission_payload(
    callback_id: str,
    private_metadata: str,
    values: dict[str, Any],
    *,
    user: str = "U_ALICE",
    user_name: str = "alice",
    team_id: str = TEAM_ID,
    api_app_id: str = APP_ID,
    view_id: str = "V1",
    trigger_id: str | None = None,
) -> dict[str, Any]:
    """A `view_submission` payload. `values` is `view.state.values`:
    `{block_id: {action_id: {"type": "plain_text_input", "value": "..."}}}`.

    There is no channel in a view submission; carry it in `private_metadata`.
    """
    return {
        "type": "view_submission",
        "team": {"id": team_id, "domain": "example"},
        "user": {"id": user, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "legacy",
        "trigger_id": trigger_id or new_trigger_id(),
        "view": {
            "id": view_id,
            "team_id": team_id,
            "type": "modal",
            "blocks": [],
            "private_metadata": private_metadata,
            "callback_id": callback_id,
            "state": {"values": values},
            "hash": uuid.uuid4().hex[:20],
            "title": {"type": "plain_text", "text": "clawgate"},
            "app_id": api_app_id,
            "app_installed_team_id": team_id,
            "bot_id": BOT_ID,
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def _encoded(payload: Callable[P, Any], encode: Callable[[Any], str], doc: str) -> Callable[P, str]:
    """A body builder: `payload(...)` with the same arguments, then `encode`d."""

    def body(*args: P.args, **kwargs: P.kwargs) -> str:
        return encode(payload(*args, **kwargs))

    body.__doc__ = doc
    return body


def _interaction(payload: Any) -> str:
    return urlencode({"payload": json.dumps(payload)})


event_body = _encoded(
    event_payload, json.dumps, "JSON body of an Events API request (`application/json`)."
)
command_body = _encoded(
    command_payload,
    urlencode,
    "Form-encoded slash command body. Use `FakeSlack.new_response_url()` for `response_url`.",
)
block_action_body = _encoded(
    block_action_payload, _interaction, "Form-encoded `payload=<json>`, as Slack posts clicks."
)
view_submission_body = _encoded(
    view_submission_payload, _interaction, "Form-encoded `payload=<json>` of a modal submission."
)


# ---------------------------------------------------------------------------------------------
# The fake server
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One Web API request. `params` merges query string and JSON/form body (a JSON-looking
    `blocks`/`attachments`/`metadata` form value is decoded); `token` never appears in it."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic, compare=False)  # when it was answered

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.response.get("ok"))

    @property
    def is_notice(self) -> bool:
        """Block Kit blocks other than an answer's (its markdown block, the tool calls that
        led to it, its feedback buttons): an approval notice."""
        blocks = self.params.get("blocks")
        return isinstance(blocks, list) and any(
            isinstance(b, dict) and b.get("type") not in ("markdown", "context", "context_actions")
            for b in blocks
        )

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


@dataclass(frozen=True)
class StoredMessage:
    channel: str
    ts: str
    text: str | None
    blocks: list[Any] | None
    thread_ts: str | None = None
    edits: int = 0
    metadata: dict[str, Any] | None = None
    files: tuple[dict[str, Any], ...] = ()  # a file share: the files' objects
    user: str | None = None  # who wrote it (the bot's user id for its own posts)
    bot_id: str | None = None
    streaming: bool = False  # started by chat.startStream and not stopped yet
    streamed: bool = False  # started by chat.startStream
    appends: int = 0  # chat.appendStream calls that grew it


@dataclass(frozen=True)
class HostedFile:
    """A file a person shared (`add_file`), downloadable at its `url_private_download` with
    the bot token, `chunk_delay` seconds between pieces of `chunk` bytes (a slow download).
    `redirect`: an authorized download is sent there instead (another host, say); `public`:
    served without a token (a pre-signed URL of a file host)."""

    id: str
    name: str
    mimetype: str
    content: bytes
    chunk: int = 64 * 1024
    chunk_delay: float = 0.0
    redirect: str | None = None
    public: bool = False


@dataclass(frozen=True)
class Download:
    """One GET of a hosted file's URL: the headers it came with, how far it got."""

    file_id: str
    headers: dict[str, str]
    status: int
    sent: int = 0  # bytes of the file written to the client
    completed: bool = False


@dataclass(frozen=True)
class SharedFile:
    """A file uploaded through files.getUploadURLExternal + the upload URL, then shared by
    files.completeUploadExternal (`channel` "" when completed without one)."""

    id: str
    name: str
    title: str
    data: bytes
    channel: str
    thread_ts: str | None
    ts: str | None  # of the file share message


@dataclass(frozen=True)
class ResponseCall:
    """A POST to a fake `response_url`; `body` is the decoded JSON (or `{"raw": text}`)."""

    response_id: str
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(frozen=True)
class _Fault:
    status: int
    error: str
    retry_after: int | None
    after: bool = False  # act on the call first, then fail (the answer "got lost")
    page: str | None = None  # answer with this text instead of JSON (a proxy's error page)


_READS = ("conversations.replies", "conversations.history", "users.info", "files.info")
_JSON_PARAMS = ("blocks", "attachments", "metadata", "view", "files", "chunks", "prompts")
_STREAMS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


class FakeSlack(ThreadedServer):
    """Fake Slack Web API + Socket Mode + response_url endpoint, served from its own thread."""

    thread_name = "fake-slack"
    connections = "socket connection(s)"

    def __init__(
        self,
        *,
        latency: float = 0.0,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
        team_id: str = TEAM_ID,
        app_id: str = APP_ID,
        bot_name: str = BOT_NAME,
    ) -> None:
        super().__init__()
        self.latency = latency
        self.upload_delay = 0.0  # seconds an upload URL takes to answer
        self.slow_answers: dict[str, float] = {}  # method -> seconds its answer waits, acted on
        self.uploading = 0  # uploads under way (received, not answered yet)
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self.app_id = app_id
        self.bot_name = bot_name
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._attempts: list[Call] = []
        self._messages: dict[tuple[str, str], StoredMessage] = {}
        self._faults: dict[str, deque[_Fault]] = {}
        self._overrides: dict[str, dict[str, Any]] = {}
        self._responses: list[ResponseCall] = []
        self._acks: list[dict[str, Any]] = []
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_connects = 0
        self._uploads: dict[str, dict[str, Any]] = {}  # file id -> filename, length, data
        self._shared: list[SharedFile] = []
        self._users: dict[str, dict[str, Any]] = {}
        self._hosted: dict[str, HostedFile] = {}
        self._downloads: list[Download] = []
        # The error chat.startStream/appendStream/stopStream answer with, as a workspace that
        # does not offer streaming does (None: streaming works).
        self.refuse_streaming: str | None = None

    # -- addresses and routes -----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """Web API base for `AsyncWebClient(base_url=...)` / SLACK_API_URL (ends with /api/)."""
        return f"{self.url}/api/"

    @property
    def socket_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_get("/socket", self._socket)
        app.router.add_post("/response/{id}", self._response_url)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files-pri/{owner}/{rest:.*}", self._download)
        app.router.add_get("/signin", self._signin)

    # -- Web API ------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        params.update(await _read_params(request))
        for key in _JSON_PARAMS:
            value = params.get(key)
            if isinstance(value, str) and value[:1] in ("[", "{"):
                with contextlib.suppress(ValueError):
                    params[key] = json.loads(value)
        headers = dict(request.headers)
        if self.latency > 0:
            await asyncio.sleep(self.latency)

        auth = request.headers.get("Authorization", "")
        prefix = "Bearer xapp-" if method == "apps.connections.open" else "Bearer xoxb-"
        if not auth.startswith(prefix) or len(auth) <= len(prefix):
            body: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
            self._record(Call(method, params, headers, 200, body), handled=False)
            return web.json_response(body)

        with self._lock:
            queue = self._faults.get(method)
            fault = queue.popleft() if queue else None
        if fault is not None and fault.after:
            with self._lock:
                done = self._handle(method, params)
                self._calls.append(Call(method, params, headers, 200, done))
        if fault is not None:
            body = {"ok": False, "error": fault.error}
            extra = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            self._record(Call(method, params, headers, fault.status, body), handled=False)
            if fault.page is not None:
                return web.Response(text=fault.page, status=fault.status, content_type="text/plain")
            return web.json_response(body, status=fault.status, headers=extra)

        with self._lock:
            body = self._handle(method, params)
            self._calls.append(Call(method, params, headers, 200, body))
            self._attempts.append(Call(method, params, headers, 200, body))
        await asyncio.sleep(self.slow_answers.get(method, 0.0))  # acted, not answered yet
        return web.json_response(body)

    def _record(self, call: Call, *, handled: bool) -> None:
        with self._lock:
            self._attempts.append(call)
            if handled:
                self._calls.append(call)

    def _handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Method logic; runs under self._lock."""
        if method in self._overrides:
            return dict(self._overrides[method])
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://example.slack.com/",
                "team": "Example",
                "user": self.bot_name,
                "team_id": self.team_id,
                "user_id": self.bot_user_id,
                "bot_id": self.bot_id,
                "is_enterprise_install": False,
            }
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url}
        if method == "chat.postMessage":
            channel = params.get("channel")
            if not channel:
                return {"ok": False, "error": "channel_not_found"}
            if not params.get("text") and not params.get("blocks"):
                return {"ok": False, "error": "no_text"}
            ts = next_ts()
            thread_ts = params.get("thread_ts") or None
            metadata = params.get("metadata")
            self._messages[(channel, ts)] = StoredMessage(
                channel=channel,
                ts=ts,
                text=params.get("text"),
                blocks=params.get("blocks"),
                thread_ts=thread_ts,
                metadata=metadata if isinstance(metadata, dict) else None,
                user=self.bot_user_id,
                bot_id=self.bot_id,
            )
            message = {
                **{k: v for k, v in params.items() if k != "channel"},
                "type": "message",
                "user": self.bot_user_id,
                "bot_id": self.bot_id,
                "ts": ts,
            }
            return {"ok": True, "channel": channel, "ts": ts, "message": message}
        if method == "chat.update":
            return self._update(params)
        if method == "chat.delete":
            channel, ts = params.get("channel", ""), params.get("ts", "")
            self._messages.pop((channel, ts), None)
            return {"ok": True, "channel": channel, "ts": ts}
        if method in _READS:
            return self._read(method, params)
        if method in _STREAMS:
            return self._stream_call(method, params)
        if method == "files.getUploadURLExternal":
            return self._upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete_upload(params)
        return _simple(method, params)

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        """chat.update: text, blocks and metadata replaced."""
        channel, ts = params.get("channel", ""), params.get("ts", "")
        stored = self._messages.get((channel, ts))
        if stored is None:
            return {"ok": False, "error": "message_not_found"}
        if stored.streaming:  # a stream is finished by chat.stopStream first
            return {"ok": False, "error": "cant_update_message"}
        metadata = params.get("metadata")
        self._messages[(channel, ts)] = replace(
            stored,
            text=params.get("text", stored.text),
            blocks=params.get("blocks", stored.blocks),
            edits=stored.edits + 1,
            metadata=metadata if isinstance(metadata, dict) else stored.metadata,
        )
        return {
            "ok": True,
            "channel": channel,
            "ts": ts,
            "text": params.get("text", stored.text or ""),
            "message": {"text": params.get("text", stored.text or ""), "ts": ts},
        }

    def _stream_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """chat.startStream (a reply in a thread; outside a DM for a named recipient),
        chat.appendStream (its text grows) and chat.stopStream (the last text, blocks under
        it, metadata): one message that grows, listed as it is so far."""
        if self.refuse_streaming:
            return {"ok": False, "error": self.refuse_streaming}
        channel, text = str(params.get("channel", "")), str(params.get("markdown_text") or "")
        chunks: list[Any] = params["chunks"] if isinstance(params.get("chunks"), list) else []
        text += "".join(str(c.get("text", "")) for c in chunks if c.get("type") == "markdown_text")
        if method == "chat.startStream":
            thread_ts = params.get("thread_ts")
            named = params.get("recipient_user_id") and params.get("recipient_team_id")
            if not channel or not thread_ts or not (named or channel.startswith("D")):
                return {"ok": False, "error": "invalid_arguments"}
            ts = next_ts()
            self._messages[(channel, ts)] = StoredMessage(
                channel,
                ts,
                text,
                None,
                str(thread_ts),
                user=self.bot_user_id,
                bot_id=self.bot_id,
                streaming=True,
                streamed=True,
            )
            return {"ok": True, "channel": channel, "ts": ts}
        ts = str(params.get("ts", ""))
        stored = self._messages.get((channel, ts))
        if stored is None:
            return {"ok": False, "error": "message_not_found"}
        if not stored.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        grown = (stored.text or "") + text
        if method == "chat.appendStream":
            if not text:
                return {"ok": False, "error": "invalid_arguments"}
            self._messages[(channel, ts)] = replace(stored, text=grown, appends=stored.appends + 1)
            return {"ok": True, "channel": channel, "ts": ts}
        metadata = params.get("metadata")
        below: list[Any] = params["blocks"] if isinstance(params.get("blocks"), list) else []
        self._messages[(channel, ts)] = replace(
            stored,
            text=grown,
            blocks=[{"type": "markdown", "text": grown}, *below],
            metadata=metadata if isinstance(metadata, dict) else None,
            streaming=False,
        )
        message = {"ts": ts, "text": grown, "user": self.bot_user_id, "bot_id": self.bot_id}
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """What was said (conversations.*), who someone is (users.info of an `add_user`),
        a shared file (files.info of an `add_file`)."""
        if method in ("conversations.replies", "conversations.history"):
            return self._history(method, params)
        if method == "users.info":
            user = self._users.get(str(params.get("user", "")))
            return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
        hosted = self._hosted.get(str(params.get("file", "")))
        if hosted is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": self.file_object(hosted)}

    def _upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        filename, length = params.get("filename"), str(params.get("length", ""))
        if not filename or not length.isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{_next_id():09d}"
        self._uploads[file_id] = {"filename": filename, "length": int(length), "data": None}
        return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL: the file's bytes as the body (what slack_sdk's files_upload_v2
        posts); Slack answers 200 "OK - <length>"."""
        data = await request.read()
        with self._lock:
            self.uploading += 1
        try:
            await asyncio.sleep(self.upload_delay)  # a slow upload, to kill a process during
        finally:
            with self._lock:
                self.uploading -= 1
        with self._lock:
            pending = self._uploads.get(request.match_info["file_id"])
            if pending is None or pending["length"] != len(data):
                return web.Response(status=400, text="bad upload")
            pending["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        """Share uploaded files in `channel_id` (its thread `thread_ts`) as one message
        carrying them (its text the `initial_comment`), as Slack shows a file share."""
        listed = params.get("files")
        if not isinstance(listed, list) or not listed:
            return {"ok": False, "error": "invalid_arguments"}
        ids = [str(f.get("id", "")) for f in listed if isinstance(f, dict)]
        if any((self._uploads.get(i) or {}).get("data") is None for i in ids):
            return {"ok": False, "error": "file_not_found"}  # never uploaded
        channel, thread_ts = str(params.get("channel_id") or ""), params.get("thread_ts") or None
        ts = next_ts() if channel else None
        files = []
        for entry, file_id in zip(listed, ids, strict=True):
            upload = self._uploads.pop(file_id)
            title = str(entry.get("title") or upload["filename"])
            data: bytes = upload["data"]
            files.append(
                {"id": file_id, "name": upload["filename"], "title": title, "size": len(data)}
            )
            self._shared.append(
                SharedFile(file_id, upload["filename"], title, data, channel, thread_ts, ts)
            )
        if ts is not None:
            self._messages[(channel, ts)] = StoredMessage(
                channel=channel,
                ts=ts,
                text=params.get("initial_comment") or "",
                blocks=None,
                thread_ts=thread_ts,
                files=tuple(files),
            )
        return {"ok": True, "files": files}

    def _history(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A thread (replies: its root and replies, oldest first) or a channel's top level
        (history, newest first) between `oldest` and `latest` (`inclusive` of them or not),
        `limit` a page (Slack's defaults: 1000 and 100), the next one from `cursor`;
        metadata only with `include_all_metadata`."""
        replies = method == "conversations.replies"
        channel, root = params.get("channel", ""), params.get("ts") if replies else None
        if replies and not root:
            return {"ok": False, "error": "invalid_arguments"}
        oldest, latest = float(params.get("oldest") or 0), float(params.get("latest") or "inf")
        inclusive = _truthy(params.get("inclusive"))
        with_metadata = _truthy(params.get("include_all_metadata"))
        found = []
        for stored in self._messages.values():
            in_place = stored.thread_ts == root or (root is not None and stored.ts == root)
            at = float(stored.ts)
            inside = oldest <= at <= latest if inclusive else oldest < at < latest
            if stored.channel == channel and in_place and inside:
                found.append(self._listed(stored, with_metadata))
        found.sort(key=lambda m: float(m["ts"]), reverse=not replies)
        start = int(str(params.get("cursor") or "0").removeprefix("next:") or 0)
        limit = int(params.get("limit") or (1000 if replies else 100))
        page, more = found[start : start + limit], start + limit < len(found)
        cursor = f"next:{start + limit}" if more else ""
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": cursor},
        }

    @staticmethod
    def _listed(stored: StoredMessage, with_metadata: bool) -> dict[str, Any]:
        """A stored message as conversations.replies and .history list it."""
        message: dict[str, Any] = {"type": "message", "ts": stored.ts, "text": stored.text}
        for key in ("user", "bot_id", "thread_ts"):
            if getattr(stored, key):
                message[key] = getattr(stored, key)
        if stored.files:
            message["files"] = list(stored.files)
        if with_metadata and stored.metadata:
            message["metadata"] = stored.metadata
        return message

    # -- files people share, downloaded with the bot token ------------------------------------

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """A hosted file's `url_private(_download)`. Without the bot token Slack does not say
        401: it redirects to its sign-in page (HTML), so a client must check what it got."""
        hosted = self._hosted.get(request.match_info["owner"].rpartition("-")[2])
        auth = request.headers.get("Authorization", "")
        authorized = auth.startswith("Bearer xoxb-") and len(auth) > len("Bearer xoxb-")
        if hosted is not None and (authorized or hosted.public) and not hosted.redirect:
            return await self._stream(request, hosted)
        if hosted is None:
            response = web.Response(status=404, text="file not found")
        else:
            where = hosted.redirect if authorized and hosted.redirect else f"{self.url}/signin"
            response = web.Response(status=302, headers={"Location": where})
        with self._lock:
            self._downloads.append(
                Download(hosted.id if hosted else "?", dict(request.headers), response.status)
            )
        return response

    async def _stream(self, request: web.Request, hosted: HostedFile) -> web.StreamResponse:
        with self._lock:
            index = len(self._downloads)
            self._downloads.append(Download(hosted.id, dict(request.headers), 200))
        content = hosted.content
        response = web.StreamResponse(
            headers={"Content-Type": hosted.mimetype, "Content-Length": str(len(content))}
        )
        await response.prepare(request)
        try:
            for start in range(0, len(content), hosted.chunk):
                if hosted.chunk_delay and start:
                    await asyncio.sleep(hosted.chunk_delay)
                await response.write(content[start : start + hosted.chunk])
                with self._lock:
                    sent = min(start + hosted.chunk, len(content))
                    self._downloads[index] = replace(self._downloads[index], sent=sent)
            await response.write_eof()
        except ConnectionError:  # the client went away mid-file (killed, say)
            return response
        with self._lock:
            self._downloads[index] = replace(self._downloads[index], completed=True)
        return response

    async def _signin(self, request: web.Request) -> web.Response:
        page = "<html><body>Sign in to your workspace</body></html>"
        return web.Response(text=page, content_type="text/html")

    async def _response_url(self, request: web.Request) -> web.Response:
        text = await request.text()
        try:
            decoded = json.loads(text)
            body = decoded if isinstance(decoded, dict) else {"raw": decoded}
        except ValueError:
            body = {"raw": text}
        with self._lock:
            self._responses.append(
                ResponseCall(request.match_info["id"], body, dict(request.headers))
            )
        return web.Response(text="ok", content_type="text/plain")

    # -- Socket Mode --------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(timeout=2.0)
        await ws.prepare(request)
        with self._lock:
            self._sockets.append(ws)
            self._socket_connects += 1
        try:
            await ws.send_json(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                    "connection_info": {"app_id": self.app_id},
                }
            )
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    frame = json.loads(msg.data)
                except ValueError:
                    frame = {"raw": msg.data}
                with self._lock:
                    self._acks.append(frame if isinstance(frame, dict) else {"raw": frame})
        finally:
            with self._lock:
                if ws in self._sockets:
                    self._sockets.remove(ws)
        return ws

    async def _close_sockets(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for ws in sockets:
            with contextlib.suppress(Exception):
                await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server closed")

    async def _broadcast(self, frame: dict[str, Any]) -> int:
        with self._lock:
            sockets = [ws for ws in self._sockets if not ws.closed]
        if not sockets:
            raise RuntimeError("no Socket Mode client is connected to FakeSlack")
        for ws in sockets:
            await ws.send_json(frame)
        return len(sockets)

    @property
    def connection_count(self) -> int:
        with self._lock:
            return sum(1 for ws in self._sockets if not ws.closed)

    @property
    def connects(self) -> int:
        """How many Socket Mode connections were ever accepted (grows on reconnects)."""
        with self._lock:
            return self._socket_connects

    def _envelope(
        self,
        type_: str,
        payload: dict[str, Any],
        accepts_response_payload: bool,
        envelope_id: str | None,
        retry_attempt: int | None,
        retry_reason: str | None,
    ) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "envelope_id": envelope_id or str(uuid.uuid4()),
            "type": type_,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if retry_attempt is not None:
            frame["retry_attempt"] = retry_attempt
            frame["retry_reason"] = retry_reason or "timeout"
        return frame

    def send_envelope(
        self,
        type_: str,
        payload: dict[str, Any],
        accepts_response_payload: bool = False,
        *,
        envelope_id: str | None = None,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
    ) -> str:
        """Push an envelope to every connected client; returns its envelope_id.

        `type_` is "events_api" (payload: `event_payload(...)`), "slash_commands"
        (`command_payload(...)`) or "interactive" (`block_action_payload(...)`, ...). Slack sets
        `accepts_response_payload` true for commands and interactions. Raises RuntimeError when no
        client is connected. Thread-safe; do not call from the fake's own thread.
        """
        frame = self._envelope(
            type_, payload, accepts_response_payload, envelope_id, retry_attempt, retry_reason
        )
        self._run(self._broadcast(frame))
        return str(frame["envelope_id"])

    async def asend_envelope(
        self,
        type_: str,
        payload: dict[str, Any],
        accepts_response_payload: bool = False,
        *,
        envelope_id: str | None = None,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
    ) -> str:
        """`send_envelope` without blocking the caller's event loop."""
        return await asyncio.to_thread(
            self.send_envelope,
            type_,
            payload,
            accepts_response_payload,
            envelope_id=envelope_id,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
        )

    def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask clients to reconnect the way Slack does (`{"type":"disconnect"}` frame)."""
        self._run(
            self._broadcast(
                {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}}
            )
        )

    def acks(self) -> list[dict[str, Any]]:
        """Frames received from Socket Mode clients (`{"envelope_id": ..., "payload"?: ...}`)."""
        with self._lock:
            return list(self._acks)

    def ack_for(self, envelope_id: str) -> dict[str, Any] | None:
        with self._lock:
            return next((a for a in self._acks if a.get("envelope_id") == envelope_id), None)

    def wait_for_ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_for(
            lambda: self.ack_for(envelope_id), timeout, what=f"ack of envelope {envelope_id}"
        )

    async def await_ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        return await self.await_for(
            lambda: self.ack_for(envelope_id), timeout, what=f"ack of envelope {envelope_id}"
        )

    # -- fault injection and overrides --------------------------------------------------------

    def fail_next(
        self, method: str, *, status: int = 429, retry_after: int = 1, times: int = 1
    ) -> None:
        """Answer the next `times` calls of `method` with HTTP `status` (429), a `Retry-After`
        header (whole seconds; slack_sdk parses it with int(); 0 is allowed) and
        `{"ok":false,"error":"ratelimited"}`. Those show up in `attempts()`, not `calls()`."""
        with self._lock:
            queue = self._faults.setdefault(method, deque())
            queue.extend(_Fault(status, "ratelimited", retry_after) for _ in range(times))

    def error_next(
        self,
        method: str,
        error: str = "internal_error",
        status: int = 200,
        times: int = 1,
        *,
        after: bool = False,
        page: str | None = None,
    ) -> None:
        """Answer the next `times` calls of `method` with `{"ok":false,"error":error}`; with
        `after`, the call is carried out first (its answer is what fails); with `page`, that
        text instead of JSON."""
        with self._lock:
            queue = self._faults.setdefault(method, deque())
            queue.extend(_Fault(status, error, None, after, page) for _ in range(times))

    def respond_with(self, method: str, body: dict[str, Any] | None) -> None:
        """Fixed HTTP 200 body for `method` from now on (None restores the default)."""
        with self._lock:
            if body is None:
                self._overrides.pop(method, None)
            else:
                self._overrides[method] = dict(body)

    # -- what people said and shared (read back by conversations.*, users.info, files.*) ------

    def add_user(self, user_id: str, display_name: str, real_name: str = "") -> None:
        """A member of the workspace, as users.info tells of them."""
        profile = {"display_name": display_name, "real_name": real_name or display_name}
        with self._lock:
            self._users[user_id] = {
                "id": user_id,
                "team_id": self.team_id,
                "name": display_name.lower().replace(" ", "."),
                "real_name": profile["real_name"],
                "is_bot": False,
                "profile": profile,
            }

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str | None = "U_ALICE",
        ts: str | None = None,
        thread_ts: str | None = None,
        bot_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """A message someone posted (no event is sent: build one with `message_event`, the
        same `ts`, to deliver it too); its ts."""
        ts = ts or next_ts()
        with self._lock:
            self._messages[(channel, ts)] = StoredMessage(
                channel,
                ts,
                text,
                None,
                thread_ts,
                user=user,
                bot_id=bot_id,
                files=tuple(files or ()),
            )
        return ts

    def add_file(
        self,
        name: str,
        content: bytes,
        mimetype: str = "text/plain",
        **options: Any,
    ) -> dict[str, Any]:
        """A file a person shares: its object as Slack puts it in a message's `files`
        (`HostedFile` says what `options` may be: chunk, chunk_delay, redirect, public)."""
        hosted = HostedFile(f"F{_next_id():09d}", name, mimetype, content, **options)
        with self._lock:
            self._hosted[hosted.id] = hosted
        return self.file_object(hosted)

    def file_object(self, hosted: HostedFile) -> dict[str, Any]:
        private = f"{self.url}/files-pri/{self.team_id}-{hosted.id}"
        return {
            "id": hosted.id,
            "created": int(time.time()),
            "name": hosted.name,
            "title": hosted.name,
            "mimetype": hosted.mimetype,
            "filetype": hosted.name.rpartition(".")[2] or "binary",
            "user": "U_ALICE",
            "size": len(hosted.content),
            "mode": "hosted",
            "is_external": False,
            "url_private": f"{private}/{hosted.name}",
            "url_private_download": f"{private}/download/{hosted.name}",
        }

    def downloads(self, file_id: str | None = None) -> list[Download]:
        """Every GET of a hosted file's URL (sign-in redirects included)."""
        with self._lock:
            return [d for d in self._downloads if file_id is None or d.file_id == file_id]

    # -- inspection ---------------------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[Call]:
        """Calls the fake answered normally (injected faults and invalid_auth excluded)."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def attempts(self, method: str | None = None) -> list[Call]:
        """Every request that reached /api/, including injected faults and auth failures."""
        with self._lock:
            return [c for c in self._attempts if method is None or c.method == method]

    def posts(self, channel: str | None = None, thread_ts: str | None = None) -> list[Call]:
        """Successful chat.postMessage calls, optionally filtered by channel / thread_ts."""
        return self._ok_calls("chat.postMessage", channel=channel, thread_ts=thread_ts)

    def updates(self, channel: str | None = None, ts: str | None = None) -> list[Call]:
        """Successful chat.update calls."""
        return self._ok_calls("chat.update", channel=channel, ts=ts)

    def files(self, channel: str | None = None, thread_ts: str | None = None) -> list[SharedFile]:
        """Files shared (files.completeUploadExternal), optionally by channel / thread."""
        with self._lock:
            return [
                f
                for f in self._shared
                if (channel is None or f.channel == channel)
                and (thread_ts is None or f.thread_ts == thread_ts)
            ]

    def statuses(self, channel: str | None = None, thread_ts: str | None = None) -> list[str]:
        """The assistant thread statuses set (assistant.threads.setStatus), in order."""
        calls = self._ok_calls("assistant.threads.setStatus", channel_id=channel)
        return [
            str(c.params.get("status", ""))
            for c in calls
            if thread_ts is None or c.params.get("thread_ts") == thread_ts
        ]

    def bot_messages(self, channel: str, thread_ts: str) -> list[StoredMessage]:
        """The bot's messages in a thread now, oldest first."""
        return [m for m in self.messages(channel, thread_ts) if m.user == self.bot_user_id]

    def said(self, channel: str | None = None, thread_ts: str | None = None) -> list[str]:
        """What the bot said, oldest first: the text of each post as posted, and each
        streamed answer as it ended (one still streaming is not said yet)."""
        said = [
            (str(c.response.get("ts")), str(c.params.get("text", "")))
            for c in self.posts(channel, thread_ts)
        ]
        said += [
            (m.ts, str(m.text or ""))
            for m in self.messages(channel, thread_ts)
            if m.streamed and not m.streaming
        ]
        return [text for _, text in sorted(said, key=lambda pair: float(pair[0]))]

    def answers(self, channel: str, thread_ts: str) -> list[StoredMessage]:
        """The bot's answers in a thread as they stand (streamed or posted): its messages
        with a markdown block, or still streaming."""
        return [
            m
            for m in self.bot_messages(channel, thread_ts)
            if m.streaming or any(b.get("type") == "markdown" for b in m.blocks or [])
        ]

    def ephemerals(self, channel: str | None = None, user: str | None = None) -> list[Call]:
        """Successful chat.postEphemeral calls."""
        return self._ok_calls("chat.postEphemeral", channel=channel, user=user)

    def _ok_calls(self, method: str, **params: str | None) -> list[Call]:
        """Successful `method` calls whose params equal every filter that is not None."""
        return [
            c
            for c in self.calls(method)
            if c.ok and all(v is None or c.params.get(k) == v for k, v in params.items())
        ]

    def message(self, channel: str, ts: str) -> StoredMessage | None:
        """Current state of a bot message (after updates; None once deleted)."""
        with self._lock:
            return self._messages.get((channel, ts))

    def messages(
        self, channel: str | None = None, thread_ts: str | None = None
    ) -> list[StoredMessage]:
        with self._lock:
            found = [
                m
                for m in self._messages.values()
                if (channel is None or m.channel == channel)
                and (thread_ts is None or m.thread_ts == thread_ts)
            ]
        return sorted(found, key=lambda m: m.ts)

    def new_response_url(self) -> str:
        """A fresh `response_url` served by this fake (`POST /response/<n>`)."""
        return f"{self.url}/response/{_next_id()}"

    def responses(self, url_or_id: str | None = None) -> list[ResponseCall]:
        """Bodies posted to response_urls (filter by the full URL or its id)."""
        key = None if url_or_id is None else url_or_id.rstrip("/").rsplit("/", 1)[-1]
        with self._lock:
            return [r for r in self._responses if key is None or r.response_id == key]

    def clear(self) -> None:
        """Forget calls, attempts, messages, faults, overrides, responses and acks."""
        with self._lock:
            self._calls.clear()
            self._attempts.clear()
            self._messages.clear()
            self._faults.clear()
            self._overrides.clear()
            self._responses.clear()
            self._acks.clear()
            self._uploads.clear()
            self._shared.clear()
            self._users.clear()
            self._hosted.clear()
            self._downloads.clear()
            self.refuse_streaming = None

    def describe(self) -> str:
        """Human-readable log of what the fake saw (used in timeout messages)."""
        with self._lock:
            attempts = list(self._attempts)
            acks = list(self._acks)
            responses = list(self._responses)
            connected = sum(1 for ws in self._sockets if not ws.closed)
        lines = [f"{len(attempts)} API request(s):"]
        for c in attempts:
            shown = {
                k: v
                for k, v in c.params.items()
                if k in ("channel", "ts", "thread_ts", "text", "user", "trigger_id")
            }
            result = "ok" if c.ok else f"{c.status} {c.response.get('error')}"
            lines.append(f"  {c.method} [{result}] {_short(shown)}")
        lines.append(f"{len(responses)} response_url post(s):")
        lines.extend(f"  {r.response_id}: {_short(r.body)}" for r in responses)
        lines.append(f"socket connections: {connected}; {len(acks)} socket frame(s) received:")
        lines.extend(f"  {_short(a)}" for a in acks)
        return "\n".join(lines)


async def _read_params(request: web.Request) -> dict[str, Any]:
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        return {k: v for k, v in form.items() if isinstance(v, str)}
    raw = await request.text()
    if not raw:
        return {}
    if request.content_type == JSON_CONTENT_TYPE or raw.lstrip().startswith("{"):
        try:
            decoded = json.loads(raw)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return dict(parse_qsl(raw, keep_blank_values=True))


def _simple(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The methods that keep no state; anything else answers ok."""
    if method == "chat.postEphemeral":
        return {"ok": True, "message_ts": next_ts()}
    if method == "conversations.open":
        return _open_dm(params)
    if method == "views.open":
        return {"ok": True, "view": {"id": "V1"}}
    if method.startswith("assistant.threads.") and not (
        params.get("channel_id") and params.get("thread_ts")
    ):
        return {"ok": False, "error": "invalid_arguments"}
    return {"ok": True}


def _open_dm(params: dict[str, Any]) -> dict[str, Any]:
    """`conversations.open` for one user: the bot's DM channel with them (D + the user id)."""
    user = str(params.get("users", ""))
    if not user or "," in user:
        return {"ok": False, "error": "not_enough_users" if not user else "invalid_users"}
    return {"ok": True, "channel": {"id": "D" + user.removeprefix("U")}}


def _truthy(value: object) -> bool:
    """A boolean parameter as slack_sdk sends it (`1`/`0`) or as typed (`true`)."""
    return str(value).lower() in ("1", "true")


def _short(value: object, limit: int = 160) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."
