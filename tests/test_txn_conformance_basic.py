"""Transaction conformance, the producer's life (transactions.md §6.3 scenarios 1, 2, 3, 4, 6 and
12) with confluent-kafka (librdkafka), kafka-python and aiokafka transactional producers, each
read back by the same client's consumer with read_committed and read_uncommitted. Every
transaction spans a plain and a compacted topic of 2 partitions; what the broker wrote is checked
in its files (control batches, ``.txnindex``, ``__transaction_state``) and through raw Fetch,
ListOffsets and DescribeTransactions requests."""

from __future__ import annotations

import pytest

from broker_support import Broker
from txn_support import (ALL_CLIENTS, BROKER_CONFIG, E, Raw, TxnProducer, batches, create_topics, markers, read,
                         state_records, states, txn_batch, txn_index, uid, values, wait_until)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn-basic") / "data", BROKER_CONFIG) as b:
        yield b


@pytest.fixture
def raw(broker):
    with Raw(broker.port) as r:
        yield r


def send_to_both(p: TxnProducer, plain: str, compacted: str, n: int, tag: str) -> dict:
    """``n`` records to each partition of both topics; {(topic, partition): [values]} sent."""
    sent: dict = {}
    for i in range(n):
        for topic in (plain, compacted):
            for part in (0, 1):
                v = f"{tag}-{topic[-6:]}-{part}-{i}".encode()
                p.send(topic, v, key=b"k%d" % (i % 3), partition=part)
                sent.setdefault((topic, part), []).append(v)
    return sent


def by_partition(records) -> dict[int, list[bytes]]:
    out: dict = {}
    for part, _, _, v in records:
        out.setdefault(part, []).append(v)
    return out


# -- 1. commit ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_commit(broker, raw, client):
    plain, compacted, tid = uid("commit"), uid("commit-c"), uid("tx")
    create_topics(broker.bootstrap, plain, compacted)
    p = TxnProducer(client, broker.bootstrap, tid).init()
    try:
        p.begin()
        sent = send_to_both(p, plain, compacted, 5, "c")
        p.commit()
    finally:
        p.close()
    for topic in (plain, compacted):
        for isolation in ("read_committed", "read_uncommitted"):
            got = by_partition(read(client, broker.bootstrap, topic, isolation))
            assert got == {0: sent[(topic, 0)], 1: sent[(topic, 1)]}, (topic, isolation)
        for part in (0, 1):
            bs = batches(broker.data_dir, topic, part)
            # the data, then one COMMIT control batch of the producer's id and epoch (an offset gap)
            assert [b.control for b in bs[:-1]] == [None] * (len(bs) - 1) and bs[-1].control == 1
            data = [r for b in bs[:-1] for r in b.records]
            assert [r[0] for r in data] == list(range(5)) and bs[-1].base_offset == 5
            assert {(b.producer_id, b.producer_epoch) for b in bs} == {(bs[-1].producer_id, bs[-1].producer_epoch)}
            assert all(b.is_transactional for b in bs)
            hw = raw.list_offset(topic, part, read_committed=False)
            assert hw == 6 and raw.list_offset(topic, part, read_committed=True) == hw    # LSO = HW
    assert states(broker.data_dir, tid) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    d = raw.describe_transaction(tid)
    assert (d.error_code, d.transaction_state, d.topics) == (E.none, "CompleteCommit", ())


