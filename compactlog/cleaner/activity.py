"""What the cleaner threads are doing and what they last did, for the status page.

Kafka's ``LogCleaner.CleanerThread`` keeps its last round's ``CleanerStats`` and
``PreCleanStats`` (``lastStats``, ``lastPreCleanStats``) for the metrics to read; Kafka logs each
clean and forgets it. Here the data dir's ``CleanerManager`` holds one ``CleanerActivity``: each
cleaner thread's current state (idle, or cleaning which partitions since when) and a small ring
buffer of the last cleanings (when, which partition, how it ended, records removed, engine,
duration), filled by ``Cleaner.clean_filthiest`` as each round ends. Reading it costs a copy under
a lock: no file is looked at.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

RECENT_CLEANINGS = 32

CLEANED = "cleaned"
FAILED = "failed"
ABORTED = "aborted"


@dataclass(frozen=True)
class Cleaning:
    """One partition's clean, as it ended."""
    topic: str
    partition: int
    started_ms: int
    ended_ms: int
    result: str                     # CLEANED, FAILED or ABORTED
    engine: str                     # "in-process" or "spark" (the executor's choice for the round)
    duration_s: float
    thread: str
    first_dirty: int | None = None
    end_offset: int | None = None
    records_read: int = 0
    records_removed: int = 0
    removed: dict = field(default_factory=dict)    # reason -> records
    bytes_before: int = 0
    bytes_after: int = 0
    error: str | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "startedMs": self.started_ms,
                "endedMs": self.ended_ms, "result": self.result, "engine": self.engine,
                "durationSeconds": round(self.duration_s, 6), "thread": self.thread,
                "firstDirtyOffset": self.first_dirty, "endOffset": self.end_offset,
                "recordsRead": self.records_read, "recordsRemoved": self.records_removed,
                "removed": dict(self.removed), "bytesBefore": self.bytes_before,
                "bytesAfter": self.bytes_after, "error": self.error}


@dataclass(frozen=True)
class ThreadState:
    """A cleaner thread: cleaning ``partitions`` since ``since_ms``, or idle (none)."""
    name: str
    partitions: tuple = ()
    since_ms: int | None = None
    cleanings: int = 0              # partitions it has finished cleaning (any result)
    last_ended_ms: int | None = None


def engine_of(executor) -> str:
    """The engine the executor's last round ran on: its choice, else its name. Wrappers (the
    broker's stop-aware one) are looked through."""
    seen = 0
    while executor is not None and seen < 5:
        choice = getattr(executor, "choice", None)
        if choice is not None:
            return choice.engine
        inner = executor.__dict__.get("inner") if hasattr(executor, "__dict__") else None
        if inner is None:
            break
        executor, seen = inner, seen + 1
    return getattr(executor, "name", "executor")


def cleaning_of(outcome, *, started_ms: int, duration_s: float, engine: str, thread: str) -> Cleaning | None:
    """The record of one partition's outcome (a ``cleaner.cleaner.PartitionOutcome``); None for a
    partition that was chosen but turned out to have nothing to clean."""
    if outcome.cleaned:
        result = CLEANED
    elif outcome.error:
        result = FAILED
    elif outcome.aborted:
        result = ABORTED
    else:
        return None
    s = outcome.stats
    elapsed = s.elapsed_seconds if s is not None and s.elapsed_seconds > 0 else duration_s
    return Cleaning(outcome.topic, outcome.partition, started_ms, started_ms + int(duration_s * 1000), result,
                    engine, elapsed, thread,
                    first_dirty=outcome.status.first_dirty if outcome.status else None,
                    end_offset=outcome.end_offset,
                    records_read=s.messages_read if s else 0,
                    records_removed=max(s.messages_read - s.messages_written, 0) if s else 0,
                    removed=dict(s.removed) if s else {},
                    bytes_before=outcome.start_size, bytes_after=outcome.end_size, error=outcome.error)


class CleanerActivity:
    """Thread states and the ring buffer of recent cleanings; safe from any thread."""

    def __init__(self, capacity: int = RECENT_CLEANINGS):
        self._lock = threading.Lock()
        self._recent: deque[Cleaning] = deque(maxlen=capacity)
        self._threads: dict[str, ThreadState] = {}

    def register_thread(self, name: str) -> None:
        """A cleaner thread (re)started: shown idle until it grabs a partition."""
        with self._lock:
            old = self._threads.get(name)
            self._threads[name] = ThreadState(name, cleanings=old.cleanings if old else 0,
                                              last_ended_ms=old.last_ended_ms if old else None)

    def started(self, thread: str, partitions, now_ms: int) -> None:
        with self._lock:
            old = self._threads.get(thread) or ThreadState(thread)
            self._threads[thread] = ThreadState(thread, tuple(partitions), now_ms, old.cleanings,
                                                old.last_ended_ms)

    def ended(self, thread: str, cleanings: list[Cleaning], now_ms: int) -> None:
        with self._lock:
            self._recent.extend(cleanings)
            old = self._threads.get(thread) or ThreadState(thread)
            self._threads[thread] = ThreadState(thread, (), None, old.cleanings + len(cleanings),
                                                now_ms if cleanings else old.last_ended_ms)

    def recent(self) -> list[Cleaning]:
        """The last cleanings, newest first."""
        with self._lock:
            return list(reversed(self._recent))

    def threads(self) -> list[ThreadState]:
        with self._lock:
            return [self._threads[n] for n in sorted(self._threads)]
