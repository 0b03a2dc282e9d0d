"""The shard composing the two managers, sans-IO: requests refused while a partition loads, a
restart replaying groups and offsets together, DeleteGroups (offsets, then the group) and the
expiry of offsets, then of the groups they leave empty (GroupCoordinatorShard)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.classic_group_state import EMPTY, STABLE
from compactlog.coordinator.group.conftest import H, SESSION

def test_requests_while_loading():
    h = H()
    p = h.c.partition_for("g")
    h.c.start_loading(p)
    assert h.join().result(0).error == ErrorCode.coordinator_load_in_progress
    assert h.sync("g", "m", 1).result(0).error == ErrorCode.coordinator_load_in_progress
    assert h.heartbeat("g", "m", 1) == ErrorCode.none                    # answered blindly
    assert h.commit("g", [("t", 0, 1, "")]) == [ErrorCode.coordinator_load_in_progress]
    assert h.c.fetch_offsets("g", None)[0] == ErrorCode.coordinator_load_in_progress
    assert h.c.describe_groups(["g"])[0].error == ErrorCode.coordinator_load_in_progress
    assert h.leave("g", ("m", None))[0] == ErrorCode.coordinator_load_in_progress
    h.c.on_loaded(p)
    assert h.join().result(0).error == ErrorCode.member_id_required


def test_replay_rebuilds_groups_and_offsets_then_absent_members_expire():
    h = H()
    (a, b), gen = h.stable_group(n=2)
    assert h.commit("g", [("t", 0, 11, "md"), ("t", 1, 12, "")], gen, a) == [ErrorCode.none, ErrorCode.none]
    h.commit("simple", [("u", 0, 3, "")])
    # a new coordinator replays the log (a broker restart)
    h2 = H()
    p = h2.c.partition_for("g")
    h2.c.start_loading(p)
    for i, rec in enumerate(h.log):
        h2.c.replay(R.decode_record(rec.key_bytes(), rec.value_bytes()), i)
    h2.c.on_loaded(p)
    g = h2.c.groups["g"]
    assert g.state == STABLE and g.generation_id == gen and set(g.members) == {a, b}
    assert g.subscribed_topics == {"t"}
    assert {m: g.members[m].assignment for m in g.members} == {a: R.encode_assignment([("t", [0])]),
                                                               b: R.encode_assignment([("t", [1])])}
    err, topics = h2.c.fetch_offsets("g", [("t", [0, 1, 2])])
    assert err == ErrorCode.none and [(f.partition, f.offset, f.metadata) for f in topics[0][1]] == \
        [(0, 11, "md"), (1, 12, ""), (2, -1, "")]
    assert h2.c.groups["simple"].state == EMPTY and h2.c.groups["simple"].protocol_type is None
    # members that do not come back are removed when their session ends; the group empties
    n = len(h2.log)
    h2.advance(SESSION)
    assert h2.state() == EMPTY
    assert h2.log[n:][0].value.members == []


# -- DeleteGroups ----------------------------------------------------------------------------------

def test_delete_groups():
    h = H()
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, "")], gen, a)
    h.commit("simple", [("t", 0, 1, ""), ("u", 3, 2, "")])
    outcome, results = h.c.delete_groups(["g", "simple", "nope", ""])
    assert results == [("g", ErrorCode.non_empty_group), ("simple", ErrorCode.none),
                       ("nope", ErrorCode.group_id_not_found), ("", ErrorCode.invalid_group_id)]
    assert [(r.key, r.value) for r in outcome.records] == [
        (R.OffsetCommitKey("simple", "t", 0), None), (R.OffsetCommitKey("simple", "u", 3), None),
        (R.GroupMetadataKey("simple"), None)]
    h.run(outcome)
    assert "simple" not in h.c.groups and h.c.fetch_offsets("simple", None) == (ErrorCode.none, [])


# -- expiry ----------------------------------------------------------------------------------------

def test_simple_group_offsets_expire_after_retention_then_the_group_goes():
    h = H(retention_ms=60000)
    h.commit("simple", [("t", 0, 1, "")])
    h.now += 59999
    assert h.c.cleanup_expired().records == []
    h.now += 1
    outcome = h.c.cleanup_expired()
    assert [(r.key, r.value) for r in outcome.records] == [(R.OffsetCommitKey("simple", "t", 0), None),
                                                           (R.GroupMetadataKey("simple"), None)]
    h.run(outcome)
    assert "simple" not in h.c.groups


def test_empty_consumer_group_expires_from_when_it_became_empty():
    h = H(retention_ms=60000)
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, "")], gen, a)
    h.now += 50000
    h.leave("g", (a, None))                      # Empty from now
    emptied = h.now
    h.now = emptied + 59999
    assert h.c.cleanup_expired().records == []
    h.now = emptied + 60000
    assert len(h.c.cleanup_expired().records) == 2


def test_stable_consumer_group_expires_only_unsubscribed_topics_and_explicit_expiry_wins():
    h = H(retention_ms=60000)
    (a,), gen = h.stable_group()
    h.commit("g", [("t", 0, 1, ""), ("old", 0, 2, "")], gen, a)
    h.commit("g", [("old", 1, 3, "")], gen, a, retention=1000)
    h.now += 1000
    assert [r.key for r in h.c.cleanup_expired().records] == [R.OffsetCommitKey("g", "old", 1)]
    h.now += 60000
    keys = [r.key for r in h.c.cleanup_expired().records]
    assert keys == [R.OffsetCommitKey("g", "old", 0), R.OffsetCommitKey("g", "old", 1)]
    # a group still rebalancing expires nothing
    h.join_new()
    assert h.c.cleanup_expired().records == []
