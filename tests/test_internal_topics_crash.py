"""The coordinators' internal topics across a kill -9 during their creation. compactlog made the
partition directories first and recorded the count last, so a kill -9 while ``__consumer_offsets``
or ``__transaction_state`` was first created left it with 18 (or 11, 46...) partitions for good,
and ids then landed where Kafka's formula (hash % 50) does not put them. Now the count is recorded
first and the broker completes a topic left short at start: a real kill -9 in the middle of the
creation (held there by the broker's test hook ``COMPACTLOG_TEST_TOPIC_CREATION_HOLD_FILE``), and
data dirs as the older creation left them, ``__transaction_state`` used afterwards included."""

from __future__ import annotations

import json
import os
import threading

import pytest

from broker_support import Broker, wait_until
from compactlog.record import consumer_offsets as R
from compactlog.storage import files
from compactlog.storage.checkpoint import PartitionMetadataFile, new_topic_id
from groups_support import GROUP_BROKER, Confluent, committed, create_topic, names, produce, read_and_commit
from txn_support import BROKER_CONFIG, Raw, TxnProducer, read, state_records, uid, values

HOLD_ENV = "COMPACTLOG_TEST_TOPIC_CREATION_HOLD_FILE"
OFFSETS, TXN = "__consumer_offsets", "__transaction_state"


def partition_dirs(data, topic: str) -> list[int]:
    found = []
    for name in os.listdir(data):
        try:
            t, p = files.parse_partition_dir(name)
        except ValueError:
            continue
        if t == topic:
            found.append(p)
    return sorted(found)


def repaired_lines(broker: Broker) -> list[str]:
    return [ln for ln in broker.log_text().splitlines() if "Repaired __" in ln]


def check_groups_work(bootstrap: str, data) -> None:
    """A confluent-kafka member of a group reads, commits, and its offsets read back; the commit
    lies in the partition hash % 50 gives the group, as Kafka's."""
    topic, group = names("whole")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 10)
    m = Confluent(bootstrap, group, topic)
    try:
        read_and_commit(m, 10)
    finally:
        m.close()
    assert sum(committed(bootstrap, group, topic, 2).values()) == 10
    home = os.path.join(str(data), f"{OFFSETS}-{R.partition_for(group, 50)}")
    assert any(os.path.getsize(os.path.join(home, f)) > 0 for f in os.listdir(home) if f.endswith(".log"))


def check_transactions_work(bootstrap: str, data) -> None:
    topic, tid = uid("txn-whole"), uid("tx")
    create_topic(bootstrap, topic, 1)
    p = TxnProducer("confluent", bootstrap, tid).init()
    try:
        p.begin()
        p.send(topic, b"committed")
        p.commit()
    finally:
        p.close()
    assert values(read("confluent", bootstrap, topic, "read_committed", partitions=1)) == [b"committed"]
    # its records in the partition hash % 50 gives it, as Kafka's
    assert [s for s, _, _ in state_records(str(data), tid)][-1] == "CompleteCommit"


@pytest.mark.parametrize("topic", [OFFSETS, TXN])
def test_kill_9_in_the_middle_of_the_first_creation(tmp_path, monkeypatch, topic):
    data = tmp_path / "data"
    hold = tmp_path / "hold"
    hold.write_text("18")           # the creation waits after its 18th partition directory
    monkeypatch.setenv(HOLD_ENV, str(hold))
    first = Broker(data, {**GROUP_BROKER, **BROKER_CONFIG}).start()
    monkeypatch.delenv(HOLD_ENV)
    port = first.port
    raw = Raw(port)
    lookup = threading.Thread(target=lambda: _find_coordinator(raw, 0 if topic == OFFSETS else 1), daemon=True)
    try:
        lookup.start()                  # the first FindCoordinator creates the topic
        held = os.path.join(data, f"{topic}-17", files.PARTITION_METADATA)
        wait_until(lambda: os.path.exists(held) or not first.alive(), what=f"{topic}-17 to be made")
        assert first.alive(), first.log_text()[-3000:]
    finally:
        first.kill()                    # kill -9, while the creation holds
        raw.close()
    assert partition_dirs(data, topic) == list(range(18))
    b = Broker(data, {**GROUP_BROKER, **BROKER_CONFIG}, port=port).start()
    try:
        assert repaired_lines(b) and len(repaired_lines(b)) == 1, b.log_text()[-3000:]
        assert f"Repaired {topic}: 18 of its 50 partitions were there (its creation was interrupted); made " \
               f"partition(s) 18-49 (empty)" in repaired_lines(b)[0]
        assert partition_dirs(data, topic) == list(range(50))
        ids = {PartitionMetadataFile(os.path.join(data, f"{topic}-{p}", files.PARTITION_METADATA)).read()
               for p in range(50)}
        assert len(ids) == 1
        check_groups_work(b.bootstrap, data)
        check_transactions_work(b.bootstrap, data)
    finally:
        b.stop()


