"""What to clean: Kafka's LogCleanerManager decisions (plan.py) on real logs."""

from __future__ import annotations

import pytest

from compactlog.cleaner.plan import non_active_segments_from, partition_status, select_logs
from compactlog.storage.config import LogConfig
from compactlog.storage.log import Log

T0 = 1_700_000_000_000


@pytest.fixture
def make_log(tmp_path):
    opened = []

    def make(n: int, *, log_start_offset: int = 0) -> Log:
        cfg = LogConfig({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        path = tmp_path / "t-0"
        path.mkdir(exist_ok=True)
        log = Log(str(path), cfg, clock=lambda: T0)
        log.append_records([b"k%d" % i for i in range(n)], [b"v"] * n)
        if log_start_offset:
            log.close()
            log = Log(str(path), cfg, clock=lambda: T0, log_start_offset=log_start_offset,
                      had_clean_shutdown=True)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def test_dirty_offset_larger_than_active_segment_base_offset(make_log):
    # Kafka's LogCleanerManagerTest.testDirtyOffsetLargerThanActiveSegmentBaseOffset: one segment
    # (the active one, base 0) of 6 records and a cleaner checkpoint at 3: no log is selected
    log = make_log(6)
    assert log.active_segment.base_offset == 0 and log.log_end_offset == 6
    assert non_active_segments_from(log, 3) == []
    st = partition_status(log, 3, T0)
    assert not st.eligible and st.cleanable_bytes == 0 and select_logs([st]) == []
    assert (st.first_dirty, st.first_uncleanable) == (3, 3)
    assert st.reason == ("active segment: nothing to clean: the first dirty offset 3 (the cleaner checkpoint) "
                         "lies inside the active segment, which starts at 0")


def test_log_start_offset_larger_than_active_segment_base_offset(make_log):
    # Kafka's testLogStartOffsetLargerThanActiveSegmentBaseOffset: 9 records, log start 2, checkpoint 0
    log = make_log(9, log_start_offset=2)
    assert log.log_start_offset == 2
    st = partition_status(log, 0, T0)
    assert not st.eligible and select_logs([st]) == []
    assert st.first_dirty == 2 and st.force_checkpoint_update
    assert "the first dirty offset 2 (the log start offset) lies inside the active segment" in st.reason


def test_dirty_offset_at_the_active_segment_base_is_the_usual_case(make_log):
    log = make_log(4)
    log.roll()
    log.append_records([b"a"], [b"b"])
    st = partition_status(log, 4, T0)
    assert not st.eligible and st.reason.startswith("active segment: no dirty data outside the active segment")
    st = partition_status(log, 0, T0)
    assert st.eligible and (st.first_dirty, st.first_uncleanable) == (0, 4)
