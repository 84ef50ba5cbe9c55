"""`clawgate serve` for Feishu, end to end: the real aiohttp server and lark-oapi (client,
event dispatcher, long connection) against FakeFeishu in its own thread, a real Redis, inbound
requests AES-256-CBC encrypted and signed exactly as Feishu does, the in-process worker.
Every test checks what a user would notice: what was sent where, what ran in the workdir,
what was refused, and what is queued in Redis."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.feishu.cardkit import ANSWER as ANSWER_ID
from adapters.feishu.cardkit import STEPS
from adapters.feishu.crypto import encrypt
from adapters.feishu.stream import INTERVAL as STREAM_INTERVAL
from bot.settings import Settings
from runtime.approval.models import ApprovalRecord
from runtime.models import UserMessage
from tests.conftest import free_port
from tests.e2e.test_worker_processes import Clawgate
from tests.fake_feishu import (
    BOT_OPEN_ID,
    CARDKIT_PATH,
    CODE_RATE_LIMITED,
    CODE_TOKEN_INVALID,
    TENANT_KEY,
    Call,
    FakeFeishu,
    StoredMessage,
    card_action_event,
    challenge_body,
    event_envelope,
    event_request,
    find_element,
    message_event,
    new_message_id,
    post,
    signed_headers,
)
from tests.fake_openai import FakeOpenAI, calls, reply, streamed
from tests.processes import CLAWGATE, clean_env
from tests.serving import (
    Served,
    assert_settings_errors,
    load_settings_in,
    own_redis,
    run_serve,
    running,
)

KEY = "test-encrypt-key"
TOKEN = "test-verification-token"
CHAT = "oc_chat1"
DM = "oc_dm1"
ADMIN = "ou_admin"
APPROVER = "ou_carol"
ALICE = "ou_alice"  # the requester in these tests; may not approve her own calls
BOB = "ou_bob"  # neither admin nor approver
MENTION = [("@_user_1", BOT_OPEN_ID, "clawgate")]
NOTES = "Quarterly notes: the fox jumped over the lazy dog.\n"
ANSWER = NOTES.rstrip("\n")
MESSAGE = "im.message.receive_v1"
CARD = "card.action.trigger"
FEISHU_VARS = (
    "FEISHU_APP_ID",
    "FEISHU_APP_SECRET",
    "FEISHU_VERIFICATION_TOKEN",
    "FEISHU_ENCRYPT_KEY",
    "FEISHU_DOMAIN",
    "FEISHU_MODE",
)

pytestmark = pytest.mark.e2e  # real processes and servers: the slow tier


# ---------------------------------------------------------------------------------------------
# The harness: one service (runtime + worker + Feishu adapter) behind a real HTTP server
# ---------------------------------------------------------------------------------------------


@dataclass
class Said:
    """A message event that was posted: its envelope and the HTTP answer."""

    envelope: dict[str, Any]
    status: int
    text: str

    @property
    def message_id(self) -> str:
        return str(self.envelope["event"]["message"]["message_id"])

    @property
    def event_id(self) -> str:
        return str(self.envelope["header"]["event_id"])


@dataclass
class Harness(Served[FakeFeishu]):
    app_id: str

    @property
    def url(self) -> str:
        return str(self.server.make_url("/feishu/events"))

    async def post(self, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, str]:
        return await post(self.url, body, headers)

    async def send(self, envelope: dict[str, Any], **kwargs: Any) -> tuple[int, str]:
        """POST an event encrypted with our key and signed, like Feishu."""
        return await self.post(*event_request(envelope, encrypt_key=KEY, **kwargs))

    async def say(
        self,
        text: str,
        *,
        mention: bool = True,
        chat_type: str = "group",
        chat_id: str = CHAT,
        sender: str = ALICE,
        root_id: str | None = None,
        message_id: str | None = None,
        event_id: str | None = None,
        sender_type: str = "user",
    ) -> Said:
        """A user's message; with `mention`, the text starts with the bot's mention."""
        event = message_event(
            f"@_user_1 {text}" if mention else text,
            chat_id=chat_id,
            chat_type=chat_type,
            sender_open_id=sender,
            message_id=message_id,
            root_id=root_id,
            parent_id=root_id,
            mentions=MENTION if mention else (),
            sender_type=sender_type,
        )
        envelope = event_envelope(MESSAGE, event, token=TOKEN, event_id=event_id)
        status, answer = await self.send(envelope)
        return Said(envelope, status, answer)

    async def click(
        self,
        action: str,
        card: Card,
        operator: str,
        chat_id: str = CHAT,
        form_value: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """A click on the approval card's button for `action` (with `form_value`: its edit
        form submitted), calling back as Feishu does with the button's callback value and
        name; returns (HTTP status, decoded JSON answer)."""
        button: dict[str, Any] = {}  # a card we never sent: a value of our shape
        value = {"action": action, "approval_id": card.approval_id}
        if card.call.content is not None:
            (button,) = [b for b in buttons(card.call.content) if value_of(b)["action"] == action]
            value = value_of(button)
        event = card_action_event(
            value,
            operator_open_id=operator,
            open_message_id=card.message_id,
            open_chat_id=chat_id,
            form_value=form_value,
            name=button.get("name"),
        )
        status, text = await self.send(event_envelope(CARD, event, token=TOKEN))
        return status, json.loads(text) if status == 200 else text

    # --- what is in Redis ----------------------------------------------------------------

    async def approval(self, approval_id: str) -> ApprovalRecord:
        loaded = await self.service.runtime.approvals.load(approval_id)
        assert loaded is not None, approval_id
        return loaded[0]

    # --- what was sent -------------------------------------------------------------------

    def outbound(self) -> list[Call]:
        """Every successful message call (send, reply, patch, update, delete)."""
        return [c for c in self.fake.calls() if c.kind not in ("token", "bot_info") and c.ok]

    def texts(self, root_id: str) -> list[str]:
        """Texts the bot posted under `root_id` (its replies there), current content."""
        return [m.text for m in self.fake.messages(root_id=root_id) if m.text is not None]

    async def await_text(self, root_id: str, text: str, what: str) -> StoredMessage:
        def found() -> StoredMessage | None:
            return next((m for m in self.fake.messages(root_id=root_id) if m.text == text), None)

        return await self.fake.await_for(found, 15, what=what)


def session_of(root_id: str | None, chat_id: str = CHAT) -> str:
    return f"feishu:{TENANT_KEY}:{chat_id}" + (f":{root_id}" if root_id else "")


@contextlib.asynccontextmanager
async def serving(
    fake: FakeFeishu,
    workdir: Path,
    redis_url: str,
    *,
    start_worker: bool = True,
    **overrides: str,
) -> AsyncIterator[Harness]:
    prefix = f"cgfeishu{uuid.uuid4().hex[:10]}"
    app_id, secret = fake.new_app()  # lark-oapi caches tokens per app id, process-wide
    values: dict[str, Any] = {
        "REDIS_URL": redis_url,
        "CLAWGATE_REDIS_PREFIX": prefix,
        "FEISHU_APP_ID": app_id,
        "FEISHU_APP_SECRET": secret,
        "FEISHU_ENCRYPT_KEY": KEY,
        "FEISHU_VERIFICATION_TOKEN": TOKEN,
        "FEISHU_DOMAIN": fake.url,
        "CLAWGATE_WORKDIR": str(workdir),
        "CLAWGATE_ADMINS": f"feishu:{ADMIN}",
        "CLAWGATE_APPROVERS": f"feishu:{APPROVER}",
        "CLAWGATE_BASH_TIMEOUT": "20",
        **overrides,
    }
    settings = Settings(**values)
    async with running(settings, worker=True, start_worker=start_worker) as (service, server):
        yield Harness(fake, service, server, workdir, prefix, settings, app_id)


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeFeishu]:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "REDIS_URL", "CLAWGATE_POLICY_FILE"):
        monkeypatch.delenv(var, raising=False)
    for var in FEISHU_VARS:
        monkeypatch.delenv(var, raising=False)
    async with FakeFeishu() as server:
        yield server


@pytest.fixture
async def h(fake: FakeFeishu, workdir: Path, redis_url: str) -> AsyncIterator[Harness]:
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(fake, workdir, redis_url) as harness:
        yield harness


# ---------------------------------------------------------------------------------------------
# Approval cards
# ---------------------------------------------------------------------------------------------


@dataclass
class Card:
    """An approval card the bot replied with."""

    message_id: str
    approval_id: str
    root_id: str  # the user message whose thread it is in
    call: Call

    @property
    def session(self) -> str:
        return session_of(self.root_id)


def components(node: Any) -> Iterator[dict[str, Any]]:
    """Every component of a JSON 2.0 card, nested ones too, in order."""
    if isinstance(node, dict):
        if "tag" in node:
            yield node
        for value in node.values():
            yield from components(value)
    elif isinstance(node, list):
        for value in node:
            yield from components(value)


def buttons(card: Any) -> list[dict[str, Any]]:
    return [c for c in components(card) if c["tag"] == "button"]


def value_of(button: dict[str, Any]) -> dict[str, Any]:
    """What a button's click calls back with (its callback behaviour's value)."""
    (behaviour,) = [b for b in button["behaviors"] if b["type"] == "callback"]
    return dict(behaviour["value"])


def card_text(card: Any) -> str:
    texts = (c.get("content") for c in components(card) if c["tag"] in ("markdown", "plain_text"))
    return "\n".join(str(t) for t in texts)


def element(card: dict[str, Any], element_id: str) -> str | None:
    found = find_element(card, element_id)
    return None if found is None else str(found["content"])


def is_approval_card(content: Any) -> bool:
    return isinstance(content, dict) and content.get("schema") == "2.0" and "header" in content


async def request_risky(h: Harness, text: str, sender: str = ALICE) -> Card:
    """Mention the bot with a risky request; wait for the approval card in its thread."""
    said = await h.say(text, sender=sender)
    assert said.status == 200, said.text

    def card() -> Call | None:
        return next(
            (
                c
                for c in h.fake.replies(said.message_id)
                if is_approval_card(c.content) and not c.duplicate
            ),
            None,
        )

    call = await h.fake.await_for(card, 15, what="the approval card")
    (button, *_) = buttons(call.content)
    assert call.message_id is not None
    return Card(call.message_id, value_of(button)["approval_id"], said.message_id, call)


def current_card(h: Harness, card: Card) -> Any:
    stored = h.fake.message(card.message_id)
    assert stored is not None
    return stored.content


# ---------------------------------------------------------------------------------------------
# 1. The url_verification challenge
# ---------------------------------------------------------------------------------------------


async def test_challenge_is_answered_only_with_our_token(h: Harness) -> None:
    # Sent encrypted but without signature headers, as Feishu does when the URL is saved.
    status, text = await h.post(challenge_body(TOKEN, "chal-123", KEY))
    assert (status, json.loads(text)) == (200, {"challenge": "chal-123"})

    assert (await h.post(challenge_body("wrong-token", "chal-1", KEY)))[0] == 401
    assert (await h.post(challenge_body(TOKEN, "chal-2", "another-key")))[0] == 401
    assert (await h.post(challenge_body(TOKEN, "chal-3")))[0] == 401  # not encrypted
    assert await h.enqueued() == 0 and h.outbound() == []


# ---------------------------------------------------------------------------------------------
# 2. Which messages are answered, and where
# ---------------------------------------------------------------------------------------------


async def test_p2p_message_is_answered_with_a_plain_reply(h: Harness) -> None:
    said = await h.say("read notes.txt", mention=False, chat_type="p2p", chat_id=DM)
    assert (said.status, json.loads(said.text)) == (200, {"msg": "success"})

    answer = await h.await_text(said.message_id, ANSWER, "the answer")
    assert answer.chat_id == DM and answer.thread_id is None
    await h.drained()
    replies = h.fake.replies(said.message_id)
    assert replies and all(not c.reply_in_thread for c in replies)
    assert h.fake.sends() == []  # everything is a reply to the user's message
    assert all(c.uuid for c in replies)  # Feishu's idempotency key on every send
    assert len({c.uuid for c in replies}) == len(replies)
    # One card, streamed: thinking, the tool's line, the answer; finished, streaming off.
    (card,) = [m for m in h.fake.messages(DM) if m.msg_type == "interactive"]  # and a notice
    (entity,) = h.fake.cards()
    assert card.content == entity.card and not entity.streaming
    steps = [str(element(c, STEPS)) for c in entity.history if element(c, STEPS)]
    assert steps[0] == "💭 Thinking…" and any(s.startswith("✅ read") for s in steps), steps
    assert [t for t in h.texts(said.message_id) if "lazy dog" in t] == [ANSWER]
    assert await h.history_length(session_of(None, DM)) > 0


async def test_lowercased_headers_from_a_proxy_are_accepted(h: Harness) -> None:
    """HTTP/2 proxies lowercase header names; lark-oapi looks them up case-sensitively."""
    event = message_event("read notes.txt", chat_type="p2p", chat_id=DM, sender_open_id=ALICE)
    body, headers = event_request(event_envelope(MESSAGE, event, token=TOKEN), encrypt_key=KEY)
    status, _ = await h.post(body, {k.lower(): v for k, v in headers.items()})
    assert status == 200
    message_id = event["message"]["message_id"]
    await h.await_text(message_id, ANSWER, "the answer")


async def test_group_mention_is_answered_in_thread_and_follow_ups_too(h: Harness) -> None:
    (h.workdir / "more.txt").write_text("second file body\n")
    said = await h.say("read notes.txt")  # "@_user_1 read notes.txt": the model sees no mention
    assert said.status == 200
    answer = await h.await_text(said.message_id, ANSWER, "the answer in thread")
    assert answer.chat_id == CHAT and answer.thread_id is not None
    await h.drained()
    assert all(c.reply_in_thread for c in h.fake.replies(said.message_id))
    assert h.fake.sends() == []
    history = await h.service.runtime.history.load(session_of(said.message_id))
    users = [m for m in history if isinstance(m, UserMessage)]
    assert [m.content for m in users] == ["read notes.txt"]  # the mention is not for the model

    # A follow-up in that thread without a mention is answered there.
    follow_up = await h.say("read more.txt", mention=False, root_id=said.message_id)
    assert follow_up.status == 200
    await h.await_text(said.message_id, "second file body", "the follow-up answer")
    await h.drained()
    assert all(c.reply_in_thread for c in h.fake.replies(follow_up.message_id))

    # A thread the bot never joined: queued (Redis decides), then ignored.
    before, sent = await h.enqueued(), len(h.outbound())
    stranger = new_message_id()
    assert (await h.say("read notes.txt", mention=False, root_id=stranger)).status == 200
    await h.drained()
    assert await h.enqueued() == before + 1
    assert len(h.outbound()) == sent
    assert await h.history_length(session_of(stranger)) == 0

    # A group message without mention, outside a thread; the bot's own; another app's:
    # not even queued.
    ignored = [
        await h.say("read notes.txt", mention=False),
        await h.say("read notes.txt", sender=BOT_OPEN_ID, root_id=said.message_id),
        await h.say("read notes.txt", sender="ou_otherbot", sender_type="app"),
    ]
    assert [s.status for s in ignored] == [200, 200, 200]
    await asyncio.sleep(0.2)
    await h.drained()
    assert await h.enqueued() == before + 1
    assert len(h.outbound()) == sent
    assert [t for t in h.texts(said.message_id) if "lazy dog" in t] == [ANSWER]


async def test_mentions_of_others_are_named_and_help_is_answered(h: Harness) -> None:
    """The bot's mention is stripped wherever it is; another person's becomes @name."""
    event = message_event(
        "@_user_2 see this @_user_1 /help",
        mentions=[("@_user_1", BOT_OPEN_ID, "clawgate"), ("@_user_2", BOB, "Bob")],
    )
    message_id = event["message"]["message_id"]
    assert (await h.send(event_envelope(MESSAGE, event, token=TOKEN)))[0] == 200
    # "@Bob see this /help" is not a command: the demo model answers with its grammar.
    reply = await h.fake.await_for(
        lambda: [t for t in h.texts(message_id) if t.startswith("I am the offline demo model")],
        15,
        what="the demo grammar",
    )
    assert len(reply) == 1
    await h.drained()

    said = await h.say("/help")
    help_text = await h.fake.await_for(
        lambda: [t for t in h.texts(said.message_id) if "/approve <id>" in t], 15, what="/help"
    )
    assert len(help_text) == 1


async def test_a_console_link_asked_for_in_a_group_comes_in_a_direct_message(h: Harness) -> None:
    """A sign-in link is a secret: never in the group, where everyone reads the thread."""
    said = await h.say("/clawgate console")
    direct = f"oc_p2p_{ALICE}"
    (message,) = await h.fake.await_for(
        lambda: [m for m in h.fake.messages(direct) if "/console/login?token=" in (m.text or "")],
        15,
        what="the sign-in link in Alice's direct chat",
    )
    assert message.text is not None and "works once, for 10 minutes" in message.text
    assert not [m for m in h.fake.messages(CHAT) if "/console/" in (m.text or "")]
    assert h.texts(said.message_id) == []
    token = message.text.split("token=")[1].split()[0]
    assert h.service.runtime.sign_in is not None
    actor = await h.service.runtime.sign_in.redeem(token)
    assert actor is not None and actor.key == f"feishu:{ALICE}"


# ---------------------------------------------------------------------------------------------
# 3. Human approval through card buttons and typed commands
# ---------------------------------------------------------------------------------------------


async def test_risky_call_card_refusals_then_admin_click_runs_once(h: Harness) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    card = await request_risky(h, "run: rm -f victim.txt")

    assert card.call.reply_in_thread and card.call.uuid
    content = card.call.content
    assert content["schema"] == "2.0" and content["config"]["update_multi"] is True
    assert [value_of(b) for b in buttons(content)] == [
        {"action": action, "approval_id": card.approval_id}
        for action in ("approve_once", "approve_always", "reject", "edit")
    ]  # the last, the edit form's submit button
    details = card_text(content)
    assert card.approval_id in details and "rm -f victim.txt" in details
    assert f"<at id={ALICE}></at>" in details  # the requester
    await h.drained()
    assert victim.read_text() == "precious"  # nothing ran while waiting
    assert (await h.approval(card.approval_id)).status == "pending"

    # The requester herself and a bystander: refused with a toast, nothing queued or sent.
    before, sent = await h.enqueued(), len(h.outbound())
    for who in (ALICE, BOB):
        status, answer = await h.click("approve_once", card, who)
        assert status == 200
        assert answer["toast"]["type"] == "error", answer
        assert f"You cannot decide approval {card.approval_id}" in answer["toast"]["content"]
        assert "card" not in answer
    # An admin, but from another chat: decisions come from the conversation that asked.
    status, answer = await h.click("approve_once", card, ADMIN, chat_id="oc_elsewhere")
    assert status == 200 and answer["toast"]["type"] == "error", answer
    assert "conversation that requested it" in answer["toast"]["content"]
    await asyncio.sleep(0.2)
    assert await h.enqueued() == before
    assert len(h.outbound()) == sent
    assert h.fake.patches(card.message_id) == []
    assert victim.read_text() == "precious"
    assert (await h.approval(card.approval_id)).status == "pending"

    # An admin approves: accepted at once, runs once, the card is patched, the answer follows.
    status, answer = await h.click("approve_once", card, ADMIN)
    assert status == 200
    assert answer["toast"] == {"type": "info", "content": f"Approving {card.approval_id}…"}
    # This click decides: the card (JSON 2.0) loses its buttons at once, saying so.
    assert answer["card"]["type"] == "raw" and answer["card"]["data"]["schema"] == "2.0"
    assert buttons(answer["card"]["data"]) == []
    assert f"⏳ Approving by <at id={ADMIN}></at>…" in card_text(answer["card"]["data"])
    await h.fake.await_for(lambda: not victim.exists(), 15, what="the approved rm to run")
    await h.drained()
    assert await h.enqueued() == before + 1
    patched = current_card(h, card)
    assert buttons(patched) == []
    assert f"Approved by <at id={ADMIN}></at>" in card_text(patched)
    assert patched["config"]["update_multi"] is True
    record = await h.approval(card.approval_id)
    assert record.status == "consumed" and record.decided_by == f"feishu:{ADMIN}"
    answers = [m for m in h.fake.messages(root_id=card.root_id) if "exit code" in str(m.text)]
    assert len(answers) == 1 and answers[0].thread_id is not None

    # A second click (by an admin, even) is refused: already decided.
    victim.write_text("new")
    sent = len(h.outbound())
    status, answer = await h.click("approve_once", card, ADMIN)
    assert status == 200 and answer["toast"]["type"] == "error"
    assert "already" in answer["toast"]["content"], answer
    await asyncio.sleep(0.2)
    await h.drained()
    assert victim.read_text() == "new"
    assert len(h.outbound()) == sent


async def test_reject_button_patches_the_card_and_runs_nothing(h: Harness) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    card = await request_risky(h, "run: rm -f victim.txt")
    await h.drained()

    status, answer = await h.click("reject", card, APPROVER)
    assert status == 200
    assert answer["toast"] == {"type": "info", "content": f"Rejecting {card.approval_id}…"}
    assert f"Rejecting by <at id={APPROVER}></at>" in card_text(answer["card"]["data"])
    await h.fake.await_for(
        lambda: h.fake.patches(card.message_id), 15, what="the card to be patched"
    )
    await h.drained()
    patched = current_card(h, card)
    assert buttons(patched) == []
    assert f"Rejected by <at id={APPROVER}></at>" in card_text(patched)
    assert victim.read_text() == "precious"
    assert (await h.approval(card.approval_id)).status == "rejected"
    # The model was told and answered in the thread.
    told = [t for t in h.texts(card.root_id) if "did not complete" in t]
    assert len(told) == 1, h.fake.describe()


async def test_the_edit_form_on_the_card_approves_the_edited_call(h: Harness) -> None:
    """The card's form is prefilled with the arguments; submitted edited, the edited call runs
    (never the original) once the policy judged it again; a denied edit is refused."""
    keep, drop = h.workdir / "keep.txt", h.workdir / "drop.txt"
    keep.write_text("keep")
    drop.write_text("drop")
    card = await request_risky(h, "run: rm -f keep.txt")
    (form,) = [e for e in card.call.content["body"]["elements"] if e.get("tag") == "form"]
    field, submit = form["elements"]
    assert json.loads(field["default_value"]) == {"command": "rm -f keep.txt"}
    assert (field["tag"], field["name"], submit["form_action_type"]) == (
        "input",
        "arguments",
        "submit",
    )
    assert value_of(submit) == {"action": "edit", "approval_id": card.approval_id}

    status, answer = await h.click(
        "edit", card, APPROVER, form_value={"arguments": '{"command": "rm -rf /"}'}
    )
    assert status == 200 and answer["toast"]["type"] == "info", answer

    def refusal() -> list[str]:
        return [t for t in h.texts(card.root_id) if "not edited" in t]

    (refused,) = await h.fake.await_for(refusal, 15, what="the refusal")
    assert "refused by the risk policy" in refused
    await h.drained()
    assert (await h.approval(card.approval_id)).status == "pending"

    edited = '{\n  "command": "rm -f drop.txt"\n}'
    status, answer = await h.click("edit", card, APPROVER, form_value={"arguments": edited})
    assert answer == {"toast": {"type": "info", "content": f"Approving {card.approval_id}…"}}
    await h.fake.await_for(lambda: not drop.exists(), 15, what="the edited call to run")
    await h.drained()
    assert keep.read_text() == "keep"
    record = await h.approval(card.approval_id)
    assert record.status == "consumed" and json.loads(record.arguments) == {
        "command": "rm -f drop.txt"
    }
    patched = current_card(h, card)
    assert buttons(patched) == [] and not [c for c in components(patched) if c["tag"] == "form"]
    assert f"Approved by <at id={APPROVER}></at>" in card_text(patched)


async def test_typed_approve_and_reject_in_the_thread(h: Harness) -> None:
    log = h.workdir / "log.txt"
    first = await request_risky(h, "run: echo once >> log.txt")
    await h.drained()

    said = await h.say(f"/approve {first.approval_id}", sender=ADMIN, root_id=first.root_id)
    assert said.status == 200
    await h.fake.await_for(log.exists, 15, what="the approved echo")
    await h.drained()
    assert log.read_text() == "once\n"
    assert f"Approved by <at id={ADMIN}></at>" in card_text(current_card(h, first))
    assert (await h.approval(first.approval_id)).status == "consumed"

    # Typed again: refused, said in the thread, nothing runs.
    again = await h.say(f"/approve {first.approval_id}", sender=ADMIN, root_id=first.root_id)
    refusal = await h.fake.await_for(
        lambda: [c for c in h.fake.replies(again.message_id) if c.text and "already" in c.text],
        15,
        what="the refusal of a second /approve",
    )
    assert len(refusal) == 1 and refusal[0].reply_in_thread
    await h.drained()
    assert log.read_text() == "once\n"

    second = await request_risky(h, "run: rm -f notes.txt")
    await h.drained()
    said = await h.say(
        f"/reject {second.approval_id} not on a Friday", sender=APPROVER, root_id=second.root_id
    )
    assert said.status == 200
    await h.fake.await_for(
        lambda: h.fake.patches(second.message_id), 15, what="the rejected card patch"
    )
    await h.drained()
    record = await h.approval(second.approval_id)
    assert record.status == "rejected" and record.reason == "not on a Friday"
    text = card_text(current_card(h, second))
    assert f"Rejected by <at id={APPROVER}></at>\nnot on a Friday" in text
    assert (h.workdir / "notes.txt").read_text() == NOTES


async def test_messages_held_while_waiting_run_after_the_decision(h: Harness) -> None:
    victim = h.workdir / "victim.txt"
    victim.write_text("precious")
    card = await request_risky(h, "run: rm -f victim.txt")
    await h.drained()

    # Two follow-ups in the thread while it waits: the sender is told once, nothing runs.
    first = await h.say("read notes.txt", mention=False, root_id=card.root_id)
    second = await h.say("run: echo later", mention=False, root_id=card.root_id)
    assert (first.status, second.status) == (200, 200)
    told = await h.fake.await_for(
        lambda: [c for c in h.fake.replies(first.message_id) if c.text and "Waiting" in c.text],
        15,
        what="the held notice",
    )
    assert card.approval_id in str(told[0].text) and told[0].reply_in_thread
    await h.drained()
    assert h.fake.replies(second.message_id) == []
    assert [t for t in h.texts(card.root_id) if t == ANSWER] == []

    status, _ = await h.click("approve_always", card, APPROVER)
    assert status == 200
    await h.await_text(card.root_id, ANSWER, "the first held message's answer")
    later = "later\n[exit code 0]"
    await h.await_text(card.root_id, later, "the second held message's answer")
    await h.drained()
    assert not victim.exists()
    assert [t for t in h.texts(card.root_id) if t in (ANSWER, later)] == [ANSWER, later]
    # "Approve always" also added a standing rule, and says so in the thread.
    assert [t for t in h.texts(card.root_id) if "are now allowed" in t]
    assert f"Approved by <at id={APPROVER}></at>" in card_text(current_card(h, card))


# ---------------------------------------------------------------------------------------------
# 4. Redelivery
# ---------------------------------------------------------------------------------------------


async def test_redelivered_event_runs_once(h: Harness) -> None:
    said = await h.say("run: echo ran >> log.txt", chat_type="p2p", chat_id=DM, mention=False)
    assert said.status == 200
    # Feishu retries the same event (same event_id) ...
    assert (await h.send(said.envelope))[0] == 200
    # ... and may deliver the same message under a new event id.
    again = await h.say(
        "run: echo ran >> log.txt",
        chat_type="p2p",
        chat_id=DM,
        mention=False,
        message_id=said.message_id,
    )
    assert again.status == 200 and again.event_id != said.event_id
    card_calls = await h.fake.await_for(
        lambda: [c for c in h.fake.replies(said.message_id) if is_approval_card(c.content)],
        15,
        what="the card",
    )
    await asyncio.sleep(0.3)
    await h.drained()
    assert await h.enqueued() == 1
    messages = h.fake.messages(DM)
    assert len(card_calls) == 1
    assert len([m for m in messages if is_approval_card(m.content)]) == 1
    texts = [m.text for m in messages if m.text]
    assert len(texts) == len(set(texts)), texts  # the notice and working message once each
    # Both event ids and the message id are remembered: any of them comes back, it is known.
    assert len(await h.seen_keys()) == 3


# ---------------------------------------------------------------------------------------------
# 5. Bad requests: refused, nothing queued, nothing sent
# ---------------------------------------------------------------------------------------------


async def test_bad_requests_are_refused_and_never_queued(h: Harness) -> None:
    event = message_event("read notes.txt", chat_type="p2p", chat_id=DM)
    envelope = event_envelope(MESSAGE, event, token=TOKEN)
    body, headers = event_request(envelope, encrypt_key=KEY)

    async def status_of(body: bytes, headers: dict[str, str] | None = None) -> int:
        return (await h.post(body, headers))[0]

    # 401: bad signature, stale timestamp, no signature, wrong verification token, wrong key,
    # not encrypted.
    assert await status_of(body, {**headers, "X-Lark-Signature": "0" * 64}) == 401
    assert await status_of(body, {**headers, "X-Lark-Request-Nonce": "tampered"}) == 401
    stale = event_request(envelope, encrypt_key=KEY, timestamp=int(time.time()) - 600)
    assert await status_of(*stale) == 401
    assert await status_of(body) == 401
    assert await status_of(body, {**headers, "X-Lark-Request-Timestamp": "soon"}) == 401
    forged = event_envelope(MESSAGE, event, token="wrong-token")
    assert await status_of(*event_request(forged, encrypt_key=KEY)) == 401
    other_key = event_request(envelope, encrypt_key="another-key")
    assert await status_of(*other_key) == 401
    signed_other = event_request(envelope, encrypt_key="another-key")[0]
    assert await status_of(signed_other, signed_headers(KEY, signed_other)) == 401
    plain = json.dumps(envelope).encode()
    assert await status_of(plain, signed_headers(KEY, plain)) == 401

    # 400: authentic (our key, our signature) but not what Feishu sends.
    def sealed(plaintext: str) -> tuple[bytes, dict[str, str]]:
        sealed_body = json.dumps({"encrypt": encrypt(KEY, plaintext)}).encode()
        return sealed_body, signed_headers(KEY, sealed_body)

    assert await status_of(*sealed("not json at all")) == 400
    assert await status_of(*sealed('["a", "list"]')) == 400
    assert await status_of(*sealed(json.dumps({"schema": "2.0", "event": {}}))) == 400
    no_message = event_envelope(MESSAGE, {"sender": event["sender"]}, token=TOKEN)
    assert await status_of(*sealed(json.dumps(no_message))) == 400
    assert await status_of(b"{not json", signed_headers(KEY, b"{not json")) == 400
    assert await status_of(b'{"encrypt": 42}', signed_headers(KEY, b'{"encrypt": 42}')) == 401

    # 413: over 1 MiB, whatever it says.
    huge = event_envelope(MESSAGE, message_event("x" * (1024 * 1024), chat_type="p2p"), token=TOKEN)
    assert await status_of(*event_request(huge, encrypt_key=KEY)) == 413

    # Inputs are queued before the answer: a wrongly accepted one would be in the stream now.
    await asyncio.sleep(0.2)
    assert await h.enqueued() == 0
    assert await h.seen_keys() == []
    assert h.outbound() == []

    # The genuine request still works after all that.
    assert await status_of(body, headers) == 200
    await h.await_text(event["message"]["message_id"], ANSWER, "the genuine answer")


async def test_unknown_events_and_clicks_are_acknowledged_and_ignored(h: Harness) -> None:
    other = event_envelope("im.chat.member.bot.added_v1", {"chat_id": CHAT}, token=TOKEN)
    assert (await h.send(other))[0] == 200
    foreign = card_action_event({"action": "vote", "id": "x"}, open_message_id="om_x")
    status, text = await h.send(event_envelope(CARD, foreign, token=TOKEN))
    assert status == 200 and "toast" not in json.loads(text)
    unknown = Card("om_card_unknown", "nosuchid", "om_root", Call("", "", "", {}, {}, {}))
    status, answer = await h.click("approve_once", unknown, ADMIN)
    assert status == 200 and answer["toast"]["type"] == "error"
    assert "unknown approval id" in answer["toast"]["content"]
    # One of our buttons, but Feishu does not say who clicked: told how to decide instead.
    nameless = card_action_event(
        {"action": "approve_once", "approval_id": "ab12cd"}, open_message_id="om_card"
    )
    del nameless["operator"]["open_id"]
    status, text = await h.send(event_envelope(CARD, nameless, token=TOKEN))
    assert status == 200 and json.loads(text)["toast"]["type"] == "error", text
    assert "/approve ab12cd" in json.loads(text)["toast"]["content"]
    await asyncio.sleep(0.2)
    assert await h.enqueued() == 0 and h.outbound() == []


async def test_webhook_endpoint_refuses_everything_without_key_and_token(
    fake: FakeFeishu, workdir: Path, redis_url: str
) -> None:
    """FEISHU_MODE=websocket needs no encrypt key or verification token: then nothing could
    authenticate a POST (an empty key signs anything), so the HTTP endpoint takes none."""
    (workdir / "notes.txt").write_text(NOTES)
    async with serving(
        fake,
        workdir,
        redis_url,
        FEISHU_MODE="websocket",
        FEISHU_ENCRYPT_KEY="",
        FEISHU_VERIFICATION_TOKEN="",
    ) as h:
        forged = message_event("read notes.txt", chat_type="p2p", chat_id=DM, sender_open_id=ADMIN)
        envelope = event_envelope(MESSAGE, forged, token="")
        status, _ = await h.post(*event_request(envelope, encrypt_key=None))
        assert status == 404
        status, _ = await h.post(challenge_body("", "chal"))
        assert status == 404
        await asyncio.sleep(0.2)
        assert await h.enqueued() == 0 and h.outbound() == []


async def test_redis_down_answers_503_and_queues_nothing(
    fake: FakeFeishu, workdir: Path, tmp_path: Path
) -> None:
    async with own_redis(tmp_path, fake) as redis_server:
        (workdir / "notes.txt").write_text(NOTES)
        async with serving(fake, workdir, redis_server.url) as h:
            said = await h.say("read notes.txt", chat_type="p2p", chat_id=DM, mention=False)
            assert said.status == 200
            await h.await_text(said.message_id, ANSWER, "an answer")
            card = await request_risky(h, "run: rm -f notes.txt")
            await h.drained()
            sent = len(h.outbound())

            redis_server.kill()
            down = await h.say("read notes.txt", chat_type="p2p", chat_id=DM, mention=False)
            assert down.status == 503, down.text
            status, text = await h.click("approve_once", card, ADMIN)
            assert status == 503, text
            status, _ = await h.post(challenge_body(TOKEN, "still-here", KEY))
            assert status == 200  # needs no Redis
            await asyncio.sleep(0.3)
            assert len(h.outbound()) == sent  # nothing was queued, so nothing ran
            assert (workdir / "notes.txt").read_text() == NOTES


# ---------------------------------------------------------------------------------------------
# 6. Sends: idempotency keys, rate limits, expired tokens
# ---------------------------------------------------------------------------------------------


def reply_attempts(fake: FakeFeishu) -> list[Call]:
    return [c for c in fake.attempts() if c.kind == "reply"]


def api_attempts(fake: FakeFeishu) -> list[Call]:
    """Every Open API call tried, tokens aside (cards and messages)."""
    return [c for c in fake.attempts("/open-apis/") if c.kind not in ("token", "app_token")]


async def test_rate_limited_reply_is_retried_with_the_same_uuid(h: Harness) -> None:
    first = await h.say("hello", chat_type="p2p", chat_id=DM, mention=False)
    await h.fake.await_for(lambda: h.texts(first.message_id), 15, what="the first reply")
    await h.drained()
    before, messages = len(reply_attempts(h.fake)), len(h.fake.messages(DM))

    # A follow-up runs no tool: its only message is the demo model's answer.
    h.fake.fail_next("reply", code=CODE_RATE_LIMITED, http_status=429)
    said = await h.say("hello again", chat_type="p2p", chat_id=DM, mention=False)
    assert said.status == 200
    await h.fake.await_for(
        lambda: [t for t in h.texts(said.message_id) if t.startswith("I am the offline demo")],
        15,
        what="the reply",
    )
    await h.drained()
    attempts = reply_attempts(h.fake)[before:]
    assert [(a.status, a.code) for a in attempts] == [(429, CODE_RATE_LIMITED), (200, 0)]
    assert attempts[0].uuid and attempts[0].uuid == attempts[1].uuid
    assert attempts[0].body == attempts[1].body
    assert len(h.fake.messages(DM)) == messages + 1


async def test_expired_token_is_fetched_again(h: Harness) -> None:
    said = await h.say("hello", chat_type="p2p", chat_id=DM, mention=False)
    await h.fake.await_for(lambda: h.texts(said.message_id), 15, what="the first reply")
    await h.drained()
    assert len(h.fake.token_fetches(h.app_id)) == 1

    before, messages = len(api_attempts(h.fake)), len(h.fake.messages(DM))

    h.fake.expire_tokens(h.app_id)  # lark-oapi would keep using its cached token
    again = await h.say("hello again", chat_type="p2p", chat_id=DM, mention=False)
    await h.fake.await_for(lambda: h.texts(again.message_id), 15, what="the second reply")
    await h.drained()
    assert len(h.fake.token_fetches(h.app_id)) == 2
    refused, retried, *_ = api_attempts(h.fake)[before:]  # the answer's card, made once
    assert (refused.code, retried.code) == (CODE_TOKEN_INVALID, 0)
    assert (refused.kind, refused.body) == (retried.kind, retried.body)
    assert len(h.fake.messages(DM)) == messages + 1


# ---------------------------------------------------------------------------------------------
# 7. Long connection (FEISHU_MODE=websocket) with `clawgate serve` as a real process
# ---------------------------------------------------------------------------------------------


def ws_env(fake: FakeFeishu, redis_url: str, workdir: Path, **extra: str) -> dict[str, str]:
    app_id, secret = fake.new_app()
    env = {k: v for k, v in clean_env().items() if not k.startswith(("SLACK_", "FEISHU_"))}
    env.update(
        REDIS_URL=redis_url,
        CLAWGATE_REDIS_PREFIX=f"cgfsws{uuid.uuid4().hex[:8]}",
        CLAWGATE_PORT=str(free_port()),
        CLAWGATE_WORKDIR=str(workdir),
        CLAWGATE_ADMINS=f"feishu:{ADMIN}",
        CLAWGATE_RECLAIM_IDLE="1",
        CLAWGATE_SHUTDOWN_GRACE="2",
        CLAWGATE_LOG_LEVEL="INFO",
        FEISHU_APP_ID=app_id,
        FEISHU_APP_SECRET=secret,
        FEISHU_DOMAIN=fake.url,
        FEISHU_MODE="websocket",
    )
    env.update(extra)
    return env


def ws_message(text: str, **kwargs: Any) -> dict[str, Any]:
    """Over the long connection events are plaintext; their token is not checked."""
    return event_envelope(MESSAGE, message_event(text, **kwargs), token="")


def replies_with(fake: FakeFeishu, message_id: str, text: str) -> list[StoredMessage]:
    return [m for m in fake.messages(root_id=message_id) if m.text == text]


async def test_long_connection_acks_answers_redeliveries_once_and_stops(
    fake: FakeFeishu, redis_url: str, workdir: Path
) -> None:
    (workdir / "notes.txt").write_text(NOTES)
    victim = workdir / "victim.txt"
    victim.write_text("precious")
    serve = await Clawgate.start("serve", ws_env(fake, redis_url, workdir), workdir)
    try:
        await serve.wait_line(r"platforms: feishu \(websocket\)")
        await fake.await_connected(timeout=20)

        envelope = ws_message("read notes.txt", chat_type="p2p", chat_id=DM)
        message_id = envelope["event"]["message"]["message_id"]
        ack = await fake.await_ack(await fake.asend_event(envelope))
        assert ack.code == 200
        await fake.await_for(
            lambda: replies_with(fake, message_id, ANSWER), 15, what="the answer over ws"
        )

        # The connection drops; the client reconnects; Feishu redelivers the same event.
        await fake.adisconnect_all()
        await fake.await_for(
            lambda: fake.connects >= 2 and fake.connection_count == 1, 20, what="reconnect"
        )
        again = await fake.await_ack(await fake.asend_event(envelope))
        assert again.code == 200

        # A risky call, approved with a click over the long connection: the toast is in the ack.
        risky = ws_message("@_user_1 run: rm -f victim.txt", mentions=MENTION)
        risky_id = risky["event"]["message"]["message_id"]
        assert (await fake.await_ack(await fake.asend_event(risky))).code == 200
        card_call = await fake.await_for(
            lambda: [c for c in fake.replies(risky_id) if is_approval_card(c.content)],
            15,
            what="the approval card",
        )
        card_id = card_call[0].message_id
        assert card_id is not None
        approval_id = value_of(buttons(card_call[0].content)[0])["approval_id"]
        refused = card_action_event(
            {"action": "approve_once", "approval_id": approval_id},
            operator_open_id=BOB,
            open_message_id=card_id,
        )
        ack = await fake.await_ack(await fake.asend_event(event_envelope(CARD, refused, token="")))
        assert ack.code == 200 and ack.data["toast"]["type"] == "error"
        click = card_action_event(
            {"action": "approve_once", "approval_id": approval_id},
            operator_open_id=ADMIN,
            open_message_id=card_id,
        )
        ack = await fake.await_ack(await fake.asend_event(event_envelope(CARD, click, token="")))
        assert ack.code == 200
        assert ack.data["toast"] == {"type": "info", "content": f"Approving {approval_id}…"}
        assert buttons(ack.data["card"]["data"]) == []  # the deciding click's card
        await fake.await_for(lambda: not victim.exists(), 15, what="the approved rm")
        await fake.await_for(lambda: fake.patches(card_id), 15, what="the card patch")
        await asyncio.sleep(1.5)  # longer than the reclaim idle time
        assert len(replies_with(fake, message_id, ANSWER)) == 1
        assert serve.stderr.count("run stopped (final)") == 2, serve.stderr
    finally:
        started = time.monotonic()
        os.kill(serve.pid, signal.SIGTERM)
        code = await serve.stop()
        elapsed = time.monotonic() - started
    assert code == 0, serve.stderr
    assert elapsed < 5, f"took {elapsed:.1f}s to stop:\n{serve.stderr}"
    assert "Traceback" not in serve.stderr, serve.stderr
    await fake.await_for(lambda: fake.connection_count == 0, 5, what="the ws client gone")


# ---------------------------------------------------------------------------------------------
# 8. Bad Feishu settings fail at start, one line each
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"FEISHU_APP_ID": "cli_1", "FEISHU_ENCRYPT_KEY": "k", "FEISHU_VERIFICATION_TOKEN": "t"},
            ["FEISHU_APP_SECRET: required with FEISHU_APP_ID"],
        ),
        (
            {"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": "s"},
            [
                "FEISHU_ENCRYPT_KEY: required for FEISHU_MODE=webhook",
                "FEISHU_VERIFICATION_TOKEN: required for FEISHU_MODE=webhook",
            ],
        ),
        (
            {"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": "s", "FEISHU_ENCRYPT_KEY": "k"},
            ["FEISHU_VERIFICATION_TOKEN: required for FEISHU_MODE=webhook"],
        ),
        (
            {"FEISHU_APP_SECRET": "s"},
            ["FEISHU_APP_ID: required when other FEISHU_* settings are set"],
        ),
        (
            {"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": "s", "FEISHU_MODE": "polling"},
            ["FEISHU_MODE: Input should be 'webhook' or 'websocket'"],
        ),
        (
            {
                "FEISHU_APP_ID": "cli_1",
                "FEISHU_APP_SECRET": "s",
                "FEISHU_MODE": "websocket",
                "FEISHU_DOMAIN": "https://open.feishu.cn/",
            },
            ["FEISHU_DOMAIN: expected an origin like https://open.feishu.cn"],
        ),
    ],
)
def test_bad_feishu_settings_name_every_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], expected: list[str]
) -> None:
    assert_settings_errors(monkeypatch, tmp_path, FEISHU_VARS, env, expected)


def test_feishu_settings_that_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The long connection needs no key/token.
    env = {"FEISHU_APP_ID": "cli_1", "FEISHU_APP_SECRET": "s", "FEISHU_MODE": "websocket"}
    settings = load_settings_in(monkeypatch, tmp_path, FEISHU_VARS, env)
    assert settings.feishu_enabled and settings.feishu_domain == "https://open.feishu.cn"


@pytest.fixture
def sync_fake() -> Iterator[FakeFeishu]:
    with FakeFeishu() as server:
        yield server


def test_serve_with_a_wrong_app_secret_exits_2(sync_fake: FakeFeishu, redis_url: str) -> None:
    app_id, _ = sync_fake.new_app()
    env = {
        k: v
        for k, v in clean_env().items()
        if not k.startswith(("SLACK_", "FEISHU_")) and "proxy" not in k.lower()
    }
    env |= {
        "REDIS_URL": redis_url,
        "CLAWGATE_PORT": str(free_port()),
        "FEISHU_APP_ID": app_id,
        "FEISHU_APP_SECRET": "not-the-secret",
        "FEISHU_ENCRYPT_KEY": KEY,
        "FEISHU_VERIFICATION_TOKEN": TOKEN,
        "FEISHU_DOMAIN": sync_fake.url,
    }
    done = run_serve(CLAWGATE, env)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("clawgate: FEISHU_APP"), lines
    assert "FEISHU_APP_SECRET" in lines[0] and "10014" in lines[0], lines
    assert {c.kind for c in sync_fake.attempts()} == {"token"}  # nothing was sent


async def approve_from_a_copy(h: Harness, card: Card, sent: Call, chat_id: str) -> None:
    """The approver clicks Approve on the copy of the card in `chat_id`: both cards lose
    their buttons and say who approved."""
    assert sent.message_id is not None
    copy = Card(sent.message_id, card.approval_id, card.root_id, sent)
    status, answer = await h.click("approve_once", copy, APPROVER, chat_id=chat_id)
    assert status == 200 and answer["toast"]["type"] == "info", answer
    await h.fake.await_for(lambda: not (h.workdir / "victim.txt").exists(), 15, what="the rm")
    await h.drained()
    for message_id in (card.message_id, sent.message_id):
        stored = h.fake.message(message_id)
        assert stored is not None and buttons(stored.content) == [], message_id
        assert f"Approved by <at id={APPROVER}></at>" in card_text(stored.content)


async def test_a_request_is_decided_from_the_approvers_chat_and_both_cards_updated(
    fake: FakeFeishu, workdir: Path, redis_url: str
) -> None:
    approvers_chat = "oc_approvers"
    policy = workdir.parent / "routes.toml"
    policy.write_text(f'[approvals]\nnotify = ["feishu:{TENANT_KEY}:{approvers_chat}"]\n')
    victim = workdir / "victim.txt"
    victim.write_text("precious")
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        card = await request_risky(h, "run: rm -f victim.txt")

        def copy() -> Call | None:
            return next(
                (c for c in h.fake.sends(approvers_chat) if c.msg_type == "interactive"), None
            )

        sent = await h.fake.await_for(copy, 15, what="the copy in the approvers' chat")
        assert f"Asked in:** feishu:{TENANT_KEY}:{CHAT}" in card_text(sent.content)
        await approve_from_a_copy(h, card, sent, approvers_chat)
        answers = [m for m in h.fake.messages(root_id=card.root_id) if "exit code" in str(m.text)]
        assert len(answers) == 1  # the run went on in the thread that asked


async def test_a_request_sent_to_the_approvers_directly_is_decided_from_the_direct_chat(
    fake: FakeFeishu, workdir: Path, redis_url: str
) -> None:
    policy = workdir.parent / "dm.toml"
    policy.write_text('[approvals]\nnotify = ["dm"]\n')
    victim = workdir / "victim.txt"
    victim.write_text("precious")
    async with serving(fake, workdir, redis_url, CLAWGATE_POLICY_FILE=str(policy)) as h:
        card = await request_risky(h, "run: rm -f victim.txt")
        direct = f"oc_p2p_{APPROVER}"  # the fake's p2p chat for a send to an open_id

        def copy() -> Call | None:
            sends = h.fake.sends(APPROVER)  # sent to the person (an open_id)
            return next((c for c in sends if c.msg_type == "interactive"), None)

        sent = await h.fake.await_for(copy, 15, what="the card sent to the approver")
        assert sent.receive_id_type == "open_id"
        await approve_from_a_copy(h, card, sent, direct)


# ---------------------------------------------------------------------------------------------
# An answer streamed into the working message
# ---------------------------------------------------------------------------------------------


async def test_a_streamed_answer_is_one_card_typed_out_and_sent_once(
    fake: FakeFeishu, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    answer = "Here is the story: " + " ".join(f"word{i}" for i in range(40)) + ". The end."
    fake_openai.script = [streamed(answer, chunks=12, delay=0.4)]  # about 4.4 s of writing
    url = fake_openai.base_url
    async with serving(fake, workdir, redis_url, OPENAI_BASE_URL=url, OPENAI_API_KEY="k") as h:
        said = await h.say("tell me a story", mention=False, chat_type="p2p", chat_id=DM)
        assert said.status == 200
        await h.await_text(said.message_id, answer, "the answer")
        await h.drained()
        assert fake_openai.requests[0]["stream"] is True

        (card,) = h.fake.messages(root_id=said.message_id)  # the answer sent once, whole
        (entity,) = h.fake.cards()
        assert card.content == entity.card and not entity.streaming
        # Typed out: growing beginnings of the answer in at least three updates of the card.
        shown = [str(element(c, ANSWER_ID)) for c in entity.history]
        previews = list(dict.fromkeys(p for p in shown if p and p != answer))
        assert len(previews) >= 3, previews
        assert all(answer.startswith(p) for p in previews), previews
        assert all(len(a) < len(b) for a, b in itertools.pairwise(previews))
        assert element(entity.card, ANSWER_ID) == answer
        # Within CardKit's rate (10 a second per card): the answer's updates the interval
        # apart, and no second with more than 10 updates of the card.
        updates = [c for c in h.fake.calls(CARDKIT_PATH) if c.kind.startswith("card_")]
        typed = [c for c in updates if c.path.endswith(f"/{ANSWER_ID}/content")]
        gaps = [b.at - a.at for a, b in itertools.pairwise(typed)]
        assert min(gaps) >= STREAM_INTERVAL - 0.01, gaps
        assert max(sum(a.at <= b.at < a.at + 1 for b in updates) for a in updates) <= 10


# ---------------------------------------------------------------------------------------------
# A question back to the asker (the clarify tool)
# ---------------------------------------------------------------------------------------------


async def test_a_question_card_is_answered_by_the_requesters_click_alone(
    fake: FakeFeishu, workdir: Path, redis_url: str, fake_openai: FakeOpenAI
) -> None:
    ask = {"question": "Which environment?", "options": ["staging", "prod"]}
    fake_openai.script = [calls(("call_q", "clarify", ask)), reply("Deploying to staging.")]
    url = fake_openai.base_url
    async with serving(fake, workdir, redis_url, OPENAI_BASE_URL=url, OPENAI_API_KEY="k") as h:
        said = await h.say("deploy it")
        call = await h.fake.await_for(
            lambda: next(
                # Not the answer's streaming card (a CardKit card_id): the question's JSON.
                (c for c in h.fake.replies(said.message_id) if "schema" in (c.content or {})),
                None,
            ),
            15,
            what="the question card",
        )
        content = call.content
        assert content["schema"] == "2.0"
        elements = content["body"]["elements"]
        assert f"<at id={ALICE}></at> asks you:" in elements[0]["content"]
        assert elements[1]["text"]["content"] == "Which environment?"
        options = [e for e in elements if e["tag"] == "button"]
        assert [b["text"]["content"] for b in options] == ["staging", "prod"]
        (behavior,) = options[0]["behaviors"]
        assert behavior["type"] == "callback"
        value = behavior["value"]
        question_id = value["approval_id"]
        assert value == {"action": "answer", "approval_id": question_id, "option": "1"}
        await h.drained()
        (entity,) = h.fake.cards()  # the answer's card says whose turn it is
        assert "Waiting for the asker's answer" in json.dumps(entity.card, ensure_ascii=False)

        async def click(operator: str) -> Any:
            event = card_action_event(
                value, operator_open_id=operator, open_message_id=str(call.message_id)
            )
            status, text = await h.send(event_envelope(CARD, event, token=TOKEN))
            assert status == 200
            return json.loads(text)

        refused = await click(BOB)  # someone else: a toast for them alone, nothing queued
        assert refused["toast"]["type"] == "error"
        assert f"Only feishu:{ALICE} can answer" in refused["toast"]["content"]
        await h.drained()
        assert (await h.approval(question_id)).status == "pending"
        assert len(fake_openai.requests) == 1

        accepted = await click(ALICE)
        assert accepted == {"toast": {"type": "info", "content": f"Answering {question_id}…"}}
        await h.fake.await_for(
            lambda: any("Deploying to staging." in t for t in h.texts(said.message_id)),
            15,
            what="the answer",
        )
        await h.drained()
        tool = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool] == ["The requester answered: staging"]
        record = await h.approval(question_id)
        assert record.status == "answered" and record.answer == "staging"
        patched = h.fake.message(str(call.message_id))
        assert patched is not None
        shown = json.dumps(patched.content, ensure_ascii=False)
        assert "Answered by" in shown and "staging" in shown and '"button"' not in shown
