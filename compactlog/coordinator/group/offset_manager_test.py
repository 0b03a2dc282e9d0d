"""Committed offsets through the shard, sans-IO: OffsetCommit and its checks, OffsetFetch,
OffsetDelete, commits keeping a member's session, and the replay of offset records with their
transactional markers (OffsetMetadataManager)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.api_data import CommitPartition, FetchedOffset
from compactlog.coordinator.group.classic_group_state import EMPTY, STABLE
from compactlog.coordinator.group.config import GroupConfig
from compactlog.coordinator.group.conftest import H, SESSION
from compactlog.coordinator.group.shard import GroupCoordinatorShard

def test_manual_commits_make_a_simple_group():
    h = H()
    assert h.commit("manual", [("t", 0, 5, "meta"), ("t", 1, 6, None)]) == [ErrorCode.none, ErrorCode.none]
    g = h.c.groups["manual"]
    assert g.state == EMPTY and g.protocol_type is None
    assert [r.value.offset for r in h.log] == [5, 6] and h.log[1].value.metadata == ""
    assert h.log[0].value_version == 3 and h.log[0].value.commit_timestamp == h.now
    err, topics = h.c.fetch_offsets("manual", None)
    assert topics == [("t", [FetchedOffset(0, 5, -1, "meta"), FetchedOffset(1, 6, -1, "")])]
    # a retention time (OffsetCommit v2-4) writes a v1 value with an expire timestamp
    h.commit("manual", [("t", 0, 7, "")], retention=60000)
    assert h.log[-1].value_version == 1 and h.log[-1].value.expire_timestamp == h.now + 60000


def test_commit_errors():
    h = H(offset_metadata_max_bytes=3)
    assert h.commit("", [("t", 0, 1, "")]) == [ErrorCode.invalid_group_id]
    assert h.commit("nope", [("t", 0, 1, "")], generation=1, member="m") == [ErrorCode.illegal_generation]
    assert h.commit("nope", [("t", 0, 1, "")], generation=1, member="m", version=9) == [ErrorCode.group_id_not_found]
    assert h.commit("nope", [("t", 0, 1, "toolong"), ("t", 1, 1, "ok")]) == \
        [ErrorCode.offset_metadata_too_large, ErrorCode.none]
    h2 = H()
    (a,), gen = h2.stable_group()
    assert h2.commit("g", [("t", 0, 1, "")], gen, "stranger") == [ErrorCode.unknown_member_id]
    assert h2.commit("g", [("t", 0, 1, "")], gen + 1, a) == [ErrorCode.illegal_generation]
    # generation -1 without a member id on a group with members
    assert h2.commit("g", [("t", 0, 1, "")]) == [ErrorCode.unknown_member_id]
    assert h2.commit("g", [("t", 0, 1, "")], gen, a) == [ErrorCode.none]


def test_commits_keep_the_session_alive():
    h = H()
    (a,), gen = h.stable_group()
    for _ in range(4):
        h.advance(SESSION - 1)
        assert h.commit("g", [("t", 0, 1, "")], gen, a) == [ErrorCode.none]
    assert h.state() == STABLE


def test_fetch_offsets():
    h = H()
    assert h.c.fetch_offsets(None, None)[0] == ErrorCode.invalid_group_id
    assert h.c.fetch_offsets("nothing", [("t", [0])]) == (ErrorCode.none, [("t", [FetchedOffset(0)])])
    assert h.c.fetch_offsets("nothing", None) == (ErrorCode.none, [])


def test_offset_delete():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, ""), ("u", 0, 2, "")], gen, a)
    outcome, err, res = h.c.delete_offsets("g", [("t", [0]), ("u", [0, 1])])
    assert err == ErrorCode.none
    assert res == [("t", [(0, ErrorCode.group_subscribed_to_topic)]), ("u", [(0, ErrorCode.none), (1, ErrorCode.none)])]
    assert [(r.key, r.value) for r in outcome.records] == [(R.OffsetCommitKey("g", "u", 0), None)]
    assert h.c.delete_offsets("nope", [("t", [0])])[1] == ErrorCode.group_id_not_found
    h2 = H()
    h2.join(ptype="connect", version=3)
    assert h2.c.delete_offsets("g", [("t", [0])])[1] == ErrorCode.non_empty_group


# -- replay ----------------------------------------------------------------------------------------

def test_replay_of_tombstones_and_transactional_offsets():
    c = GroupCoordinatorShard(GroupConfig(), clock=lambda: 5)
    c.replay(R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1, -1, "", 1)), 0)
    c.replay(R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(9, -1, "", 2)), 1, producer_id=7)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == 1
    assert c.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][1][0].error == ErrorCode.unstable_offset_commit
    c.replay_end_txn(7, commit=True)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == 9
    c.replay(R.offset_commit_record("g", "t", 1, R.OffsetCommitValue(4, -1, "", 2)), 2, producer_id=8)
    c.replay_end_txn(8, commit=False)
    assert c.fetch_offsets("g", [("t", [1])])[1][0][1][0].offset == -1
    # a transactional commit older than a plain one does not win when it commits
    c.replay(R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(50, -1, "", 2)), 3, producer_id=9)
    c.replay(R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(60, -1, "", 2)), 4)
    c.replay_end_txn(9, commit=True)
    assert c.fetch_offsets("g", [("t", [2])])[1][0][1][0].offset == 60
    c.replay(R.offset_commit_record("g", "t", 0, None), 5)
    assert c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == -1
    c.replay(R.group_metadata_record("g", None), 6)
    assert "g" not in c.groups


# -- TxnOffsetCommit -------------------------------------------------------------------------------

def txn_commit(h, group, offsets, generation=-1, member="", instance=None, version=3, producer_id=7):
    """A TxnOffsetCommit as the service runs it: its records written and replayed as pending."""
    parts = [CommitPartition(t, p, o, -1, md) for t, p, o, md in offsets]
    outcome, errors = h.c.commit_transactional_offsets(group, generation, member, instance, parts, version)
    base = len(h.log)
    h.log.extend(outcome.records)
    for i, rec in enumerate(outcome.records):
        h.c.replay(rec, base + i, producer_id)
    return errors


def offset(h, group, topic, partition, stable=False):
    return h.c.fetch_offsets(group, [(topic, [partition])], require_stable=stable)[1][0][1][0]


def test_transactional_commit_group_checks():
    """ClassicGroup.validateOffsetCommit with isTransactional (transactions.md §2.8 step 4)."""
    h = H(offset_metadata_max_bytes=3)
    assert txn_commit(h, "", [("t", 0, 1, "")]) == [ErrorCode.invalid_group_id]
    # a missing group: generation -1 makes a simple group, any generation is ILLEGAL_GENERATION (v9's
    # GROUP_ID_NOT_FOUND is OffsetCommit's only)
    assert txn_commit(h, "nope", [("t", 0, 1, "")], generation=1, member="m") == [ErrorCode.illegal_generation]
    assert txn_commit(h, "simple", [("t", 0, 1, "toolong"), ("t", 1, 1, "ok")]) == \
        [ErrorCode.offset_metadata_too_large, ErrorCode.none]
    assert h.c.groups["simple"].state == EMPTY
    (a,), gen = h.stable_group()
    assert txn_commit(h, "g", [("t", 0, 1, "")], gen, "stranger") == [ErrorCode.unknown_member_id]
    assert txn_commit(h, "g", [("t", 0, 1, "")], gen + 1, a) == [ErrorCode.illegal_generation]
    assert txn_commit(h, "g", [("t", 0, 1, "")], gen, "", instance="i") == [ErrorCode.unknown_member_id]
    # no member id and generation -1 on a group with members: accepted (old versions carry neither)
    assert txn_commit(h, "g", [("t", 0, 1, "")]) == [ErrorCode.none]
    assert txn_commit(h, "g", [("t", 0, 2, "")], gen, a) == [ErrorCode.none]
    # never REBALANCE_IN_PROGRESS
    h2 = H()
    m, fut = h2.join_new("g")
    h2.advance(0)
    assert h2.state() == "CompletingRebalance"
    assert txn_commit(h2, "g", [("t", 0, 1, "")], fut.result(0).generation_id, m) == [ErrorCode.none]
    assert h2.commit("g", [("t", 0, 1, "")], fut.result(0).generation_id, m) == [ErrorCode.rebalance_in_progress]
    # a loading partition
    h2.c.start_loading(h2.c.partition_for("g"))
    assert txn_commit(h2, "g", [("t", 0, 1, "")]) == [ErrorCode.coordinator_load_in_progress]


def test_transactional_commits_stay_pending_until_their_marker():
    h = H()
    assert txn_commit(h, "g", [("t", 0, 5, "md")], producer_id=7) == [ErrorCode.none]
    assert offset(h, "g", "t", 0).offset == -1
    assert offset(h, "g", "t", 0, stable=True).error == ErrorCode.unstable_offset_commit
    assert h.c.fetch_offsets("g", None) == (ErrorCode.none, [])       # pending offsets are not listed
    h.c.replay_end_txn(7, True, h.c.partition_for("g"))
    assert (offset(h, "g", "t", 0).offset, offset(h, "g", "t", 0).metadata) == (5, "md")
    assert offset(h, "g", "t", 0, stable=True).error == ErrorCode.none


def test_a_marker_settles_only_its_partitions_groups():
    """Kafka keeps one offset manager per __consumer_offsets partition: a producer's marker in one
    partition leaves its pending offsets of groups in other partitions pending."""
    h = H(num_partitions=50)
    a, b = "g", next(g for g in (f"g{i}" for i in range(100)) if h.c.partition_for(g) != h.c.partition_for("g"))
    txn_commit(h, a, [("t", 0, 1, "")])
    txn_commit(h, b, [("t", 0, 2, "")])
    h.c.replay_end_txn(7, True, h.c.partition_for(b))
    assert offset(h, b, "t", 0).offset == 2
    assert offset(h, a, "t", 0, stable=True).error == ErrorCode.unstable_offset_commit
    h.c.replay_end_txn(7, False, h.c.partition_for(a))
    assert offset(h, a, "t", 0).offset == -1 and offset(h, a, "t", 0, stable=True).error == ErrorCode.none
    assert h.c.offset_manager.pending_txn_offsets == {} and h.c.offset_manager.open_txns_by_group == {}


def test_pending_offsets_are_not_expired_and_go_with_their_group():
    h = H(retention_ms=1000)
    h.commit("g", [("t", 0, 1, "")])
    txn_commit(h, "g", [("t", 0, 2, "")])
    h.now += 10_000
    outcome = h.c.cleanup_expired()
    assert outcome.records == []            # the committed offset has a pending one: kept, group kept
    h.c.replay_end_txn(7, False)
    assert [r.key.partition for r in h.c.cleanup_expired().records if isinstance(r.key, R.OffsetCommitKey)] == [0]
    # DeleteGroups writes a tombstone for a pending-only offset too; its replay drops it
    txn_commit(h, "g2", [("u", 3, 9, "")])
    outcome, results = h.c.delete_groups(["g2"])
    assert results == [("g2", ErrorCode.none)]
    assert [(r.key.topic, r.key.partition) for r in outcome.records if isinstance(r.key, R.OffsetCommitKey)] == \
        [("u", 3)]
    h.run(outcome)
    h.c.replay_end_txn(7, True)
    assert "g2" not in h.c.groups and h.c.committed("g2") == {}
