"""Transaction conformance, the admin side (transactions.md §6.3 scenario 13) through kafka-python's
``KafkaAdminClient``: DescribeTransactions and ListTransactions with each filter (states, producer
ids, duration, id pattern) and their combination, DescribeProducers, and the admin abort
(WriteTxnMarkers) of a hanging transaction, made the way Kafka's pitfall makes one: a late
transactional write after its transaction's marker, accepted because the broker runs with
``transaction.partition.verification.enable=false`` (KIP-890 off)."""

from __future__ import annotations

import time

import pytest

from broker_support import Broker
from txn_support import (BROKER_CONFIG, E, Raw, TxnProducer, create_topics, read, txn_batch, txn_index, uid, values,
                         wait_until)

kafka_admin = pytest.importorskip("kafka.admin")
import kafka.errors as KE  # noqa: E402
from kafka import TopicPartition  # noqa: E402

ADMIN_BROKER = {**BROKER_CONFIG, "transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn-admin") / "data", ADMIN_BROKER) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    a = kafka_admin.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


@pytest.fixture
def raw(broker):
    with Raw(broker.port) as r:
        yield r


def listed(admin, prefix: str, **filters) -> dict[str, str]:
    """{transactional id: state} of the listing, only ids starting with ``prefix``."""
    out = {}
    for rows in admin.list_transactions(**filters).values():
        for r in rows:
            if r.transactional_id.startswith(prefix):
                out[r.transactional_id] = str(getattr(r.state, "value", r.state))
    return out


def test_describe_and_list_transactions_with_each_filter(broker, admin, raw):
    prefix = uid("adm")
    topic = uid("adm-topic")
    create_topics(broker.bootstrap, topic)
    ids = {s: f"{prefix}-{s}" for s in ("empty", "ongoing", "committed", "aborted")}
    pids = {}
    for name, tid in ids.items():
        code, pid, e = raw.init_producer_id(tid, timeout_ms=45000)
        assert code == E.none
        pids[name] = pid
        if name != "empty":
            assert raw.add_partitions(tid, pid, e, {topic: [0, 1] if name == "ongoing" else [1]}) == \
                {(topic, p): E.none for p in ([0, 1] if name == "ongoing" else [1])}
        if name in ("committed", "aborted"):
            assert raw.end_txn(tid, pid, e, name == "committed") == E.none

    # describe
    d = admin.describe_transactions([ids["ongoing"]])[ids["ongoing"]]
    assert str(d.state.value) == "Ongoing" and d.producer_id == pids["ongoing"] and d.producer_epoch == 0
    assert sorted((tp.topic, tp.partition) for tp in d.topic_partitions) == [(topic, 0), (topic, 1)]
    assert d.transaction_timeout_ms == 45000 and d.transaction_start_time_ms > 0
    d = admin.describe_transactions([ids["committed"], ids["empty"]])
    assert str(d[ids["committed"]].state.value) == "CompleteCommit" and not d[ids["committed"]].topic_partitions
    assert str(d[ids["empty"]].state.value) == "Empty" and d[ids["empty"]].transaction_start_time_ms == -1
    with pytest.raises(KE.TransactionalIdNotFoundError):
        admin.describe_transactions([uid("never")])

    # list, each filter
    everything = {ids["empty"]: "Empty", ids["ongoing"]: "Ongoing", ids["committed"]: "CompleteCommit",
                  ids["aborted"]: "CompleteAbort"}
    assert listed(admin, prefix) == everything
    for state in ("Empty", "Ongoing", "CompleteCommit", "CompleteAbort"):
        assert listed(admin, prefix, state_filters=[state]) == {k: v for k, v in everything.items() if v == state}
    assert listed(admin, prefix, state_filters=["Ongoing", "CompleteAbort"]) == \
        {ids["ongoing"]: "Ongoing", ids["aborted"]: "CompleteAbort"}
    assert listed(admin, prefix, producer_id_filters=[pids["committed"], pids["empty"]]) == \
        {ids["committed"]: "CompleteCommit", ids["empty"]: "Empty"}
    assert listed(admin, prefix, transactional_id_pattern=f"{prefix}-(on|ab).*") == \
        {ids["ongoing"]: "Ongoing", ids["aborted"]: "CompleteAbort"}
    assert listed(admin, prefix, transactional_id_pattern=f"{prefix}-on") == {}       # the whole id must match
    # duration: transactions that started longer ago than the filter (Empty: start -1, always in)
    time.sleep(0.2)
    assert listed(admin, prefix, duration_filter_ms=100) == everything
    assert listed(admin, prefix, duration_filter_ms=3_600_000) == {ids["empty"]: "Empty"}
    # filters are ANDed
    assert listed(admin, prefix, state_filters=["Ongoing"], producer_id_filters=[pids["aborted"]]) == {}
    assert listed(admin, prefix, state_filters=["Ongoing", "Empty"], duration_filter_ms=100,
                  transactional_id_pattern=f"{prefix}-.*") == {ids["ongoing"]: "Ongoing", ids["empty"]: "Empty"}
    with pytest.raises(KE.KafkaError):              # 128: kafka-python has no class of its own for it
        admin.list_transactions(transactional_id_pattern="(")
    r = raw.call(66, 2, state_filters=[], producer_id_filters=[], duration_filter=-1, transactional_id_pattern="(")
    assert (r.error_code, r.transaction_states) == (E.invalid_regular_expression, ())
    # a state name the broker does not know is echoed back and matches nothing
    r = raw.call(66, 2, state_filters=["Ongoing", "Sleeping"], producer_id_filters=[], duration_filter=-1,
                 transactional_id_pattern=f"{prefix}-.*")
    assert (r.error_code, list(r.unknown_state_filters)) == (E.none, ["Sleeping"])
    assert [s.transactional_id for s in r.transaction_states] == [ids["ongoing"]]
    assert raw.end_txn(ids["ongoing"], pids["ongoing"], 0, False) == E.none


