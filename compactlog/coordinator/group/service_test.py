"""The coordinator on a real data dir: __consumer_offsets created with Kafka's configs, records in
the partition Kafka's formula picks, everything loaded back by a new service (a restart), the
Kafka-written fixtures loaded, transactional offsets, and compaction by compactlog's cleaner."""

from __future__ import annotations

import os
import shutil

from kio.schema.errors import ErrorCode

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.record import consumer_offsets as R
from compactlog.coordinator.group.api_data import CommitPartition, JoinRequest, SyncRequest
from compactlog.coordinator.group.classic_group_state import EMPTY, STABLE
from compactlog.server.conftest import FakeTransactions
from compactlog.coordinator.group.service import GroupCoordinatorService
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.coordinator.conftest import Clock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VECTORS = os.path.join(REPO, "tests", "data", "kafka-vectors")
SUB = R.encode_subscription(["t"])


def open_dir(path, **props):
    broker = BrokerConfig({"group.initial.rebalance.delay.ms": "0", **props})
    return DataDir(str(path), broker=broker, writable=True, create=True, command="test")


def service(dd, clock=None, load=True):
    s = GroupCoordinatorService(dd, clock=clock or Clock())
    if load:
        s.load_now()
    return s


def stable_member(s: GroupCoordinatorService, group="g", assignment=b"A"):
    c = s.coordinator
    first = s.call(c.join_group, JoinRequest(group, "", "consumer", [("range", SUB)], 10000, 30000,
                                              client_id="cli", client_host="/127.0.0.1")).result(0)
    fut = s.call(c.join_group, JoinRequest(group, first.member_id, "consumer", [("range", SUB)], 10000,
                                           30000, client_id="cli", client_host="/127.0.0.1"))
    s.run_due()
    r = fut.result(0)
    s.call(c.sync_group, SyncRequest(group, r.generation_id, r.member_id, assignments={r.member_id: assignment}))
    return r.member_id, r.generation_id


def test_topic_created_with_kafkas_configs_and_records_in_the_formulas_partition(tmp_path):
    dd = open_dir(tmp_path / "d", **{"offsets.topic.num.partitions": "7",
                                     "offsets.topic.segment.bytes": "1048576"})
    s = service(dd)
    assert not s.topic_exists()
    errors = s.commit_offsets("group-a", -1, "", None, [CommitPartition("t", 0, 42, 3, "meta")])
    assert errors == [ErrorCode.none]
    assert dd.partitions(R.OFFSETS_TOPIC) == list(range(7))
    cfg = dd.topic_config(R.OFFSETS_TOPIC)
    assert cfg.get("cleanup.policy") == ["compact"] and cfg.get("segment.bytes") == 1048576
    assert cfg.get("compression.type") == "producer"
    p = R.partition_for("group-a", 7)
    recs = list(dd.open_log(R.OFFSETS_TOPIC, p).records())
    (r,) = recs
    rec = R.decode_record(r.key, r.value)
    assert rec.key == R.OffsetCommitKey("group-a", "t", 0) and rec.value_version == 3
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata) == (42, 3, "meta")
    for q in range(7):
        if q != p:
            assert list(dd.open_log(R.OFFSETS_TOPIC, q).records()) == []
    dd.close()


def test_everything_survives_a_restart(tmp_path):
    clock = Clock()
    dd = open_dir(tmp_path / "d")
    s = service(dd, clock)
    m, gen = stable_member(s)
    assert s.commit_offsets("g", gen, m, None, [CommitPartition("t", 0, 10), CommitPartition("t", 1, 20)]) \
        == [ErrorCode.none, ErrorCode.none]
    s.commit_offsets("manual", -1, "", None, [CommitPartition("u", 0, 5)])
    dd.close()

    dd = open_dir(tmp_path / "d")
    s2 = service(dd, clock)
    g = s2.coordinator.groups["g"]
    assert (g.state, g.generation_id, list(g.members)) == (STABLE, gen, [m])
    assert g.members[m].assignment == b"A" and g.members[m].client_host == "/127.0.0.1"
    assert s2.coordinator.committed("g") == {
        ("t", 0): s2.coordinator.committed("g")[("t", 0)], ("t", 1): s2.coordinator.committed("g")[("t", 1)]}
    assert [o.offset for o in s2.coordinator.committed("g").values()] == [10, 20]
    assert s2.coordinator.groups["manual"].protocol_type is None
    # the member does not come back: its session ends and the empty group is written
    clock.now += 10000
    s2.run_due()
    assert g.state == EMPTY
    dd.close()
    dd = open_dir(tmp_path / "d")
    s3 = service(dd, clock)
    assert s3.coordinator.groups["g"].state == EMPTY
    assert [o.offset for o in s3.coordinator.committed("g").values()] == [10, 20]
    dd.close()


