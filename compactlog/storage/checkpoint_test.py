"""Kafka's text checkpoint files: offsets, leader epochs, partition.metadata."""

from __future__ import annotations

import os

import pytest

from compactlog.errors import StorageError
from compactlog.storage.checkpoint import (LeaderEpochCache, LeaderEpochCheckpointFile,
                                           OffsetCheckpointFile, PartitionMetadataFile,
                                           decode_topic_id, new_topic_id, read_checkpoint)
from compactlog.storage.conftest import vector


def test_offset_checkpoint_write_format(tmp_path):
    ck = OffsetCheckpointFile(str(tmp_path / "cleaner-offset-checkpoint"))
    ck.write({("orders-compacted", 0): 15342, ("orders-compacted", 1): 0})
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == \
        "0\n2\norders-compacted 0 15342\norders-compacted 1 0\n"
    assert not os.path.exists(ck.path + ".tmp")
    assert ck.read() == {("orders-compacted", 0): 15342, ("orders-compacted", 1): 0}


def test_offset_checkpoint_read_rules(tmp_path):
    path = tmp_path / "ck"
    ck = OffsetCheckpointFile(str(path))
    assert ck.read() == {}                                  # missing file
    path.write_text("")
    assert ck.read() == {}                                  # empty file
    path.write_text("0\n")
    assert ck.read() == {}                                  # no count line
    path.write_text("0\n1\ntopic-with-dash   3\t7\n")       # split on any whitespace
    assert ck.read() == {("topic-with-dash", 3): 7}
    for bad, what in [("1\n0\n", "version"), ("0\n2\nt 0 1\n", "expected 2 entries"),
                      ("0\n1\nt 0\n", "malformed"), ("0\n1\nt x 1\n", "malformed"),
                      ("zero\n0\n", "not a number")]:
        path.write_text(bad)
        with pytest.raises(StorageError, match=what):
            ck.read()


def test_kafka_recovery_point_checkpoint():
    import tempfile
    raw = vector("Niloufar1171+LDI-POC/recovery-point-offset-checkpoint")
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "recovery-point-offset-checkpoint")
        with open(p, "wb") as f:
            f.write(raw)
        offsets = OffsetCheckpointFile(p).read()
    lines = raw.decode().splitlines()
    assert lines[0] == "0" and int(lines[1]) == 54 == len(offsets)
    for line in lines[2:]:
        topic, part, off = line.split()
        assert offsets[(topic, int(part))] == int(off)


def test_kafka_cleaner_checkpoint_is_empty(tmp_path):
    p = tmp_path / "cleaner-offset-checkpoint"
    p.write_bytes(vector("mscaldas2012+kafka-connect-spooldir/kafka-data/cleaner-offset-checkpoint"))
    assert OffsetCheckpointFile(str(p)).read() == {}


def test_leader_epoch_checkpoint(tmp_path):
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_bytes(vector("Niloufar1171+LDI-POC/__consumer_offsets-6/leader-epoch-checkpoint"))
    ck = LeaderEpochCheckpointFile(str(p))
    assert ck.read() == [(0, 0)]
    cache = LeaderEpochCache(ck)
    assert not cache.assign(0, 5)            # not a newer epoch
    assert not cache.assign(-1, 5)
    assert cache.assign(2, 10) and cache.assign(4, 30)
    cache.flush()
    assert p.read_text() == "0\n3\n0 0\n2 10\n4 30\n"
    cache.truncate_from_end(30)              # epochs starting at/after the end are dropped
    assert ck.read() == [(0, 0), (2, 10)]
    cache.truncate_from_start(12)            # the epoch covering the new start moves to it
    assert ck.read() == [(2, 12)]


def test_unreadable_leader_epoch_checkpoint_starts_empty(tmp_path):
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_text("0\n2\n1 0\n")
    assert LeaderEpochCache(LeaderEpochCheckpointFile(str(p))).entries == []


def test_partition_metadata(tmp_path):
    p = tmp_path / "partition.metadata"
    p.write_bytes(vector("Niloufar1171+LDI-POC/__consumer_offsets-6/partition.metadata"))
    md = PartitionMetadataFile(str(p))
    assert md.read() == "gSnfpEbtQfSDpxM2lhEn9A"
    assert len(decode_topic_id("gSnfpEbtQfSDpxM2lhEn9A")) == 16
    tid = new_topic_id()
    assert len(tid) == 22 and "=" not in tid
    md.write(tid)
    assert p.read_text() == f"version: 0\ntopic_id: {tid}\n"
    assert md.read() == tid
    p.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    with pytest.raises(StorageError, match="topic_id"):
        md.read()
    p.write_text("version: 1\ntopic_id: gSnfpEbtQfSDpxM2lhEn9A\n")
    with pytest.raises(StorageError, match="version"):
        md.read()


def test_generic_reader_names_file_and_line(tmp_path):
    p = tmp_path / "x"
    p.write_text("0\n2\n1 2\nbroken\n")
    with pytest.raises(StorageError) as err:
        read_checkpoint(str(p), 0, lambda t: (int(t[0]), int(t[1])))
    assert str(p) in str(err.value) and "line 4" in str(err.value)


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "cleaner-offset-checkpoint"])
def test_a_byte_that_is_not_utf8_names_the_file_and_line(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b"0\n2\nt 0 5\nt \xff1 7\n")
    with pytest.raises(StorageError) as err:
        OffsetCheckpointFile(str(p)).read()
    assert str(err.value) == f"{p}: line 4: byte 0xff at column 3 is not UTF-8 text"


def test_unreadable_leader_epoch_checkpoint_keeps_its_error(tmp_path):
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_bytes(b"0\n1\n\xfe 0\n")
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(str(p)))
    assert cache.entries == [] and "line 3" in str(cache.load_error)
    cache.assign(3, 40)
    cache.flush()                            # the next flush replaces the bad file
    assert p.read_text() == "0\n1\n3 40\n"
    assert LeaderEpochCache(LeaderEpochCheckpointFile(str(p))).load_error is None


def test_partition_metadata_not_utf8(tmp_path):
    p = tmp_path / "partition.metadata"
    p.write_bytes(b"version: 0\ntopic_id: gSnfpEbtQfSDpxM2l\xe9En9A\n")
    with pytest.raises(StorageError, match="line 2: byte 0xe9 at column 28"):
        PartitionMetadataFile(str(p)).read()


def test_a_checkpoint_that_cannot_be_read_is_a_storage_error(tmp_path):
    (tmp_path / "ck").mkdir()                # a directory where the file should be
    with pytest.raises(StorageError, match="cannot be read"):
        OffsetCheckpointFile(str(tmp_path / "ck")).read()
