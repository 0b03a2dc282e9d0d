"""Transaction conformance with raw kio requests through a socket (transactions.md §6.3 scenarios
9, 10, 11 and the TV 0 half of 6): produce verification (KIP-890) and its error code per Produce
version, PRODUCER_FENCED answered as INVALID_PRODUCER_EPOCH to the versions before it, the
transaction timeout bounds, the empty transactional id, and transactional-id expiry (a tombstone
in ``__transaction_state``, TRANSACTIONAL_ID_NOT_FOUND, a new producer id at the next init)."""

from __future__ import annotations

import pytest

from broker_support import Broker
from compactlog.record.consumer_offsets import partition_for
from txn_support import (BROKER_CONFIG, E, Raw, TxnProducer, create_topics, markers, state_records, txn_batch, uid,
                         wait_until)

EXPIRATION_MS = 1500
RAW_BROKER = {**BROKER_CONFIG, "transactional.id.expiration.ms": str(EXPIRATION_MS),
              "transaction.remove.expired.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn-raw") / "data", RAW_BROKER) as b:
        yield b


@pytest.fixture
def raw(broker):
    with Raw(broker.port) as r:
        yield r


@pytest.fixture
def topic(broker):
    name = uid("raw")
    create_topics(broker.bootstrap, name)
    return name


def init(raw: Raw, tid: str, **kw) -> tuple[int, int]:
    code, pid, epoch = raw.init_producer_id(tid, **kw)
    assert code == E.none
    return pid, epoch


# -- 9. verification --------------------------------------------------------------------------------------

def test_a_transactional_produce_to_a_partition_not_in_the_transaction(raw, topic):
    tid = uid("tx")
    pid, e = init(raw, tid)
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    # partition 1 was never added: TRANSACTION_ABORTABLE, answered INVALID_TXN_STATE before v11
    for version, code in ((3, E.invalid_txn_state), (9, E.invalid_txn_state), (10, E.invalid_txn_state),
                          (11, E.transaction_abortable), (12, E.transaction_abortable)):
        got = raw.produce(tid, [(topic, 1, txn_batch(pid, e, 0, [b"x"]))], version=version)
        assert got == {(topic, 1): code}, version
    assert raw.list_offset(topic, 1, read_committed=False) == 0          # nothing written
    # partition 0 was: accepted
    assert raw.produce(tid, [(topic, 0, txn_batch(pid, e, 0, [b"in"]))]) == {(topic, 0): E.none}
    assert raw.end_txn(tid, pid, e, False) == E.none


def test_stale_epochs_and_non_transactional_batches_in_an_open_transaction(broker, raw, topic):
    tid = uid("tx")
    init(raw, tid)
    pid, e = init(raw, tid)                        # epoch 1: 0 is now stale
    assert e == 1
    assert raw.add_partitions(tid, pid, e, {topic: [0, 1]}) == {(topic, 0): E.none, (topic, 1): E.none}
    # a stale epoch: verification says PRODUCER_FENCED, Produce answers INVALID_PRODUCER_EPOCH
    for version in (3, 9, 11):
        assert raw.produce(tid, [(topic, 0, txn_batch(pid, 0, 0, [b"old"]))], version=version) == \
            {(topic, 0): E.invalid_producer_epoch}
    assert raw.produce(tid, [(topic, 0, txn_batch(pid, e, 0, [b"a"]))]) == {(topic, 0): E.none}
    # the partition now has the producer's open transaction: a non-transactional batch of it
    assert raw.produce(None, [(topic, 0, txn_batch(pid, e, 1, [b"b"], transactional=False))]) == \
        {(topic, 0): E.invalid_txn_state}
    # a transactional batch without the transactional id
    assert raw.produce(None, [(topic, 1, txn_batch(pid, e, 0, [b"c"]))]) == \
        {(topic, 1): E.transactional_id_authorization_failed}
    # transactional batches of two producer ids in one request: the whole request
    tid2 = uid("tx")
    pid2, e2 = init(raw, tid2)
    assert raw.add_partitions(tid2, pid2, e2, {topic: [1]}) == {(topic, 1): E.none}
    assert raw.produce(tid, [(topic, 0, txn_batch(pid, e, 1, [b"d"])), (topic, 1, txn_batch(pid2, e2, 0, [b"e"]))]) \
        == {(topic, 0): E.invalid_producer_id_mapping, (topic, 1): E.invalid_producer_id_mapping}
    assert raw.list_offset(topic, 0, read_committed=False) == 1 and raw.list_offset(topic, 1, read_committed=False) == 0
    assert raw.end_txn(tid, pid, e, True) == E.none
    assert raw.end_txn(tid2, pid2, e2, False) == E.none
    assert [m[:2] for m in markers(broker.data_dir, topic, 0)] == [("COMMIT", 1)]


