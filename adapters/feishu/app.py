"""The Feishu (Lark) endpoint: lark-oapi's `EventDispatcherHandler` turns events into typed
objects for our handlers, behind strict checks of our own that the SDK lacks or answers with
a generic 500: size (413), decryption, verification token, signature and a ±5 minute
timestamp window (401), shape (400), Redis (503). The long connection (`FEISHU_MODE=websocket`)
feeds the same handlers, so both modes share one pipeline.

lark-oapi's handlers are synchronous: they run in a thread (the HTTP path uses
`asyncio.to_thread`, the long connection its own thread) and hand async work to the main
event loop, waiting for it, so nothing is acknowledged before it is queued."""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import lark_oapi as lark
import lark_oapi.ws.client as lark_ws_client
from aiohttp import web
from lark_oapi.core.model import RawRequest
from lark_oapi.event.callback.model.p2_card_action_trigger import P2CardActionTriggerResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.exceptions import RedisError

from adapters.feishu.cards import approval_card, person
from adapters.feishu.channel import FeishuChannel
from adapters.feishu.crypto import DecryptError, decrypt, signature_ok
from adapters.feishu.inbound import (
    ANSWER,
    EDIT,
    REJECT,
    CardClick,
    FeishuIdentity,
    card_click,
    message_inbound,
)
from adapters.feishu.payloads import CardEnvelope, MessageEnvelope
from adapters.http import NotJson, json_object, read_body
from runtime.channel import ApprovalNotice
from runtime.metrics import INBOUND
from runtime.models import Actor, ConversationRef
from runtime.queue.inbound import Inbound
from runtime.queue.ingest import IngestUnavailable

log = logging.getLogger(__name__)

TIMESTAMP_WINDOW = 300  # seconds
DEADLINE = 2.5  # seconds for a handler's Redis work: Feishu waits 3, and a 503 makes it retry
LARK_HEADERS = ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature")
MESSAGE_EVENT = "im.message.receive_v1"
CARD_EVENT = "card.action.trigger"
T = TypeVar("T")
_SHAPES: dict[str, type[BaseModel]] = {MESSAGE_EVENT: MessageEnvelope, CARD_EVENT: CardEnvelope}

Ingest = Callable[[Inbound], Coroutine[Any, Any, bool]]
Precheck = Callable[
    [str, Actor, ConversationRef], Coroutine[Any, Any, tuple[str | None, str | None]]
]
NoticeOf = Callable[[str], Coroutine[Any, Any, ApprovalNotice | None]]


class Malformed(Exception):
    """An authentic request whose content is not what Feishu sends."""


def _expected(record: logging.LogRecord) -> bool:
    """lark-oapi logs (with a traceback) every exception a handler raises; those we raise on
    purpose are answered (400, 503) and logged by us."""
    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, IngestUnavailable | Malformed)


# lark-oapi also prints its records to stdout itself, unmasked and never as JSON: they go
# through the process's own handlers only.
logging.getLogger("Lark").handlers.clear()
logging.getLogger("Lark").addFilter(_expected)


class _Header(BaseModel):
    """Schema 2.0 event header: what every event must carry."""

    model_config = ConfigDict(extra="ignore")

    event_id: str = Field(min_length=1)
    event_type: str = Field(min_length=1)
    token: str = ""


def _toast(kind: str, text: str) -> dict[str, Any]:
    return {"toast": {"type": kind, "content": text}}