# -- 2. abort ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_abort(broker, raw, client):
    plain, compacted, tid = uid("abort"), uid("abort-c"), uid("tx")
    create_topics(broker.bootstrap, plain, compacted)
    p = TxnProducer(client, broker.bootstrap, tid).init()
    try:
        # a committed transaction first, so that the aborted one starts past offset 0
        p.begin()
        committed = send_to_both(p, plain, compacted, 2, "ok")
        p.commit()
        p.begin()
        aborted = send_to_both(p, plain, compacted, 3, "no")
        p.flush()
        for topic in (plain, compacted):
            for part in (0, 1):
                # open: the LSO is the transaction's first offset (after the first one's marker)
                assert raw.list_offset(topic, part, read_committed=True) == 3
                assert raw.list_offset(topic, part, read_committed=False) == 6
                f = raw.fetch(topic, part, 0, read_committed=True)
                assert (f.high_watermark, f.last_stable_offset) == (6, 3)
        p.abort()
    finally:
        p.close()
    for topic in (plain, compacted):
        got = by_partition(read(client, broker.bootstrap, topic, "read_committed"))
        assert got == {0: committed[(topic, 0)], 1: committed[(topic, 1)]}
        got = by_partition(read(client, broker.bootstrap, topic, "read_uncommitted"))
        assert got == {0: committed[(topic, 0)] + aborted[(topic, 0)],
                       1: committed[(topic, 1)] + aborted[(topic, 1)]}
        for part in (0, 1):
            [(k1, o1, pid, e1), (k2, o2, pid2, e2)] = markers(broker.data_dir, topic, part)
            assert (k1, o1, k2, o2) == ("COMMIT", 2, "ABORT", 6) and (pid, e1) == (pid2, e2)
            f = raw.fetch(topic, part, 0, read_committed=True)
            assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(pid, 3)]
            # from inside the aborted transaction too; from past its marker, none
            f = raw.fetch(topic, part, 4, read_committed=True)
            assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(pid, 3)]
            assert list(raw.fetch(topic, part, 7, read_committed=True).aborted_transactions or []) == []
            assert f.high_watermark == f.last_stable_offset == 7
            assert raw.fetch(topic, part, 0, read_committed=False).aborted_transactions is None
            [entry] = txn_index(broker.data_dir, topic, part)
            assert (entry.producer_id, entry.first_offset, entry.last_offset) == (pid, 3, 6)
            assert raw.list_offset(topic, part, read_committed=True) == 7
    assert states(broker.data_dir, tid)[-2:] == ["PrepareAbort", "CompleteAbort"]


# -- 3. empty transaction ----------------------------------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_an_empty_transaction_sends_no_end_txn(broker, raw, client):
    tid = uid("tx-empty")
    p = TxnProducer(client, broker.bootstrap, tid).init()
    try:
        p.begin()
        p.commit()
        p.begin()
        p.abort()
    finally:
        p.close()
    # had an EndTxn reached the broker it would have failed (48) or written a state: only the init
    assert states(broker.data_dir, tid) == ["Empty"]
    d = raw.describe_transaction(tid)
    assert (d.error_code, d.transaction_state, d.transaction_start_time_ms) == (E.none, "Empty", -1)


def test_a_raw_end_txn_on_an_empty_transaction_is_invalid_txn_state(raw):
    tid = uid("tx-raw-empty")
    code, pid, epoch = raw.init_producer_id(tid)
    assert code == E.none
    for version in range(5):
        for commit in (True, False):
            assert raw.end_txn(tid, pid, epoch, commit, version=version) == E.invalid_txn_state, version
    d = raw.describe_transaction(tid)
    assert (d.transaction_state, d.producer_epoch) == ("Empty", epoch)


