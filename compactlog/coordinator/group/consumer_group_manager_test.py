"""ConsumerGroupHeartbeat and the consumer groups of the coordinator shard, sans-IO (spec §2-§10):
joining, revocation before assignment, leaving, fencing by session and rebalance timeouts, static
members, regex subscriptions, the records written and their replay at load, offsets with member
epochs, describe/list/delete, and fuzzed heartbeats that must neither crash nor wedge it."""

from __future__ import annotations

import random
import uuid

import pytest
from kio.schema.errors import ErrorCode

from compactlog.coordinator.group.api_data import CommitPartition, HeartbeatRequest
from compactlog.coordinator.group.config import GroupConfig
from compactlog.coordinator.group.consumer.model import ConsumerGroupState, MemberState, MetadataImage, TopicImage
from compactlog.coordinator.group.conftest import H
from compactlog.record import consumer_offsets as R

T = uuid.UUID("4f5f80e2-cdd5-4f08-88e4-24db129e8f3b")
U = uuid.UUID("11111111-2222-3333-4444-555555555555")
SESSION = 45000
REBALANCE = 300000


class CH(H):
    """A shard with a fake clock, topics ``t`` (6 partitions) and ``u`` (2), and an in-memory log
    whose records are encoded and decoded as the loader reads them."""

    through_bytes = True

    def __init__(self, **config):
        super().__init__(**config)
        self.topics = {"t": TopicImage(T, "t", 6), "u": TopicImage(U, "u", 2)}
        self.version = 0
        self.c.consumer.image = lambda: MetadataImage(self.topics.values(), self.version)

    def config_of(self, config: dict) -> dict:
        return config

    def hb(self, member="", epoch=0, group="g", *, names=None, regex=None, owned=None, instance=None,
           assignor=None, rebalance=-1, version=1):
        if epoch == 0:
            rebalance = REBALANCE if rebalance == -1 else rebalance
            owned = [] if owned is None else owned
            if names is None and regex is None:
                names = ["t"]
        req = HeartbeatRequest(group, member, epoch, instance, None, rebalance, names, regex, assignor,
                               owned, "rdkafka", "/127.0.0.1", version)
        outcome, resp = self.c.consumer_group_heartbeat(req)
        self.run(outcome)
        return resp

    def types(self, since=0):
        return [r.key.version for r in self.log[since:]]

    def group(self, gid="g"):
        return self.c.consumer.groups[gid]


def parts(resp, topic=T):
    return sorted((resp.assignment or {}).get(topic, []))


def test_first_member_joins_with_kafkas_records_and_gets_everything():
    h = CH()
    r = h.hb("m1")
    assert (r.error, r.member_id, r.member_epoch, parts(r), r.heartbeat_interval_ms) == \
        (ErrorCode.none, "m1", 1, list(range(6)), 5000)
    # GroupMetadataManagerTest.testMemberJoinsEmptyConsumerGroup: 5, 3, 7, 6, 8
    assert h.types() == [5, 3, 7, 6, 8]
    g = h.group()
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    assert g.metadata_hash != 0
    # the member acknowledges its partitions; then a plain heartbeat: nothing written, no
    # assignment sent again
    n = len(h.log)
    assert h.hb("m1", 1, owned=[(T, list(range(6)))]).assignment is None
    r = h.hb("m1", 1)
    assert (r.member_epoch, r.assignment, len(h.log)) == (1, None, n)


def test_v0_join_without_member_id_gets_one():
    h = CH()
    assert h.hb("").error == ErrorCode.invalid_request        # v1: the client generates it
    r = h.hb("", version=0)
    assert len(r.member_id) == 22 and r.member_epoch == 1


def test_second_member_revoke_before_assign():
    h = CH()
    h.hb("m1")
    r2 = h.hb("m2")
    # m2 is at the new epoch but its partitions are still owned by m1: nothing yet
    assert (r2.member_epoch, parts(r2)) == (2, [])
    assert h.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    r1 = h.hb("m1", 1)
    keep = parts(r1)
    assert r1.member_epoch == 1 and len(keep) == 3
    m1 = h.group().members["m1"]
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    assert h.group().state is ConsumerGroupState.RECONCILING
    # m2 still gets nothing while m1 has not acknowledged the revocation
    assert parts(h.hb("m2", 2)) == []
    # m1 reports only what it kept: it reaches epoch 2, the revoked partitions are free
    r1 = h.hb("m1", 1, owned=[(T, keep)])
    assert r1.member_epoch == 2
    r2 = h.hb("m2", 2)
    assert sorted(parts(r2) + keep) == list(range(6)) and not set(parts(r2)) & set(keep)
    h.hb("m1", 2, owned=[(T, keep)])
    h.hb("m2", 2, owned=[(T, parts(r2))])
    assert h.group().state is ConsumerGroupState.STABLE


