"""CleanerManager: the cleaning states, the filthiest-first grab, uncleanable partitions, and a
clean in progress meeting retention, DeleteRecords and topic deletion (aborted, never failed)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.manager import (ABORTED, IN_PROGRESS, CleanerManager, CleaningStateError,
                                        Paused)
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def dd(tmp_path):
    d = DataDir(str(tmp_path / "d"), broker=BrokerConfig({"log.cleaner.backoff.ms": "15000"}),
                create=True, writable=True, clock=lambda: T0)
    yield d
    if d.lock is not None:
        d.close()


def fill(log, n, keys=3):
    for i in range(n):
        log.append_records([b"k%d" % (i % keys)], [b"v%d" % i + b"." * 40])


def make_topic(dd, topic, n=40, keys=3, configs=COMPACT):
    dd.create_topic(topic, 1, configs)
    log = dd.open_log(topic, 0)
    fill(log, n, keys)
    return log


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- states
def test_pause_when_idle_and_resume_as_many_times(dd):
    m = CleanerManager.for_datadir(dd)
    m.abort_and_pause_cleaning("t", 0)
    m.abort_and_pause_cleaning("t", 0)
    assert m.cleaning_state("t", 0) == Paused(2)
    m.resume_cleaning("t", 0)
    assert m.cleaning_state("t", 0) == Paused(1)
    m.resume_cleaning("t", 0)
    assert m.cleaning_state("t", 0) is None
    with pytest.raises(CleaningStateError, match="cannot be resumed"):
        m.resume_cleaning("t", 0)
    with pytest.raises(CleaningStateError, match="cannot be done"):
        m.done_cleaning("t", 0)


def test_one_manager_per_data_dir_registered_with_it(dd):
    m = CleanerManager.for_datadir(dd)
    assert CleanerManager.for_datadir(dd) is m and dd.cleaner is m
    assert Cleaner(dd).manager is m


def test_abort_waits_for_the_clean_in_progress_then_pauses(dd):
    make_topic(dd, "t")
    m = CleanerManager.for_datadir(dd)
    grabbed = m.grab_filthiest_compacted_log(T0)
    assert grabbed.key == ("t", 0) and m.cleaning_state("t", 0) == IN_PROGRESS
    done = []
    waiters = [threading.Thread(target=lambda: (m.abort_and_pause_cleaning("t", 0), done.append(1)))
               for _ in range(2)]
    for w in waiters:
        w.start()
    wait_for(lambda: m.cleaning_state("t", 0) == ABORTED)
    time.sleep(0.2)
    assert not done and m.cleaning_aborted("t", 0)          # both wait for the clean to stop
    m.done_cleaning("t", 0)
    for w in waiters:
        w.join(10)
    assert done == [1, 1] and m.cleaning_state("t", 0) == Paused(2)
    assert m.grab_filthiest_compacted_log(T0) is None       # paused: not cleaned
    m.resume_cleaning("t", 0)
    m.resume_cleaning("t", 0)
    assert m.grab_filthiest_compacted_log(T0).key == ("t", 0)


# -- choosing
def test_grab_takes_the_filthiest_first_and_skips_those_taken(dd):
    half_clean = make_topic(dd, "half-clean", n=60)
    make_topic(dd, "all-dirty", n=60)
    m = CleanerManager.for_datadir(dd)
    m.update_checkpoints({("half-clean", 0): half_clean.segment_bases()[3]})
    first, second = m.grab_filthiest_compacted_log(T0), m.grab_filthiest_compacted_log(T0)
    assert first.key == ("all-dirty", 0) and second.key == ("half-clean", 0)
    assert first.status.dirty_ratio > second.status.dirty_ratio
    assert m.grab_filthiest_compacted_log(T0) is None
    m.done_cleaning(*first.key)
    m.done_cleaning(*second.key)
    assert [g.key for g in m.grab_filthiest_compacted_logs(T0, None)] == [("all-dirty", 0), ("half-clean", 0)]


def test_grab_honours_the_dirty_ratio_and_the_policy(dd):
    make_topic(dd, "clean-enough", configs={**COMPACT, "min.cleanable.dirty.ratio": "1.0"})
    make_topic(dd, "deleted-by-time", configs={"segment.bytes": "600"})
    assert CleanerManager.for_datadir(dd).grab_filthiest_compacted_logs(T0, None) == []


def test_a_failed_clean_backs_off_then_is_retried(dd):
    make_topic(dd, "t")
    m = CleanerManager.for_datadir(dd)

    class Failing(InProcessExecutor):
        def run(self, plans):
            from compactlog.cleaner.executor import TaskFailure
            return [TaskFailure(p.topic, p.partition, "boom", "Test") for p in plans]

    outs = Cleaner(dd, Failing()).clean_filthiest(T0)
    assert [o.error for o in outs] == ["boom"]
    u = m.uncleanable_partitions()[("t", 0)]
    assert (u.reason, u.retry_at_ms) == ("boom", T0 + 15000)
    assert m.cleaning_state("t", 0) is None
    assert Cleaner(dd).clean_filthiest(T0 + 14999) == []            # backing off
    assert [o.cleaned for o in Cleaner(dd).clean_filthiest(T0 + 15000)] == [True]
    assert m.uncleanable_partitions() == {}


def test_an_out_of_range_checkpoint_is_reset_when_looked_at(dd):
    log = make_topic(dd, "t", configs={**COMPACT, "min.cleanable.dirty.ratio": "1.0"})
    m = CleanerManager.for_datadir(dd)
    m.update_checkpoints({("t", 0): log.log_end_offset + 100})
    assert m.grab_filthiest_compacted_log(T0) is None
    assert m.all_cleaner_checkpoints() == {("t", 0): 0}


# -- a clean in progress meets a change of its log
class Gate(InProcessExecutor):
    """Holds the clean in its task phase until released."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def run(self, plans):
        self.entered.set()
        assert self.release.wait(30)
        return super().run(plans)


