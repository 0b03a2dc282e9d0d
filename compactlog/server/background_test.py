"""The broker's background work in-process: the scheduler's retention, expiration and event
report, and a cleaner thread taking the filthiest partition and backing off a failing one."""

from __future__ import annotations

import logging
import time

import pytest

from compactlog.cleaner.executor import InProcessExecutor, TaskFailure
from compactlog.server.background import Background
from compactlog.server.state import BrokerState, Listener
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir


def make_state(tmp_path, props=None):
    dd = DataDir(str(tmp_path), broker=BrokerConfig(props or {}), writable=True, command="test")
    return BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))


def fill(log, n, key_space=3, ts=None):
    for i in range(n):
        log.append_records([b"k%d" % (i % key_space)], [b"v%d" % i + b"." * 50],
                           timestamps=None if ts is None else [ts])


def test_scheduler_runs_retention_and_reports_it(tmp_path, caplog):
    st = make_state(tmp_path, {"log.retention.check.interval.ms": "1000"})
    st.datadir.create_topic("old", 1, {"segment.bytes": "300", "retention.ms": "1000"})
    log = st.log("old", 0)
    fill(log, 20, ts=int(time.time() * 1000) - 3_600_000)
    before = len(log.segments)
    now = [int(time.time() * 1000)]
    bg = Background(st, InProcessExecutor(), clock=lambda: now[0])
    next_run = {}
    with caplog.at_level(logging.INFO, logger="kafka"):
        bg.run_scheduled_once(next_run)            # schedules; retention is due in 1 s
        assert len(log.segments) == before
        now[0] += 1500
        bg.run_scheduled_once(next_run)
    assert len(log.segments) < before and log.log_start_offset > 0
    assert any("deleted by retention" in r.getMessage() for r in caplog.records)
    st.datadir.close()


def test_cleaner_threads_clean_the_filthiest_and_back_off_failures(tmp_path):
    st = make_state(tmp_path, {"log.cleaner.backoff.ms": "50"})
    for t in ("a", "b"):
        st.datadir.create_topic(t, 1, {"cleanup.policy": "compact", "segment.bytes": "400",
                                       "min.cleanable.dirty.ratio": "0.01"})
    fill(st.log("a", 0), 40)
    fill(st.log("b", 0), 40)

    class FailingForB(InProcessExecutor):
        calls = []

        def run(self, plans):
            self.calls.append([p.topic for p in plans])
            ok = [p for p in plans if p.topic != "b"]
            return super().run(ok) + [TaskFailure(p.topic, p.partition, "boom", "Test")
                                      for p in plans if p.topic == "b"]

    bg = Background(st, FailingForB())
    bg.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (bg.manager.cleaning_state("a", 0) is None
                                                   and st.datadir.cleaner_checkpoint.read().get(("a", 0))
                                                   and ("b", 0) in bg.manager.uncleanable_partitions()):
            time.sleep(0.05)
    finally:
        bg.stop(30)
    assert st.datadir.cleaner_checkpoint.read().get(("a", 0))
    assert ("b", 0) in bg.manager.uncleanable_partitions()
    assert st.log("a", 0).size() < st.log("b", 0).size() / 2
    st.datadir.close()


def test_the_broker_uses_the_one_executor_factory_and_names_a_fixed_engine_alone(tmp_path):
    from compactlog.cleaner.engines import make_executor
    st = make_state(tmp_path)
    bg = Background(st, make_executor("local"))
    assert bg.executor.last_choice == "in-process"        # the "Cleaned log ... (in-process)" line
    assert bg.cleaner.manager is bg.manager is st.datadir.cleaner
    st.datadir.close()


def test_retention_skips_the_log_being_cleaned_and_deletes_after(tmp_path):
    """Kafka's rule (LogCleanerManager.deletableLogs): retention leaves a log the cleaner is
    working on alone (the clean is neither failed nor aborted) and deletes from it at its next
    run. Before the log manager, the broker's retention aborted the clean and waited for it."""
    import threading
    st = make_state(tmp_path, {"log.cleaner.backoff.ms": "50"})
    st.datadir.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "400",
                                     "min.cleanable.dirty.ratio": "0.01"})
    log = st.log("c", 0)
    fill(log, 40)
    log.delete_records_before(log.segment_bases()[2])

    class Gate(InProcessExecutor):
        entered, release, rounds = threading.Event(), threading.Event(), []

        def run(self, plans):
            self.entered.set()
            self.release.wait(30)
            out = super().run(plans)
            self.rounds.append(out)
            return out

    bg = Background(st, Gate())
    bg.start()
    try:
        assert Gate.entered.wait(30)
        bases = log.segment_bases()
        assert bg.log_manager.cleanup_logs(bg.clock()) == 0          # at once: the log is skipped
        assert bg.manager.cleaning_state("c", 0) == "in progress" and log.segment_bases() == bases
        Gate.release.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not st.datadir.cleaner_checkpoint.read().get(("c", 0)):
            time.sleep(0.05)
        while time.monotonic() < deadline and bg.manager.cleaning_state("c", 0) is not None:
            time.sleep(0.01)
        bg.log_manager.cleanup_logs(bg.clock())
        assert log.segment_bases()[0] >= bases[2]      # the segments below the start, deleted now
    finally:
        bg.stop(30)
    assert not any(isinstance(o, TaskFailure) for r in Gate.rounds for o in r)     # never aborted
    assert bg.manager.uncleanable_partitions() == {}
    assert st.datadir.cleaner_checkpoint.read().get(("c", 0))
    assert log.log_start_offset > 0
    st.datadir.close()