def test_delete_groups_and_expiry_leave_tombstones_that_load_as_absence(tmp_path):
    clock = Clock()
    dd = open_dir(tmp_path / "d", **{"offsets.retention.minutes": "1"})
    s = service(dd, clock)
    s.commit_offsets("a", -1, "", None, [CommitPartition("t", 0, 1)])
    s.commit_offsets("b", -1, "", None, [CommitPartition("t", 0, 2)])
    assert s.call(s.coordinator.delete_groups, ["a"]) == [("a", ErrorCode.none)]
    clock.now += 60000
    assert s.expire_offsets_now() == 2         # b's offset and then the empty group b
    dd.close()
    dd = open_dir(tmp_path / "d")
    s2 = service(dd, clock)
    assert s2.coordinator.groups == {} and s2.coordinator.offset_manager.offsets == {}
    # the tombstones are in the log
    recs = [R.decode_record(r.key, r.value) for p in dd.partitions(R.OFFSETS_TOPIC)
            for r in dd.open_log(R.OFFSETS_TOPIC, p).records()]
    assert sum(1 for r in recs if r.value is None) == 4
    dd.close()


def test_requests_for_a_loading_partition_wait(tmp_path):
    dd = open_dir(tmp_path / "d")
    s = service(dd)
    s.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 1)])
    dd.close()
    dd = open_dir(tmp_path / "d")
    s2 = service(dd, load=False)
    s2.mark_loading()
    assert s2.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 2)]) == \
        [ErrorCode.coordinator_load_in_progress]
    s2.load_partition(s2.coordinator.partition_for("g"))
    assert s2.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 2)]) == [ErrorCode.none]
    dd.close()


def copy_fixture(src, dd_path, name):
    os.makedirs(dd_path, exist_ok=True)
    shutil.copytree(src, os.path.join(dd_path, name))


def test_kafka_37_fixture_loads(tmp_path):
    d = tmp_path / "d"
    copy_fixture(os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6"), d, "__consumer_offsets-6")
    dd = open_dir(d)
    s = service(dd)
    assert s.config.num_partitions == 50 and s.coordinator.partition_for("DEVSmileCDR") == 6
    g = s.coordinator.groups["DEVSmileCDR"]
    assert (g.state, g.generation_id, g.protocol_name, len(g.members)) == (STABLE, 6, "range", 17)
    assert g.subscribed_topics == {"batch2.work.notification.SHR_PROD.persistence",
                                   "subscription.matching.SHR_PROD.persistence", "TestTopicPatient",
                                   "Retry.TestTopicPatient"}
    assert {k: o.offset for k, o in s.coordinator.committed("DEVSmileCDR").items()} == {
        ("batch2.work.notification.SHR_PROD.persistence", 0): 0,
        ("subscription.matching.SHR_PROD.persistence", 0): 0,
        ("TestTopicPatient", 0): 3, ("Retry.TestTopicPatient", 0): 0}
    d, = s.coordinator.describe_groups(["DEVSmileCDR"])
    assert d.state == STABLE and len(d.members) == 17
    dd.close()


def test_kafka_2022_fixture_loads(tmp_path):
    d = tmp_path / "d"
    copy_fixture(os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs", "__consumer_offsets-0"), d,
                 "__consumer_offsets-0")
    dd = open_dir(d)
    s = service(dd)
    g = s.coordinator.groups["console-consumer-14897"]
    assert (g.state, g.generation_id, g.protocol_type) == (EMPTY, 2, "consumer")
    dd.close()


def test_transactional_offset_commits_wait_for_their_marker(tmp_path):
    dd = open_dir(tmp_path / "d")
    s = service(dd)
    s.ensure_topic()
    p = s.coordinator.partition_for("g")
    lg = dd.open_log(R.OFFSETS_TOPIC, p)
    committed = R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(7, -1, "", 1))
    aborted = R.offset_commit_record("g", "t", 1, R.OffsetCommitValue(8, -1, "", 1))
    open_txn = R.offset_commit_record("g", "t", 2, R.OffsetCommitValue(9, -1, "", 1))
    lg.append_records([committed.key_bytes()], [committed.value_bytes()], producer_id=11, producer_epoch=0,
                      base_sequence=0, transactional=True)
    lg.append_records([aborted.key_bytes()], [aborted.value_bytes()], producer_id=12, producer_epoch=0,
                      base_sequence=0, transactional=True)
    lg.append_records([open_txn.key_bytes()], [open_txn.value_bytes()], producer_id=13, producer_epoch=0,
                      base_sequence=0, transactional=True)
    lg.append_control(commit=True, producer_id=11, producer_epoch=0)
    lg.append_control(commit=False, producer_id=12, producer_epoch=0)
    dd.close()
    dd = open_dir(tmp_path / "d")
    s2 = service(dd)
    assert {k: o.offset for k, o in s2.coordinator.committed("g").items()} == {("t", 0): 7}
    err, topics = s2.coordinator.fetch_offsets("g", [("t", [2])], require_stable=True)
    assert topics[0][1][0].error == ErrorCode.unstable_offset_commit
    dd.close()