def clean_meets(dd, change):
    """Start a clean, run ``change`` in another thread while the clean is in its task, and check
    that the change waited for the clean to stop; the clean's outcomes."""
    m = CleanerManager.for_datadir(dd)
    gate = Gate()
    outcomes, changed = [], threading.Event()
    cleaner = threading.Thread(target=lambda: outcomes.extend(Cleaner(dd, gate).clean_filthiest(T0)))
    cleaner.start()
    assert gate.entered.wait(30)
    changer = threading.Thread(target=lambda: (change(), changed.set()))
    changer.start()
    wait_for(lambda: m.cleaning_state("c", 0) == ABORTED)
    time.sleep(0.1)
    assert not changed.is_set(), "the change must wait for the clean to stop"
    gate.release.set()
    cleaner.join(30)
    changer.join(30)
    assert changed.is_set()
    assert [(o.aborted, o.cleaned, o.error) for o in outcomes] == [(True, False, None)]
    assert m.uncleanable_partitions() == {} and m.cleaning_state("c", 0) is None
    return outcomes


def test_retention_waits_for_a_clean_in_progress_which_stops_without_error(dd):
    log = make_topic(dd, "c", n=60)
    bases = log.segment_bases()
    log.delete_records_before(bases[2])           # retention now has two segments to delete
    assert log.has_segments_to_delete()
    deleted = []
    clean_meets(dd, lambda: deleted.append(dd.delete_old_segments(log)))
    assert deleted == [2] and log.segment_bases() == bases[2:]
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    assert [o.cleaned for o in Cleaner(dd).clean_filthiest(T0)] == [True]      # cleaned again


def test_delete_records_waits_for_a_clean_in_progress(dd):
    log = make_topic(dd, "c", n=60)
    clean_meets(dd, lambda: dd.delete_records("c", 0, 30))
    assert log.log_start_offset == 30
    assert [o.cleaned for o in Cleaner(dd).clean_filthiest(T0)] == [True]


def test_topic_deletion_waits_for_a_clean_in_progress(dd):
    make_topic(dd, "c", n=60)
    CleanerManager.for_datadir(dd).mark_uncleanable("c", 0, "an earlier failure", T0 - 20000)
    clean_meets(dd, lambda: dd.delete_topic("c"))
    assert not dd.has_topic("c") and dd.cleaner_checkpoint.read() == {}
    assert Cleaner(dd).clean_filthiest(T0) == []


def test_retention_with_nothing_to_delete_does_not_pause(dd):
    log = make_topic(dd, "c")
    m = CleanerManager.for_datadir(dd)
    grabbed = m.grab_filthiest_compacted_log(T0)
    assert dd.delete_old_segments(log) == 0                # returns at once: nothing to delete
    assert m.cleaning_state("c", 0) == IN_PROGRESS
    m.done_cleaning(*grabbed.key)
