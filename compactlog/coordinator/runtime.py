"""One coordinator runtime for the group and the transaction coordinators: Kafka's
``CoordinatorRuntime`` (coordinator-common), which the group and share coordinators both run on.

What the two coordinators share, written once:

- ``Outcome`` (Kafka's ``CoordinatorResult``: the records to append and what to do once they are
  written), ``Timer`` (``CoordinatorTimer``: keyed one-shot timers), ``CoordinatorPartitions``
  (which partition of the internal topic holds a key, and which are still loading: Kafka refuses
  requests for a loading shard with COORDINATOR_LOAD_IN_PROGRESS);
- the errors: a refusal is a typed exception carrying Kafka's code (``CoordinatorError``:
  ``GroupError``, ``TxnError``), and every failure becomes the code an API answers here, in one
  place: ``error_code_of`` (a refusal's own code, a failed append's ``kafka_error``,
  KAFKA_STORAGE_ERROR for I/O), ``answered`` (an operation's result or its refusal's code),
  ``operation_error`` (``CoordinatorOperationExceptionHelper``, the same table
  as ``TransactionStateManager.appendTransactionToLog``) and ``append_error`` (a failed append of
  group records, ``appendGroupMetadataErrorToResponseError``);
- ``CoordinatorRuntime``, the running half: one lock that serialises every operation, the
  internal topic's partition count and its creation on first use, marking its partitions loading
  and replaying them (``CoordinatorLoaderImpl``'s loop: one partition after another, a failure
  leaves only that partition unavailable), the background thread that loads and then drives the
  timers (``scheduleTimer``, ``Periodic`` for the fixed-interval tasks: offset expiry, timed-out
  transaction aborts, transactional id expiry), and stopping.

A coordinator plugs in its state machine (``group.service``, ``txn.service``) by giving the
runtime its topic, its partitions to load, ``load_partition`` and ``run_timers``. Kafka runs one
shard per partition on an event processor; on one node one shard holds every partition and one
lock orders its operations, which is what the single-threaded shards guarantee too.

``Outcome``, ``Timer`` and ``CoordinatorPartitions`` are sans-IO: nothing there reads a clock;
``CoordinatorRuntime`` is the I/O side (threads, the data dir, an injected clock).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from ..record import consumer_offsets as R
from .errors import CoordinatorError, GroupError, TxnError
from .internal_topics import partition_count

MAX_TIMER_WAIT_S = 1.0          # the timer thread wakes at least this often (a stop, a clock step)


def wall_clock() -> int:
    """Milliseconds since the epoch (the default clock; tests inject their own)."""
    return int(time.time() * 1000)


@dataclass
class Outcome:
    """What an operation asks the caller to do (Kafka's ``CoordinatorResult``)."""
    records: list = field(default_factory=list)
    on_written: Callable[[Exception | None], None] | None = None
    replay: bool = True


class Timer:
    """Keyed one-shot timers; scheduling a key again replaces it (Kafka's ``CoordinatorTimer``)."""

    def __init__(self):
        self._entries: dict = {}
        self._seq = 0

    def schedule(self, key, deadline_ms: int, fn: Callable[[], Outcome]) -> None:
        self._seq += 1
        self._entries[key] = (deadline_ms, self._seq, fn)

    def cancel(self, key) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key) -> bool:
        return key in self._entries

    def deadline(self, key) -> int | None:
        e = self._entries.get(key)
        return None if e is None else e[0]

    def next_deadline(self) -> int | None:
        return min((e[0] for e in self._entries.values()), default=None)

    def pop_due(self, now_ms: int):
        """The expired timers, earliest first, removed; one at a time so that a timer that
        cancels or replaces another one is honoured."""
        while True:
            due = [(d, s, k) for k, (d, s, _) in self._entries.items() if d <= now_ms]
            if not due:
                return
            _, _, key = min(due)
            yield key, self._entries.pop(key)[2]

    def __len__(self) -> int:
        return len(self._entries)


