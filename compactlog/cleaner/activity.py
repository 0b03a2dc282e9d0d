"""What the cleaner threads did and how they are: the sources of Kafka's ``LogCleaner`` gauges.

Kafka's ``LogCleaner`` computes its gauges from each ``CleanerThread``'s last completed round
(``lastStats``: recopy percent, buffer utilization, clean time; ``lastPreCleanStats``: compaction
delay) and counts the threads whose loop died (``DeadThreadCount``). ``CleanerActivity`` keeps the
same facts for the broker's cleaner threads (``server/background.py`` records into it): the last
completed round of each thread, the recent cleanings (for the status page), the threads that are
dead and waiting to be restarted, and how often they died. It is plain data under one lock and
knows nothing of Prometheus: the broker's metrics read it at scrape time, and subscribe to each
finished round for their counters and histograms (``subscribe``).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable

from .stats import CleanerStats

OK = "ok"
FAILED = "failed"
DISCARDED = "discarded"      # stopped for a change of the log: the result was thrown away

# the engine label of a round: in this process, or on Spark
LOCAL = "local"
SPARK = "spark"


def engine_label(name: str) -> str:
    """"spark" for a Spark executor's name or choice, "local" for everything in this process."""
    return SPARK if name.startswith("spark") else LOCAL


@dataclass(frozen=True)
class Cleaning:
    """One partition's cleaning as a cleaner thread finished it."""
    thread: str
    finished_ms: int
    topic: str
    partition: int
    result: str                  # OK, FAILED or DISCARDED
    engine: str                  # LOCAL or SPARK
    stats: CleanerStats | None   # of a completed round (OK) only
    start_size: int = 0          # bytes of the cleaned range before and after
    end_size: int = 0
    error: str | None = None

    @property
    def reclaimed_bytes(self) -> int:
        return max(self.start_size - self.end_size, 0) if self.result == OK else 0

    def to_dict(self) -> dict:
        d = {"thread": self.thread, "finishedMs": self.finished_ms, "topic": self.topic,
             "partition": self.partition, "result": self.result, "engine": self.engine,
             "startSize": self.start_size, "endSize": self.end_size, "error": self.error}
        if self.stats is not None:
            s = self.stats
            d.update({"messagesRead": s.messages_read, "messagesWritten": s.messages_written,
                      "bytesRead": s.bytes_read, "bytesWritten": s.bytes_written,
                      "elapsedSeconds": round(s.elapsed_seconds, 6), "removed": dict(s.removed)})
        return d


def cleaning_of(thread: str, outcome, engine: str, now_ms: int) -> Cleaning | None:
    """A ``PartitionOutcome`` as a finished cleaning; None for a partition nothing was done to."""
    if outcome.cleaned:
        result = OK
    elif outcome.aborted:
        result = DISCARDED
    elif outcome.error:
        result = FAILED
    else:
        return None
    return Cleaning(thread, now_ms, outcome.topic, outcome.partition, result, engine,
                    outcome.stats if result == OK else None, outcome.start_size, outcome.end_size,
                    outcome.error)


@dataclass
class ThreadHealth:
    """A cleaner thread's life: dead since when (None while it runs), deaths in a row, in all."""
    dead_since_ms: int | None = None
    last_error: str | None = None
    deaths_in_a_row: int = 0
    deaths: int = 0
    restart_at_ms: int | None = None


class CleanerActivity:
    def __init__(self, recent: int = 50):
        self._lock = threading.Lock()
        self._last_round: dict[str, Cleaning] = {}     # thread -> its last completed (OK) cleaning
        self._recent: deque[Cleaning] = deque(maxlen=recent)
        self._threads: dict[str, ThreadHealth] = {}
        self._subscribers: list[Callable[[Cleaning], None]] = []
        self.last_success_ms: int | None = None

    def subscribe(self, callback: Callable[[Cleaning], None]) -> None:
        """``callback(cleaning)`` for every cleaning recorded from now on, in the cleaner's thread."""
        self._subscribers.append(callback)

    # -- what the threads did
    def record(self, thread: str, outcomes, engine: str, now_ms: int) -> list[Cleaning]:
        done = [c for c in (cleaning_of(thread, o, engine, now_ms) for o in outcomes) if c is not None]
        with self._lock:
            for c in done:
                self._recent.append(c)
                if c.result == OK:
                    self._last_round[thread] = c
                    self.last_success_ms = now_ms
        for c in done:
            for callback in self._subscribers:
                callback(c)
        return done

    def last_rounds(self) -> list[Cleaning]:
        """Each thread's last completed cleaning (Kafka's ``lastStats`` per thread)."""
        with self._lock:
            return list(self._last_round.values())

    def recent(self) -> list[Cleaning]:
        """The last cleanings, oldest first."""
        with self._lock:
            return list(self._recent)

    # -- how the threads are
    def thread_started(self, thread: str) -> None:
        with self._lock:
            h = self._threads.setdefault(thread, ThreadHealth())
            h.dead_since_ms = h.restart_at_ms = None

    def thread_worked(self, thread: str) -> None:
        """A loop iteration ended normally: the next death starts the backoff from the start."""
        h = self._threads.get(thread)
        if h is not None and h.deaths_in_a_row:
            with self._lock:
                h.deaths_in_a_row = 0

    def thread_died(self, thread: str, error: str, now_ms: int,
                    restart_delay_ms: Callable[[int], int]) -> ThreadHealth:
        """The thread's loop ended by ``error``; it is restarted ``restart_delay_ms(deaths in a
        row)`` later. Its health now."""
        with self._lock:
            h = self._threads.setdefault(thread, ThreadHealth())
            h.dead_since_ms = now_ms
            h.last_error = error
            h.deaths += 1
            h.deaths_in_a_row += 1
            h.restart_at_ms = now_ms + restart_delay_ms(h.deaths_in_a_row)
            return ThreadHealth(**vars(h))

    def threads(self) -> dict[str, ThreadHealth]:
        with self._lock:
            return {name: ThreadHealth(**vars(h)) for name, h in self._threads.items()}

    def dead_threads(self) -> int:
        """Kafka's ``DeadThreadCount``: threads whose loop ended by an exception, not yet restarted."""
        with self._lock:
            return sum(1 for h in self._threads.values() if h.dead_since_ms is not None)

    def deaths(self) -> int:
        with self._lock:
            return sum(h.deaths for h in self._threads.values())
