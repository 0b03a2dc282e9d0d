"""Transaction conformance from a prepared data dir (transactions.md §6.3, the loading half of
scenario 10 and scenario 15), with confluent-kafka, kafka-python and aiokafka producers:

* a restart while ``__consumer_offsets`` takes a while to load: TxnOffsetCommit v0/v1 answer
  COORDINATOR_NOT_AVAILABLE (KAFKA-7296), v2+ COORDINATOR_LOAD_IN_PROGRESS, InitProducerId and
  DescribeTransactions COORDINATOR_LOAD_IN_PROGRESS (the transaction coordinator loads after the
  groups), and each client's init retries through it;
* epoch exhaustion, from ``__transaction_state`` records written into the stopped broker's data
  dir: an id at epoch 32765 is bumped to 32766 by the client's init, the next init on a completed
  transaction rotates to a new producer id at epoch 0, and a fence at 32766 writes its ABORT
  markers with epoch 32767 before the fencing producer gets a new producer id at epoch 0."""

from __future__ import annotations

import contextlib
import threading
import time

from broker_support import Broker
from compactlog.record import consumer_offsets as R
from compactlog.record import transaction_log as TL
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from txn_support import (BROKER_CONFIG, INSTALLED, E, Raw, TxnProducer, create_topics, markers, read, state_records,
                         uid, values)

LOAD_RECORDS = 80_000             # ~1 s of __consumer_offsets-0 to replay: the loading window


TXN_OFFSET_COMMIT_WHILE_LOADING = ((0, E.coordinator_not_available), (1, E.coordinator_not_available),
                                   (2, E.coordinator_load_in_progress), (3, E.coordinator_load_in_progress))


def _writable(data):
    """The stopped broker's data dir, writable (closed at the block's end)."""
    return contextlib.closing(DataDir(str(data), broker=BrokerConfig({}), writable=True, command="test"))


