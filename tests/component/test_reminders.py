"""Reminders and escalation on a real Redis: a request nobody decides is brought up again in
its thread and the approvers' channel, once, then a second group may decide it."""

from __future__ import annotations

from runtime.models import Actor

CAROL = Actor(platform="slack", user_id="UCAROL")
BOB = Actor(platform="slack", user_id="UBOB")
POLICY = """
[approvals]
remind_after = 0.3
escalate_after = 0.8
escalate_to = ["slack:UBOB"]
notify = ["slack:T1:C9"]
"""
