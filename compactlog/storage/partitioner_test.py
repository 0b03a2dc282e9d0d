"""Kafka's built-in partitioner: murmur2 for keys (the vectorised pass against the scalar one) and
the sticky partition of keyless records (the array entry point against record-by-record calls)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from compactlog.storage.partitioner import (STICKY_BATCH_BYTES, StickyPartitioner, murmur2, partition_for_key,
                                            partitions_for_keys)


def test_murmur2_is_kafkas_and_the_numba_pass_agrees():
    # values from Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    keys = [b"", b"a", b"ab", b"abc", b"abcd", "é".encode(), None, bytes(range(200))]
    got = partitions_for_keys(pa.array(keys, pa.binary()), 7).tolist()
    assert got == [-1 if k is None else partition_for_key(k, 7) for k in keys]


def test_keyless_records_switch_once_batch_size_bytes_went_to_a_partition():
    class Draws(random.Random):          # the partitions drawn, in order: the first, then one per switch
        def __init__(self, draws):
            super().__init__(0)
            self.draws = iter(draws)

        def randrange(self, n):
            return next(self.draws)

    s = StickyPartitioner(rng=Draws([2, 2, 0]))
    parts = [s.partition("t", None, 4, 1000) for _ in range(50)]
    # 17 records reach 16 KiB (16 * 1000 < 16384 <= 17 * 1000): the 18th draws again and the count
    # restarts; like Kafka's nextPartition the draw may give the same partition (a new span there)
    assert parts == [2] * 34 + [0] * 16
    # one partition: never anywhere else
    one = StickyPartitioner(rng=random.Random(2))
    assert {one.partition("u", None, 1, 5000) for _ in range(20)} == {0}
    # keyed records are murmur2's and leave the sticky state alone
    assert s.partition("t", b"k", 4) == partition_for_key(b"k", 4)


def test_a_record_larger_than_batch_size_is_alone_on_its_partition():
    s = StickyPartitioner(rng=random.Random(3))
    parts = s.assign("t", 3, [10, STICKY_BATCH_BYTES * 3, 10, 10])
    assert parts[0] == parts[1] and parts[2] == parts[3]
    assert s._sticky["t"] == (parts[3], 20)      # the big record ended its span: a new one began after it


def test_the_array_entry_point_places_records_as_one_call_per_record():
    rng = np.random.default_rng(5)
    for count in (1, 2, 5):
        a, b = StickyPartitioner(rng=random.Random(count)), StickyPartitioner(rng=random.Random(count))
        got, want = [], []
        for _ in range(6):               # consecutive calls continue the same span
            sizes = rng.integers(0, 3000, int(rng.integers(0, 60)))
            got += a.assign("t", count, sizes).tolist()
            want += [b.partition("t", None, count, int(x)) for x in sizes]
        assert got == want and all(0 <= p < count for p in got)
    # a partition count that shrinks below the sticky partition starts afresh
    s = StickyPartitioner(rng=random.Random(9))
    while s.assign("t", 8, [100])[0] < 2:
        s = StickyPartitioner(rng=random.Random(s.rng.random()))
    assert all(p < 2 for p in s.assign("t", 2, [100] * 5))