# -- 4. fencing by a second producer with the same transactional id -------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_a_second_producer_with_the_same_id_fences_the_first(broker, raw, client):
    plain, compacted, tid = uid("fence"), uid("fence-c"), uid("tx")
    create_topics(broker.bootstrap, plain, compacted)
    a = TxnProducer(client, broker.bootstrap, tid).init()
    b = None
    try:
        a.begin()
        send_to_both(a, plain, compacted, 2, "a")
        a.flush()
        b = TxnProducer(client, broker.bootstrap, tid).init()     # 51 while A's transaction aborts, then its epoch
        recs = state_records(broker.data_dir, tid)
        pid, e = recs[0][1], recs[0][2]
        assert [(s, ep) for s, _, ep in recs if s != "Ongoing"] == \
            [("Empty", e), ("PrepareAbort", e + 1), ("CompleteAbort", e + 1), ("Empty", e + 2)]
        assert {x[1] for x in recs} == {pid}
        if client != "confluent":                       # librdkafka keeps its producer id to itself
            assert b.producer_id_and_epoch() == (pid, e + 2)
        for topic in (plain, compacted):
            for part in (0, 1):
                assert markers(broker.data_dir, topic, part) == [("ABORT", 2, pid, e + 1)]
        # A's epoch on the wire: its produce is INVALID_PRODUCER_EPOCH, its EndTxn PRODUCER_FENCED
        # (INVALID_PRODUCER_EPOCH below v2)
        late = txn_batch(pid, e, 100, [b"a-raw"])
        assert raw.produce(tid, [(plain, 0, late)]) == {(plain, 0): E.invalid_producer_epoch}
        assert raw.end_txn(tid, pid, e, True, version=2) == E.producer_fenced
        assert raw.end_txn(tid, pid, e, True, version=1) == E.invalid_producer_epoch
        # A, fenced: a produce to a partition of its (aborted) transaction, then its commit
        a.send(plain, b"a-late", partition=0)
        a.expect_fenced(lambda: (a.flush(), a.commit()))
        b.begin()
        b.send(plain, b"from-b", partition=1)
        b.send(compacted, b"from-b", key=b"k", partition=0)
        b.commit()
    finally:
        a.close()
        if b is not None:
            b.close()
    assert values(read(client, broker.bootstrap, plain, "read_committed")) == [b"from-b"]
    assert values(read(client, broker.bootstrap, compacted, "read_committed")) == [b"from-b"]
    assert len(read(client, broker.bootstrap, plain, "read_uncommitted")) == 5    # A's 4 aborted + B's
    # A's own epoch is no longer one the coordinator takes back (KIP-360 recovery refused)
    assert raw.init_producer_id(tid, expected=(pid, e), version=4)[0] == E.producer_fenced
    assert raw.init_producer_id(tid, expected=(pid, e), version=3)[0] == E.invalid_producer_epoch


# -- 6. the coordinator aborts a transaction past its timeout -------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker, raw, client):
    plain, compacted, tid = uid("timeout"), uid("timeout-c"), uid("tx")
    create_topics(broker.bootstrap, plain, compacted)
    p = TxnProducer(client, broker.bootstrap, tid, timeout_ms=1000).init()
    q = None
    try:
        p.begin()
        send_to_both(p, plain, compacted, 2, "late")
        p.flush()
        [(_, pid, e)] = state_records(broker.data_dir, tid)[:1]
        wait_until(lambda: states(broker.data_dir, tid)[-1:] == ["CompleteAbort"], timeout=10,
                   what="the coordinator's timeout abort")
        assert [(s, x, ep) for s, x, ep in state_records(broker.data_dir, tid)][-2:] == \
            [("PrepareAbort", pid, e + 1), ("CompleteAbort", pid, e + 1)]
        for topic in (plain, compacted):
            for part in (0, 1):
                assert markers(broker.data_dir, topic, part) == [("ABORT", 2, pid, e + 1)]
            assert read(client, broker.bootstrap, topic, "read_committed") == []
        p.expect_fenced(p.commit)
        # server TV 2: the coordinator's abort kept lastEpoch = e, so the timed-out instance's
        # KIP-360 recovery (InitProducerId with its epoch) gets the new epoch back, not a fence
        assert raw.init_producer_id(tid, expected=(pid, e)) == (E.none, pid, e + 1)
        q = TxnProducer(client, broker.bootstrap, tid).init()      # a fresh producer with the same id
        q.begin()
        q.send(plain, b"fresh", partition=1)
        q.commit()
    finally:
        p.close()
        if q is not None:
            q.close()
    assert values(read(client, broker.bootstrap, plain, "read_committed")) == [b"fresh"]


