"""The transaction coordinator of ``compactlog serve`` with unmodified transactional producers
(confluent-kafka / librdkafka and kafka-python): commit, abort, fencing by a second producer with
the same transactional id, the coordinator's timeout abort, a kill -9 at each crash point (after
the Prepare* record, after the first marker) then a restart that completes the commit
(transactions.md §6.3 scenarios 1, 2, 4, 5, 6), and DescribeTransactions / ListTransactions
through kafka-python's admin client. The kill -9 is the broker's test hook
(``COMPACTLOG_TEST_CRASH_AFTER``), which exits exactly at the point.

What ``__transaction_state`` holds is read back with ``compactlog dump-log
--transaction-log-decoder`` (the broker's own writes, v1 values)."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pytest

from broker_support import Broker, wait_until
from cli_support import run_in_process
from compactlog.record.consumer_offsets import partition_for

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TXN_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
              "group.initial.rebalance.delay.ms": "0"}
STATE_NAMES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn") / "data", TXN_BROKER) as b:
        yield b


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})       # held: a dropped handle cancels its futures
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    """Every record value up to the end (the last stable offset for read_committed)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("reader"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        out, eof = [], set()
        deadline = time.monotonic() + 30
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            out.append(m.value())
        assert len(eof) == partitions, "no end of partition within 30 s"
        return out
    finally:
        c.close()


def state_records(data_dir: str, tid: str) -> list[tuple[str, int]]:
    """(state name, producer epoch) of each ``__transaction_state`` record of ``tid``, as
    ``compactlog dump-log --transaction-log-decoder --json`` decodes them."""
    pdir = os.path.join(data_dir, f"__transaction_state-{partition_for(tid, 50)}")
    # in this process: the decoded records are the test, not dump-log's process
    r = run_in_process(["dump-log", "--transaction-log-decoder", "--json", "--files", pdir])
    assert r.returncode == 0, r.stderr.decode()
    out = []
    for line in r.stdout.decode().splitlines():
        d = json.loads(line)
        if d.get("decodedKey", {}).get("data", {}).get("transactionalId") != tid:
            continue
        v = d["decodedValue"]
        assert v["version"] == "1"                   # v1 values: transaction.version 2
        out.append((STATE_NAMES[v["data"]["transactionStatus"]], v["data"]["producerEpoch"]))
    return out


def states(data_dir: str, tid: str) -> list[str]:
    return [s for s, _ in state_records(data_dir, tid)]


# -- commit and abort -------------------------------------------------------------------------------

def test_commit_confluent(broker):
    topic, tid = uid("commit"), uid("tx")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    p.commit_transaction(30)
    assert sorted(read_all(broker.bootstrap, topic, "read_committed")) == sorted(b"v%d" % i for i in range(10))
    assert states(broker.data_dir, tid) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    # a second transaction on the same producer
    p.begin_transaction()
    p.produce(topic, value=b"second", partition=0)
    p.commit_transaction(30)
    assert b"second" in read_all(broker.bootstrap, topic, "read_committed")


def test_commit_kafka_python(broker):
    kafka = pytest.importorskip("kafka")
    topic, tid = uid("commit-kp"), uid("tx-kp")
    create_topic(broker.bootstrap, topic)
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(topic, key=b"k%d" % i, value=b"kp%d" % i, partition=i % 2)
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    assert sorted(read_all(broker.bootstrap, topic, "read_committed")) == sorted(b"kp%d" % i for i in range(6))
    # kafka-python may add the two partitions in two AddPartitionsToTxn requests: Ongoing twice
    seen = states(broker.data_dir, tid)
    assert [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s] == \
        ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]


def test_abort_confluent(broker):
    topic, tid = uid("abort"), uid("tx")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed") == []
    assert sorted(read_all(broker.bootstrap, topic, "read_uncommitted")) == [b"a0", b"a1", b"a2", b"a3"]
    assert states(broker.data_dir, tid)[-2:] == ["PrepareAbort", "CompleteAbort"]


# -- fencing (scenario 4) ---------------------------------------------------------------------------

def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    topic, tid = uid("fence"), uid("tx")
    create_topic(broker.bootstrap, topic)
    a = txn_producer(broker.bootstrap, tid)
    a.begin_transaction()
    a.produce(topic, value=b"from-a", partition=0)
    a.flush(30)
    b = txn_producer(broker.bootstrap, tid)             # answered 51 once, then its own epoch
    recs = state_records(broker.data_dir, tid)
    e = recs[0][1]
    assert recs == [("Empty", e), ("Ongoing", e), ("PrepareAbort", e + 1), ("CompleteAbort", e + 1), ("Empty", e + 2)]
    with pytest.raises(KafkaException) as err:
        a.commit_transaction(30)
    assert err.value.args[0].fatal()
    b.begin_transaction()
    b.produce(topic, value=b"from-b", partition=1)
    b.commit_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed") == [b"from-b"]


