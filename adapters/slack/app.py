"""The Slack endpoint: slack-bolt's `AsyncApp` routes events, slash commands and clicks to
listeners that only normalize and ingest (work happens in the worker), behind strict checks
of our own: size (413), signature and timestamp (401), shape (400), Redis (503).

The same app serves Socket Mode (`socket_mode_handler`), so both feed one pipeline."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs

from aiohttp import ClientError, web
from pydantic import ValidationError
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.http import NotJson, json_object, read_body
from adapters.slack.answers import FEEDBACK
from adapters.slack.blocks import edit_modal, reject_modal
from adapters.slack.inbound import (
    APPROVE_ALWAYS,
    APPROVE_ONCE,
    CLARIFY_ANSWER,
    COMMANDS,
    EDIT,
    EDIT_VIEW,
    REJECT,
    REJECT_VIEW,
    SlackIdentity,
    action_inbound,
    action_thread,
    command_inbound,
    feedback_inbound,
    message_inbound,
    modal_inbound,
)
from adapters.slack.payloads import (
    BlockActions,
    EventCallback,
    Malformed,
    MessageEvent,
    ModalContext,
    SlashCommand,
    ViewSubmission,
)
from runtime.metrics import INBOUND
from runtime.queue.inbound import Inbound
from runtime.queue.ingest import IngestUnavailable
from runtime.redact import shown

log = logging.getLogger(__name__)

MESSAGE_EVENTS = ("app_mention", "message")  # the events `on_message` takes
# The assistant view's: a thread opened (prompts suggested), the channel viewed beside it.
ASSISTANT_EVENTS = ("assistant_thread_started", "assistant_thread_context_changed")
# What the assistant view (the app's split pane) offers at a new thread's start.
SUGGESTED_PROMPTS = (
    {"title": "What can you do?", "message": "What can you do, and what needs approval?"},
    {"title": "Look at the repository", "message": "Summarize what is in the work directory."},
    {"title": "What waits for approval?", "message": "/clawgate pending"},
)
TITLE_CHARS = 60  # of an assistant thread's first message, as its title
UNTITLED = 1_000  # assistant threads remembered until their first message names them
# The payloads checked before bolt routes them (by the top-level or interactive `type`).
_SHAPES: dict[str, type[Any]] = {
    "event_callback": EventCallback,
    "command": SlashCommand,
    "block_actions": BlockActions,
    "view_submission": ViewSubmission,
}


def _bolt_logger() -> logging.Logger:
    """Bolt's logger, minus its start-up warnings that the SLACK_* variables it would read by
    itself are ignored: clawgate passes everything explicitly."""
    logger = logging.getLogger("slack_bolt.clawgate")
    if not logger.filters:
        logger.addFilter(lambda record: "will be " not in record.getMessage())
    return logger


Ingest = Callable[[Inbound], Awaitable[bool]]


def _validate(model: type[Any], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise Malformed(str(exc).splitlines()[0]) from exc


def _kind(body: str, content_type: str) -> tuple[str, dict[str, Any]]:
    """What kind of request this is, and its parsed body, of a shape bolt can route (its
    matchers index into `actions`, `event` and `type` unchecked); raises `Malformed`."""
    try:
        if content_type.startswith("application/json"):
            parsed = json_object(body)
            kind = parsed.get("type") or "unknown"
        else:
            form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
            if "payload" in form:
                parsed, kind = json_object(form["payload"]), "interactive"
            elif "command" in form:
                parsed, kind = form, "command"
            elif form.get("ssl_check") == "1":  # Slack checking the certificate; bolt answers
                return "ssl_check", form
            else:
                raise Malformed("unrecognized request")
    except NotJson as exc:
        raise Malformed(f"body is not a JSON object of Slack's ({exc})") from exc
    shape = parsed.get("type") if kind == "interactive" else kind
    if not isinstance(shape, str):
        raise Malformed("expected a string type")
    if shape in _SHAPES:
        _validate(_SHAPES[shape], parsed)
    return shape if kind != "interactive" else kind, parsed


class SlackAdapter:
    def __init__(
        self,
        client: AsyncWebClient,
        identity: SlackIdentity,
        ingest: Ingest,
        signing_secret: str | None,
    ) -> None:
        self.client = client
        self.identity = identity
        self.ingest = ingest
        self.verifier = SignatureVerifier(signing_secret) if signing_secret else None
        # A dialog must open within the click's 3 s: no retrying after a 429.
        self._prompt = AsyncWebClient(
            token=client.token, base_url=client.base_url, session=client.session, retry_handlers=[]
        )
        # Assistant threads started here whose first message will be their title (a thread
        # started while another process served Slack keeps Slack's own title).
        self._untitled: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()

        async def authorize() -> AuthorizeResult:
            return self._authorization

        self._authorization = AuthorizeResult(
            enterprise_id=None,
            team_id=identity.team_id,
            bot_token=client.token,
            bot_user_id=identity.bot_user_id,
            bot_id=identity.bot_id,
        )
        self.app = AsyncApp(
            client=client,
            authorize=authorize,
            # Verified in `handle_http` (with our own status codes); Socket Mode needs none.
            request_verification_enabled=False,
            # Listeners only ingest: the answer must wait until the input is safely queued.
            process_before_response=True,
            raise_error_for_unhandled_request=False,
            logger=_bolt_logger(),
        )
        self._register()

    # --- listeners -------------------------------------------------------------------------

    def _register(self) -> None:
        """Bolt passes listener arguments by parameter name, so it gets plain functions."""
        app = self.app

        async def on_message(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_message(body, ack)

        async def on_other_event(ack: AsyncAck) -> None:
            await ack()  # acknowledged, so Slack does not retry it

        async def on_command(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_command(body, ack)

        async def on_approve(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_approve(body, ack)

        async def on_feedback(body: dict[str, Any], ack: AsyncAck) -> None:
            inbound = feedback_inbound(_validate(BlockActions, body))
            if inbound is not None:
                await self._ingest(inbound)
            await ack()

        async def on_reject_click(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_reject_click(body, ack)

        async def on_edit_click(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_edit_click(body, ack)

        async def on_submit(body: dict[str, Any], ack: AsyncAck) -> None:
            await self._on_submit(body, ack)

        async def on_error(error: Exception) -> BoltResponse:
            return self._on_error(error)

        async def on_thread_started(body: dict[str, Any], ack: AsyncAck) -> None:
            self._thread_started(body)  # its calls go out after the answer
            await ack()

        for event_type in MESSAGE_EVENTS:
            app.event(event_type)(on_message)
        started, context_changed = ASSISTANT_EVENTS
        app.event(started)(on_thread_started)
        # The channel the person looks at beside the assistant: clawgate reads nothing from it.
        app.event(context_changed)(on_other_event)
        app.event(re.compile(".*"))(on_other_event)
        for command in COMMANDS:
            app.command(command)(on_command)
        app.action(APPROVE_ONCE)(on_approve)
        app.action(APPROVE_ALWAYS)(on_approve)
        app.action(re.compile(f"^{CLARIFY_ANSWER}_[0-9]+$"))(on_approve)  # a question's option
        app.action(REJECT)(on_reject_click)
        app.action(FEEDBACK)(on_feedback)
        app.action(EDIT)(on_edit_click)
        app.view(REJECT_VIEW)(on_submit)
        app.view(EDIT_VIEW)(on_submit)
        app.error(on_error)

    async def _on_message(self, body: dict[str, Any], ack: AsyncAck) -> None:
        envelope = _validate(EventCallback, body)
        event = _validate(MessageEvent, envelope.event)
        # A Slack Connect user's message carries their own workspace's id; the channel, and
        # the answer, are this bot's when its installation sees the event.
        ours = self.identity.team_id
        team = ours if envelope.seen_by(ours) else envelope.team_id
        inbound = message_inbound(event, envelope.event_id, team, self.identity)
        if inbound is not None:
            await self._ingest(inbound)
            if self._untitled and event.thread_ts:
                self._name_thread(event.channel, event.thread_ts, inbound.text)
        await ack()

    # --- the assistant view ----------------------------------------------------------------

    def _thread_started(self, body: dict[str, Any]) -> None:
        """A person opened a new assistant thread: suggest prompts; its first message will
        be its title."""
        thread = (body.get("event") or {}).get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not isinstance(channel, str) or not isinstance(thread_ts, str):
            raise Malformed("assistant_thread: expected channel_id and thread_ts")
        self._untitled[(channel, thread_ts)] = None
        while len(self._untitled) > UNTITLED:
            self._untitled.popitem(last=False)
        self._later(
            "assistant.threads.setSuggestedPrompts",
            self._prompt.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=list(SUGGESTED_PROMPTS)
            ),
        )

    def _name_thread(self, channel: str, thread_ts: str, text: str) -> None:
        if (channel, thread_ts) not in self._untitled or not text.strip():
            return
        del self._untitled[(channel, thread_ts)]
        title = shown(" ".join(text.split()))[:TITLE_CHARS]
        self._later(
            "assistant.threads.setTitle",
            self._prompt.assistant_threads_setTitle(
                channel_id=channel, thread_ts=thread_ts, title=title
            ),
        )

    def _later(self, method: str, call: Coroutine[Any, Any, Any]) -> None:
        """A call that adorns the thread, made after the request is answered (within Slack's
        3 s): a failure is only logged."""

        async def run() -> None:
            try:
                await call
            except (SlackApiError, ClientError, TimeoutError) as exc:
                log.warning("slack: %s failed (%s)", method, type(exc).__name__)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_command(self, body: dict[str, Any], ack: AsyncAck) -> None:
        await self._ingest(command_inbound(_validate(SlashCommand, body)))
        await ack()

    async def _on_approve(self, body: dict[str, Any], ack: AsyncAck) -> None:
        inbound = action_inbound(_validate(BlockActions, body))
        if inbound is not None:
            await self._ingest(inbound)
        await ack()

    async def _ingest(self, inbound: Inbound) -> None:
        """Queue it, unless it comes from another workspace (the same app installed there,
        or an Enterprise Grid org): this bot's token speaks for one workspace only."""
        if not inbound.conversation.id.startswith(f"slack:{self.identity.team_id}:"):
            log.warning("slack: ignoring %s from another workspace", inbound.event_id)
            return
        await self.ingest(inbound)

    async def _on_reject_click(self, body: dict[str, Any], ack: AsyncAck) -> None:
        """Ask for a reason in a modal; the submitted modal is the decision."""
        payload: BlockActions = _validate(BlockActions, body)
        await ack()
        approval_id = payload.actions[0].value
        typed = f"Type `/reject {approval_id} <reason>` to reject it."
        await self._open(payload, reject_modal(self._context(payload, approval_id)), typed)

    async def _on_edit_click(self, body: dict[str, Any], ack: AsyncAck) -> None:
        """The call's arguments in a modal to change (the button carries them, see
        `blocks.approval_blocks`); the submitted modal is `/approve <id> edit <json>`."""
        payload: BlockActions = _validate(BlockActions, body)
        await ack()
        approval_id, _, arguments = payload.actions[0].value.partition("\n")
        typed = f"Type `/approve {approval_id} edit <json arguments>` to approve it edited."
        view = edit_modal(self._context(payload, approval_id), arguments)
        await self._open(payload, view, typed)

    @staticmethod
    def _context(payload: BlockActions, approval_id: str) -> ModalContext:
        return ModalContext(
            approval_id=approval_id, channel=payload.channel.id, thread_ts=action_thread(payload)
        )

    async def _open(self, payload: BlockActions, view: dict[str, Any], typed: str) -> None:
        """Open a modal (its trigger is valid for 3 s, so here, not in the worker); when that
        fails, tell the clicker privately how to type the same."""
        try:
            await self._prompt.views_open(trigger_id=payload.trigger_id, view=view)
        except (SlackApiError, ClientError, TimeoutError) as exc:
            log.warning("slack: cannot open a dialog (%s)", type(exc).__name__)
            if payload.response_url:
                with contextlib.suppress(ClientError, TimeoutError):
                    await AsyncWebhookClient(payload.response_url).send(
                        text=typed, response_type="ephemeral", replace_original=False
                    )

    async def _on_submit(self, body: dict[str, Any], ack: AsyncAck) -> None:
        """A reject or edit modal submitted: a decision, checked like any other."""
        submission = _validate(ViewSubmission, body)
        try:
            inbound = modal_inbound(submission)
        except ValidationError as exc:
            raise Malformed("bad private_metadata") from exc
        await self._ingest(inbound)
        await ack()

    def _on_error(self, error: Exception) -> BoltResponse:
        if isinstance(error, IngestUnavailable):
            log.warning("slack: cannot queue the request (%s): answering 503", error)
            return BoltResponse(status=503, body="storage unavailable, retry later")
        if isinstance(error, Malformed):
            return BoltResponse(status=400, body=f"malformed request: {error}")
        log.error("slack: listener failed: %s", error, exc_info=error)
        return BoltResponse(status=500, body="")

    # --- HTTP ------------------------------------------------------------------------------

    async def handle_http(self, request: web.Request) -> web.Response:
        kind, outcome = "unknown", "rejected"
        try:
            response, kind = await self._checked(request)
            outcome = _OUTCOMES.get(response.status, str(response.status))
            return response
        finally:
            INBOUND.labels("slack", kind, outcome).inc()

    async def _checked(self, request: web.Request) -> tuple[web.Response, str]:
        raw = await read_body(request)
        if isinstance(raw, web.Response):
            return raw, "unknown"
        if self.verifier is None:
            return web.Response(status=404, text="Slack HTTP mode is not configured"), "unknown"
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        try:
            valid = self.verifier.is_valid(raw, timestamp, signature)
        except ValueError:  # a missing or non-numeric timestamp (slack_sdk calls int() on it)
            valid = False
        if not valid:
            return web.Response(status=401, text="invalid signature or stale timestamp"), "unknown"
        try:
            body = raw.decode()
            kind, parsed = _kind(body, request.headers.get("Content-Type", ""))
        except (Malformed, UnicodeDecodeError) as exc:
            return web.Response(status=400, text=f"malformed request: {exc}"), "unknown"
        if kind == "event_callback" and self._someone_spoke(parsed):
            return _to_aiohttp(await self._message_directly(parsed)), kind
        try:
            # Bolt reads who and where from the body as it builds the request, trusting the
            # types of fields clawgate itself never reads (`enterprise`, `authorizations`…).
            bolt_request = AsyncBoltRequest(
                body=body, headers={k: [v] for k, v in request.headers.items()}
            )
        except (TypeError, AttributeError, KeyError, IndexError):
            return web.Response(
                status=400, text="malformed request: a field of the wrong type"
            ), kind
        return _to_aiohttp(await self.app.async_dispatch(bolt_request)), kind

    def _someone_spoke(self, body: dict[str, Any]) -> bool:
        """A plain `app_mention` or `message` event (no subtype) from a person other than this
        bot: bolt would hand it to `on_message` unchanged (its self-event filter does not
        apply, the authorization is constant), so `_checked` does that itself. Bolt's
        middleware chain and its second parse of the body cost about a fifth of the CPU of
        an event request; every other request still goes through bolt."""
        event = body.get("event")
        if not isinstance(event, dict) or event.get("type") not in MESSAGE_EVENTS:
            return False
        user = event.get("user")
        return (
            isinstance(user, str)
            and user != self.identity.bot_user_id
            and "subtype" not in event
            and not event.get("bot_id")
            and "user" not in body
            and "user_id" not in body
        )

    async def _message_directly(self, body: dict[str, Any]) -> BoltResponse:
        """`on_message` as bolt runs it: the ack is the response, a failure goes to `_on_error`."""
        ack = AsyncAck()  # type: ignore[no-untyped-call]
        try:
            await self._on_message(body, ack)
        except Exception as error:  # as bolt does: the error handler picks the status
            return self._on_error(error)
        return ack.response or BoltResponse(status=200, body="")

    def socket_mode_handler(self, app_token: str) -> AsyncSocketModeHandler:
        return AsyncSocketModeHandler(self.app, app_token=app_token)


_OUTCOMES = {200: "accepted", 400: "malformed", 401: "unauthorized", 413: "too_large"}
_OUTCOMES |= {404: "unhandled", 500: "error", 503: "unavailable"}


def _to_aiohttp(bolt: BoltResponse) -> web.Response:
    headers = {k: v[0] for k, v in bolt.headers.items() if v and k.lower() != "content-length"}
    return web.Response(status=bolt.status, body=bolt.body, headers=headers)