def _find_coordinator(raw: Raw, key_type: int) -> None:
    try:
        raw.call(10, 3, key="whole-group" if key_type == 0 else "whole-tx", key_type=key_type)
    except OSError:
        pass                            # the broker was killed under it


def test_an_offsets_topic_an_older_creation_left_short_is_made_whole_at_start(tmp_path):
    """18 directories and no record of the count, as the older creation left them."""
    data = tmp_path / "data"
    os.makedirs(data)
    topic_id = new_topic_id()
    for p in range(18):
        os.makedirs(data / f"{OFFSETS}-{p}")
        PartitionMetadataFile(str(data / f"{OFFSETS}-{p}" / files.PARTITION_METADATA)).write(topic_id)
    b = Broker(data, GROUP_BROKER).start()
    try:
        assert repaired_lines(b) == [ln for ln in b.log_text().splitlines() if OFFSETS + ":" in ln]
        (line,) = repaired_lines(b)
        assert "Repaired __consumer_offsets: 18 of its 50 partitions were there (no record of its count: " \
               "offsets.topic.num.partitions=50); made partition(s) 18-49 (empty) (" in line, line
        assert partition_dirs(data, OFFSETS) == list(range(50))
        from confluent_kafka.admin import AdminClient
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(OFFSETS, timeout=30)
        assert sorted(md.topics[OFFSETS].partitions) == list(range(50))
        check_groups_work(b.bootstrap, data)
    finally:
        b.stop()
    b = Broker(data, GROUP_BROKER).start()          # whole from now on: nothing more to repair
    try:
        assert repaired_lines(b) == [line]
    finally:
        b.stop()


def test_a_transaction_state_left_short_and_used_moves_its_ids_where_kafka_looks(tmp_path):
    """A ``__transaction_state`` of 11 partitions with no record of its count, used as the older
    broker used it (ids placed by hash % 11: committed ones, and one transaction left open by a
    kill -9). At start the broker makes 39 more and moves each id to hash % 50; every producer
    goes on with its producer id (a new epoch), and the open transaction is aborted."""
    data = tmp_path / "data"
    b = Broker(data, {**BROKER_CONFIG, "transaction.state.log.num.partitions": "11"}).start()
    topic = uid("short")
    tids = [uid(f"tx{i}") for i in range(6)]
    before = {}
    try:
        create_topic(b.bootstrap, topic, 1)
        for i, tid in enumerate(tids):
            p = TxnProducer("kafka-python", b.bootstrap, tid).init()
            p.begin()
            p.send(topic, b"v%d" % i)
            if i:
                p.commit()
            else:
                p.flush()               # tids[0]: its transaction stays open
            before[tid] = p.producer_id_and_epoch()
            p.close()
    finally:
        b.kill()
    # the count no longer recorded: the topic known by its 11 directories, as the older creation left it
    meta_path = data / "compactlog.topics.json"
    meta = json.loads(meta_path.read_text())
    del meta["topics"][TXN]
    meta_path.write_text(json.dumps(meta))
    moving = [t for t in tids if R.partition_for(t, 11) != R.partition_for(t, 50)]
    assert moving

    b = Broker(data, BROKER_CONFIG).start()
    try:
        (line,) = repaired_lines(b)
        assert f"Repaired __transaction_state: 11 of its 50 partitions were there (no record of its count: " \
               f"transaction.state.log.num.partitions=50); made partition(s) 11-49 (empty), moved {len(moving)} " \
               f"transactional id(s) to the partition hash % 50 gives them (" in line, line
        assert partition_dirs(data, TXN) == list(range(50))
        for tid in tids:                # each id's state where hash % 50 puts it
            assert state_records(str(data), tid), tid
        for i, tid in enumerate(tids):
            p = TxnProducer("kafka-python", b.bootstrap, tid).init()
            try:
                pid, epoch = p.producer_id_and_epoch()
                assert pid == before[tid][0] and epoch > before[tid][1], (tid, before[tid], (pid, epoch))
            finally:
                p.close()
        # the open transaction was aborted by the new producer's init: the partition is stable again
        assert sorted(values(read("kafka-python", b.bootstrap, topic, "read_committed", partitions=1))) == \
            [b"v%d" % i for i in range(1, 6)]
        assert state_records(str(data), tids[0])[-1][0] in ("Empty", "CompleteAbort")
        check_transactions_work(b.bootstrap, data)
    finally:
        b.stop()