def test_undecodable_and_unknown_records_are_skipped_with_a_log_line(tmp_path, caplog):
    dd = open_dir(tmp_path / "d")
    s = service(dd)
    s.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 1)])
    p = s.coordinator.partition_for("g")
    lg = dd.open_log(R.OFFSETS_TOPIC, p)
    good = R.offset_commit_record("g", "t", 1, R.OffsetCommitValue(5, -1, "", 1))
    # type 10 (a share group's record) is skipped; types 3-8 and 16 are the consumer groups' now
    lg.append_records([b"\x00\x0a\x00\x01g", R.encode_key(R.OffsetCommitKey("g", "t", 9)), good.key_bytes()],
                      [b"\x00\x00", b"\x00\x03\x00", good.value_bytes()])
    dd.close()
    dd = open_dir(tmp_path / "d")
    with caplog.at_level("DEBUG"):
        s2 = service(dd)
    assert {k: o.offset for k, o in s2.coordinator.committed("g").items()} == {("t", 0): 1, ("t", 1): 5}
    text = caplog.text
    assert f"__consumer_offsets-{p}: offset 2: record skipped" in text and "offset 1: unknown record type 10" in text
    dd.close()


def test_compaction_keeps_the_same_state(tmp_path):
    """Many commits, small segments, the cleaner run in-process: the state loaded after every
    clean is the one before it, and the offsets topic shrinks."""
    clock = Clock()
    props = {"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "2048",
             "log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.delete.retention.ms": "0"}
    dd = open_dir(tmp_path / "d", **props)
    s = service(dd, clock)
    m, gen = stable_member(s)
    for i in range(300):
        clock.now += 1
        s.commit_offsets("g", gen, m, None, [CommitPartition("t", i % 3, i)])
        if i % 50 == 0:
            s.commit_offsets(f"tmp-{i}", -1, "", None, [CommitPartition("t", 0, i)])
            s.call(s.coordinator.delete_groups, [f"tmp-{i}"])
    expected = {k: o.offset for k, o in s.coordinator.committed("g").items()}
    lg = dd.open_log(R.OFFSETS_TOPIC, 0)
    before = lg.size()
    assert len(lg.segments) > 5
    cleaner = Cleaner(dd, InProcessExecutor())
    for _ in range(3):
        cleaner.run(clock.now + 10**6, topic=R.OFFSETS_TOPIC, partition=0)
        fresh = GroupCoordinatorService(dd, clock=clock)
        fresh.load_now()
        assert {k: o.offset for k, o in fresh.coordinator.committed("g").items()} == expected
        assert set(fresh.coordinator.groups) == {"g"}
        assert fresh.coordinator.groups["g"].members[m].assignment == b"A"
        s.commit_offsets("g", gen, m, None, [CommitPartition("t", 0, 1000)])
        expected[("t", 0)] = 1000
    assert lg.size() < before / 3, (lg.size(), before)
    dd.close()


