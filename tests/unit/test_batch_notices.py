"""How a batch looks in Slack, Feishu and the terminal: one notice, each call with its own
decision, and approve all / reject all while any call waits."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from adapters.console.channel import render_request, render_update
from adapters.feishu.cards import approval_card
from adapters.pending import render_pending
from adapters.slack.blocks import approval_blocks, fallback_text
from adapters.slack.inbound import APPROVE_ONCE, REJECT, action_inbound
from adapters.slack.payloads import BlockActions
from runtime.channel import ApprovalNotice
from tests.fake_slack import block_action_payload

BATCH = "b4tch2345678a"


def item(approval_id: str, command: str, status: str = "pending") -> ApprovalNotice:
    return ApprovalNotice(
        approval_id=approval_id,
        tool="bash",
        arguments=command,
        reasons=("deletes files",),
        requester="slack:U1",
        expires_at=1_800_000_000_000,
        status=status,
        editable=json.dumps({"command": command}),
        batch=BATCH,
    )


ITEMS = (item("aaaaaaaaaaaaa", "rm a.txt"), item("bbbbbbbbbbbbb", "rm b.txt"))
NOTICE = replace(ITEMS[0], items=ITEMS)


def actions(blocks: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (b["block_id"], e["action_id"], e["value"].split("\n")[0])
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
    ]


def test_slack_shows_each_call_with_its_buttons_then_approve_and_reject_all() -> None:
    blocks = approval_blocks(NOTICE)
    found = actions(blocks)
    assert ("clawgate_batch", APPROVE_ONCE, BATCH) in found
    assert ("clawgate_batch", REJECT, BATCH) in found
    for i in ("aaaaaaaaaaaaa", "bbbbbbbbbbbbb"):
        assert (f"clawgate_approval_{i}", APPROVE_ONCE, i) in found
    assert len({b for b, _, _ in found}) == 3  # block ids unique in the message
    text = json.dumps(blocks)
    assert "2 calls need approval" in text and "1 of 2" in text and f"/approve {BATCH}" in text
    assert fallback_text(NOTICE) == f"Approval needed for 2 calls (batch {BATCH})"
    assert len(blocks) <= 50


def test_approve_all_clicked_in_slack_is_approve_of_the_batch() -> None:
    payload = block_action_payload(APPROVE_ONCE, BATCH, user="U2", channel="C1", message_ts="1.2")
    inbound = action_inbound(BlockActions.model_validate(payload))
    assert inbound is not None and inbound.text == f"/approve {BATCH}"


def test_a_decided_call_shows_its_outcome_while_the_other_keeps_its_buttons() -> None:
    decided = replace(ITEMS[0], status="rejected", decided_by="slack:U2", reason="no")
    blocks = approval_blocks(replace(NOTICE, items=(decided, ITEMS[1])))
    assert [i for _, a, i in actions(blocks) if a == APPROVE_ONCE] == ["bbbbbbbbbbbbb", BATCH]
    assert ":no_entry: Rejected by <@U2>: no" in json.dumps(blocks)
    done = replace(NOTICE, status="decided", items=(decided, replace(ITEMS[1], status="consumed")))
    assert actions(approval_blocks(done)) == []  # all decided: no button left


def test_feishu_card_holds_every_call_and_a_form_each() -> None:
    card = approval_card(NOTICE)
    text = json.dumps(card)
    assert card["header"]["title"]["content"] == "2 calls need approval"
    forms = [e["name"] for e in card["body"]["elements"] if e["tag"] == "form"]
    assert forms == ["clawgate_form_aaaaaaaaaaaaa", "clawgate_form_bbbbbbbbbbbbb"]
    assert f'"approval_id": "{BATCH}"' in text and "Approve all" in text


def test_the_terminal_lists_the_calls_and_the_batch() -> None:
    shown = render_request(NOTICE)
    assert "[2 calls need approval: batch" in shown and "(2/2) bash: rm b.txt" in shown
    assert f"/approve {BATCH}" in shown
    assert render_update(replace(NOTICE, items=(replace(ITEMS[0], status="consumed"),))) == (
        "[approval aaaaaaaaaaaaa done]"
    )
    assert render_pending(ITEMS[1]).endswith(f"[batch {BATCH}]")
