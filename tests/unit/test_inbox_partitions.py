"""The inbox's partitions as key names: the layout of one partition is the one a single Redis
always had, a session always lands in the same partition, and the partitions' slots are
spread evenly over a cluster's slot space."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from runtime.store.keys import Keys, inbox_partition, inbox_tag


def test_one_partition_keeps_the_keys_of_before() -> None:
    keys = Keys("clawgate")
    assert keys.inbox_stream() == "clawgate:{inbox}:stream"
    assert keys.inbox_lane("slack:T1:C1:1.0") == "clawgate:{inbox}:lane:slack:T1:C1:1.0"
    assert keys.inbox_seen("event:Ev1") == "clawgate:{inbox}:seen:event:Ev1"
    assert keys.inbox_starts("1-0") == "clawgate:{inbox}:starts:1-0"
    assert inbox_partition("any session", 1) == 0


def test_a_session_has_one_partition_in_every_process() -> None:
    # A stable hash (CRC32), not Python's hash(), which differs from process to process.
    session = "slack:T1:C1:1700000000.000100"
    assert inbox_partition(session, 16) == zlib.crc32(session.encode()) % 16
    counts = Counter(inbox_partition(f"slack:T1:C1:{n}.0", 16) for n in range(1600))
    assert len(counts) == 16 and min(counts.values()) > 60  # 100 each on average


@pytest.mark.parametrize("partitions", [2, 3, 4, 6, 16, 64])
def test_partition_slots_are_evenly_spaced(partitions: int) -> None:
    tags = [inbox_tag(p, partitions) for p in range(partitions)]
    assert tags[0] == "inbox" and len(set(tags)) == partitions
    keys = Keys("p")
    for p, tag in enumerate(tags):  # a partition's keys share its tag, so its slot
        assert f"{{{tag}}}" in keys.inbox_stream(p, partitions)
        assert f"{{{tag}}}" in keys.inbox_lane("s", p, partitions)
    slots = sorted(key_slot(tag.encode()) for tag in tags)
    after = [*slots[1:], slots[0] + REDIS_CLUSTER_HASH_SLOTS]  # the next, round the circle
    gaps = [b - a for a, b in zip(slots, after, strict=True)]
    spacing = REDIS_CLUSTER_HASH_SLOTS / partitions
    assert min(gaps) > spacing / 2 and max(gaps) < spacing * 1.5
    # so three equal slot ranges (what `redis-cli --cluster create` makes) get as many each
    # as can be: 16 -> 6, 5, 5
    per_master = Counter(
        min(2, key_slot(tag.encode()) * 3 // REDIS_CLUSTER_HASH_SLOTS) for tag in tags
    )
    assert max(per_master.values()) - min(per_master.values()) <= 1 or partitions < 3


def test_a_partition_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="partition 4 of 4"):
        inbox_tag(4, 4)