def _grow_offsets(data, topic: str, records: int) -> None:
    """``records`` more offset commits in __consumer_offsets-0 (loaded first, and long)."""
    rec = R.offset_commit_record("bulk", topic, 0, R.OffsetCommitValue(5, commit_timestamp=int(time.time() * 1000)))
    with _writable(data) as dd:
        lg = dd.open_log("__consumer_offsets", 0)
        for _ in range(records // 10_000):
            lg.append_records([rec.key_bytes()] * 10_000, [rec.value_bytes()] * 10_000)


def _answers_while_loading(raw, group: str, topic: str, tid: str) -> list:
    """TxnOffsetCommit v0-v3 for a group in a partition loaded after __consumer_offsets-0, then
    InitProducerId, DescribeTransactions and ListTransactions: their error codes, in order."""
    answers = [raw.txn_offset_commit("t", group, 1, 0, {(topic, 0): 1}, version=v)[(topic, 0)]
               for v, _ in TXN_OFFSET_COMMIT_WHILE_LOADING]
    answers.append(raw.init_producer_id(uid("tx"))[0])
    answers.append(raw.describe_transaction(tid).error_code)
    listed = raw.call(66, 0, state_filters=[], producer_id_filters=[])
    answers.append(listed.error_code if not listed.transaction_states else "transactions listed")
    return answers


def test_loading_answers_and_epoch_exhaustion(tmp_path):
    data = tmp_path / "data"
    topic = uid("exhaust")
    group = uid("group")
    while R.partition_for(group, 50) == 0:            # loaded after the big partition 0
        group = uid("group")
    ids = {c: (uid(f"tx-rot-{c}"), uid(f"tx-fence-{c}")) for c in ("confluent", "kafka-python", "aiokafka")}
    with Broker(data, BROKER_CONFIG) as b, Raw(b.port) as raw:
        create_topics(b.bootstrap, topic)
        pids = {}
        for pair in ids.values():
            for tid in pair:
                code, pid, _ = raw.init_producer_id(tid)
                assert code == E.none
                pids[tid] = pid
        # __consumer_offsets exists (the group's lookup creates it) and holds a commit of the group
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        c.close()
    # the stopped broker's dir: every id at epoch 32765, and a big __consumer_offsets-0
    now = int(time.time() * 1000)
    with _writable(data) as dd:
        for tid, pid in pids.items():
            slg = dd.open_log("__transaction_state", R.partition_for(tid, 50))
            slg.append_records([TL.encode_key(tid)], [TL.encode_value(1, pid, 32765, 60000, 0, None, now, -1)])
    expected = [code for _, code in TXN_OFFSET_COMMIT_WHILE_LOADING] + [E.coordinator_load_in_progress] * 3

    # The loading window is how long __consumer_offsets-0 takes to replay: on a fast machine it
    # can close before the last of the seven requests below (a quiet run saw ListTransactions
    # answered). The broker's log says when it did; then the partition grows fourfold and the
    # broker starts again: a window missed is not a wrong answer, a wrong answer while the log
    # says the loading goes on is.
    records = LOAD_RECORDS
    _grow_offsets(data, topic, records)
    for attempt in range(4):
        with contextlib.ExitStack() as running:         # the broker stopped (killed if need be) at its end
            b = running.enter_context(Broker(data, BROKER_CONFIG))
            with Raw(b.port) as raw:
                answers = _answers_while_loading(raw, group, topic, ids["confluent"][0])
            if answers == expected:
                kept = running.pop_all()                # this broker goes on below
                break
            assert "Finished loading offsets and group metadata from __consumer_offsets-0" in b.log_text(), \
                f"answers while loading {answers}, expected {expected}"
        _grow_offsets(data, topic, 3 * records)
        records *= 4
    else:
        raise AssertionError(f"the loading window closed before seven requests with {records // 4:,} records")
    with kept:
        # the clients' inits, started now, retry until the coordinator has loaded
        producers: dict = {}
        errors: list = []

        def start(client, tid):
            try:
                producers[tid] = TxnProducer(client, b.bootstrap, tid).init()
            except Exception as e:                  # noqa: BLE001 (reported below)
                errors.append((client, e))
        threads = [threading.Thread(target=start, args=(c, pair[0])) for c, pair in ids.items() if c in INSTALLED]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        for client, (rot, fence) in ids.items():
            if rot not in producers:
                continue                                        # the client is not installed
            p = producers[rot]
            pid = pids[rot]
            # the init bumped the crafted 32765 to 32766 (not yet exhausted)
            assert state_records(b.data_dir, rot)[-1] == ("Empty", pid, 32766)
            p.begin()
            p.send(topic, b"at-32766-" + client.encode(), partition=0)
            p.commit()
            # the next init on the completed transaction: exhausted, a new producer id at epoch 0
            q = TxnProducer(client, b.bootstrap, rot).init()
            last = state_records(b.data_dir, rot)[-1]
            assert last[0] == "Empty" and last[1] != pid and last[2] == 0, last
            q.begin()
            q.send(topic, b"rotated-" + client.encode(), partition=0)
            q.commit()
            p.close()
            q.close()
            # a fence at 32766: the coordinator's abort takes the last epoch, 32767
            f = TxnProducer(client, b.bootstrap, fence).init()
            fpid = pids[fence]
            assert state_records(b.data_dir, fence)[-1] == ("Empty", fpid, 32766)
            f.begin()
            f.send(topic, b"fenced-" + client.encode(), partition=1)
            f.flush()
            g = TxnProducer(client, b.bootstrap, fence).init()
            recs = [r for r in state_records(b.data_dir, fence) if r[0] != "Ongoing"]
            assert recs[-3:-1] == [("PrepareAbort", fpid, 32767), ("CompleteAbort", fpid, 32767)]
            assert recs[-1][0] == "Empty" and recs[-1][1] != fpid and recs[-1][2] == 0
            assert markers(b.data_dir, topic, 1)[-1] == ("ABORT", markers(b.data_dir, topic, 1)[-1][1], fpid, 32767)
            g.begin()
            g.send(topic, b"after-fence-" + client.encode(), partition=1)
            g.commit()
            f.close()
            g.close()
        got = values(read("confluent", b.bootstrap, topic, "read_committed"))
        for client in (c for c in ids if ids[c][0] in producers):
            assert {b"at-32766-" + client.encode(), b"rotated-" + client.encode(),
                    b"after-fence-" + client.encode()} <= set(got)
            assert b"fenced-" + client.encode() not in got