class CoordinatorPartitions:
    """Which ``__consumer_offsets`` partition holds each group, and which partitions are still
    being loaded: the checks every group API makes first (GroupCoordinatorService)."""

    def __init__(self, num_partitions: int):
        self.num_partitions = num_partitions
        self.loading: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        return R.partition_for(group_id, self.num_partitions)

    def is_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    def check_loaded(self, group_id: str) -> None:
        if self.is_loading(group_id):
            raise GroupError(ErrorCode.coordinator_load_in_progress,
                             f"__consumer_offsets-{self.partition_for(group_id)} is still loading")


# The one table both coordinators answer a failed append or operation with (Kafka's
# CoordinatorOperationExceptionHelper, and TransactionStateManager.appendTransactionToLog: the
# two differ only in NOT_ENOUGH_REPLICAS_AFTER_APPEND and INVALID_FETCH_SIZE, which no append of
# compactlog's storage raises, so one table holds both)
_UNAVAILABLE = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas,
                          ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out})
_NOT_COORDINATOR = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error})
_TOO_LARGE = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                        ErrorCode.invalid_fetch_size})


def operation_error(code: ErrorCode) -> ErrorCode:
    """The code a failed coordinator operation or append answers (CoordinatorOperationExceptionHelper,
    TransactionStateManager.appendTransactionToLog): what the client can act on (retry the
    coordinator, look it up again); the producer's own errors (47, 48, 49, 51, ...) pass as they
    are."""
    if code == ErrorCode.network_exception:
        return ErrorCode.coordinator_load_in_progress
    if code in _UNAVAILABLE:
        return ErrorCode.coordinator_not_available
    if code in _NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if code in _TOO_LARGE:
        return ErrorCode.unknown_server_error
    return code


def error_code_of(error: Exception) -> ErrorCode:
    """The Kafka code a failure carries: a coordinator's refusal its own, a failed append its
    ``kafka_error``, KAFKA_STORAGE_ERROR for an I/O failure (an ``OSError``) or anything without
    one."""
    return ErrorCode(getattr(error, "kafka_error", ErrorCode.kafka_storage_error))


def answered(operation: Callable, *args, **kwargs) -> tuple[ErrorCode, object]:
    """(NONE, ``operation``'s result), or (the code of its refusal, None): where an API that
    answers a code beside its data meets a state machine that raises ``CoordinatorError``."""
    try:
        return ErrorCode.none, operation(*args, **kwargs)
    except CoordinatorError as e:
        return e.code, None


def append_error(error: Exception) -> ErrorCode:
    """The code a failed ``__consumer_offsets`` append answers (appendGroupMetadataErrorToResponseError):
    the table of ``operation_error`` for the unavailable and too-large codes, NOT_COORDINATOR for
    any other failure of the storage, so that clients look the coordinator up again and retry."""
    code = error_code_of(error)
    return operation_error(code) if code in _UNAVAILABLE | _TOO_LARGE else ErrorCode.not_coordinator


def is_too_large(error: Exception) -> bool:
    """The append failed because the records were too large (a code of ``_TOO_LARGE``)."""
    return getattr(error, "kafka_error", None) in _TOO_LARGE


class Periodic:
    """A task every ``interval_ms`` (the runtime's ``scheduleTimer`` re-armed by the task itself):
    offset expiry, timed-out transaction aborts, transactional id expiry."""

    def __init__(self, interval_ms: int):
        self.interval_ms = interval_ms
        self.next_ms: int | None = None

    def start(self, now_ms: int) -> None:
        self.next_ms = now_ms + self.interval_ms

    def run_if_due(self, now_ms: int, task: Callable[[], object]) -> None:
        """Run ``task`` when due and re-arm it (not when it fails: the timer loop retries soon)."""
        if self.next_ms is not None and now_ms >= self.next_ms:
            task()
            self.next_ms = now_ms + self.interval_ms


def seconds_until(deadlines: Iterable[int | None], now_ms: int) -> float:
    """How long the timer thread may sleep: until the earliest deadline, at most ``MAX_TIMER_WAIT_S``."""
    due = [d for d in deadlines if d is not None]
    if not due:
        return MAX_TIMER_WAIT_S
    return min(max((min(due) - now_ms) / 1000.0, 0.0), MAX_TIMER_WAIT_S)