def test_a_lost_revocation_is_sent_again_until_the_member_reconciles():
    """librdkafka retries a timed-out ConsumerGroupHeartbeat as it was (not full, no owned
    partitions): the answer that carried the revocation is lost, the retry must carry it again or
    the member keeps everything and the group never settles (30 members, benchmarks/groups.py)."""
    h = CH()
    h.hb("m1")
    h.hb("m2")
    lost = h.hb("m1", 1)                                   # its answer never reaches the client
    keep = parts(lost)
    assert len(keep) == 3 and h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    again = h.hb("m1", 1)                                  # the same request, retried
    assert (again.member_epoch, parts(again)) == (1, keep)
    # m2 acknowledged its empty share when it joined (owned []): not sent again
    assert h.hb("m2", 2).assignment is None
    h.hb("m1", 1, owned=[(T, keep)])
    r2 = h.hb("m2", 2)
    h.hb("m1", 2, owned=[(T, keep)])
    h.hb("m2", 2, owned=[(T, parts(r2))])
    assert h.group().state is ConsumerGroupState.STABLE
    # members gone are forgotten
    h.hb("m2", -1)
    h.hb("m3")
    assert h.c.consumer._unacked_members(h.group()) <= set(h.group().members)
    # acknowledged, a plain heartbeat is answered without the assignment, as Kafka's is
    assert h.hb("m1", 2).assignment is None


def test_leave_writes_tombstones_and_bumps_the_epoch():
    h = CH()
    h.hb("m1")
    h.hb("m2")
    n = len(h.log)
    r = h.hb("m2", -1)
    assert (r.error, r.member_id, r.member_epoch) == (ErrorCode.none, "m2", -1)
    assert h.types(n) == [8, 7, 5, 3]
    assert [r.value is None for r in h.log[n:]] == [True, True, True, False]
    assert h.log[-1].value.epoch == 3
    r1 = h.hb("m1", 1)
    # m1 never revoked anything: it keeps all 6 (unchanged, so not sent again) at epoch 3
    assert r1.assignment is None and r1.member_epoch == 3
    assert h.group().members["m1"].assigned_partitions[T] == frozenset(range(6))
    # the last member leaving: the target's epoch follows the group's (KAFKA-20442)
    n = len(h.log)
    h.hb("m1", -1)
    assert h.types(n) == [8, 7, 5, 3, 6]
    assert h.group().state is ConsumerGroupState.EMPTY


def test_errors_where_kafka_returns_them():
    h = CH(consumer_max_size=2)
    assert h.hb("x", 3).error == ErrorCode.group_id_not_found
    h.hb("m1")
    assert h.hb("nobody", 1).error == ErrorCode.unknown_member_id
    r = h.hb("m1", 7)
    assert (r.error, r.member_epoch, r.member_id) == (ErrorCode.fenced_member_epoch, 0, None)
    h.hb("m2")
    assert h.hb("m3").error == ErrorCode.group_max_size_reached
    assert h.hb("m3", regex="(a").error == ErrorCode.group_max_size_reached
    assert h.hb("m1", -1).error == ErrorCode.none
    assert h.hb("m3", names=None, regex="(a").error == ErrorCode.invalid_regular_expression
    assert h.hb("m3", names=None, regex="(x)\\1").error == ErrorCode.invalid_regular_expression
    assert h.hb("zz", -1, group="nope").error == ErrorCode.group_id_not_found


def test_smaller_epoch_accepted_only_from_the_previous_one_with_a_subset():
    h = CH()
    h.hb("m1")
    h.hb("m2")
    r1 = h.hb("m1", 1)
    keep = parts(r1)
    h.hb("m1", 1, owned=[(T, keep)])            # now epoch 2, previous 1
    assert h.group().members["m1"].member_epoch == 2
    # the answer with epoch 2 was lost: epoch 1 with a subset of the assignment is fine
    assert h.hb("m1", 1, owned=[(T, keep[:1])]).error == ErrorCode.none
    assert h.hb("m1", 1).error == ErrorCode.fenced_member_epoch           # owned unknown
    assert h.hb("m1", 1, owned=[(T, [9])]).error == ErrorCode.fenced_member_epoch
    # epoch 0 from a known member is a rejoin (KAFKA-19233): its assignment comes back
    r = h.hb("m1", 0)
    assert r.error == ErrorCode.none and parts(r) == keep


