"""The one timestamp lookup: segments skipped by their largest timestamp, the log start respected,
the fetchable bound; the writer's log (through its time indexes) and the reader (scanning from the
log start) answer alike."""

from __future__ import annotations

import random

from compactlog.record.batch import Record
from compactlog.storage.conftest import T0, config
from compactlog.storage.reader import PartitionReader
from compactlog.storage.timestamp_lookup import (EARLIEST_TIMESTAMP, fetchable_answer,
                                                 find_offset_by_timestamp)


class FakeBatch:
    def __init__(self, base, stamps):
        self.base_offset, self.last_offset = base, base + len(stamps) - 1
        self.max_timestamp = max(stamps)
        self._records = [Record(base + i, ts, None, b"", ()) for i, ts in enumerate(stamps)]

    def records(self):
        return self._records


def segment(largest, *batches, scanned=None):
    def batches_from():
        if scanned is not None:
            scanned.append(largest)
        return iter(batches)
    return largest, batches_from


def test_segments_below_the_target_are_not_scanned():
    scanned = []
    segs = [segment(100, FakeBatch(0, [90, 100]), scanned=scanned),
            segment(300, FakeBatch(2, [150, 310, 200]), scanned=scanned),
            segment(None, FakeBatch(5, [400]), scanned=scanned)]
    assert find_offset_by_timestamp(segs, 160, 0) == (3, 310)
    assert scanned == [300]
    assert find_offset_by_timestamp(segs, 350, 0) == (5, 400)       # an unknown largest is scanned
    assert find_offset_by_timestamp(segs, 500, 0) is None
    assert find_offset_by_timestamp(segs, 0, 1) == (1, 100)         # never below the log start


def test_fetchable_answer():
    assert fetchable_answer((4, T0), 5) == (4, T0)
    assert fetchable_answer((5, T0), 5) is None
    assert fetchable_answer(None, 5) is None
    assert fetchable_answer((5, -1), 5, target=EARLIEST_TIMESTAMP) == (5, -1)


def test_the_log_and_the_reader_answer_alike(open_log):
    rng = random.Random(4)
    log = open_log(config(segment_bytes=600, index_interval_bytes=100))
    for i in range(120):
        stamps = [T0 + rng.randrange(0, 5000) for _ in range(rng.randrange(1, 4))]
        log.append_records([b"k%d" % j for j in range(len(stamps))], [b"v" * 30] * len(stamps),
                           timestamps=stamps)
    log.flush()
    log.log_start_offset = 17
    reader = PartitionReader(log.dir, log_start_offset=17)
    assert len(log.segments) > 3
    for target in list(range(T0 - 10, T0 + 5010, 37)):
        found = log.offset_for_timestamp(target)
        assert reader.offset_for_timestamp(target) == (None if found is None else found[0]), target
