"""Issue 24: "one OUT_OF_ORDER_SEQUENCE_NUMBER in ~54,000 committed transactions, after a
transaction whose messages timed out across a broker restart; it aborted cleanly". The broker's
producer state is not at fault: librdkafka times the messages of a partition without a leader out
on its internal broker without bumping its epoch or moving its sequence base past them, so after a
clean abort at the same epoch its next batch skips their sequence numbers, and Kafka's own rule
(same epoch: last + 1) answers OUT_OF_ORDER_SEQUENCE_NUMBER. tests/faults/librdkafka-oosn.md has
the trace; the storage half of the proof is compactlog/storage/producer_state_restart_test.py.

1. the sequence pinned down with a real librdkafka: the broker holds the right state and answers
   as Kafka does, librdkafka diagnoses the gap as its own ("skipped sequence numbers"), recovers
   with its KIP-360 bump, and read_committed sees exactly the committed records;
2. the other half of "it aborted cleanly": after the coordinator's own timeout-abort, librdkafka's
   EndTxn v1 abort is fenced, as Kafka answers it (it was answered NONE);
3. a short run of tests/txn_restart_soak.py's kill -9 trials (the long one is that script).
"""

from __future__ import annotations

import logging
import os
import re
import time

import pytest

from broker_support import Broker
from txn_restart_soak import DIAGNOSIS, OOSN_RESPONSE, run_trials
from txn_support import (BROKER_CONFIG, Raw, TxnProducer, batches, create_topics, markers, read, state_records, states,
                         uid, values, wait_until)

confluent_kafka = pytest.importorskip("confluent_kafka")


def _client_log(path: str, name: str) -> logging.Logger:
    logger = logging.getLogger(f"rdkafka.{name}")
    logger.propagate = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger


def test_librdkafka_skips_the_sequences_of_messages_timed_out_without_a_leader(tmp_path):
    data, log_path = tmp_path / "data", str(tmp_path / "rdkafka.log")
    broker = Broker(data, BROKER_CONFIG).start()
    port, topic, tid = broker.port, uid("gap"), uid("tx")
    create_topics(broker.bootstrap, topic, partitions=1)
    reports = []
    p = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": tid, "acks": "all",
        # the batch waits in the queue while AddPartitionsToTxn is written, then the kill
        "linger.ms": 3000, "message.timeout.ms": 6000, "transaction.timeout.ms": 60000,
        "socket.timeout.ms": 1000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 20, "debug": "eos,protocol,msg", "logger": _client_log(log_path, tid)})

    def produce(txn: str) -> None:
        for i in range(10):
            p.produce(topic, value=b"%s-%d" % (txn.encode(), i), partition=0,
                      on_delivery=lambda err, msg: reports.append(err and err.name()))
    try:
        p.init_transactions(30)
        p.begin_transaction()
        produce("t1")
        p.commit_transaction(30)
        # the producer's id and epoch as t1 ended (its CompleteCommit), not as first given: a loaded
        # machine may have let librdkafka time out (socket.timeout.ms 1 s) and send InitProducerId
        # again, which bumps the epoch (a CI run at load ~10: t2 at epoch 1, the first record 0)
        records = wait_until(lambda: (r := state_records(str(data), tid)) and r[-1][0] == "CompleteCommit" and r,
                             timeout=30, what="t1's CompleteCommit on disk")
        (_, pid, epoch), written = records[-1], len(records)
        p.begin_transaction()
        produce("t2")
        wait_until(lambda: [s for s, _, _ in state_records(str(data), tid)[written:]] == ["Ongoing"], timeout=5,
                   what="t2's AddPartitionsToTxn on disk")
        broker.kill()                     # before t2's batch (linger.ms) is sent
        assert [m[0] for m in markers(str(data), topic, 0)] == ["COMMIT"] and \
            len(batches(str(data), topic, 0)) == 2, "t2's batch reached the log before the kill"
        time.sleep(6.5)                   # past message.timeout.ms: t2 times out in librdkafka
        broker = Broker(data, BROKER_CONFIG, port=port).start()
        with pytest.raises(confluent_kafka.KafkaException) as failed:
            p.commit_transaction(30)
        assert failed.value.args[0].txn_requires_abort()
        p.abort_transaction(30)           # EndTxn(abort) on Ongoing: PrepareAbort at the same epoch
        assert state_records(str(data), tid)[written:] == [
            ("Ongoing", pid, epoch), ("PrepareAbort", pid, epoch), ("CompleteAbort", pid, epoch)]
        # the broker's state of the producer: t1's 10 records (sequences 0..9), epoch unchanged
        with Raw(broker.port) as raw:
            assert raw.describe_producers(topic, 0) == [(pid, epoch, 9, 0, -1)]
        # no InitProducerId: librdkafka keeps its epoch, and numbers t3 after t2's lost records
        p.begin_transaction()
        produce("t3")
        try:
            p.commit_transaction(30)
            committed = [b"t1", b"t3"]                     # a librdkafka that no longer skips
        except confluent_kafka.KafkaException as e:
            err = e.args[0]
            assert err.name() == "OUT_OF_ORDER_SEQUENCE_NUMBER" and err.txn_requires_abort(), err
            p.abort_transaction(30)                        # librdkafka's KIP-360 bump, then go on
            committed = [b"t1", b"t4"]
            p.begin_transaction()
            produce("t4")
            p.commit_transaction(30)
            assert state_records(str(data), tid)[-4][0] == "Empty"      # the bump: InitProducerId
    finally:
        p.flush(5)
    with open(log_path, errors="replace") as f:
        log = f.read()
    if confluent_kafka.libversion()[1] < 0x02110000:
        assert committed[1] == b"t4", "librdkafka up to 2.16 was seen to skip t2's sequences"
    if committed[1] == b"t4":
        # librdkafka's own diagnosis: it sent t3 from sequence 20 while it knows the broker holds 0..9
        assert len(OOSN_RESPONSE.findall(log)) == 1
        [(pid_text, base, nxt)] = DIAGNOSIS["skipped"].findall(log)
        assert (pid_text, int(base), int(nxt)) == (f"PID{{Id:{pid},Epoch:{epoch}}}", 20, 10)
        assert not DIAGNOSIS["desync"].search(log) and not DIAGNOSIS["rewound"].search(log)
        # t2's 10 messages (MsgId 11..20) timed out in the queue of a partition with no leader, in
        # one scan or, on a loaded machine, several ("0+1 ... (MsgId 11..11)", "0+9 ... (12..20)")
        timed_out = [(int(n), int(first), int(last)) for n, first, last in re.findall(
            r"TIMEOUT .*:0/internal: .*timed out 0\+(\d+) message\(s\) \(MsgId (\d+)\.\.(\d+)\)", log)]
        assert timed_out and sum(n for n, _, _ in timed_out) == 10, timed_out
        assert [m for _, first, last in timed_out for m in range(first, last + 1)] == list(range(11, 21)), timed_out
    got = values(read("confluent", broker.bootstrap, topic, "read_committed", partitions=1))
    broker.stop()
    assert got == [b"%s-%d" % (t, i) for t in committed for i in range(10)]