def test_txn_offset_commit_without_add_offsets_to_txn(raw, topic):
    tid, group = uid("tx"), uid("group")
    pid, e = init(raw, tid)
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    # the group's __consumer_offsets partition is not in the transaction: INVALID_TXN_STATE to
    # v0-3 (TRANSACTION_ABORTABLE to v4); nothing pending
    for version in (0, 1, 2, 3):
        assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5}, version=version) == \
            {(topic, 0): E.invalid_txn_state}, version
    assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5}, version=4) == \
        {(topic, 0): E.transaction_abortable}
    assert raw.offset_fetch(group, topic, [0], require_stable=True) == {0: (E.none, -1)}
    # with AddOffsetsToTxn it is accepted, pending until the marker
    assert raw.add_offsets(tid, pid, e, group) == E.none
    assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5}, version=0) == {(topic, 0): E.none}
    assert raw.offset_fetch(group, topic, [0], require_stable=True) == {0: (E.unstable_offset_commit, -1)}
    assert raw.offset_fetch(group, topic, [0], require_stable=False) == {0: (E.none, -1)}
    assert raw.end_txn(tid, pid, e, True) == E.none
    assert raw.offset_fetch(group, topic, [0], require_stable=True) == {0: (E.none, 5)}


def test_verification_turned_off_at_run_time_through_the_admin_api(broker, raw, topic):
    """transaction.partition.verification.enable changed through IncrementalAlterConfigs applies at
    once to both of its readers, Produce and the group coordinator's TxnOffsetCommit, without a
    restart (it had stayed on for TxnOffsetCommit until one), and back."""
    admin_module = pytest.importorskip("confluent_kafka.admin")
    admin = admin_module.AdminClient({"bootstrap.servers": broker.bootstrap})
    node = str(admin.describe_cluster(request_timeout=30).result(30).controller.id)

    def verification(value: str | None) -> None:
        op = admin_module.AlterConfigOpType.SET if value is not None else admin_module.AlterConfigOpType.DELETE
        res = admin_module.ConfigResource("broker", node, incremental_configs=[
            admin_module.ConfigEntry("transaction.partition.verification.enable", value, incremental_operation=op)])
        admin.incremental_alter_configs([res])[res].result(30)

    tid, group, other = uid("tx"), uid("group"), uid("group")
    # the other group in another __consumer_offsets partition: the one the first commit wrote to
    # holds the producer's open transaction then, which needs no verification (Kafka's rule too),
    # so a group sharing it (1 in 50 by chance) would be accepted whatever the setting
    while partition_for(other, 50) == partition_for(group, 50):
        other = uid("group")
    pid, e = init(raw, tid)
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    # verified: neither the group's partition nor partition 1 is in the transaction
    assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5}) == {(topic, 0): E.invalid_txn_state}
    assert raw.produce(tid, [(topic, 1, txn_batch(pid, e, 0, [b"x"]))]) == {(topic, 1): E.invalid_txn_state}
    verification("false")
    try:
        # Kafka's pitfall with KIP-890 off: both writes are taken without the coordinator's word
        assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5}) == {(topic, 0): E.none}
        assert raw.produce(tid, [(topic, 1, txn_batch(pid, e, 0, [b"x"]))]) == {(topic, 1): E.none}
    finally:
        verification(None)
    assert raw.txn_offset_commit(tid, other, pid, e, {(topic, 0): 5}) == {(topic, 0): E.invalid_txn_state}
    assert raw.end_txn(tid, pid, e, False) == E.none


