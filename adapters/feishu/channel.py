"""Runtime events to Feishu: answers as replies to the originating message (in its thread in
groups), streamed into one CardKit card (adapters/feishu/stream.py) or, where cards are
refused or turned off, one "Working…" text message edited as tools run and the answer as its
own card; approval cards (JSON 2.0) patched after the decision. lark-oapi's client blocks
(also its token fetch), so every call runs in a thread; sends carry Feishu's `uuid`
idempotency key, so a retried send never posts twice."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath
from typing import Any

import lark_oapi as lark
from lark_oapi.api.im.v1 import (
    CreateFileRequest,
    CreateFileRequestBody,
    CreateImageRequest,
    CreateImageRequestBody,
    CreateMessageRequest,
    CreateMessageRequestBody,
    DeleteMessageRequest,
    PatchMessageRequest,
    PatchMessageRequestBody,
    ReplyMessageRequest,
    ReplyMessageRequestBody,
    UpdateMessageRequest,
    UpdateMessageRequestBody,
)
from lark_oapi.core.token.manager import TokenManager

from adapters.feishu.answers import answer_card, answer_pieces
from adapters.feishu.cardkit import CardKit
from adapters.feishu.inbound import FeishuIdentity
from adapters.feishu.questions import notice_card
from adapters.feishu.stream import Streams
from adapters.long_answer import DEFAULT_FILE_CHARS, as_file
from adapters.progress import Progress, ProgressEvent, Style
from adapters.split import split_text
from runtime.channel import (
    ApprovalRequested,
    ApprovalUpdated,
    Event,
    FileShared,
    MessageRef,
    Notice,
    Reply,
    RunFinished,
    ToolFinished,
    ToolStarted,
    Writing,
)
from runtime.models import Actor, ConversationRef, ToolStatus
from runtime.risk.exports import is_image

log = logging.getLogger(__name__)

MAX_TEXT = 8_000  # characters per message: far under Feishu's 150 KB, still readable
ATTEMPTS = 4
MAX_EDITS = 20  # Feishu's limit per message
PREVIEW_EDITS = 14  # of those, the most spent on previews of an answer being written
API_THREADS = 16
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # Feishu's limit for an image; a larger one goes as a file
_TOKEN_CODES = {99991661, 99991663, 99991664, 99991668}  # missing / invalid / expired token
_RATE_CODES = {99991400, 230020}  # gateway and per-chat frequency limits
# im/v1/files' file types: these by extension, any other file is a "stream".
_FILE_TYPES = {".pdf": "pdf", ".doc": "doc", ".docx": "doc", ".xls": "xls", ".xlsx": "xls"}
_FILE_TYPES |= {".ppt": "ppt", ".pptx": "ppt", ".mp4": "mp4", ".opus": "opus"}
STYLE = Style(
    marks={
        ToolStatus.COMPLETED: "✅",
        ToolStatus.DENIED: "⛔",
        ToolStatus.SUSPENDED: "🔒",
        ToolStatus.ERROR: "❌",
        ToolStatus.CANCELLED: "⏹",
    },
    running="⏳",
    line=lambda mark, tool, text: f"{mark} {tool}: {text}",
    heading="Working…",
    footer=str,
)


def feishu_client(app_id: str, app_secret: str, domain: str) -> Any:
    return (
        lark.Client.builder()
        .app_id(app_id)
        .app_secret(app_secret)
        .domain(domain)
        .timeout(10)
        .log_level(lark.LogLevel.WARNING)
        .build()
    )


def _addressed(conversation_id: str) -> dict[str, str]:
    """Where to post for a conversation named by its id alone (from the policy): a chat
    (`feishu:<tenant>:<chat_id>`) or a person directly (`feishu:<open_id>`)."""
    last = conversation_id.rsplit(":", 1)[-1]
    return {"open_id": last} if conversation_id.count(":") == 1 else {"chat_id": last}


_KEY = re.compile(r"(?<![\w:])feishu:(ou_[A-Za-z0-9_]+)\b")  # a person as clawgate names them
_AT_TAG = re.compile(r"<(?=\s*/?\s*at\b)", re.IGNORECASE)


def plain(text: str) -> str:
    """Text for a text message with no `<at …>` of its own: a quoted call or question in
    `/pending` must not mention anyone, let alone everyone (`<at user_id="all">`)."""
    return _AT_TAG.sub("<\u200b", text)


def named(text: str) -> str:
    """clawgate's own notes (reminders, escalations, mode switches: none quotes the model)
    with the people they name by key (`feishu:ou_…`) as mentions, shown by name."""
    return _KEY.sub(r'<at user_id="\1"></at>', plain(text))


class FeishuChannel:
    def __init__(
        self,
        client: Any,
        app_id: str,
        file_chars: int = DEFAULT_FILE_CHARS,
        cards: bool = True,
    ) -> None:
        """`file_chars`: an answer longer than this comes as a message plus a file; `cards`:
        answers streamed into a CardKit card (False: a text working message, as before)."""
        self.client = client
        self.app_id = app_id
        self.file_chars = file_chars
        self._progress = Progress(STYLE)
        kit = CardKit(client, self._call)
        self._streams = Streams(kit, self._say, self._recall, self._patch, STYLE) if cards else None
        # lark-oapi's calls block: they get threads of their own, more than asyncio's default
        # pool (CPUs + 4) so slow API calls of many sessions do not queue behind each other.
        self._calls = ThreadPoolExecutor(API_THREADS, thread_name_prefix="feishu-api")
        self._edits: dict[str, int] = {}  # working message id -> edits so far

    async def send(self, conversation: ConversationRef, event: Event) -> MessageRef | None:
        if isinstance(event, Reply):
            await self._answer(conversation, event)
        elif isinstance(event, Notice):
            await self._say(conversation.data, "text", {"text": f"[notice] {named(event.text)}"})
        elif isinstance(event, ApprovalRequested):
            card = notice_card(event.notice, copy=event.copy)
            where = conversation.data or _addressed(conversation.id)
            key = (
                f"approval/{event.notice.approval_id}/{where.get('chat_id', where.get('open_id'))}"
            )
            message_id = await self._say(where, "interactive", card, key)
            return {"message_id": message_id} if message_id else None
        elif isinstance(event, ApprovalUpdated):
            card = notice_card(event.notice, copy=event.notice.conversation != conversation.id)
            if event.notice.message.get("message_id"):
                await self._patch(event.notice.message["message_id"], card)
            else:  # the card was never posted: post it now
                await self._say(conversation.data, "interactive", card)
        elif isinstance(event, ToolStarted | ToolFinished | Writing | RunFinished):
            streams = self._streams
            if streams is None or not await streams.progress(conversation.data, event):
                await self._report(conversation.data, event)
        elif isinstance(event, FileShared):
            if is_image(event.data) and len(event.data) <= MAX_IMAGE_BYTES:  # shown inline
                return await self.upload_image(conversation, event.data, key=event.key)
            return await self.upload_file(
                conversation, event.name, event.data, event.title, key=event.key, again=event.again
            )
        return None

    async def tell(
        self,
        conversation: ConversationRef,
        actor: Actor,
        text: str,
        reply: Mapping[str, str],
        secret: bool = False,
    ) -> None:
        """Feishu has no private text messages in groups: answer the command's message (in
        its thread), which only adds to the conversation the command started. A `secret` goes
        to the person's direct chat with the bot instead."""
        where = dict(conversation.data)
        if secret and not conversation.direct:
            where = {"open_id": actor.user_id}
        elif reply.get("message_id"):
            where["message_id"] = reply["message_id"]
        for piece in split_text(plain(text), MAX_TEXT):
            await self._say(where, "text", {"text": piece})

    async def upload_file(
        self,
        conversation: ConversationRef,
        name: str,
        data: bytes,
        title: str,
        *,
        key: str = "",
        again: bool = False,
    ) -> MessageRef | None:
        """Upload `data` as the file `name` (im/v1/files), then post it as a `file` message
        (a reply in the conversation's thread). The message carries Feishu's uuid made from
        `key`, so a retried or retaken send posts it once (`again` needs nothing more); the
        upload may be repeated, unseen: an unsent file is no one's. Feishu shows a file
        message by its name: `title` is not shown. None when it failed (logged)."""
        file_type = _FILE_TYPES.get(PurePosixPath(name).suffix.lower(), "stream")

        def upload() -> Any:  # a request per attempt: lark-oapi consumes its body
            body = (
                CreateFileRequestBody.builder()
                .file_type(file_type)
                .file_name(name)
                .file(io.BytesIO(data))
                .build()
            )
            request = CreateFileRequest.builder().request_body(body).build()
            return self.client.im.v1.file.create(request)

        uploaded = await self._call(upload, "file upload")
        if uploaded is None or not uploaded.file_key:
            return None
        return await self._post_uploaded(conversation, "file", {"file_key": uploaded.file_key}, key)

    async def upload_image(
        self, conversation: ConversationRef, data: bytes, *, key: str = ""
    ) -> MessageRef | None:
        """Upload `data` as an image (im/v1/images), then post it as an `image` message,
        which Feishu shows inline; once, by `key`, as `upload_file`. None when it failed."""

        def upload() -> Any:  # a request per attempt: lark-oapi consumes its body
            body = (
                CreateImageRequestBody.builder()
                .image_type("message")
                .image(io.BytesIO(data))
                .build()
            )
            request = CreateImageRequest.builder().request_body(body).build()
            return self.client.im.v1.image.create(request)

        uploaded = await self._call(upload, "image upload")
        if uploaded is None or not uploaded.image_key:
            return None
        content = {"image_key": uploaded.image_key}
        return await self._post_uploaded(conversation, "image", content, key)

    async def _post_uploaded(
        self, conversation: ConversationRef, msg_type: str, content: dict[str, str], key: str
    ) -> MessageRef | None:
        where = conversation.data or _addressed(conversation.id)
        message_id = await self._say(where, msg_type, content, key)
        return {"message_id": message_id} if message_id else None

    async def _answer(self, conversation: ConversationRef, reply: Reply) -> None:
        """The answer as Markdown cards, as few as fit, or, longer than `file_chars`, its
        beginning plus the whole of it as a file in the thread; the first in the card that
        streamed it when there is one. Each send carries a uuid made from the answer's key,
        so a retake posts only what is missing. A card Feishu refuses (a tag it will not
        take) is said as plain text instead: never lost."""
        filed = as_file(reply.text, reply.key, self.file_chars)
        pieces = answer_pieces(filed.message if filed else reply.text)
        streams = self._streams
        streamed = streams is not None and await streams.answer(conversation.data, reply, pieces[0])
        for i, piece in enumerate(pieces):
            if i == 0 and streamed:
                continue
            key = f"{reply.key}/{i}" if reply.key else ""
            if not await self._say(conversation.data, "interactive", answer_card(piece), key):
                await self._say(conversation.data, "text", {"text": piece}, key and f"{key}/text")
        if filed:
            key = f"{reply.key}/file" if reply.key else ""
            await self.upload_file(conversation, filed.name, filed.data, filed.title, key=key)

    # --- the working message ---------------------------------------------------------------

    async def _report(self, where: Mapping[str, str], event: ProgressEvent) -> None:
        show = self._progress.apply((where["chat_id"], where.get("message_id", "")), event)
        if show is None:
            return
        if show.wait:
            await asyncio.sleep(show.wait)
        if show.working.ref is None:
            message_id = await self._say(where, "text", {"text": show.text})
            if not isinstance(event, RunFinished):
                show.working.ref = message_id
            self._progress.shown(show)
            return
        # Feishu allows a message 20 edits: keep the last for how the run ended, and some
        # for tool lines after previews of an answer being written.
        edits = self._edits.get(show.working.ref, 0)
        if isinstance(event, RunFinished):
            self._edits.pop(show.working.ref, None)
        elif edits >= (PREVIEW_EDITS if show.preview else MAX_EDITS - 1):
            return
        else:
            self._edits[show.working.ref] = edits + 1
        await self._edit(show.working.ref, show.text, attempts=1 if show.preview else ATTEMPTS)
        self._progress.shown(show)

    # --- Open API calls ------------------------------------------------------------------------

    async def _say(
        self, where: Mapping[str, str], msg_type: str, content: Any, key: str = ""
    ) -> str | None:
        """Reply to `where`'s message (in thread if so marked), else post to its chat. `key`:
        a stable id of what is said (Feishu drops a second send with its uuid for an hour,
        so a crashed run's retake never says it twice)."""
        payload = json.dumps(content, ensure_ascii=False)
        key = str(uuid.uuid5(uuid.NAMESPACE_URL, key)) if key else str(uuid.uuid4())
        if where.get("message_id"):
            body = (
                ReplyMessageRequestBody.builder()
                .msg_type(msg_type)
                .content(payload)
                .reply_in_thread(where.get("thread") == "1")
                .uuid(key)
                .build()
            )
            request: Any = (
                ReplyMessageRequest.builder()
                .message_id(where["message_id"])
                .request_body(body)
                .build()
            )
            data = await self._call(lambda: self.client.im.v1.message.reply(request), "reply")
        else:
            create = (
                CreateMessageRequestBody.builder()
                .receive_id(where.get("open_id") or where["chat_id"])
                .msg_type(msg_type)
                .content(payload)
                .uuid(key)
                .build()
            )
            request = (
                CreateMessageRequest.builder()
                .receive_id_type("open_id" if "open_id" in where else "chat_id")
                .request_body(create)
                .build()
            )
            data = await self._call(lambda: self.client.im.v1.message.create(request), "send")
        return str(data.message_id) if data is not None and data.message_id else None

    async def _edit(self, message_id: str, text: str, attempts: int = ATTEMPTS) -> None:
        """`attempts`: 1 for a preview, which the next one replaces anyway."""
        body = (
            UpdateMessageRequestBody.builder()
            .msg_type("text")
            .content(json.dumps({"text": text}, ensure_ascii=False))
            .build()
        )
        request = UpdateMessageRequest.builder().message_id(message_id).request_body(body).build()
        await self._call(lambda: self.client.im.v1.message.update(request), "update", attempts)

    async def _patch(self, message_id: str, card: dict[str, Any]) -> None:
        body = PatchMessageRequestBody.builder().content(json.dumps(card, ensure_ascii=False))
        request = (
            PatchMessageRequest.builder().message_id(message_id).request_body(body.build()).build()
        )
        await self._call(lambda: self.client.im.v1.message.patch(request), "patch")

    async def _recall(self, message_id: str) -> bool:
        request = DeleteMessageRequest.builder().message_id(message_id).build()
        return bool(await self._call(lambda: self.client.im.v1.message.delete(request), "recall"))

    async def _call(self, call: Callable[[], Any], what: str, attempts: int = ATTEMPTS) -> Any:
        """Run a blocking lark call off the event loop: its `data`, True for a call that
        answers none, None when it failed. Every call here is safe to repeat (sends carry
        their uuid, CardKit updates their sequence), so rate limits, expired tokens and
        network errors are retried; other failures are logged and dropped: the run's state
        is in Redis."""
        for attempt in range(1, attempts + 1):
            try:
                response = await asyncio.get_running_loop().run_in_executor(self._calls, call)
            except Exception as exc:  # requests' connection errors and timeouts
                log.warning("feishu %s failed (%s), attempt %d", what, type(exc).__name__, attempt)
                await asyncio.sleep(0.2 * attempt)
                continue
            if response.success():
                # A PATCH answers no `data` (PatchMessageResponse has no such attribute).
                return getattr(response, "data", True)
            code = int(response.code or 0)
            if code in _TOKEN_CODES:
                # lark-oapi keeps a rejected token until it would expire: forget it.
                TokenManager.cache.set(f"self_tenant_token:{self.app_id}", "", 0)
            elif code not in _RATE_CODES:
                log.error("feishu %s failed: code %d %s", what, code, response.msg)
                return None
            log.warning("feishu %s: code %d, attempt %d", what, code, attempt)
            await asyncio.sleep(0.5 * attempt)
        log.error("feishu %s gave up after %d attempts", what, attempts)
        return None


class FeishuError(Exception):
    """The Open API refused a call clawgate cannot work without."""


class FeishuUnreachable(FeishuError):
    """The Open API did not answer at all (no connection, a timeout)."""


def fetch_identity(client: Any) -> FeishuIdentity:
    """The bot's own open_id (blocking: call it in a thread)."""
    request = (
        lark.BaseRequest.builder()
        .http_method(lark.HttpMethod.GET)
        .uri("/open-apis/bot/v3/info")
        .token_types({lark.AccessTokenType.TENANT})
        .build()
    )
    try:
        response = client.request(request)
    except OSError as exc:  # requests' errors are OSErrors: no connection, a timeout
        raise FeishuUnreachable(str(exc) or type(exc).__name__) from exc
    except Exception as exc:  # the token fetch raises for a bad secret
        raise FeishuError(str(exc) or type(exc).__name__) from exc
    if not response.success():
        raise FeishuError(f"code {response.code}: {response.msg}")
    bot = json.loads(response.raw.content).get("bot") or {}
    if not bot.get("open_id"):
        raise FeishuError("/bot/v3/info returned no open_id")
    return FeishuIdentity(str(bot["open_id"]))