def test_librdkafka_abort_after_the_coordinators_timeout_abort_is_fenced_as_with_kafka(tmp_path):
    """Server TV 2: the coordinator's timeout-abort writes its markers with e+1. librdkafka's
    abort_transaction then sends EndTxn v1 with e; Kafka takes a v1 request by the TV1 rules
    (strict epoch equality: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH below v2), which librdkafka
    treats as fatal. compactlog judged it by the TV2 rules of the coordinator's own abort, took
    e for the retry of a bump and answered NONE: an abort that looked clean."""
    broker = Broker(tmp_path / "data", BROKER_CONFIG).start()
    topic, tid = uid("fenced"), uid("tx")
    p = None
    try:
        create_topics(broker.bootstrap, topic, partitions=1)
        p = TxnProducer("confluent", broker.bootstrap, tid, timeout_ms=1000).init()
        p.begin()
        p.send(topic, b"late", partition=0)
        p.flush()
        [(_, pid, e)] = state_records(broker.data_dir, tid)[:1]
        wait_until(lambda: states(broker.data_dir, tid)[-1:] == ["CompleteAbort"], timeout=15,
                   what="the coordinator's timeout abort")
        assert markers(broker.data_dir, topic, 0) == [("ABORT", 1, pid, e + 1)]
        error = p.expect_fenced(p.abort).args[0]
        assert error.fatal()
        assert states(broker.data_dir, tid)[-1:] == ["CompleteAbort"]          # nothing written
        assert read("confluent", broker.bootstrap, topic, "read_committed", partitions=1) == []
    finally:
        if p is not None:
            p.close()
        broker.stop()


def test_kill_9_trials_with_timed_out_transactions(tmp_path):
    """A few of tests/txn_restart_soak.py's trials: kill -9 at each point of a transaction, down
    past message.timeout.ms or briefly, restart; read_committed holds exactly the committed
    transactions and every OUT_OF_ORDER_SEQUENCE_NUMBER is one librdkafka diagnoses as its own
    skipped sequences (none from a broker that lost or rewound producer state)."""
    result = run_trials(str(tmp_path), trials=4, seed=24, log=lambda line: None)
    assert result.ok, result.summary() + f"\nsuspect: {result.broker_suspect}\nmissing: {result.missing[:5]}" \
        f"\nunexpected: {result.unexpected[:5]}\nduplicates: {result.duplicates[:5]}"
    assert result.committed > 0 and len(result.kills) == 4
    assert os.path.exists(tmp_path / "rdkafka.log")
