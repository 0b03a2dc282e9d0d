"""The long-running cleaner (``compactlog cleaner run``): Kafka's LogCleaner threads and retention task.

A thin loop over the data dir's ``CleanerManager``: each iteration, at the wall clock on a warm
executor (the Spark session stays up), grabs every eligible partition and cleans them in one
round, in partition order (``Cleaner.clean_filthiest``); a partition whose cleaning fails is
reported and skipped until ``log.cleaner.backoff.ms`` has passed, while the others go on.
Retention runs every ``log.retention.check.interval.ms`` through the data dir's log manager
(storage/log_manager.py), with the broker's rule; the recovery points and log starts are
checkpointed after every round.
"""

from __future__ import annotations

import sys
import threading
import time

from .cleaner import Cleaner
from .log_format import CleanerLog
from ..storage.log_manager import LogManager
from .manager import CleanerManager


class CleanerService:
    """Runs on a data dir opened for writing (it holds the lock for its whole life)."""

    def __init__(self, datadir, executor, clock=lambda: int(time.time() * 1000), log_dir: str | None = None):
        self.datadir = datadir
        self.run_log = CleanerLog.for_datadir(datadir, log_dir)
        self.executor = executor
        self.clock = clock
        self.manager = CleanerManager.for_datadir(datadir)
        self.cleaner = Cleaner(datadir, executor, self.manager)
        self.log_manager = LogManager(datadir)
        self.last_retention_ms = 0
        # told of each round's outcomes (``cleaner run``'s progress display and summary)
        self.on_outcomes = None
        # called after each round, on the loop's thread (``cleaner run`` puts its ^C handler back:
        # a SparkContext made during a round installs its own)
        self.between_rounds = None

    def run(self, stop: threading.Event, iterations: int = 0) -> None:
        done = 0
        log = self.run_log
        log.info(f"Starting the log cleaner ({getattr(self.executor, 'name', 'executor')})")
        while not stop.is_set():
            cleaned = self.run_once(log)
            done += 1
            if self.between_rounds is not None:
                self.between_rounds()
            if iterations and done >= iterations:
                break
            if not cleaned:
                self._wait(stop, self.datadir.broker.get("log.cleaner.backoff.ms") / 1000.0)
        log.info("Shutting down the log cleaner")

    @staticmethod
    def _wait(stop: threading.Event, seconds: float) -> None:
        """``stop.wait(seconds)`` in slices of a second: a signal the kernel hands to another
        thread (numba's, a JVM gateway's) only runs its Python handler when the main thread next
        runs bytecode, which a single long wait would put off for the whole backoff."""
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            stop.wait(min(left, 1.0))

    def run_once(self, log: CleanerLog) -> bool:
        now = self.clock()
        dd = self.datadir
        outcomes = self.cleaner.clean_filthiest(now, limit=None)
        for o in outcomes:
            if o.error:
                log.error(o)
            elif o.cleaned:
                log.cleaned(o)
        if self.on_outcomes is not None:
            self.on_outcomes(outcomes)
        if now - self.last_retention_ms >= dd.broker.get("log.retention.check.interval.ms"):
            self.last_retention_ms = now
            self.log_manager.cleanup_logs(now)
        for event in dd.drain_data_events():
            log.info(str(event))
            print(f"{'warning' if event.sets_data_aside else 'note'}: {event}", file=sys.stderr)
        self.log_manager.checkpoint_logs()
        return any(o.cleaned for o in outcomes)
