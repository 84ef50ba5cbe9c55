"""Stored approvals carry a schema version: what an earlier clawgate stored is still read
(and upgraded), what a newer one stored is refused with a clear error, never misread."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from runtime.approval.models import SCHEMA_VERSION, ApprovalRecord, Checkpoint

# As wave 1 stored them (before schema versions existed).
V1_CHECKPOINT = {
    "id": "cp2345678abcd",
    "session": "slack:T1:C1:1700000000.000100",
    "conversation": {"platform": "slack", "id": "slack:T1:C1:1700000000.000100"},
    "actor": {"platform": "slack", "user_id": "U1"},
    "step": 1,
    "calls": [{"id": "call_1", "name": "bash", "arguments": '{"command": "rm x"}'}],
    "index": 0,
    "prior_results": [],
    "history_len": 3,
    "trace_id": None,
}
V1_RECORD = {
    "id": "k3x9q2m7vd4pw",
    "session": "slack:T1:C1:1700000000.000100",
    "conversation": {"platform": "slack", "id": "slack:T1:C1:1700000000.000100"},
    "requester": {"platform": "slack", "user_id": "U1"},
    "tool": "bash",
    "arguments": '{"command":"rm x"}',
    "call_id": "call_1",
    "call_hash": "0" * 64,
    "reasons": ["rm deletes files"],
    "status": "pending",
    "created_at": 1,
    "expires_at": 2,
    "version": 1,
}


def test_the_previous_version_is_read_and_upgraded() -> None:
    checkpoint = Checkpoint.model_validate_json(json.dumps(V1_CHECKPOINT))
    assert checkpoint.schema_version == SCHEMA_VERSION
    assert checkpoint.calls[0].name == "bash" and checkpoint.history_len == 3
    record = ApprovalRecord.model_validate(V1_RECORD)
    assert record.schema_version == SCHEMA_VERSION and record.reasons == ["rm deletes files"]


def test_what_is_written_carries_the_current_version() -> None:
    checkpoint = Checkpoint.model_validate(V1_CHECKPOINT)
    assert json.loads(checkpoint.model_dump_json())["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("model", [Checkpoint, ApprovalRecord])
def test_a_newer_version_is_refused_not_misread(model: type[Checkpoint | ApprovalRecord]) -> None:
    data = V1_CHECKPOINT if model is Checkpoint else V1_RECORD
    with pytest.raises(ValidationError, match="newer clawgate"):
        model.model_validate({**data, "schema_version": SCHEMA_VERSION + 1})


def test_a_version_4_checkpoint_is_one_approval_alone() -> None:
    """Before batches, a checkpoint held one suspended call: read as a batch of none."""
    checkpoint = Checkpoint.model_validate({**V1_CHECKPOINT, "schema_version": 4})
    assert checkpoint.schema_version == SCHEMA_VERSION == 5
    assert checkpoint.batch == [] and checkpoint.start == 0