class FeishuAdapter:
    def __init__(
        self,
        identity: FeishuIdentity,
        ingest: Ingest,
        precheck: Precheck,
        encrypt_key: str | None,
        verification_token: str | None,
        channel: FeishuChannel,
        notice: NoticeOf | None = None,
    ) -> None:
        """`notice`: an approval as the chat shows it, for the card a decisive click answers."""
        self.identity = identity
        self.notice = notice
        self.channel = channel
        self.ingest = ingest
        self.precheck = precheck
        self.encrypt_key = encrypt_key or ""
        self.verification_token = verification_token or ""
        self.handler = (
            lark.EventDispatcherHandler.builder(self.encrypt_key, self.verification_token)
            .register_p2_im_message_receive_v1(self._on_message)
            .register_p2_card_action_trigger(self._on_card)
            .build()
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._local = threading.local()  # a handler's mode, its work and what it raised

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop handlers hand their async work to."""
        self.loop = loop

    # --- handlers ----------------------------------------------------------------------------
    # lark-oapi calls them synchronously. Over HTTP, `do()` runs on the event loop itself (it
    # only decrypts and parses), so a handler just hands its work to the endpoint, which
    # awaits it. Over the long connection they run in lark's thread and wait for the event
    # loop to do the work: the ack, which carries a click's toast, goes after it.

    def _on_message(self, data: Any) -> None:
        inbound = self._parse(lambda d: message_inbound(d, self.identity), data, "message event")
        if inbound is not None:
            self._deliver(self._take_message(inbound))

    def _on_card(self, data: Any) -> P2CardActionTriggerResponse:
        click = self._parse(card_click, data, "card action")
        if isinstance(click, str):
            return P2CardActionTriggerResponse(_toast("error", click))
        answer = {} if click is None else self._deliver(self._take_click(click))
        return P2CardActionTriggerResponse(answer or {})

    def _parse(self, parse: Callable[[Any], T], data: Any, what: str) -> T:
        try:
            return parse(data)
        except (AttributeError, TypeError, ValidationError) as exc:
            raise self._failed(Malformed(f"unexpected {what}: {exc}")) from exc

    def _deliver(self, work: Coroutine[Any, Any, T]) -> T | None:
        if getattr(self._local, "capture", False):  # the HTTP endpoint awaits it
            self._local.work = work
            return None
        assert self.loop is not None, "bind() the adapter to the event loop first"
        future = asyncio.run_coroutine_threadsafe(_within_deadline(work), self.loop)
        try:
            return future.result(DEADLINE + 1.0)
        except (IngestUnavailable, TimeoutError) as exc:
            future.cancel()
            raise self._failed(IngestUnavailable(str(exc))) from exc

    async def _take_message(self, inbound: Inbound) -> None:
        await self.ingest(inbound)

    async def _take_click(self, click: CardClick) -> dict[str, Any]:
        """A toast at once: a refusal (who may not decide, already decided) for the clicker
        alone, nothing queued, the card untouched; or "approving", with the card (JSON 2.0)
        without its buttons when this click decides, and updated again with the outcome."""
        refusal, session = await self.precheck(click.approval_id, click.actor, click.conversation)
        if refusal is not None:
            return _toast("error", refusal)
        assert session is not None
        verb = {REJECT: "Rejecting", ANSWER: "Answering"}.get(click.action, "Approving")
        # Read while it is pending: once queued, a worker in another process may decide it
        # before this answers.
        card = await self._deciding(click, verb)
        await self.ingest(click.inbound(session))
        answer = _toast("info", f"{verb} {click.approval_id}…")
        return answer | ({"card": {"type": "raw", "data": card}} if card else {})

    async def _deciding(self, click: CardClick, verb: str) -> dict[str, Any] | None:
        """The card as the click leaves it, when the click decides: a rejection, or the
        approval that completes the quorum. Not for an edit, which the policy judges again
        (refused, the card must keep its buttons), nor for an approval that needs more."""
        # A question's card is updated with its answer once recorded (its own look).
        if self.notice is None or click.action in (EDIT, ANSWER):
            return None
        notice = await self.notice(click.approval_id)
        # An item of a batch: the batch's card keeps the other items' buttons until updated.
        if notice is None or notice.status != "pending" or notice.batch:
            return None
        if click.action != REJECT and notice.quorum - len(notice.approved_by) > 1:
            return None
        copy = notice.conversation != click.conversation.id
        return approval_card(notice, copy, deciding=f"{verb} by {person(click.actor.key)}")

    def _failed(self, exc: Exception) -> Exception:
        self._local.error = exc
        return exc

    # --- HTTP ------------------------------------------------------------------------------

    async def handle_http(self, request: web.Request) -> web.Response:
        kind, status = "unknown", 500
        try:
            response, kind = await self._checked(request)
            status = response.status
            return response
        finally:
            INBOUND.labels("feishu", kind, _OUTCOMES.get(status, str(status))).inc()

    async def _checked(self, request: web.Request) -> tuple[web.Response, str]:
        if not (self.encrypt_key and self.verification_token):
            # Long-connection mode may run without them, and then nothing authenticates a
            # POST (an empty key "signs" anything): take none.
            return _text(404, "feishu events arrive over the long connection"), "unknown"
        raw = await read_body(request)
        if isinstance(raw, web.Response):
            return raw, "unknown"
        plain = self._plaintext(raw)
        if isinstance(plain, web.Response):
            return plain, "unknown"
        if plain.get("type") == "url_verification":
            return self._challenge(plain), "url_verification"
        if not self._signed(request, raw):
            return _text(401, "invalid signature or stale timestamp"), "unknown"
        try:
            header = _Header.model_validate(plain.get("header"))
        except ValidationError:
            return _text(400, "malformed request: no schema 2.0 event header"), "unknown"
        if not _same(header.token, self.verification_token):
            return _text(401, "invalid verification token"), header.event_type
        if header.event_type not in _SHAPES:
            return web.json_response({"msg": "ignored"}), header.event_type
        try:
            _SHAPES[header.event_type].model_validate(plain)
        except ValidationError as exc:
            first = str(exc).splitlines()[:2]
            return _text(400, f"malformed request: {' '.join(first)}"), header.event_type
        return await self._dispatch(request, raw), header.event_type

    def _plaintext(self, raw: bytes) -> dict[str, Any] | web.Response:
        """The decrypted JSON object, or the answer to a body that is none: 400 for what is
        not JSON, 401 for what our key does not decrypt (or is not encrypted with one set)."""
        try:
            body = json_object(raw)
            if "encrypt" not in body:
                return _text(401, "expected an encrypted request") if self.encrypt_key else body
            return json_object(decrypt(self.encrypt_key, str(body["encrypt"])))
        except DecryptError:
            return _text(401, "cannot decrypt the request")
        except NotJson as exc:
            return _text(400, f"malformed request: {exc}")

    def _challenge(self, plain: dict[str, Any]) -> web.Response:
        """Sent unsigned (but encrypted when a key is set): authenticated by its token."""
        token, challenge = plain.get("token"), plain.get("challenge")
        if not isinstance(token, str) or not _same(token, self.verification_token):
            return _text(401, "invalid verification token")
        if not isinstance(challenge, str):
            return _text(400, "malformed request: no challenge")
        return web.json_response({"challenge": challenge})

    def _signed(self, request: web.Request, raw: bytes) -> bool:
        timestamp = request.headers.get("X-Lark-Request-Timestamp", "")
        nonce = request.headers.get("X-Lark-Request-Nonce", "")
        given = request.headers.get("X-Lark-Signature", "")
        try:
            fresh = abs(time.time() - int(timestamp)) <= TIMESTAMP_WINDOW
        except ValueError:
            return False
        return fresh and signature_ok(timestamp, nonce, self.encrypt_key, raw, given)

    async def _dispatch(self, request: web.Request, raw: bytes) -> web.Response:
        lark_request = RawRequest()
        lark_request.uri = request.path
        # lark-oapi looks headers up by their exact names; proxies may have lowercased them.
        lark_request.headers = {name: request.headers.get(name, "") for name in LARK_HEADERS}
        lark_request.body = raw
        self._local.capture, self._local.work, self._local.error = True, None, None
        try:
            response = self.handler.do(lark_request)
        finally:
            work, error = self._local.work, self._local.error
            self._local.capture, self._local.work, self._local.error = False, None, None
        if isinstance(error, Malformed):
            return _text(400, f"malformed request: {error}")
        if response.status_code != 200 or work is None:
            if work is not None:
                work.close()
            if response.status_code != 200:
                log.error("feishu: the event dispatcher failed: %s", response.content[:300])
                return _text(500, "")
            return web.Response(body=response.content, content_type="application/json")
        try:
            answer = await _within_deadline(work)
        except IngestUnavailable as exc:
            log.warning("feishu: cannot queue the request (%s): answering 503", exc)
            return _text(503, "storage unavailable, retry later")
        return web.json_response({"msg": "success"} if answer is None else answer)


async def _within_deadline(work: Coroutine[Any, Any, T]) -> T:
    """Redis work of a handler: past `DEADLINE`, or with Redis down, `IngestUnavailable`
    (the work cancelled, so nothing is queued behind the platform's back)."""
    try:
        async with asyncio.timeout(DEADLINE):
            return await work
    except (TimeoutError, RedisError, OSError) as exc:
        raise IngestUnavailable(str(exc) or "Redis did not answer in time") from exc


_OUTCOMES = {200: "accepted", 400: "malformed", 401: "unauthorized", 413: "too_large"}
_OUTCOMES |= {500: "error", 503: "unavailable"}


def _same(given: str, expected: str) -> bool:
    """Constant-time, and safe for any text an attacker sends."""
    return hmac.compare_digest(given.encode(), expected.encode())


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text)


class LongConnection:
    """lark-oapi's websocket client in its own thread with its own event loop: it has no
    async start and no stop, and reads its loop from a module global at start."""

    def __init__(self, app_id: str, app_secret: str, domain: str, adapter: FeishuAdapter) -> None:
        self._args = (app_id, app_secret, domain)
        self.adapter = adapter
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client: Any = None
        self._thread = threading.Thread(target=self._run, name="feishu-ws", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """False once lark's client gave up (bad credentials, reconnects exhausted)."""
        return self._thread.is_alive()

    def _run(self) -> None:
        app_id, app_secret, domain = self._args
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # ws.Client() schedules a task on the current loop
        lark_ws_client.loop = loop
        self.loop = loop
        self.client = lark.ws.Client(
            app_id,
            app_secret,
            event_handler=self.adapter.handler,
            domain=domain,
            log_level=lark.LogLevel.WARNING,
        )
        try:
            self.client.start()
        except asyncio.CancelledError:
            pass  # stop()
        except Exception:
            log.exception("feishu long connection stopped")
        finally:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            connection = getattr(self.client, "_conn", None)
            if connection is not None:
                loop.run_until_complete(connection.close())
            loop.close()

    def _cancel_everything(self) -> None:
        self.client._auto_reconnect = False
        for task in asyncio.all_tasks():
            task.cancel()

    async def stop(self, grace: float = 5.0) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_everything)
        await asyncio.to_thread(self._thread.join, grace)
