"""Committed offsets through the shard, sans-IO: OffsetCommit and its checks, OffsetFetch,
OffsetDelete, commits keeping a member's session, and the replay of offset records with their
transactional markers (OffsetMetadataManager)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.server.groups.api_data import FetchedOffset
from compactlog.server.groups.classic_group_state import EMPTY, STABLE
from compactlog.server.groups.config import GroupConfig
from compactlog.server.groups.conftest import H, SESSION
from compactlog.server.groups.shard import GroupCoordinatorShard

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