def test_transactional_offsets_against_plain_commits_and_the_group_checks(raw, topic):
    """§5.1: a marker's COMMIT makes a pending offset the group's only if it was written after the
    committed one (a later plain OffsetCommit wins); §2.8: an empty group id is INVALID_GROUP_ID;
    AddOffsetsToTxn adds the group's __consumer_offsets partition to the transaction."""
    tid, group = uid("tx"), uid("group")
    pid, e = init(raw, tid)
    assert raw.txn_offset_commit(tid, "", pid, e, {(topic, 0): 1}) == {(topic, 0): E.invalid_group_id}
    assert raw.add_offsets(tid, pid, e, group) == E.none
    d = raw.describe_transaction(tid)
    assert (d.transaction_state, d.topics) == \
        ("Ongoing", (("__consumer_offsets", (partition_for(group, 50),)),))
    assert raw.txn_offset_commit(tid, group, pid, e, {(topic, 0): 5, (topic, 1): 5}) == \
        {(topic, 0): E.none, (topic, 1): E.none}
    plain = raw.call(8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                     topics=[{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 8,
                                                             "committed_leader_epoch": -1,
                                                             "committed_metadata": ""}]}])
    assert [p.error_code for t in plain.topics for p in t.partitions] == [E.none]
    assert raw.end_txn(tid, pid, e, True) == E.none
    # partition 0: the plain commit came after the pending one and stays; partition 1: committed
    assert raw.offset_fetch(group, topic, [0, 1], require_stable=True) == {0: (E.none, 8), 1: (E.none, 5)}
    # a retried EndTxn of the same result is answered NONE, the other result INVALID_TXN_STATE
    assert raw.end_txn(tid, pid, e, True) == E.none
    assert raw.end_txn(tid, pid, e, False) == E.invalid_txn_state
    # adding partitions already in the transaction writes nothing
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    before = raw.describe_transaction(tid)
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    assert raw.describe_transaction(tid) == before
    assert raw.end_txn(tid, pid, e, False) == E.none


# -- 10. version mapping ------------------------------------------------------------------------------------

def test_producer_fenced_is_invalid_producer_epoch_to_older_versions(raw, topic):
    tid, group = uid("tx"), uid("group")
    init(raw, tid)
    pid, e = init(raw, tid)
    stale = e - 1
    # InitProducerId: PRODUCER_FENCED from v4
    for version in (3, 4, 5):
        code, _, _ = raw.init_producer_id(tid, version=version, expected=(pid, 7))
        assert code == (E.producer_fenced if version >= 4 else E.invalid_producer_epoch), version
    # AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: from v2
    for version in range(4):
        assert raw.add_partitions(tid, pid, stale, {topic: [0]}, version=version) == \
            {(topic, 0): E.producer_fenced if version >= 2 else E.invalid_producer_epoch}, version
    for version in range(5):
        assert raw.add_offsets(tid, pid, stale, group, version=version) == \
            (E.producer_fenced if version >= 2 else E.invalid_producer_epoch), version
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    assert raw.add_offsets(tid, pid, e, group) == E.none
    for version in range(5):
        assert raw.end_txn(tid, pid, stale, True, version=version) == \
            (E.producer_fenced if version >= 2 else E.invalid_producer_epoch), version
    # Produce and TxnOffsetCommit: INVALID_PRODUCER_EPOCH at every version
    for version in (3, 9, 11, 12):
        assert raw.produce(tid, [(topic, 0, txn_batch(pid, stale, 0, [b"x"]))], version=version) == \
            {(topic, 0): E.invalid_producer_epoch}, version
    for version in range(5):
        assert raw.txn_offset_commit(tid, group, pid, stale, {(topic, 0): 1}, version=version) == \
            {(topic, 0): E.invalid_producer_epoch}, version
    # nothing of that changed the transaction
    d = raw.describe_transaction(tid)
    assert (d.transaction_state, d.producer_epoch) == ("Ongoing", e)
    assert raw.end_txn(tid, pid, e, False) == E.none


def test_unknown_ids_and_producer_ids(raw, topic):
    tid = uid("tx")
    assert raw.add_partitions(tid, 1, 0, {topic: [0]}) == {(topic, 0): E.invalid_producer_id_mapping}
    assert raw.end_txn(tid, 1, 0, True) == E.invalid_producer_id_mapping
    pid, e = init(raw, tid)
    assert raw.add_partitions(tid, pid + 1000, e, {topic: [0]}) == {(topic, 0): E.invalid_producer_id_mapping}
    assert raw.end_txn(tid, pid + 1000, e, True) == E.invalid_producer_id_mapping
    # internal and unknown partitions are refused before the coordinator, the others not attempted
    got = raw.add_partitions(tid, pid, e, {topic: [0], "__consumer_offsets": [0], uid("none"): [0]})
    assert got[(topic, 0)] == E.operation_not_attempted
    assert got[("__consumer_offsets", 0)] == E.topic_authorization_failed
    assert sorted(v for k, v in got.items() if k[0] not in (topic, "__consumer_offsets")) == \
        [E.unknown_topic_or_partition]
    assert raw.describe_transaction(tid).transaction_state == "Empty"


