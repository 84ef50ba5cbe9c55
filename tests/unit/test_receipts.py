"""A receipt verifies under its key ring, and any change to what it covers makes it fail."""

from __future__ import annotations

import pytest

from runtime import evidence_keys
from runtime.receipts import Receipt, issue, verify

RING = evidence_keys.load("k1:" + "a" * 32)


def made() -> Receipt:
    return issue(
        RING,
        tool="bash",
        args_sha256="1" * 64,
        result_sha256="2" * 64,
        session="slack:T1:C1:1.2",
        approval="k4q8m2x7d9w3r",
        at=1_796_000_000_000,
    )


def test_a_receipt_verifies_and_survives_a_round_trip_through_its_audit_fields() -> None:
    receipt = made()
    assert verify(RING, receipt) is None
    fields = {"tool": "bash", "args_sha256": "1" * 64, "session": "slack:T1:C1:1.2"}
    fields |= {"approval": "k4q8m2x7d9w3r", **receipt.audit_fields()}
    assert Receipt.from_fields(fields) == receipt
    assert Receipt.from_fields({"tool": "bash"}) is None  # an entry without one
    rotated = evidence_keys.load("k1:" + "a" * 32 + ",k2:" + "b" * 32)
    assert verify(rotated, receipt) is None and plain(rotated).kid == "k2"


def plain(ring: evidence_keys.KeyRing) -> Receipt:
    return issue(ring, tool="read", args_sha256="", result_sha256="", session="s")


@pytest.mark.parametrize(
    "change",
    [
        {"tool": "read"},
        {"args_sha256": "3" * 64},
        {"result_sha256": "3" * 64},
        {"session": "slack:T1:C1:1.3"},
        {"approval": ""},
        {"at": 1_796_000_000_001},
    ],
)
def test_any_changed_field_fails(change: dict[str, object]) -> None:
    why = verify(RING, made().model_copy(update=change))
    assert why is not None and why.startswith("the MAC does not match the recorded fields")


def test_a_changed_mac_or_an_unknown_key_fails_with_its_reason() -> None:
    receipt = made()
    forged = receipt.model_copy(update={"mac": "0" * 64})
    assert verify(RING, forged) == "receipt_mac was changed: it no longer matches the receipt's id"
    other = evidence_keys.load("k2:" + "b" * 32)
    why = verify(other, receipt)
    assert why is not None and "key id 'k1'" in why and "holds: k2" in why
    unkeyed = plain(evidence_keys.load(None, None))
    assert unkeyed.kid == "none" and verify(evidence_keys.load(None, None), unkeyed) is None