def test_offsets_of_deleted_partitions_become_tombstones(tmp_path):
    dd = open_dir(tmp_path / "d")
    s = service(dd)
    s.commit_offsets("a", -1, "", None, [CommitPartition("gone", 0, 1), CommitPartition("kept", 0, 2)])
    s.commit_offsets("b", -1, "", None, [CommitPartition("gone", 1, 3)])
    assert s.on_partitions_deleted([("gone", 0), ("gone", 1)]) == 2
    assert {k: o.offset for k, o in s.coordinator.committed("a").items()} == {("kept", 0): 2}
    assert s.coordinator.committed("b") == {}
    dd.close()
    dd = open_dir(tmp_path / "d")
    assert service(dd).coordinator.committed("b") == {}
    dd.close()


# -- transactional offset commits (transactions.md §5.1) ---------------------------------------------

TID = "tx-1"


def txn_commit(s, offsets, fake, *, group="g", pid=7, epoch=0, version=3, generation=-1, member=""):
    return s.commit_transactional_offsets(TID, group, pid, epoch, generation, member, None,
                                          [CommitPartition(t, p, o) for t, p, o in offsets], version, fake)


def committed(s, group="g"):
    return {k: o.offset for k, o in s.coordinator.committed(group).items()}


def stable_error(s, topic, partition, group="g"):
    return s.coordinator.fetch_offsets(group, [(topic, [partition])], require_stable=True)[1][0][1][0].error


def txn_setup(tmp_path, **props):
    dd = open_dir(tmp_path / "d", **props)
    s = service(dd)
    s.ensure_topic()
    p = s.coordinator.partition_for("g")
    fake = FakeTransactions()
    fake.add(TID, 7, 0, (R.OFFSETS_TOPIC, p))
    return dd, s, p, fake


def test_txn_offset_commit_is_one_transactional_batch_pending_until_the_commit_marker(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    lg = dd.open_log(R.OFFSETS_TOPIC, p)
    assert txn_commit(s, [("t", 0, 5), ("t", 1, 6)], fake) == [ErrorCode.none, ErrorCode.none]
    [b] = list(lg.batches())
    h = b.header
    assert (h.is_transactional, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == \
        (True, 7, 0, 0, 2)
    assert lg.last_stable_offset == 0                       # the open transaction holds the LSO
    assert committed(s) == {} and stable_error(s, "t", 0) == ErrorCode.unstable_offset_commit
    # the same producer again: a new batch (not a duplicate of sequence 0), no second question
    asked = len(fake.calls)
    assert txn_commit(s, [("t", 0, 8)], fake) == [ErrorCode.none]
    assert len(list(lg.batches())) == 2 and len(fake.calls) == asked
    assert s.write_txn_marker(p, 7, 0, 0, True) == ErrorCode.none
    assert committed(s) == {("t", 0): 8, ("t", 1): 6}
    assert stable_error(s, "t", 0) == ErrorCode.none and lg.last_stable_offset == lg.log_end_offset
    dd.close()
    dd = open_dir(tmp_path / "d")
    assert committed(service(dd)) == {("t", 0): 8, ("t", 1): 6}     # loading agrees with the live path
    dd.close()


def test_an_abort_marker_drops_the_pending_offsets_and_a_newer_plain_commit_wins(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    s.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 1)])
    txn_commit(s, [("t", 0, 5)], fake)
    assert s.write_txn_marker(p, 7, 0, 0, False) == ErrorCode.none
    assert committed(s) == {("t", 0): 1} and stable_error(s, "t", 0) == ErrorCode.none
    # a plain commit written after the transactional one is newer: the COMMIT does not undo it
    txn_commit(s, [("t", 0, 50), ("t", 1, 51)], fake)
    s.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 60)])
    assert s.write_txn_marker(p, 7, 0, 0, True) == ErrorCode.none
    assert committed(s) == {("t", 0): 60, ("t", 1): 51}
    dd.close()
    dd = open_dir(tmp_path / "d")
    assert committed(service(dd)) == {("t", 0): 60, ("t", 1): 51}
    dd.close()


