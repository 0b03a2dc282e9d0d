"""The coordinators' internal topics (coordinator/internal_topics.py): their partition count, and the
repair at start of a topic a kill -9 left short during its creation (compactlog made the partition
directories first and recorded the count last, so such a topic passed for one of 18 partitions)."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.record import transaction_log as TL
from compactlog.coordinator import internal_topics as IT
from compactlog.coordinator.txn.conftest import Broker, Clock
from compactlog.coordinator.txn.state_log import TRANSACTION_STATE_TOPIC as TXN
from compactlog.coordinator.txn.state_log import partition_for, replay
from compactlog.storage import files
from compactlog.storage.checkpoint import PartitionMetadataFile, new_topic_id
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import TOPICS_FILE, DataDir

OFFSETS = R.OFFSETS_TOPIC


def open_dir(path, **props) -> DataDir:
    return DataDir(str(path), broker=BrokerConfig(props), writable=True, create=True, command="test")


def left_short(path, topic: str, present) -> str:
    """A data dir as a kill -9 during ``topic``'s creation left it before the count was recorded
    first: the first partition directories, each with the topic id, and no record of the count."""
    topic_id = new_topic_id()
    for p in present:
        pdir = os.path.join(str(path), files.partition_dir_name(topic, p))
        os.makedirs(pdir)
        PartitionMetadataFile(os.path.join(pdir, files.PARTITION_METADATA)).write(topic_id)
    return topic_id


def forget_record(path, topic: str) -> None:
    """``topic`` known only by its directories from now on, as that older creation left it."""
    name = os.path.join(str(path), TOPICS_FILE)
    with open(name, encoding="utf-8") as f:
        meta = json.load(f)
    del meta["topics"][topic]
    with open(name, "w", encoding="utf-8") as f:
        json.dump(meta, f)


def dir_ids(dd, topic) -> set:
    return {PartitionMetadataFile(os.path.join(dd.path, files.partition_dir_name(topic, p),
                                               files.PARTITION_METADATA)).read()
            for p in dd.partition_dirs()[topic]}


def test_an_offsets_topic_left_short_is_made_whole_at_the_configured_count(tmp_path, caplog):
    path = tmp_path / "d"
    os.makedirs(path)
    topic_id = left_short(path, OFFSETS, range(18))
    dd = open_dir(path)
    assert IT.partition_count(dd, OFFSETS) == 50
    with caplog.at_level(logging.WARNING, logger="kafka.log.LogManager"):
        lines = IT.repair(dd)
    assert lines == ["Repaired __consumer_offsets: 18 of its 50 partitions were there (no record of its count: "
                     "offsets.topic.num.partitions=50); made partition(s) 18-49 (empty)"]
    assert [r.getMessage() for r in caplog.records] == lines
    assert dd.partition_dirs()[OFFSETS] == list(range(50))
    assert dd.registered_partitions(OFFSETS) == 50
    assert dd.topic_id(OFFSETS) == topic_id and dir_ids(dd, OFFSETS) == {topic_id}
    assert dd.topic_overrides(OFFSETS) == IT.offsets_topic_configs(dd.broker)
    # a new partition is led from its creation: its leader-epoch checkpoint beside its topic id
    assert sorted(os.listdir(os.path.join(dd.path, "__consumer_offsets-49"))) == \
        sorted([files.LEADER_EPOCH_CHECKPOINT, files.PARTITION_METADATA])
    assert IT.repair(dd) == []
    dd.close()
    dd = open_dir(path, **{"offsets.topic.num.partitions": "3"})     # the record wins from now on
    assert IT.partition_count(dd, OFFSETS) == 50 and dd.partitions(OFFSETS) == list(range(50))
    dd.close()


def test_a_count_chosen_on_purpose_is_whole_and_no_count_is_lowered(tmp_path):
    few = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "4"}
    # created with 3 partitions: whole
    dd = open_dir(tmp_path / "a", **few)
    dd.create_topic(OFFSETS, 3)
    assert IT.repair(dd) == [] and IT.partition_count(dd, OFFSETS) == 3
    dd.close()
    # 3 directories and no record, with 3 the setting: whole too, its count recorded
    os.makedirs(tmp_path / "b")
    left_short(tmp_path / "b", OFFSETS, range(3))
    dd = open_dir(tmp_path / "b", **few)
    assert IT.repair(dd) == [] and dd.registered_partitions(OFFSETS) == 3
    dd.close()
    # more directories than the setting: their count, never fewer
    os.makedirs(tmp_path / "c")
    left_short(tmp_path / "c", TXN, range(10))
    dd = open_dir(tmp_path / "c", **few)
    assert IT.partition_count(dd, TXN) == 10
    assert IT.repair(dd) == [] and dd.registered_partitions(TXN) == 10
    dd.close()
    # a recorded count above the setting stays
    dd = open_dir(tmp_path / "d")
    dd.create_topic(TXN, 50)
    dd.close()
    dd = open_dir(tmp_path / "d", **few)
    assert IT.partition_count(dd, TXN) == 50 and IT.repair(dd) == []
    dd.close()


def test_a_creation_interrupted_after_its_record_is_completed(tmp_path):
    """What a kill -9 in the middle of ``DataDir.create_topic`` leaves now: the count recorded,
    only the first directories made."""
    dd = open_dir(tmp_path / "d")
    dd.create_topic(TXN, 50)
    topic_id = dd.topic_id(TXN)
    dd.close()
    for p in range(18, 50):
        shutil.rmtree(os.path.join(dd.path, files.partition_dir_name(TXN, p)))
    os.remove(os.path.join(dd.path, files.partition_dir_name(TXN, 17), files.PARTITION_METADATA))
    dd = open_dir(tmp_path / "d")
    assert IT.partition_count(dd, TXN) == 50
    assert IT.repair(dd) == ["Repaired __transaction_state: 18 of its 50 partitions were there (its creation "
                             "was interrupted); made partition(s) 18-49 (empty)"]
    assert dd.partition_dirs()[TXN] == list(range(50)) and dir_ids(dd, TXN) == {topic_id}
    dd.close()


# -- __transaction_state left short, then used: ids placed by hash % its directories ----------------------

TIDS = [f"tx-{i}" for i in range(16)]
GONE = "tx-gone"     # placed elsewhere by hash % 12 too


@pytest.fixture
def used_short(tmp_path):
    """A data dir whose ``__transaction_state`` has 5 partitions and no record of its count, each
    transactional id placed by ``hash % 5``: Ongoing, Empty and CompleteCommit ids, and one ended
    by a tombstone. Returns (path, clock, each id's (producer id, epoch, state))."""
    path, clock = tmp_path / "data", Clock()
    b = Broker(path, clock, **{"transaction.state.log.num.partitions": "5"})
    b.state.create_topic("t", 2)
    svc = b.svc
    for i, tid in enumerate(TIDS):
        r = svc.init_producer_id(tid, 60000)
        assert r.error == ErrorCode.none
        if i % 3 == 0:
            assert svc.add_partitions(tid, r.producer_id, r.producer_epoch, {("t", i % 2)}) == ErrorCode.none
        elif i % 3 == 1:
            assert svc.add_partitions(tid, r.producer_id, r.producer_epoch, {("t", 0)}) == ErrorCode.none
            assert svc.end_txn(tid, r.producer_id, r.producer_epoch, True).error == ErrorCode.none
    before = {}
    for tid in TIDS:
        md = svc.describe(tid)[1]
        before[tid] = (md.producer_id, md.producer_epoch, md.state.display)
    # an id expired: its tombstone is its latest record, nothing to move
    assert svc.init_producer_id(GONE, 60000).error == ErrorCode.none
    b.state.log(TXN, partition_for(GONE, 5)).append_records([TL.encode_key(GONE)], [None])
    b.close()
    forget_record(path, TXN)
    assert {s for _, _, s in before.values()} == {"Ongoing", "Empty", "CompleteCommit"}
    return path, clock, before


def moving() -> list[str]:
    return [t for t in TIDS if partition_for(t, 5) != partition_for(t, 12)]


def check_moved(path, before) -> None:
    dd = open_dir(path, **{"transaction.state.log.num.partitions": "12"})
    for p in range(12):
        txns, _ = replay(dd.open_log(TXN, p))
        assert set(txns) == {t for t in TIDS if partition_for(t, 12) == p}, p
        for tid, md in txns.items():
            assert (md.producer_id, md.producer_epoch, md.state.display) == before[tid]
    dd.close()
    # the coordinator of a broker finds every id where Kafka's formula puts it, as it was
    b = Broker(path, Clock(), **{"transaction.state.log.num.partitions": "12"})
    try:
        assert b.svc.config.num_partitions == 12
        for tid, (pid, epoch, state) in before.items():
            md = b.svc.describe(tid)[1]
            assert (md.producer_id, md.producer_epoch, md.state.display) == (pid, epoch, state), tid
            if state == "Ongoing":          # and the open transaction still ends
                assert b.svc.end_txn(tid, pid, epoch, False).error == ErrorCode.none
    finally:
        b.close()


def test_ids_a_short_transaction_state_placed_move_where_kafkas_formula_puts_them(used_short):
    path, _, before = used_short
    assert len(moving()) >= 3 and len(moving()) < len(TIDS)
    dd = open_dir(path, **{"transaction.state.log.num.partitions": "12"})
    assert IT.repair(dd) == [f"Repaired __transaction_state: 5 of its 12 partitions were there (no record of "
                             f"its count: transaction.state.log.num.partitions=12); made partition(s) 5-11 "
                             f"(empty), moved {len(moving())} transactional id(s) to the partition hash % 12 "
                             f"gives them"]
    assert dd.registered_partitions(TXN) == 12
    dd.close()
    check_moved(path, before)


class Crashed(BaseException):
    pass


def test_a_repair_a_crash_interrupts_is_done_again_at_the_next_start(used_short, monkeypatch):
    path, _, before = used_short
    real = IT._append

    def crash_before_the_tombstones(lg, records):
        if all(v is None for _, v in records):
            raise Crashed()
        real(lg, records)
    monkeypatch.setattr(IT, "_append", crash_before_the_tombstones)
    dd = open_dir(path, **{"transaction.state.log.num.partitions": "12"})
    with pytest.raises(Crashed):
        IT.repair(dd)
    dd.abandon()
    monkeypatch.setattr(IT, "_append", real)
    dd = open_dir(path, **{"transaction.state.log.num.partitions": "12"})
    assert dd.registered_partitions(TXN) is None           # recorded only once the ids are moved
    (line,) = IT.repair(dd)
    assert f"moved {len(moving())} transactional id(s)" in line
    dd.close()
    check_moved(path, before)


def test_both_coordinators_take_a_short_topic_for_the_setting(tmp_path):
    """Without the repair (an offline tool), a topic left short is still the setting's count: an id's
    partition is hash % 50, never hash % the directories found (the transaction coordinator kept 18)."""
    path = tmp_path / "d"
    os.makedirs(path)
    left_short(path, TXN, range(18))
    left_short(path, OFFSETS, range(11))
    b = Broker(path, Clock(), **{"offsets.topic.num.partitions": "50", "transaction.state.log.num.partitions": "50"})
    try:
        assert b.svc.config.num_partitions == 50
        assert b.state.groups.config.num_partitions == 50
        assert b.svc.coordinator.partition_for("tx-0") == partition_for("tx-0", 50)
    finally:
        b.close()