class CoordinatorRuntime:
    """The running half of a coordinator (module docstring). A coordinator sets ``topic`` (its
    internal topic), ``name`` (for the log), ``thread_name``, ``log`` and ``loader_log``, calls
    ``__init__`` with its clock and metadata lock, and provides:

    - ``datadir`` (the storage ``DataDir``), ``config.num_partitions``, ``coordinator`` (its shard,
      with ``start_loading(partition)``);
    - ``partitions_to_load()``, ``load_partition(p)``, ``load_failed(p)`` (after the loader's
      exception is logged), ``activate()`` (before the thread starts), ``run_timers(now)`` (under
      the lock: what is due, in the coordinator's order; the deadlines it knows of);
    - ``topic_configs()`` and ``create_topic(n, configs)`` for ``ensure_topic``;
    - ``before_loading()`` (in the thread: False to give up, e.g. stopped while waiting).
    """

    topic: str
    name: str
    thread_name: str
    log: logging.Logger
    loader_log: logging.Logger

    def __init__(self, clock: Callable[[], int] | None, metadata_lock=None):
        self.clock = clock or wall_clock
        self.metadata_lock = metadata_lock or threading.RLock()
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.loaded = threading.Event()

    # -- the internal topic -----------------------------------------------------------------------
    def partition_count(self) -> int:
        """The partitions of the coordinator's topic: its recorded count once created, else the
        broker's setting (``internal_topics.partition_count``, the one rule)."""
        return partition_count(self.datadir, self.topic, self.log)

    def topic_exists(self) -> bool:
        return self.datadir.has_topic(self.topic)

    def ensure_topic(self) -> bool:
        """Create the topic if it does not exist (Kafka does on the first FindCoordinator of the
        coordinator's key type), with the configured number of partitions."""
        if self.topic_exists():
            return True
        with self.metadata_lock:
            if self.topic_exists():
                return True
            n = self.config.num_partitions
            configs = self.topic_configs()
            self.create_topic(n, configs)
        self.log.info(f"Created {self.topic} with {n} partitions ({configs})")
        return True

    # -- loading ----------------------------------------------------------------------------------
    def mark_loading(self) -> list[int]:
        """The partitions to load, each marked loading (before any request can arrive)."""
        parts = self.partitions_to_load()
        with self.lock:
            for p in parts:
                self.coordinator.start_loading(p)
        return parts

    def load_all(self, parts: list[int]) -> None:
        """Load ``parts`` in turn (``CoordinatorLoaderImpl``); one that fails stays unavailable,
        the others load. ``loaded`` is set once all were tried."""
        for p in parts:
            if self._stop.is_set():
                return
            try:
                self.load_partition(p)
            except Exception:
                self.load_failed(p)
        self.loaded.set()

    def before_loading(self) -> bool:
        return True

    def activate(self) -> None:
        pass

    # -- the background thread ----------------------------------------------------------------------
    def start(self) -> None:
        """Mark the partitions loading, then load them and drive the timers in the background."""
        parts = self.mark_loading()
        self.activate()
        t = threading.Thread(target=self._run, args=(parts,), daemon=True, name=self.thread_name)
        self._threads.append(t)
        t.start()

    def _run(self, parts: list[int]) -> None:
        if not self.before_loading():
            return
        self.load_all(parts)
        while not self._stop.is_set():
            try:
                wait = self.run_due()
            except Exception:
                self.log.exception(f"Error in the {self.name}'s timers")
                wait = MAX_TIMER_WAIT_S
            self._wake.wait(wait)
            self._wake.clear()

    def run_due(self) -> float:
        """Run what is due (``run_timers``, under the lock); seconds until the next deadline."""
        with self.lock:
            deadlines = self.run_timers(self.clock())
            now = self.clock()
        return seconds_until(deadlines, now)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread: ``on_stopping`` first (answer what is parked), then wait for it."""
        self._stop.set()
        self._wake.set()
        self.on_stopping()
        for t in self._threads:
            t.join(timeout_s)
        self.on_stopped()

    def on_stopping(self) -> None:
        pass

    def on_stopped(self) -> None:
        pass