def test_kafka_python_recovers_from_a_timeout_abort_with_its_epoch_bump(broker, raw):
    """kafka-python's own path (transactions.md §6.1 step 6): its late send after the timeout abort
    gets INVALID_PRODUCER_EPOCH, on which it bumps its epoch with InitProducerId(expected = its
    epoch). With server TV 2 the abort kept lastEpoch = e, so the coordinator answers the retry
    rule's e+1 (an Empty record at e+1), not PRODUCER_FENCED, and the same producer goes on
    (KIP-588). kafka-python then drops its transaction silently (back to READY, not
    ABORTABLE_ERROR as the Java client): the application's commit of the dropped transaction is
    refused by the client itself, with no request sent."""
    kafka_errors = pytest.importorskip("kafka.errors")
    topic, tid = uid("bump"), uid("tx")
    create_topics(broker.bootstrap, topic)
    p = TxnProducer("kafka-python", broker.bootstrap, tid, timeout_ms=1000).init()
    try:
        p.begin()
        p.send(topic, b"late-0", partition=0)
        p.flush()
        pid, e = p.producer_id_and_epoch()
        wait_until(lambda: states(broker.data_dir, tid)[-1:] == ["CompleteAbort"], timeout=10,
                   what="the coordinator's timeout abort")
        p.send(topic, b"late-1", partition=0)
        with pytest.raises(kafka_errors.InvalidProducerEpochError):
            p.flush()
        wait_until(lambda: state_records(broker.data_dir, tid)[-1] == ("Empty", pid, e + 1), timeout=10,
                   what="kafka-python's epoch bump")
        # the broker wrote the bump; the client takes the answer on its own thread
        wait_until(lambda: p.producer_id_and_epoch() == (pid, e + 1), timeout=10,
                   what="kafka-python to take its bumped epoch")
        with pytest.raises(kafka_errors.KafkaError, match="READY to state COMMITTING"):
            p.commit()
        p.begin()
        p.send(topic, b"recovered", partition=1)
        p.commit()
    finally:
        p.close()
    assert values(read("kafka-python", broker.bootstrap, topic, "read_committed")) == [b"recovered"]
    assert [m[0] for m in markers(broker.data_dir, topic, 1)] == ["COMMIT"]


# -- 12. two open transactions on one partition ---------------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_the_lso_is_the_first_offset_of_the_earliest_open_transaction(broker, raw, client):
    topic = uid("two-open")
    create_topics(broker.bootstrap, topic)
    t1 = TxnProducer(client, broker.bootstrap, uid("tx1")).init()
    t2 = TxnProducer(client, broker.bootstrap, uid("tx2")).init()
    try:
        t1.begin()
        t2.begin()
        t1.send(topic, b"t1-a", partition=0)
        t1.flush()                                  # offset 0
        t2.send(topic, b"t2-a", partition=0)
        t2.flush()                                  # offset 1
        t1.send(topic, b"t1-b", partition=0)
        t1.flush()                                  # offset 2
        assert raw.list_offset(topic, 0, read_committed=True) == 0
        t2.commit()                                 # offset 3: t2's marker
        # committing the later transaction does not move the LSO past the earlier one
        assert raw.list_offset(topic, 0, read_committed=True) == 0
        assert raw.list_offset(topic, 0, read_committed=False) == 4
        assert read(client, broker.bootstrap, topic, "read_committed") == []
        t1.commit()                                 # offset 4
        assert raw.list_offset(topic, 0, read_committed=True) == 5
    finally:
        t1.close()
        t2.close()
    assert values(read(client, broker.bootstrap, topic, "read_committed")) == [b"t1-a", b"t2-a", b"t1-b"]
    assert [m[:2] for m in markers(broker.data_dir, topic, 0)] == [("COMMIT", 3), ("COMMIT", 4)]
    # an abort of the earlier one instead: the LSO jumps to the later one's first offset
    t1 = TxnProducer(client, broker.bootstrap, uid("tx1")).init()
    t2 = TxnProducer(client, broker.bootstrap, uid("tx2")).init()
    try:
        t1.begin()
        t2.begin()
        t1.send(topic, b"t1-x", partition=1)
        t1.flush()                                  # offset 0
        t2.send(topic, b"t2-x", partition=1)
        t2.flush()                                  # offset 1
        t1.abort()                                  # offset 2
        assert raw.list_offset(topic, 1, read_committed=True) == 1
        t2.commit()
        assert raw.list_offset(topic, 1, read_committed=True) == 4
    finally:
        t1.close()
        t2.close()
    got = read(client, broker.bootstrap, topic, "read_committed")
    assert [v for part, _, _, v in got if part == 1] == [b"t2-x"]