def test_admin_abort_of_a_hanging_transaction(broker, admin, raw):
    topic, tid = uid("hang"), uid("tx-hang")
    create_topics(broker.bootstrap, topic)
    assert raw.init_producer_id(tid)[0] == E.none                # epoch 0; the producer below gets 1
    p = TxnProducer("kafka-python", broker.bootstrap, tid).init()
    try:
        p.begin()
        p.send(topic, b"committed", partition=0)
        p.commit()                                        # offset 0 data, 1 COMMIT
        pid, e = p.producer_id_and_epoch()
    finally:
        p.close()
    # a late write of that producer after its marker (sequence 1 follows): with verification off
    # nothing asks the coordinator, and the partition opens a transaction nobody will end
    assert raw.produce(tid, [(topic, 0, txn_batch(pid, e, 1, [b"hanging"]))]) == {(topic, 0): E.none}
    assert raw.list_offset(topic, 0, read_committed=True) == 2         # the LSO is stuck there
    assert raw.list_offset(topic, 0, read_committed=False) == 3
    assert values(read("kafka-python", broker.bootstrap, topic, "read_committed")) == [b"committed"]
    # the coordinator knows nothing of it
    assert str(admin.describe_transactions([tid])[tid].state.value) == "CompleteCommit"
    assert tid not in listed(admin, tid, state_filters=["Ongoing"])
    # DescribeProducers shows it, with the coordinator epoch the abort needs
    tp = TopicPartition(topic, 0)
    [prod] = admin.describe_producers([tp])[tp].active_producers
    assert (prod.producer_id, prod.producer_epoch, prod.last_sequence, prod.coordinator_epoch,
            prod.current_transaction_start_offset) == (pid, e, 1, 0, 2)
    # kafka-python's default coordinator epoch, -1, is older than the producer entry's 0:
    # TRANSACTION_COORDINATOR_FENCED, as Kafka's ProducerAppendInfo answers (the client's docstring
    # says -1 bypasses the check; Kafka's log has no such exception)
    with pytest.raises(KE.TransactionCoordinatorFencedError):
        admin.abort_transaction(kafka_admin.AbortTransactionSpec(tp, pid, e))
    # an older producer epoch is refused too
    assert e == 1
    with pytest.raises(KE.InvalidProducerEpochError):
        admin.abort_transaction(kafka_admin.AbortTransactionSpec(tp, pid, e - 1, prod.coordinator_epoch))
    admin.abort_transaction(kafka_admin.AbortTransactionSpec(tp, pid, e, prod.coordinator_epoch))
    wait_until(lambda: raw.list_offset(topic, 0, read_committed=True) == 4, timeout=5, what="the LSO to advance")
    assert raw.list_offset(topic, 0, read_committed=False) == 4
    [entry] = txn_index(broker.data_dir, topic, 0)
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (pid, 2, 3)
    assert values(read("kafka-python", broker.bootstrap, topic, "read_committed")) == [b"committed"]
    assert values(read("kafka-python", broker.bootstrap, topic, "read_uncommitted")) == [b"committed", b"hanging"]
    [prod] = admin.describe_producers([tp])[tp].active_producers
    assert prod.current_transaction_start_offset == -1
    # the admin abort went around the coordinator: its state for the id is unchanged
    assert str(admin.describe_transactions([tid])[tid].state.value) == "CompleteCommit"


def test_describe_producers_of_unknown_partitions_and_open_transactions(broker, admin, raw):
    topic, tid = uid("prod"), uid("tx")
    create_topics(broker.bootstrap, topic)
    code, pid, e = raw.init_producer_id(tid)
    assert raw.add_partitions(tid, pid, e, {topic: [1]}) == {(topic, 1): E.none}
    assert raw.produce(tid, [(topic, 1, txn_batch(pid, e, 0, [b"a", b"b"]))]) == {(topic, 1): E.none}
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    got = admin.describe_producers([tp0, tp1])
    assert got[tp0].active_producers == []
    [prod] = got[tp1].active_producers
    assert (prod.producer_id, prod.producer_epoch, prod.last_sequence, prod.coordinator_epoch,
            prod.current_transaction_start_offset) == (pid, e, 1, -1, 0)
    assert raw.end_txn(tid, pid, e, True) == E.none
    [prod] = admin.describe_producers([tp1])[tp1].active_producers
    assert (prod.coordinator_epoch, prod.current_transaction_start_offset) == (0, -1)
    r = raw.call(61, 0, topics=[{"name": uid("none"), "partition_indexes": [0]},
                                {"name": topic, "partition_indexes": [7]}])
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.unknown_topic_or_partition] * 2
