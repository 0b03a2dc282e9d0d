"""Partition directories written by real Kafka brokers (tests/data/kafka-vectors, see its README).

Each is copied to a temporary data dir, opened (as after an unclean shutdown: no marker, no
recovery-point checkpoint, so every segment is validated), read back, appended to, reopened and
checked: the records are those the README describes, no ``.log`` byte changes on opening, the
Kafka-written indexes are kept as they are and missing ones are rebuilt exactly as Kafka would.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections import Counter

import pytest

from compactlog.errors import InvalidRecordError
from compactlog.storage.datadir import DataDir
from compactlog.storage.producer_state import read_snapshot
from storage_support import (VECTORS, check_partition_dir, digest_files, expected_indexes,
                             index_entries, read, time_index_entries)

LDI = "Niloufar1171+LDI-POC"
BHEEM = "Bheem6005+kafka/kafka-logs"
CONNECT = "mscaldas2012+kafka-connect-spooldir/kafka-data"

LDI_INDEX = [(3, 4730), (7, 9571)]
LDI_TIMEINDEX = [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
CITIES = [b"New York", b"Berlin", b"Paris", b"London", b"Sydney", b"Delhi", b"Dubai",
          b"Amsterdam", b"Barcelona", b"Mardid", b"Toronto"]


def group_key(key: bytes) -> tuple[int, bytes]:
    """(key version, group) of a __consumer_offsets key: 0/1 offset commit, 2 group metadata."""
    version, glen = struct.unpack_from(">hh", key, 0)
    return version, key[4:4 + glen]


def setup_dir(tmp_path, src_rel: str, parts: list[str]) -> str:
    root = tmp_path / "data"
    root.mkdir()
    for p in parts:
        shutil.copytree(os.path.join(VECTORS, src_rel, p), root / p)
    for extra in ("cleaner-offset-checkpoint",):
        src = os.path.join(VECTORS, src_rel, extra)
        if os.path.exists(src):
            shutil.copy(src, root / extra)
    return str(root)


def latest_per_key(recs):
    latest = {}
    for r in recs:
        latest[r.key] = r
    return latest


def check_batches(log, n_batches):
    batches = list(log.batches(0))
    assert len(batches) == n_batches
    for b in batches:
        b.ensure_valid()
    return batches


# --- per-directory expectations (README) ------------------------------------------------------

def expect_ldi(log):
    batches = check_batches(log, 13)
    assert all(b.records_count == 1 and b.partition_leader_epoch == 0 and b.producer_id == -1
               and b.compression == 0 and b.timestamp_type == 0 for b in batches)
    recs = list(log.records())
    assert [r.offset for r in recs] == list(range(13))
    kinds = {r.offset: group_key(r.key) for r in recs}
    assert {o for o, (v, _) in kinds.items() if v == 2} == {0, 2, 4, 5, 6, 7}
    assert {o for o, (v, _) in kinds.items() if v in (0, 1)} == {1, 3, 8, 9, 10, 11, 12}
    assert {g for _, g in kinds.values()} == {b"DEVSmileCDR"}
    assert len({r.key for r in recs}) == 5 and not any(r.value is None for r in recs)
    assert sorted(r.offset for r in latest_per_key(recs).values()) == [1, 3, 7, 9, 12]


def expect_bheem_offsets(log):
    check_batches(log, 2)
    recs = list(log.records())
    assert [r.offset for r in recs] == [0, 1]
    assert recs[0].key == recs[1].key
    assert group_key(recs[0].key) == (2, b"console-consumer-14897")
    assert [r.offset for r in latest_per_key(recs).values()] == [1]


def expect_cities(log):
    check_batches(log, 11)
    recs = list(log.records())
    assert [r.value for r in recs] == CITIES and all(r.key is None for r in recs)


def expect_connect(n_batches, n_records, n_keys, n_tombstones, tombstones_in_pairs=False):
    def check(log):
        batches = check_batches(log, n_batches)
        recs = list(log.records())
        assert len(recs) == n_records and [r.offset for r in recs] == list(range(n_records))
        assert len({r.key for r in recs}) == n_keys
        assert sum(r.value is None for r in recs) == n_tombstones
        if tombstones_in_pairs:
            tomb_batches = {b.base_offset for b in batches for r in b.records() if r.value is None}
            assert all(b.records_count == 2 for b in batches if b.base_offset in tomb_batches)
        latest = latest_per_key(recs)
        assert len(latest) == n_keys
        return latest
    return check


CASES = {
    "ldi-consumer-offsets-6": (LDI, "__consumer_offsets-6", ["__consumer_offsets-6"], expect_ldi, 13),
    "bheem-consumer-offsets-0": (BHEEM, "__consumer_offsets-0", ["__consumer_offsets-0", "cities-0"],
                                 expect_bheem_offsets, 2),
    "bheem-cities-0": (BHEEM, "cities-0", ["__consumer_offsets-0", "cities-0"], expect_cities, 11),
    "connect-configs-0": (CONNECT, "docker-connect-configs-0",
                          ["docker-connect-configs-0", "docker-connect-status-0"],
                          expect_connect(45, 54, 39, 18, True), 54),
    "connect-status-0": (CONNECT, "docker-connect-status-0",
                         ["docker-connect-configs-0", "docker-connect-status-0"],
                         expect_connect(127, 135, 20, 18), 135),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kafka_partition_opens_reads_appends_and_reopens(tmp_path, case):
    src_rel, pname, parts, expect, leo = CASES[case]
    root = setup_dir(tmp_path, src_rel, parts)
    pdir = os.path.join(root, pname)
    topic, part = pname.rsplit("-", 1)
    logs_before = {p: digest_files(os.path.join(root, p)) for p in parts}
    had_indexes = os.path.exists(os.path.join(pdir, "00000000000000000000.index"))
    original_log = read(os.path.join(pdir, "00000000000000000000.log"))

    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    log = dd.open_log(topic, int(part))
    assert (log.log_start_offset, log.log_end_offset) == (0, leo)
    assert log.segment_bases() == [0]
    expect(log)
    assert {p: digest_files(os.path.join(root, p)) for p in parts} == logs_before
    dd.close()
    assert {p: digest_files(os.path.join(root, p)) for p in parts} == logs_before

    # indexes: Kafka's kept as they are, missing ones rebuilt exactly as Kafka's recovery would
    exp_offsets, exp_times = expected_indexes(original_log, 0, 4096)
    assert index_entries(os.path.join(pdir, "00000000000000000000.index"), 0) == exp_offsets
    assert time_index_entries(os.path.join(pdir, "00000000000000000000.timeindex"), 0) == exp_times
    if not had_indexes:
        assert len(exp_times) >= 1
    check_partition_dir(pdir, 4096)
    # the leader epoch cache rebuilt by recovery is checkpointed (every batch has epoch 0)
    assert read(os.path.join(pdir, "leader-epoch-checkpoint")) == b"0\n1\n0 0\n"

    # appends, reopen (clean), more appends, reopen (unclean)
    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    log = dd.open_log(topic, int(part))
    before = [(r.offset, r.key, r.value) for r in log.records()]
    info = log.append_records([b"compactlog-key-1", b"compactlog-key-2"], [b"v1", None])
    assert (info.first_offset, info.last_offset) == (leo, leo + 1)
    dd.close()
    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    log = dd.open_log(topic, int(part))
    assert log.log_end_offset == leo + 2
    log.append_records([b"compactlog-key-3"], [b"v3"])
    dd.abandon()                                     # crash
    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    log = dd.open_log(topic, int(part))
    after = [(r.offset, r.key, r.value) for r in log.records()]
    assert after == before + [(leo, b"compactlog-key-1", b"v1"), (leo + 1, b"compactlog-key-2", None),
                              (leo + 2, b"compactlog-key-3", b"v3")]
    expect_prefix = read(os.path.join(pdir, "00000000000000000000.log"))
    assert expect_prefix.startswith(original_log)    # Kafka's bytes untouched, ours after them
    dd.close()
    check_partition_dir(pdir, 4096, exact_indexes=False)


def test_ldi_poc_files_match_the_readme(tmp_path):
    root = setup_dir(tmp_path, LDI, ["__consumer_offsets-6"])
    pdir = os.path.join(root, "__consumer_offsets-6")
    files_before = {n: read(os.path.join(pdir, n)) for n in os.listdir(pdir)}
    assert index_entries(os.path.join(pdir, "00000000000000000000.index"), 0) == LDI_INDEX
    assert time_index_entries(os.path.join(pdir, "00000000000000000000.timeindex"), 0) == LDI_TIMEINDEX
    assert read_snapshot(os.path.join(pdir, "00000000000000000013.snapshot")) == []

    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    log = dd.open_log("__consumer_offsets", 6)
    seg = log.segments[0]
    assert seg.offset_index.all_entries() == LDI_INDEX
    assert seg.time_index.all_entries() == LDI_TIMEINDEX
    assert seg.max_timestamp_so_far == 1769793578176 and seg.offset_of_max_timestamp_so_far == 12
    assert log.offset_for_timestamp(1769792518093) == (7, 1769792518093)
    assert log.offset_for_timestamp(1769792518094)[0] == 8
    assert log.leader_epochs.entries == [(0, 0)]
    assert log.producer_state.producers == {}
    dd.close()
    # a clean open and close leaves every Kafka file byte for byte as it was
    after = {n: read(os.path.join(pdir, n)) for n in files_before}
    assert after == files_before
    assert sorted(os.listdir(pdir)) == sorted(files_before)


def test_appending_keyless_records_to_a_compacted_copy_of_cities_is_refused(tmp_path):
    root = setup_dir(tmp_path, BHEEM, ["cities-0"])
    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    dd.alter_topic("cities", {"cleanup.policy": "compact"})
    log = dd.open_log("cities", 0)
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append_records([None], [b"Lisbon"])
    assert log.log_end_offset == 11
    log.append_records([b"pt"], [b"Lisbon"])
    dd.close()
    dd = DataDir(root, writable=True)
    assert [r.value for r in dd.open_log("cities", 0).records()] == CITIES + [b"Lisbon"]
    dd.close()


def test_connect_dir_with_kafka_cleaner_checkpoint(tmp_path):
    root = setup_dir(tmp_path, CONNECT, ["docker-connect-configs-0", "docker-connect-status-0"])
    dd = DataDir(root, clock=lambda: 1_800_000_000_000, writable=True)
    assert dd.cleaner_checkpoint.read() == {}
    assert dd.topics() == ["docker-connect-configs", "docker-connect-status"]
    for topic in dd.topics():
        dd.alter_topic(topic, {"cleanup.policy": "compact"})
        log = dd.open_log(topic, 0)
        n = log.log_end_offset
        log.append_records([b"connector-x"], [b"{}"])
        assert log.log_end_offset == n + 1
    dd.close()
    counts = Counter()
    dd = DataDir(root, writable=True)
    for topic in dd.topics():
        counts[topic] = sum(1 for _ in dd.open_log(topic, 0).records())
    dd.close()
    assert counts == {"docker-connect-configs": 55, "docker-connect-status": 136}