def test_session_expiry_fences_and_the_others_take_over():
    h = CH()
    h.hb("m1")
    h.hb("m2")
    h.hb("m1", 1, owned=[(T, parts(h.hb("m1", 1)))])
    h.advance(SESSION - 1000)
    h.hb("m1", 2)
    h.advance(2000)               # m2 stopped heartbeating
    assert set(h.group().members) == {"m1"}
    assert parts(h.hb("m1", 2)) == list(range(6))


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = CH()
    h.hb("m1", rebalance=10000)
    h.hb("m2")
    h.hb("m1", 1)
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(5000)
    h.hb("m1", 1)                 # still owning everything (owned unknown)
    h.hb("m2", 2)
    h.advance(6000)
    assert set(h.group().members) == {"m2"}


def test_static_member_leaves_temporarily_and_is_replaced():
    h = CH()
    r = h.hb("a1", instance="i1")
    h.hb("b1")
    ra = h.hb("a1", 1)
    keep = parts(ra)
    h.hb("a1", 1, owned=[(T, keep)])
    h.hb("b1", 2)
    epoch = h.group().group_epoch
    assert h.hb("a2", instance="i1").error == ErrorCode.unreleased_instance_id
    assert h.hb("a2", 2, instance="i1").error == ErrorCode.fenced_instance_id
    n = len(h.log)
    r = h.hb("a1", -2, instance="i1")
    assert (r.error, r.member_epoch) == (ErrorCode.none, -2)
    assert h.types(n) == [8]
    assert h.group().members["a1"].assigned_partitions[T] == frozenset(keep)
    # a new process with the same instance id: same partitions, no epoch bump
    n = len(h.log)
    r = h.hb("a2", instance="i1")
    assert (r.error, parts(r)) == (ErrorCode.none, keep)
    assert h.types(n)[:6] == [8, 7, 5, 5, 7, 8]
    assert h.group().group_epoch == epoch and set(h.group().members) == {"a2", "b1"}
    # the session of the member that left with -2 keeps running until it is replaced or expires
    r = h.hb("a2", -2, instance="i1")
    h.advance(SESSION // 2)
    h.hb("b1", h.group().members["b1"].member_epoch)
    h.advance(SESSION // 2 + 1)
    assert set(h.group().members) == {"b1"}


def test_regex_resolved_after_the_heartbeat_that_brings_it():
    h = CH()
    r = h.hb("m1", names=None, regex="t|u")
    assert (r.error, r.assignment) == (ErrorCode.none, {})
    regex_records = [x for x in h.log if x.key.version == 16]
    assert regex_records and sorted(regex_records[0].value.topics) == ["t", "u"]
    r = h.hb("m1", h.group().members["m1"].member_epoch)
    assert parts(r, T) == list(range(6)) and parts(r, U) == [0, 1]
    # whole-name match, as RE2/J's matches(): "^t" alone is topic t only
    h2 = CH()
    h2.topics["tx"] = TopicImage(uuid.uuid4(), "tx", 1)
    h2.hb("m", names=None, regex="^t")
    assert h2.group().resolved_regexes["^t"].topics == {"t"}
    # a topic created later is picked up at a heartbeat after the 10 s minimum interval
    h2.topics["t2"] = TopicImage(uuid.uuid4(), "t2", 1)
    h2.version += 1
    h2.c.consumer.on_metadata_change(["t2"], True, h2.version)
    h2.hb("m", h2.group().members["m"].member_epoch)
    assert "t2" not in h2.group().resolved_regexes["^t"].topics   # "^t" does not match t2 anyway
    h3 = CH()
    h3.hb("m", names=None, regex="t.*")
    h3.topics["t2"] = TopicImage(uuid.uuid4(), "t2", 1)
    h3.version += 1
    h3.c.consumer.on_metadata_change(["t2"], True, h3.version)
    h3.advance(11000)
    h3.hb("m", h3.group().members["m"].member_epoch)
    assert h3.group().resolved_regexes["t.*"].topics == {"t", "t2"}
    r = h3.hb("m", h3.group().members["m"].member_epoch)
    assert r.member_epoch == h3.group().group_epoch


def test_partitions_added_bump_the_epoch_and_are_assigned():
    h = CH()
    h.hb("m1")
    h.topics["t"] = TopicImage(T, "t", 8)
    h.version += 1
    h.c.consumer.on_metadata_change(["t"], False, h.version)
    r = h.hb("m1", 1)
    assert r.member_epoch == 2 and parts(r) == list(range(8))


def test_deleted_topic_is_revoked():
    h = CH()
    h.hb("m1", names=["t", "u"])
    del h.topics["u"]
    h.version += 1
    h.c.consumer.on_metadata_change(["u"], False, h.version)
    r = h.hb("m1", 1)
    assert U not in (r.assignment or {})


def test_failed_write_changes_nothing_and_answers_the_append_error():
    h = CH()
    h.fail_writes = True
    r = h.hb("m1")
    assert r.error == ErrorCode.not_coordinator and "g" not in h.c.consumer.groups
    h.fail_writes = False
    assert h.hb("m1").member_epoch == 1


def test_replay_at_load_gives_the_same_group_and_arms_the_timers():
    h = CH()
    h.hb("m1")
    h.hb("m2", names=["t", "u"])
    h.hb("m1", 1)
    h.hb("m3", names=None, regex="u")
    h.hb("m2", -1)
    before = h.group()
    fresh = CH()
    fresh.c.start_loading(fresh.c.partition_for("g"))
    assert fresh.hb("m1", 1).error == ErrorCode.coordinator_load_in_progress
    for i, rec in enumerate(h.log):
        fresh.c.replay(rec, i)
    fresh.c.on_loaded(fresh.c.partition_for("g"))
    g = fresh.group()
    assert (g.group_epoch, g.assignment_epoch, g.metadata_hash) == \
        (before.group_epoch, before.assignment_epoch, before.metadata_hash)
    assert g.members == before.members and g.target_assignment == before.target_assignment
    assert g.resolved_regexes == before.resolved_regexes
    assert g.partition_epochs == before.partition_epochs
    # heartbeats go on where they were; a member that never comes back is fenced
    m1 = g.members["m1"]
    assert fresh.hb("m1", m1.member_epoch, owned=[(T, sorted(m1.assigned_partitions.get(T, ())))]).error == \
        ErrorCode.none
    fresh.advance(SESSION + 1)
    assert set(fresh.group().members) == set()


def test_offsets_with_member_epochs():
    h = CH()
    h.hb("m1")
    p = [CommitPartition("t", 0, 5)]

    def commit(epoch, member, version=9, txn=False):
        if txn:
            outcome, errors = h.c.commit_transactional_offsets("g", epoch, member, None, p)
        else:
            outcome, errors = h.c.commit_offsets("g", epoch, member, None, p, -1, version)
        h.run(outcome)
        return errors[0]
    assert commit(1, "m1") == ErrorCode.none
    assert commit(0, "m1") == ErrorCode.stale_member_epoch
    assert commit(1, "m1", version=8) == ErrorCode.unsupported_version
    assert commit(-1, "") == ErrorCode.unknown_member_id
    assert commit(1, "x") == ErrorCode.unknown_member_id
    assert commit(-1, "", txn=True) == ErrorCode.none                      # KAFKA-18060
    assert commit(0, "m1", txn=True) == ErrorCode.illegal_generation
    assert h.c.fetch_offsets("g", [("t", [0])], False, "m1", 0)[0] == ErrorCode.stale_member_epoch
    assert h.c.fetch_offsets("g", [("t", [0])], False, "x", 1)[0] == ErrorCode.unknown_member_id
    code, topics = h.c.fetch_offsets("g", [("t", [0])], False, "m1", 1)
    assert code == ErrorCode.none and topics[0][1][0].offset == 5
    assert h.c.fetch_offsets("g", [("t", [0])], False, None, -1)[1][0][1][0].offset == 5
    # subscribed: the offsets are neither deleted nor expired
    outcome, top, res = h.c.delete_offsets("g", [("t", [0])])
    assert res[0][1][0][1] == ErrorCode.group_subscribed_to_topic
    h.hb("m1", 1, names=["u"])
    h.hb("m1", -1)
    assert commit(-1, "") == ErrorCode.none                                 # empty now
    # DeleteGroups: the consumer group's tombstones after its offsets (spec §7.2)
    outcome, results = h.c.delete_groups(["g"])
    assert results == [("g", ErrorCode.none)]
    h.run(outcome)
    kinds = [r.key.version for r in outcome.records]
    assert kinds[0] == 1 and kinds[-1] == 3 and "g" not in h.c.consumer.groups
    assert h.c.fetch_offsets("g", [("t", [0])])[1][0][1][0].offset == -1


def test_delete_refused_while_members_and_expiry_removes_an_empty_group():
    h = CH(retention_ms=60000)
    h.hb("m1")
    outcome, results = h.c.delete_groups(["g"])
    assert results == [("g", ErrorCode.non_empty_group)]
    outcome, errors = h.c.commit_offsets("g", 1, "m1", None, [CommitPartition("t", 0, 5)], -1, 9)
    h.run(outcome)
    h.hb("m1", -1)
    h.now += 120000
    h.run(h.c.cleanup_expired())
    assert "g" not in h.c.consumer.groups


def test_describe_list_and_classic_views():
    h = CH()
    h.hb("m1", assignor="range")
    [d] = h.c.consumer_group_describe(["g"])
    assert (d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Stable", 1, 1, "range")
    [m] = d.members
    assert (m.member_epoch, m.member_type, m.assignment[0][1], m.assignment[0][2]) == (1, 1, "t", list(range(6)))
    assert [x.error for x in h.c.consumer_group_describe(["", "nope"])] == \
        [ErrorCode.invalid_group_id, ErrorCode.group_id_not_found]
    listed = {(g.group_id, g.group_type, g.state, g.protocol_type) for g in h.c.list_groups()}
    assert ("g", "consumer", "Stable", "consumer") in listed
    assert h.c.list_groups(types_filter=["classic"]) == []
    assert [g.group_id for g in h.c.list_groups(types_filter=["Consumer"], states_filter=["stable"])] == ["g"]
    [dg] = h.c.describe_groups(["g"])
    assert (dg.state, dg.members) == ("Dead", [])


def test_empty_classic_group_becomes_a_consumer_group_and_keeps_offsets():
    h = CH()
    outcome, _ = h.c.commit_offsets("g", -1, "", None, [CommitPartition("t", 1, 7)], -1, 8)
    h.run(outcome)
    assert "g" in h.c.groups
    r = h.hb("m1")
    assert r.error == ErrorCode.none and "g" not in h.c.groups and "g" in h.c.consumer.groups
    assert h.log[1].key.version == 2 and h.log[1].value is None
    assert h.c.fetch_offsets("g", [("t", [1])])[1][0][1][0].offset == 7


def test_fuzzed_heartbeats_never_crash_nor_wedge_the_coordinator():
    """Lying epochs, unknown members, huge topic lists, unknown assignors, bad regexes, garbage
    owned partitions: every answer is an answer, the group stays consistent, and honest members
    still converge afterwards."""
    h = CH()
    rnd = random.Random(848)
    ids = [f"m{i}" for i in range(6)]
    huge = [f"topic-{i}" for i in range(5000)] + ["t"]
    for i in range(1500):
        mid = rnd.choice(ids + ["", "ghost"])
        epoch = rnd.choice([0, -1, -2, 1, 2, 5, 999, 2**31 - 1, -7])
        kw = {}
        if rnd.random() < 0.3:
            kw["names"] = rnd.choice([["t"], ["u"], huge, [], ["t", "u", "zz"]])
        if rnd.random() < 0.15:
            kw["regex"] = rnd.choice(["t.*", "(", "a{2000}", "(x+x+)+y", "", "u"])
        if rnd.random() < 0.2:
            kw["assignor"] = rnd.choice(["uniform", "range", "nope", "\x00"])
        if rnd.random() < 0.3:
            kw["owned"] = rnd.choice([[(T, [0, 1])], [(uuid.uuid4(), [1])], [(T, [-5, 10**6])], []])
        if rnd.random() < 0.1:
            kw["instance"] = rnd.choice(["i1", "i2"])
        try:
            r = h.hb(mid, epoch, **kw)
        except AssertionError:
            raise
        assert isinstance(r.error, ErrorCode)
        if rnd.random() < 0.05:
            h.advance(rnd.choice([1000, SESSION]))
        g = h.c.consumer.groups.get("g")
        if g is not None:
            # the partition epoch map stays the union of assigned and pending, each owned once
            owned = [(t, p) for m in g.members.values() for a in (m.assigned_partitions, m.partitions_pending_revocation)
                     for t, ps in a.items() for p in ps]
            assert len(owned) == len(set(owned))
    # the coordinator still works: everyone leaves, two honest members converge
    h.advance(SESSION * 2)
    a, b = h.hb("ha"), h.hb("hb")
    assert a.error == ErrorCode.none and b.error == ErrorCode.none
    for _ in range(6):
        for mid in ("ha", "hb"):
            m = h.group().members[mid]
            h.hb(mid, m.member_epoch, owned=[(t, sorted(ps)) for t, ps in m.assigned_partitions.items()])
    g = h.group()
    assert g.state is ConsumerGroupState.STABLE
    assert sorted(p for m in g.members.values() for p in m.assigned_partitions.get(T, ())) == list(range(6))


@pytest.mark.parametrize("protocols", [("classic",)])
def test_config_without_the_consumer_protocol(protocols):
    assert not GroupConfig(protocols=protocols).consumer_protocol_enabled
    assert GroupConfig().consumer_protocol_enabled


def test_classic_join_converts_an_empty_consumer_group():
    from compactlog.coordinator.group.api_data import JoinRequest
    h = CH()
    h.hb("m1")

    def join():
        req = JoinRequest("g", "", "consumer", [("range", R.encode_subscription(["t"]))], 10000, 30000,
                          None, "cli", "/127.0.0.1", 3)
        outcome, fut = h.c.join_group(req)
        h.run(outcome)
        return fut
    outcome, errors = h.c.commit_offsets("g", 1, "m1", None, [CommitPartition("t", 0, 3)], -1, 9)
    h.run(outcome)
    h.hb("m1", -1)
    n = len(h.log)
    fut = join()
    assert "g" not in h.c.consumer.groups and "g" in h.c.groups
    kinds = h.types(n)
    assert kinds[-1] == 2 and kinds[:-1] and set(kinds[:-1]) <= {3, 4, 5, 6, 7, 8, 16}
    assert h.c.committed("g")[("t", 0)].offset == 3
    # the log replays to the classic group alone
    fresh = CH()
    for i, rec in enumerate(h.log):
        fresh.c.replay(rec, i)
    assert "g" not in fresh.c.consumer.groups and "g" in fresh.c.groups


def test_reconciliation_process_of_kafkas_test_through_the_heartbeat(monkeypatch):
    """GroupMetadataManagerTest.testReconciliationProcess (spec §3's data case): the answer and
    the member's state at each of the ten heartbeats, with the target prepared as Kafka's mock
    assignor prepares it."""
    from compactlog.coordinator.group.consumer import assignors as A
    from compactlog.coordinator.group.consumer.model import (ConsumerGroupMember, compute_metadata_hash,
                                                             current_assignment_record, group_epoch_record,
                                                             member_metadata_record, target_assignment_epoch_record,
                                                             target_assignment_record)
    FOO, BAR = uuid.uuid4(), uuid.uuid4()
    h = CH()
    h.topics = {"foo": TopicImage(FOO, "foo", 6), "bar": TopicImage(BAR, "bar", 3)}

    class Prepared:
        name = "uniform"

        def assign(self, spec, partitions):
            return {"m1": {FOO: {0, 1}, BAR: {0}}, "m2": {FOO: {2, 3}, BAR: {2}}, "m3": {FOO: {4, 5}, BAR: {1}}}
    monkeypatch.setitem(A.ASSIGNORS, "uniform", Prepared())
    image = h.c.consumer.image()
    stored = {"m1": {FOO: frozenset({0, 1, 2}), BAR: frozenset({0, 1})}, "m2": {FOO: frozenset({3, 4, 5}), BAR: frozenset({2})}}
    for mid, a in stored.items():
        m = ConsumerGroupMember(mid, 10, 9, MemberState.STABLE, rebalance_timeout_ms=300000, client_id="c",
                                client_host="/h", subscribed_topic_names=frozenset({"foo", "bar"}),
                                assigned_partitions=a)
        for rec in (member_metadata_record("g", m), target_assignment_record("g", mid, a),
                    current_assignment_record("g", m)):
            h.c.replay(rec)
    h.c.replay(target_assignment_epoch_record("g", 10))
    h.c.replay(group_epoch_record("g", 10, compute_metadata_hash(["foo", "bar"], image)))

    def step(mid, epoch, owned=None):
        full = epoch == 0
        req = HeartbeatRequest("g", mid, epoch, None, None, REBALANCE if full else -1,
                               ["foo", "bar"] if full else None, None, None, [] if full else owned, "c", "/h")
        outcome, r = h.c.consumer_group_heartbeat(req)
        h.run(outcome)
        assert r.error == ErrorCode.none, r
        a = None if r.assignment is None else {("foo" if t == FOO else "bar"): ps for t, ps in r.assignment.items()}
        m = h.group().members[mid]
        return r.member_epoch, a, m.state
    U_, R_, S_ = MemberState.UNRELEASED_PARTITIONS, MemberState.UNREVOKED_PARTITIONS, MemberState.STABLE
    # where Kafka answers None (nothing changed), a member with partitions to revoke that has not
    # acknowledged its assignment is told it again here (the lost-revocation test)
    assert step("m3", 0) == (11, {}, U_)
    assert step("m1", 10) == (10, {"foo": [0, 1], "bar": [0]}, R_)
    assert h.group().members["m1"].partitions_pending_revocation == {FOO: {2}, BAR: {1}}
    assert step("m2", 10) == (10, {"foo": [3], "bar": [2]}, R_)
    assert step("m3", 11) == (11, None, U_)                                # acknowledged at its join
    assert step("m1", 10, [(FOO, [0, 1]), (BAR, [0])]) == (11, None, S_)
    assert step("m2", 10) == (10, {"foo": [3], "bar": [2]}, R_)            # Kafka: None
    assert step("m3", 11) == (11, {"bar": [1]}, U_)
    assert step("m3", 11) == (11, None, U_)
    assert step("m2", 10, [(FOO, [3]), (BAR, [2])]) == (11, {"foo": [2, 3], "bar": [2]}, S_)
    assert step("m3", 11, [(BAR, [1])]) == (11, {"foo": [4, 5], "bar": [1]}, S_)
    assert h.group().members["m3"].previous_member_epoch == 11
    assert h.group().state is ConsumerGroupState.STABLE


def test_regex_resolves_to_the_topics_the_principal_may_describe():
    h = CH()
    req = HeartbeatRequest("g", "m", 0, None, None, REBALANCE, None, ".*", None, [], "c", "/h")
    req.describable = lambda names: names - {"u"}
    outcome, r = h.c.consumer_group_heartbeat(req)
    h.run(outcome)
    assert r.error == ErrorCode.none and h.group().resolved_regexes[".*"].topics == {"t"}


def test_classic_member_in_a_consumer_group():
    """Spec §11.1: a classic member joins a consumer group with members: JoinGroup answers its
    epoch as the generation (no leader, no members), SyncGroup its assigned partitions as a
    ConsumerProtocolAssignment, Heartbeat REBALANCE_IN_PROGRESS while it must rejoin to move on,
    LeaveGroup fences it; describe shows member type 0."""
    from compactlog.coordinator.group.api_data import JoinRequest, SyncRequest
    h = CH()
    h.hb("m1")
    sub = R.encode_subscription(["t"], version=1)

    def join(member="", version=7):
        req = JoinRequest("g", member, "consumer", [("cooperative-sticky", sub)], 10000, 30000, None, "cli",
                          "/127.0.0.1", version)
        outcome, fut = h.c.join_group(req)
        h.run(outcome)
        return fut.result(0)

    def sync(member, generation):
        outcome, fut = h.c.sync_group(SyncRequest("g", generation, member, None, "consumer", "cooperative-sticky", {}))
        h.run(outcome)
        return fut.result(0)

    def heartbeat(member, generation):
        outcome, code = h.c.heartbeat("g", member, None, generation)
        h.run(outcome)
        return code
    first = join()
    assert first.error == ErrorCode.member_id_required
    c = first.member_id
    j = join(c)
    assert (j.error, j.generation_id, j.leader, j.members, j.protocol_name) == \
        (ErrorCode.none, 2, "", [], "cooperative-sticky")
    s = sync(c, 2)
    assert s.error == ErrorCode.none and R.decode_assignment(s.assignment).partitions == []
    assert heartbeat(c, 2) == ErrorCode.none            # its partitions are still m1's
    keep = parts(h.hb("m1", 1))
    h.hb("m1", 1, owned=[(T, keep)])
    assert heartbeat(c, 2) == ErrorCode.rebalance_in_progress     # now free: rejoin to get them
    assert heartbeat(c, 1) == ErrorCode.illegal_generation
    j = join(c)
    assert j.generation_id == 2
    got = R.decode_assignment(sync(c, 2).assignment).partitions
    assert sorted(p for _, ps in got for p in ps) == sorted(set(range(6)) - set(keep))
    assert heartbeat(c, 2) == ErrorCode.none
    [d] = h.c.consumer_group_describe(["g"])
    assert sorted(m.member_type for m in d.members) == [0, 1]
    assert h.group().members[c].classic_member_metadata.session_timeout_ms == 10000
    # a second classic member must share a protocol with the first
    bad = JoinRequest("g", "", "consumer", [("range", sub)], 10000, 30000, None, "cli", "/h", 3)
    outcome, fut = h.c.join_group(bad)
    assert fut.result(0).error == ErrorCode.inconsistent_group_protocol
    outcome, top, results = h.c.leave_group("g", [(c, None, None)])
    h.run(outcome)
    assert results == [(c, None, ErrorCode.none)] and set(h.group().members) == {"m1"}
    # the classic member's session runs out when it stops heartbeating
    j = join("", version=3)
    h.advance(10001)
    h.hb("m1", h.group().members["m1"].member_epoch)
    assert set(h.group().members) == {"m1"}


def _classic_group(h, generation=5):
    """A Stable classic group of two range consumers of t (replayed as loading would)."""
    sub = R.encode_subscription(["t"], version=1)
    members = [R.MemberMetadata(mid, None, "cli", "/h", 30000, 10000, sub, R.encode_assignment([("t", ps)], 1))
               for mid, ps in (("c1", [0, 1, 2]), ("c2", [3, 4, 5]))]
    h.c.replay(R.group_metadata_record("g", R.GroupMetadataValue("consumer", generation, "range", "c1", 0, members)))
    h.c.on_loaded(h.c.partition_for("g"))
    return sub


def test_upgrade_of_a_classic_group_and_downgrade_when_the_consumer_member_leaves():
    from compactlog.coordinator.group.api_data import JoinRequest
    from compactlog.coordinator.group.classic_group_state import PREPARING_REBALANCE
    h = CH()
    sub = _classic_group(h)
    r = h.hb("n1")
    assert r.error == ErrorCode.none and "g" not in h.c.groups
    g = h.group()
    assert sorted(m.member_type for m in h.c.consumer_group_describe(["g"])[0].members) == [0, 0, 1]
    assert g.group_epoch == 6 and g.members["c1"].member_epoch == 5
    # the conversion's records come first: the classic tombstone, then 5, 3, 7, 6, 8 as a first join
    assert h.types()[:9] == [2, 5, 5, 3, 7, 7, 6, 8, 8]
    # the classic members learn of the rebalance from their heartbeats and rejoin
    outcome, code = h.c.heartbeat("g", "c1", None, 5)
    assert code == ErrorCode.rebalance_in_progress
    outcome, fut = h.c.join_group(JoinRequest("g", "c1", "consumer", [("range", sub)], 10000, 30000, None, "cli", "/h", 7))
    h.run(outcome)
    # its subscription reports no owned partitions: nothing to revoke, it reaches the epoch at once
    assert fut.result(0).error == ErrorCode.none and fut.result(0).generation_id == 6
    # the consumer member leaves: only classic members remain, the group becomes classic again
    n = len(h.log)
    h.hb("n1", -1)
    assert "g" not in h.c.consumer.groups and h.c.groups["g"].state == PREPARING_REBALANCE
    assert set(h.c.groups["g"].members) == {"c1", "c2"}
    assert h.types(n)[-1] == 2 and 3 in h.types(n)
    # a restart replays the same classic group
    fresh = CH()
    for i, rec in enumerate(h.log):
        fresh.c.replay(rec, i)
    assert "g" not in fresh.c.consumer.groups and set(fresh.c.groups["g"].members) == {"c1", "c2"}


def test_upgrade_refused_by_the_policy():
    h = CH(consumer_migration_policy="downgrade")
    _classic_group(h)
    r = h.hb("n1")
    assert r.error == ErrorCode.group_id_not_found and "policy" in r.message