@pytest.mark.slow          # a cleaner thread over 30 topics deleted one by one: 2.6 s of CPU
def test_topics_deleted_during_the_cleaners_scan_are_skipped_quietly(tmp_path, caplog):
    """librdkafka's suite: the cleaner logged an error traceback when a topic was deleted while it
    looked at the partitions (6 times in the suite). A cleaner thread looping over 30 compacted
    topics while they are deleted one by one logs no error."""

    st = make_state(tmp_path, {"log.cleaner.backoff.ms": "1"})
    names = [f"c{i}" for i in range(30)]
    for t in names:
        st.datadir.create_topic(t, 2, {"cleanup.policy": "compact", "segment.bytes": "400",
                                       "min.cleanable.dirty.ratio": "0.01"})
        for p in (0, 1):
            fill(st.log(t, p), 30)
    bg = Background(st, InProcessExecutor())
    with caplog.at_level(logging.INFO, logger="kafka"):
        bg.start()
        try:
            for t in names:
                st.datadir.delete_topic(t)
                time.sleep(0.005)
            time.sleep(0.2)             # a few more rounds over what is left
        finally:
            bg.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING][:3]
    assert not [r for r in caplog.records if r.exc_info]
    st.datadir.close()


def test_a_full_disk_is_one_line_per_failed_task_and_an_offline_log_is_left_alone(tmp_path, caplog, monkeypatch):
    """The issue: a full disk filled the broker's log with tracebacks from the background
    checkpoint writer. Each failure is one line now, and a log taken offline is no longer
    flushed, expired or retained (each would fail again every interval)."""
    import errno
    import os

    from compactlog.storage import checkpoint as checkpoint_mod

    st = make_state(tmp_path, {"log.flush.offset.checkpoint.interval.ms": "1000"})
    st.datadir.create_topic("t", 1, {"flush.ms": "1000"})
    log = st.log("t", 0)
    fill(log, 3)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "recovery-point-offset-checkpoint.tmp")

    monkeypatch.setattr(checkpoint_mod, "atomic_write", full)
    now = [int(time.time() * 1000)]
    bg = Background(st, InProcessExecutor(), clock=lambda: now[0])
    next_run = {}
    with caplog.at_level(logging.INFO, logger="kafka"):
        for _ in range(3):
            bg.run_scheduled_once(next_run)
            now[0] += 61_000
    failures = [r for r in caplog.records if "Scheduled task checkpoint failed" in r.getMessage()]
    assert len(failures) >= 2 and all(r.exc_info is None for r in failures)
    assert "No space left on device" in failures[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    monkeypatch.undo()
    log.take_offline("test")
    lm = bg.log_manager
    assert log not in lm.maintained_logs() and log not in lm.retention_logs(now[0])
    st.datadir.close()


def test_recovery_flushes_the_logs_it_recovers_so_the_shutdown_has_not_to(tmp_path, caplog, monkeypatch):
    """After an unclean shutdown the recovery thread opens (recovers) every log not open yet and
    flushes each whose recovery point is behind its end (the recovered batches, and one appended
    to a log its first user opened meanwhile), many at a time: the clean close that follows
    fsyncs nothing for them. A topic deleted meanwhile is skipped."""
    import os

    st = make_state(tmp_path)
    st.datadir.create_topic("t", 30)
    for p in range(30):
        fill(st.log("t", p), 3)
    st.datadir.abandon()                    # kill -9: nothing flushed, no marker
    st = make_state(tmp_path)
    assert not st.datadir.had_clean_shutdown()
    fill(st.log("t", 4), 2)                 # opened (recovered) by its first user, then appended to
    monkeypatch.setattr("compactlog.storage.log_manager.RECOVERY_FLUSH_BATCH", 8)
    bg = Background(st, InProcessExecutor())
    with caplog.at_level(logging.INFO, logger="kafka"):
        bg._recovery()
    assert any("Recovered 30 log(s) after an unclean shutdown" in r.getMessage() for r in caplog.records)
    logs = [st.datadir.logs[("t", p)] for p in range(30)]
    assert [log.recovery_point for log in logs] == [5 if p == 4 else 3 for p in range(30)]
    assert [log.log_end_offset for log in logs] == [5 if p == 4 else 3 for p in range(30)]
    fsyncs = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    st.datadir.close()
    assert not [f for f in fsyncs if f.endswith(".log")]
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")
