"""``__transaction_state`` as the coordinator writes and reads it: the partition formula, the
topic's configs, which tagged fields a transition's record carries, and what the loader refuses."""

from __future__ import annotations

import pytest

from compactlog.record import transaction_log as TL
from compactlog.coordinator.txn.metadata import TxnState, TxnTransit
from compactlog.coordinator.txn.state_log import StateLogError, partition_for, topic_configs, transit_of, value_bytes
from compactlog.storage.config import BrokerConfig

S = TxnState


def transit(state=S.ONGOING, **kw):
    values = dict(producer_id=1000, prev_producer_id=1000, next_producer_id=-1, producer_epoch=0,
                  last_producer_epoch=-1, txn_timeout_ms=60000, state=state,
                  partitions=frozenset({("orders", 1), ("orders", 0)}), txn_start_ms=5, last_update_ms=6,
                  client_tv=0)
    values.update(kw)
    return TxnTransit(**values)


def test_partition_formula_is_kafkas():
    assert (partition_for("txn-1", 50), partition_for("my-transactional-id", 50), partition_for("", 50)) == \
        (10, 46, 0)


def test_topic_configs_for_one_node():
    assert topic_configs(BrokerConfig({})) == {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "segment.bytes": "104857600",
        "min.insync.replicas": "1", "unclean.leader.election.enable": "false"}
    assert topic_configs(BrokerConfig({"transaction.state.log.segment.bytes": "1000"}))["segment.bytes"] == "1000"


def test_records_v1_with_only_the_tags_that_say_something():
    v = value_bytes(transit(), 2)
    assert v == TL.encode_value_v1(1000, 0, 60000, 1, [("orders", [0, 1])], 6, 5)        # no tags
    r = TL.read_value(value_bytes(transit(S.EMPTY, prev_producer_id=900, next_producer_id=1001, client_tv=2), 2))
    assert (r.partitions, r.previous_producer_id, r.next_producer_id, r.client_transaction_version,
            r.next_producer_epoch) == (None, 900, 1001, 2, -1)
    assert value_bytes(transit(), 0)[:2] == b"\x00\x00"         # level 0: v0 values
    assert TL.read_value(value_bytes(transit(S.COMPLETE_COMMIT, partitions=frozenset()), 2)).partitions == []


def test_transit_of_reads_back_and_refuses_what_is_never_written():
    t = transit_of(TL.read_value(value_bytes(transit(client_tv=2), 2)), "x")
    assert (t.state, t.partitions, t.txn_start_ms, t.last_update_ms, t.client_tv, t.last_producer_epoch,
            t.prev_producer_id) == (S.ONGOING, {("orders", 0), ("orders", 1)}, 5, 6, 2, -1, -1)
    for status in (6, 7, 9):
        with pytest.raises(StateLogError):
            transit_of(TL.read_value(TL.encode_value_v1(1, 0, 1, status, [], 0, 0)), "x")
    with pytest.raises(StateLogError, match="without its partition list"):
        transit_of(TL.read_value(TL.encode_value_v1(1, 0, 1, 1, None, 0, 0)), "x")
    # Empty ignores whatever partitions it holds
    assert transit_of(TL.read_value(TL.encode_value_v0(1, 0, 1, 0, [("a", [0])], 0, 0)), "x").partitions == frozenset()


def test_values_from_kept_sections_are_the_codecs_bytes():
    """value_bytes keeps the partition and tag sections a producer repeats; every value is still
    TransactionLog's encoding of the whole transit, the first time and every time after."""
    import random
    rng = random.Random(3)
    topics = ("orders", "audit", "é-topic")
    for _ in range(600):
        parts = frozenset((rng.choice(topics), rng.randrange(4)) for _ in range(rng.randrange(4)))
        t = transit(rng.choice(list(S)[:6]), producer_id=rng.choice((7, 1000)), prev_producer_id=rng.choice((7, 1000, -1)),
                    next_producer_id=rng.choice((-1, 1001)), producer_epoch=rng.randrange(3),
                    partitions=parts, txn_start_ms=rng.randrange(-1, 50), last_update_ms=rng.randrange(100),
                    client_tv=rng.choice((0, 2)))
        tv = rng.choice((0, 1, 2))
        prev = t.prev_producer_id if t.prev_producer_id != t.producer_id else -1
        want = TL.encode_value(1 if tv else 0, t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state),
                               t.sorted_partitions(), t.last_update_ms, t.txn_start_ms, previous_producer_id=prev,
                               next_producer_id=t.next_producer_id, client_transaction_version=t.client_tv)
        assert value_bytes(t, tv) == want == value_bytes(t, tv), t