# -- 11. timeouts and ids --------------------------------------------------------------------------------------

def test_transaction_timeout_bounds_and_the_empty_id(raw):
    for timeout in (0, -1, 900001):
        assert raw.init_producer_id(uid("tx"), timeout_ms=timeout)[0] == E.invalid_transaction_timeout, timeout
    assert raw.init_producer_id(uid("tx"), timeout_ms=900000)[0] == E.none
    assert raw.init_producer_id("")[0] == E.invalid_request
    for version in (0, 2, 4):
        assert raw.init_producer_id("", version=version)[0] == E.invalid_request
    d = raw.describe_transaction("")
    assert d.error_code == E.invalid_request


def test_an_idle_transactional_id_expires_an_ongoing_one_never(broker, raw, topic):
    tid, ongoing = uid("tx-expire"), uid("tx-keep")
    pid, e = init(raw, tid)
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
    assert raw.end_txn(tid, pid, e, True) == E.none
    opid, oe = init(raw, ongoing, timeout_ms=60000)
    assert raw.add_partitions(ongoing, opid, oe, {topic: [1]}) == {(topic, 1): E.none}
    wait_until(lambda: state_records(broker.data_dir, tid)[-1:] == [("<tombstone>", -1, -1)],
               timeout=EXPIRATION_MS / 1000 + 10, what="the expiry tombstone")
    assert [s for s, _, _ in state_records(broker.data_dir, tid)] == \
        ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "<tombstone>"]
    assert raw.describe_transaction(tid).error_code == E.transactional_id_not_found
    assert raw.describe_transaction(ongoing).transaction_state == "Ongoing"
    # a producer that skips InitProducerId: its id is unknown now
    assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.invalid_producer_id_mapping}
    assert raw.end_txn(tid, pid, e, True) == E.invalid_producer_id_mapping
    # the next init: a brand-new producer id, epoch 0
    pid2, e2 = init(raw, tid)
    assert pid2 != pid and e2 == 0
    assert raw.describe_transaction(tid).producer_id == pid2
    assert raw.end_txn(ongoing, opid, oe, False) == E.none


# -- 6 (server TV 0). a timed-out instance's recovery is fenced -------------------------------------------------

def test_with_transaction_version_0_the_timed_out_epoch_is_fenced(tmp_path):
    b = Broker(tmp_path / "data", {**BROKER_CONFIG, "compactlog.transaction.version": "0"}).start()
    try:
        tv0_timeout_abort(b)
    finally:
        b.kill()                             # nothing to check at shutdown


def tv0_timeout_abort(b: Broker) -> None:
    with Raw(b.port) as raw:
        topic, tid = uid("tv0"), uid("tx")
        create_topics(b.bootstrap, topic)
        pid, e = init(raw, tid, timeout_ms=500)
        assert raw.add_partitions(tid, pid, e, {topic: [0]}) == {(topic, 0): E.none}
        assert raw.produce(tid, [(topic, 0, txn_batch(pid, e, 0, [b"x"]))]) == {(topic, 0): E.none}
        wait_until(lambda: raw.describe_transaction(tid).transaction_state == "CompleteAbort", timeout=10,
                   what="the timeout abort")
        assert markers(b.data_dir, topic, 0) == [("ABORT", 1, pid, e + 1)]
        # TV <= 1: the abort's lastEpoch is -1, so the old instance's epoch is fenced for good
        assert raw.init_producer_id(tid, expected=(pid, e)) == (E.producer_fenced, -1, -1)
        assert raw.init_producer_id(tid, expected=(pid, e), version=3) == (E.invalid_producer_epoch, -1, -1)
        # a client works with TV 0 as well; every __transaction_state value is v0
        p = TxnProducer("confluent", b.bootstrap, tid).init()
        try:
            p.begin()
            p.send(topic, b"ok", partition=1)
            p.commit()
        finally:
            p.close()
        assert markers(b.data_dir, topic, 1)[0][0] == "COMMIT"
        assert [r[0] for r in state_records(b.data_dir, tid, value_version=0)][-2:] == \
            ["PrepareCommit", "CompleteCommit"]