def test_txn_offset_commit_verification_answers(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    fake.add(TID, 7, 0)                                   # AddOffsetsToTxn never sent
    assert txn_commit(s, [("t", 0, 5)], fake, version=3) == [ErrorCode.invalid_txn_state]
    assert txn_commit(s, [("t", 0, 5)], fake, version=4) == [ErrorCode.transaction_abortable]
    for answer, expected in ((ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch),
                             (ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_producer_id_mapping),
                             (ErrorCode.concurrent_transactions, ErrorCode.concurrent_transactions),
                             (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_load_in_progress),
                             (ErrorCode.coordinator_not_available, ErrorCode.coordinator_not_available)):
        fake.answer = answer
        assert txn_commit(s, [("t", 0, 5), ("t", 1, 5)], fake) == [expected] * 2, answer
    assert txn_commit(s, [("t", 0, 5)], None) == [ErrorCode.coordinator_not_available]   # no coordinator
    assert txn_commit(s, [("t", 0, 5)], fake, group="") == [ErrorCode.invalid_group_id]
    assert dd.open_log(R.OFFSETS_TOPIC, p).log_end_offset == 0 and "g" not in s.coordinator.groups
    dd.close()


def test_verification_comes_before_the_loading_check(tmp_path):
    """CoordinatorRuntime.scheduleTransactionalWriteOperation verifies first, then runs the operation
    (which finds the partition loading)."""
    dd, s, p, fake = txn_setup(tmp_path)
    s.coordinator.start_loading(p)
    fake.answer = ErrorCode.producer_fenced
    assert txn_commit(s, [("t", 0, 5)], fake) == [ErrorCode.invalid_producer_epoch]
    fake.answer = None
    assert txn_commit(s, [("t", 0, 5)], fake) == [ErrorCode.coordinator_load_in_progress]
    assert s.write_txn_marker(p, 7, 0, 0, True) == ErrorCode.coordinator_load_in_progress
    dd.close()


def test_stale_epochs_and_fenced_coordinators(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    txn_commit(s, [("t", 0, 5)], fake)
    assert s.write_txn_marker(p, 7, 0, 3, False) == ErrorCode.none
    # the marker's coordinator epoch 3 is now the partition's: an older coordinator is fenced
    txn_commit(s, [("t", 0, 6)], fake)
    assert s.write_txn_marker(p, 7, 0, 2, True) == ErrorCode.transaction_coordinator_fenced
    assert committed(s) == {} and stable_error(s, "t", 0) == ErrorCode.unstable_offset_commit
    # a bumped epoch (a fence) aborts; the old epoch is refused before the coordinator is asked
    assert s.write_txn_marker(p, 7, 1, 3, False) == ErrorCode.none
    assert s.write_txn_marker(p, 7, 0, 3, False) == ErrorCode.invalid_producer_epoch
    asked = len(fake.calls)
    assert txn_commit(s, [("t", 0, 7)], fake, epoch=0) == [ErrorCode.invalid_producer_epoch]
    assert len(fake.calls) == asked and committed(s) == {}
    assert s.write_txn_marker(99, 7, 1, 3, True) == ErrorCode.not_coordinator
    dd.close()


def test_verification_disabled_writes_without_asking(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path, **{"transaction.partition.verification.enable": "false"})
    fake.answer = ErrorCode.transaction_abortable
    assert txn_commit(s, [("t", 0, 5)], fake) == [ErrorCode.none] and fake.calls == []
    assert s.write_txn_marker(p, 7, 0, 0, True) == ErrorCode.none
    assert committed(s) == {("t", 0): 5}
    dd.close()


def test_verification_turned_off_at_run_time_applies_to_the_next_commit(tmp_path):
    """A dynamic change of transaction.partition.verification.enable makes the data dir's broker
    config a new object: the coordinator reads the one of the moment, not the one it started with."""
    from compactlog.storage.config import BrokerConfig
    dd, s, p, fake = txn_setup(tmp_path)
    fake.answer = ErrorCode.transaction_abortable
    assert txn_commit(s, [("t", 0, 5)], fake) == [ErrorCode.invalid_txn_state] and len(fake.calls) == 1
    dd.reconfigure_broker(BrokerConfig({**dd.broker.props, "transaction.partition.verification.enable": "false"}))
    assert txn_commit(s, [("t", 0, 5)], fake) == [ErrorCode.none] and len(fake.calls) == 1
    assert s.write_txn_marker(p, 7, 0, 0, False) == ErrorCode.none      # that transaction ends
    dd.reconfigure_broker(BrokerConfig({**dd.broker.props, "transaction.partition.verification.enable": "true"}))
    assert txn_commit(s, [("t", 0, 6)], fake) == [ErrorCode.invalid_txn_state] and len(fake.calls) == 2
    dd.close()


def test_deleting_the_group_or_topic_removes_pending_offsets(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    txn_commit(s, [("t", 0, 5), ("gone", 0, 6)], fake)
    assert s.on_partitions_deleted([("gone", 0)]) == 1
    assert s.call(s.coordinator.delete_groups, ["g"]) == [("g", ErrorCode.none)]
    assert s.write_txn_marker(p, 7, 0, 0, True) == ErrorCode.none
    assert "g" not in s.coordinator.groups and committed(s) == {}
    dd.close()
    dd = open_dir(tmp_path / "d")
    s2 = service(dd)
    assert "g" not in s2.coordinator.groups and committed(s2) == {}
    dd.close()


def test_a_txn_offset_commit_too_large_for_the_partition_is_refused(tmp_path):
    dd, s, p, fake = txn_setup(tmp_path)
    dd.alter_topic(R.OFFSETS_TOPIC, {"max.message.bytes": "200"})
    parts = [("t", i, i) for i in range(20)]
    assert txn_commit(s, parts, fake) == [ErrorCode.unknown_server_error] * 20
    assert dd.open_log(R.OFFSETS_TOPIC, p).log_end_offset == 0 and committed(s) == {}
    dd.close()


# -- KIP-848 consumer groups: their records written, loaded and compacted ---------------------------

def test_consumer_group_records_are_loaded_and_survive_compaction(tmp_path):
    """Members of a consumer group join, reconcile and leave many times over small segments of
    __consumer_offsets; the loader rebuilds the same group (epochs, members, targets, partition
    owners) before and after the cleaner compacts the topic, and the topic shrinks."""
    from compactlog.coordinator.group.api_data import HeartbeatRequest
    clock = Clock()
    props = {"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "2048",
             "log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.delete.retention.ms": "0"}
    dd = open_dir(tmp_path / "d", **props)
    dd.create_topic("t", 6)
    s = service(dd, clock)

    def hb(member, epoch, owned=None, **kw):
        req = HeartbeatRequest("cg", member, epoch, rebalance_timeout_ms=300000 if epoch == 0 else -1,
                               subscribed_topic_names=["t"] if epoch == 0 else None,
                               topic_partitions=[] if epoch == 0 else owned, client_id="c",
                               client_host="/127.0.0.1", **kw)
        r = s.call(s.coordinator.consumer_group_heartbeat, req)
        assert r.error == ErrorCode.none, r
        return r

    def settle(members):
        for _ in range(4):
            for mid in members:
                m = s.coordinator.consumer.groups["cg"].members[mid]
                hb(mid, m.member_epoch, [(t, sorted(ps)) for t, ps in m.assigned_partitions.items()])

    hb("keep", 0)
    for i in range(40):
        clock.now += 10
        hb(f"m{i}", 0)
        settle(["keep", f"m{i}"])
        hb(f"m{i}", -1)
    settle(["keep"])
    g = s.coordinator.consumer.groups["cg"]
    want = (g.group_epoch, g.assignment_epoch, g.metadata_hash, dict(g.members), dict(g.target_assignment),
            {t: dict(ps) for t, ps in g.partition_epochs.items()})

    def loaded():
        fresh = GroupCoordinatorService(dd, clock=clock)
        fresh.load_now()
        f = fresh.coordinator.consumer.groups["cg"]
        return (f.group_epoch, f.assignment_epoch, f.metadata_hash, dict(f.members), dict(f.target_assignment),
                {t: dict(ps) for t, ps in f.partition_epochs.items()})
    assert loaded() == want
    lg = dd.open_log(R.OFFSETS_TOPIC, 0)
    before = lg.size()
    assert len(lg.segments) > 5
    Cleaner(dd, InProcessExecutor()).run(clock.now + 10**6, topic=R.OFFSETS_TOPIC, partition=0)
    assert loaded() == want
    assert lg.size() < before / 3, (lg.size(), before)
    dd.close()