# -- timeout (scenario 6) ------------------------------------------------------------------------------

def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker):
    topic, tid = uid("timeout"), uid("tx")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, value=b"late", partition=0)
    p.flush(30)
    e = state_records(broker.data_dir, tid)[0][1]
    wait_until(lambda: states(broker.data_dir, tid)[-1:] == ["CompleteAbort"], timeout=15,
               what="the coordinator's abort")
    assert state_records(broker.data_dir, tid)[-2:] == [("PrepareAbort", e + 1), ("CompleteAbort", e + 1)]
    assert read_all(broker.bootstrap, topic, "read_committed") == []
    with pytest.raises(KafkaException) as err:
        p.commit_transaction(30)
    assert err.value.args[0].fatal()
    # a fresh producer with the same id works
    q = txn_producer(broker.bootstrap, tid)
    q.begin_transaction()
    q.produce(topic, value=b"fresh", partition=1)
    q.commit_transaction(30)
    assert read_all(broker.bootstrap, topic, "read_committed") == [b"fresh"]


# -- admin (scenario 13, the coordinator's part) ----------------------------------------------------------

def test_describe_and_list_transactions_with_kafka_python_admin(broker):
    admin_mod = pytest.importorskip("kafka.admin")
    topic, tid = uid("admin"), uid("tx-admin")
    create_topic(broker.bootstrap, topic)
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(30)
    admin = admin_mod.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        d = admin.describe_transactions([tid])[tid]
        assert str(getattr(d.state, "value", d.state)) == "Ongoing"
        assert [(tp.topic, tp.partition) for tp in d.topic_partitions] == [(topic, 1)]
        assert d.transaction_timeout_ms == 60000
        listed = [x for xs in admin.list_transactions(state_filters=["Ongoing"]).values() for x in xs]
        assert tid in [x.transactional_id for x in listed]
        p.commit_transaction(30)
        d = admin.describe_transactions([tid])[tid]
        assert str(getattr(d.state, "value", d.state)) == "CompleteCommit" and not d.topic_partitions
        listed = [x for xs in admin.list_transactions(state_filters=["Ongoing"]).values() for x in xs]
        assert tid not in [x.transactional_id for x in listed]
        with pytest.raises(Exception, match="TransactionalIdNotFound"):
            admin.describe_transactions([uid("never")])
    finally:
        admin.close()


# -- kill -9 at the Prepare* crash point (scenario 5) -------------------------------------------------------

@pytest.mark.parametrize("point", ["prepare", "first-marker"])
def test_kill_at_a_crash_point_then_restart_completes_the_commit(tmp_path, monkeypatch, point):
    data = tmp_path / "data"
    monkeypatch.setenv("COMPACTLOG_TEST_CRASH_AFTER", point)
    first = Broker(data, TXN_BROKER).start()
    monkeypatch.delenv("COMPACTLOG_TEST_CRASH_AFTER")
    port = first.port
    topic, tid = uid("crash"), uid("tx")
    try:
        create_topic(first.bootstrap, topic)
        p = txn_producer(first.bootstrap, tid)
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=b"c%d" % i, partition=i % 2)
        p.flush(30)
        outcome: list = []

        def commit():
            try:
                p.commit_transaction(60)
                outcome.append("committed")
            except KafkaException as e:
                outcome.append(e)
        t = threading.Thread(target=commit, daemon=True)
        t.start()
        # the broker exits right after PrepareCommit is appended (before any marker), or right
        # after the first of the two markers
        first.proc.wait(30)
        assert first.proc.returncode == 137
        first.kill()
        assert states(str(data), tid)[-1] == "PrepareCommit"
        second = Broker(data, TXN_BROKER, port=port).start()
        try:
            wait_until(lambda: states(str(data), tid)[-1:] == ["CompleteCommit"], timeout=30,
                       what="the re-driven commit")
            assert sorted(read_all(second.bootstrap, topic, "read_committed")) == \
                sorted(b"c%d" % i for i in range(6))
            # the client waiting in EndTxn retried to the same broker and got NONE
            t.join(60)
            assert outcome == ["committed"]
        finally:
            second.stop()
    finally:
        first.kill()
