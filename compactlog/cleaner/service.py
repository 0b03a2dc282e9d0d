"""The long-running cleaner (``compactlog cleaner run``): Kafka's LogCleaner threads and retention task.

Each iteration is one cleaner run at the wall clock on a warm executor (the Spark session stays up);
a partition whose cleaning fails is reported and skipped until ``log.cleaner.backoff.ms`` has passed,
while the others go on. Retention (``delete_old_segments``) runs every
``log.retention.check.interval.ms`` on every log.
"""

from __future__ import annotations

import sys
import threading
import time

from .cleaner import Cleaner
from .log_format import CleanerLog


class CleanerService:
    """Runs on a data dir opened for writing (it holds the lock for its whole life)."""

    def __init__(self, datadir, executor, clock=lambda: int(time.time() * 1000)):
        self.datadir = datadir
        self.executor = executor
        self.clock = clock
        self.uncleanable: dict[tuple[str, int], int] = {}   # partition -> retry time
        self.last_retention_ms = 0

    def run(self, stop: threading.Event, iterations: int = 0) -> None:
        done = 0
        log = CleanerLog(self.datadir.path)
        log.info(f"Starting the log cleaner ({getattr(self.executor, 'name', 'executor')})")
        while not stop.is_set():
            cleaned = self.run_once(log)
            done += 1
            if iterations and done >= iterations:
                break
            if not cleaned:
                stop.wait(self.datadir.broker.get("log.cleaner.backoff.ms") / 1000.0)
        log.info("Shutting down the log cleaner")

    def run_once(self, log: CleanerLog) -> bool:
        now = self.clock()
        dd = self.datadir
        broker = dd.broker
        backoff = broker.get("log.cleaner.backoff.ms")
        exclude = {tp for tp, retry in self.uncleanable.items() if retry > now}
        outcomes = Cleaner(dd, self.executor).run(now, exclude=exclude)
        for o in outcomes:
            key = (o.topic, o.partition)
            if o.error:
                self.uncleanable[key] = now + backoff
                log.error(o)
            elif o.cleaned:
                self.uncleanable.pop(key, None)
                log.cleaned(o)
        if now - self.last_retention_ms >= broker.get("log.retention.check.interval.ms"):
            self.last_retention_ms = now
            for t, p in dd.all_partitions():
                if (t, p) in exclude:
                    continue
                dd.open_log(t, p).delete_old_segments()
        for event in dd.drain_data_events():
            log.info(str(event))
            print(f"{'warning' if event.sets_data_aside else 'note'}: {event}", file=sys.stderr)
        dd.checkpoint_logs()
        return any(o.cleaned for o in outcomes)
