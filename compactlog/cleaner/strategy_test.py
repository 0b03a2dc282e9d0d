"""The compaction strategies (KIP-280) in isolation: the header rule, the comparison, the version
map, the read side's Arrow path against the cleaner's kernel, and the configs' validation."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from compactlog.cleaner.offset_map import VersionMap
from compactlog.cleaner.strategy import NO_VERSION, CompactionStrategy, rank
from compactlog.errors import ConfigError
from compactlog.record.batch import BatchSpec, encode_batch, iter_batches
from compactlog.storage.config import BrokerConfig, LogConfig

HEADER = CompactionStrategy("header", "v")
LONG = struct.Struct(">q")


def _records(headers_per_record):
    data = encode_batch(BatchSpec(base_offset=0), [(i, 1000 + i, b"k", b"x", h)
                                                   for i, h in enumerate(headers_per_record)])
    batch = next(iter_batches(data))
    return batch, batch.columns()


CASES = [
    ([], (NO_VERSION, 0)),                                         # no header at all
    ([("other", LONG.pack(9))], (NO_VERSION, 0)),                 # another header only
    ([("v", LONG.pack(7))], (7, 1)),
    ([("v", LONG.pack(-3))], (-3, 1)),                            # signed
    ([("v", LONG.pack(1)), ("x", b"y"), ("v", LONG.pack(5))], (5, 1)),   # the last occurrence
    ([("v", LONG.pack(5)), ("v", LONG.pack(1))], (1, 1)),         # the last, even when lower
    ([("v", LONG.pack(5)), ("v", b"abc")], (NO_VERSION, 0)),      # the last is not 8 bytes: none
    ([("v", LONG.pack(5)), ("v", None)], (NO_VERSION, 0)),        # a null value: none
    ([("v", b"")], (NO_VERSION, 0)),
    ([("vv", LONG.pack(5))], (NO_VERSION, 0)),                    # names match exactly
    ([("v", LONG.pack(-(1 << 63)))], (-(1 << 63), 1)),            # Long.MIN_VALUE is a version
]


def test_the_header_rule_in_the_kernel_and_in_arrow():
    batch, cols = _records([h for h, _ in CASES])
    ver, has = HEADER.column_versions(cols, batch.record_timestamps())
    expected = [e for _, e in CASES]
    assert list(zip(ver.tolist(), has.tolist())) == expected
    from compactlog.storage.column_chunk import headers_array
    from compactlog.record.batch import as_u8
    src = as_u8(cols.data)
    arrow = pa.RecordBatch.from_arrays(
        [headers_array(src, src, np.zeros(len(CASES), np.int8), cols.val_pos, cols.val_len, cols.hdr_count)],
        names=["headers"])
    aver, ahas = HEADER.arrow_versions(arrow)
    assert list(zip(aver.tolist(), ahas.tolist())) == expected
    # a slice of the rows reads the same (the reader's Arrow batches are often slices)
    sver, shas = HEADER.arrow_versions(arrow.slice(4, 5))
    assert list(zip(sver.tolist(), shas.tolist())) == expected[4:9]


def _winner(strategy, rows):
    """rows: (offset, version, has); the winner's offset by latest_rows (one key)."""
    offsets = np.array([r[0] for r in rows], dtype=np.int64)
    ver = np.array([r[1] for r in rows], dtype=np.int64)
    has = np.array([r[2] for r in rows], dtype=np.int8)
    return int(offsets[strategy.latest_rows(np.zeros(len(rows), np.int64), offsets, ver, has)[0]])


def test_the_comparison_as_kip_280_words_it():
    ts = CompactionStrategy("timestamp")
    assert _winner(ts, [(0, 50, 1), (1, 40, 1)]) == 0               # the highest timestamp
    assert _winner(ts, [(0, 50, 1), (1, 50, 1)]) == 1               # a tie: the later offset
    assert _winner(HEADER, [(0, 9, 1), (1, NO_VERSION, 0)]) == 0    # only one has it: that one
    assert _winner(HEADER, [(0, NO_VERSION, 0), (1, -5, 1)]) == 1
    assert _winner(HEADER, [(0, NO_VERSION, 0), (1, NO_VERSION, 0)]) == 1   # neither: the later
    assert _winner(HEADER, [(0, -(1 << 63), 1), (1, NO_VERSION, 0)]) == 0   # MIN_VALUE beats none
    assert _winner(CompactionStrategy(), [(0, 9, 1), (1, 0, 0)]) == 1       # offset: the last


def test_the_version_map_keeps_each_keys_winner():
    m = VersionMap(100, 4)
    h1 = np.array([1, 2, 1, 3], dtype=np.uint64)
    h2 = np.array([7, 8, 7, 9], dtype=np.uint64)
    m.put(h1, h2, np.array([100, 101, 102, 103]), np.array([5, 1, 4, NO_VERSION]), np.array([1, 1, 1, 0], np.int8))
    assert m.get(h1, h2).tolist() == [100, 101, 100, 103]
    # the clean section updates known keys only; a record without a version never beats one with
    m.update(np.array([1, 2, 4], np.uint64), np.array([7, 8, 1], np.uint64), np.array([100, 100, 100]),
             np.array([6, NO_VERSION, 9]), np.array([1, 0, 1], np.int8))
    assert m.get(np.array([1, 2, 4], np.uint64), np.array([7, 8, 1], np.uint64)).tolist() == [100, 101, -1]
    assert sorted(m.offsets().tolist()) == [100, 101, 103] and len(m) == 3
    # growing keeps every slot (several doublings)
    n = 5000
    hs = np.arange(10, 10 + n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    m.put(hs, hs, np.arange(200, 200 + n), np.zeros(n, np.int64), np.ones(n, np.int8))
    assert m.get(hs, hs).tolist() == list(range(200, 200 + n)) and m.bytes_used == m.t1.shape[0] * 24


def test_rank_orders_has_before_offset():
    assert rank(np.array([5, 3]), np.array([0, 1])).tolist() == [5, (1 << 62) | 3]


@pytest.mark.parametrize("configs, message", [
    ({"compaction.strategy": "version"}, "value must be one of offset, timestamp, header"),
    ({"compaction.strategy": "Timestamp"}, "did you mean timestamp?"),
    ({"compaction.strategy": "header"}, "compaction.strategy=header needs the name of the header"),
])
def test_topic_configs_are_checked(configs, message):
    with pytest.raises(ConfigError, match=message):
        LogConfig(configs)


def test_the_broker_defaults_are_synonyms_and_checked():
    broker = BrokerConfig({"log.cleaner.compaction.strategy": "header",
                           "log.cleaner.compaction.strategy.header": "seq"})
    cfg = LogConfig({}, broker)
    assert CompactionStrategy.of(cfg) == CompactionStrategy("header", "seq")
    assert CompactionStrategy.of(LogConfig({"compaction.strategy": "timestamp"}, broker)).name == "timestamp"
    assert CompactionStrategy.of(LogConfig({})) == CompactionStrategy()
    with pytest.raises(ConfigError, match="log.cleaner.compaction.strategy=header needs"):
        BrokerConfig({"log.cleaner.compaction.strategy": "header"}).validate()
    with pytest.raises(ConfigError, match="log.cleaner.compaction.strategy"):
        BrokerConfig({"log.cleaner.compaction.strategy": "newest"}).validate()
