"""The broker's background work, while clients produce and fetch: Kafka's ``LogCleaner`` threads
and ``LogManager``'s scheduled tasks (retention, flushes, checkpoints, producer-id expiration).

Cleaner threads (``log.cleaner.threads``) are thin loops over the data dir's ``CleanerManager``
(Kafka's LogCleanerManager: in-progress, aborted and paused partitions, the uncleanable ones
backing off, the filthiest-first choice): each takes the filthiest eligible partition with
``Cleaner.clean_filthiest``, cleans it and takes the next; with nothing to clean a thread sleeps
``log.cleaner.backoff.ms``. A partition whose cleaning fails is logged and retried after the
backoff while the others go on. The partition's lock is held only to plan and to swap, never
while rewriting, so appends and fetches go on during a clean; retention (here), DeleteRecords
and topic deletion pause the partition's cleaning first and wait for a clean in progress to stop.
Small rounds are cleaned in this process, large ones (or every round, with a Spark master) on
Spark (``cleaner.engines.AutoExecutor``).

A cleaner thread whose loop dies (an exception escapes it: a bug, not a failed partition) is
counted dead (Kafka's ``DeadThreadCount``, which Kafka leaves dead until a restart of the broker)
and restarted by the scheduler thread after ``compactlog.cleaner.thread.restart.backoff.ms`` (a
minute), doubled with each death in a row up to 5 minutes. What the threads did and how they
are is kept in ``activity`` (``cleaner/activity.py``), which the broker's metrics and readiness
read. Test hook: with ``COMPACTLOG_TEST_CLEANER_CRASH_FILE=path``, a cleaner thread that finds
that file removes it and dies.

After an unclean shutdown a recovery thread opens every log not opened yet (the broker serves
meanwhile; a log is recovered before its first use either way).

The scheduler thread runs, each at its interval, the log manager's tasks (storage/log_manager.py,
the same an offline ``cleaner run`` drives): retention (``log.retention.check.interval.ms``;
every log but those being cleaned or backing off, the logs not opened since a clean start opened
only where it may have work), producer-id expiration
(``producer.id.expiration.check.interval.ms``), time-based flushes (``flush.ms`` /
``log.flush.interval.ms``), the recovery-point and log-start checkpoints
(``log.flush.offset.checkpoint.interval.ms``); and the report of what recovery or retention
removed (``storage/events.py``), one log line per event.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..cleaner.activity import CleanerActivity, engine_label
from ..cleaner.cleaner import Cleaner
from ..cleaner.executor import TaskFailure
from ..cleaner.engines import AutoExecutor
from ..cleaner.log_format import CleanerLog
from ..cleaner.manager import CleanerManager
from ..errors import StorageError
from ..storage.config import LONG_MAX
from ..storage.events import OFFLINE
from ..storage.log_manager import LogManager, reason as _reason
from .state import BrokerState

cleaner_log = logging.getLogger("kafka.log.LogCleaner")
manager_log = logging.getLogger("kafka.log.LogManager")

EVENTS_INTERVAL_MS = 1000
RESTART_BACKOFF_SETTING = "compactlog.cleaner.thread.restart.backoff.ms"
RESTART_BACKOFF_MAX_MS = 300000     # the doubling stops here (or at the setting, if larger)
CRASH_FILE_ENV = "COMPACTLOG_TEST_CLEANER_CRASH_FILE"


class InjectedCrash(RuntimeError):
    """The test hook's failure: it escapes the cleaner loop, as a bug would."""


def restart_delay_ms(deaths_in_a_row: int, first_ms: int) -> int:
    """The wait before a dead cleaner thread starts again: ``first_ms``, doubled per death in a row."""
    return min(first_ms << min(max(deaths_in_a_row - 1, 0), 20), max(RESTART_BACKOFF_MAX_MS, first_ms))


class _StopAware:
    """An executor that starts no cleaning once the broker is shutting down."""

    def __init__(self, inner, stop: threading.Event):
        self.inner = inner
        self.stop = stop
        self.name = getattr(inner, "name", "executor")
        self._ran = threading.local()       # each cleaner thread's last engine

    @property
    def last_choice(self) -> str:
        """The engine of the last round, with the reason only when it was chosen per round."""
        if isinstance(self.inner, AutoExecutor) and self.inner.choice is not None:
            return self.inner.choice.text()
        return self.name

    def run(self, plans):
        if self.stop.is_set():
            return [TaskFailure(p.topic, p.partition, "the broker is shutting down", "Shutdown")
                    for p in plans]
        results = self.inner.run(plans)
        choice = getattr(self.inner, "choice", None)
        self._ran.engine = engine_label(choice.engine if choice is not None else self.name)
        return results

    @property
    def engine(self) -> str:
        """The engine ("local" or "spark") of this thread's last run."""
        return getattr(self._ran, "engine", engine_label(self.name))


class Background:
    def __init__(self, state: BrokerState, executor, clock=lambda: int(time.time() * 1000)):
        self.state = state
        self.datadir = state.datadir
        self.clock = clock
        self.stop_event = threading.Event()
        self.executor = _StopAware(executor, self.stop_event)
        self.manager = CleanerManager.for_datadir(self.datadir)
        self.cleaner = Cleaner(self.datadir, self.executor, self.manager)
        self.threads: list[threading.Thread] = []
        self.cleaner_threads: dict[int, threading.Thread] = {}
        self.cleaner_file_log = CleanerLog.for_datadir(self.datadir)
        self.activity = CleanerActivity()
        self.data_event_counts: dict[str, int] = {}     # kind -> events reported
        self._crash_file = os.environ.get(CRASH_FILE_ENV) or None
        # retention, flushes, checkpoints, producer expiration: the one implementation an offline
        # ``cleaner run`` drives too; logs not open yet are opened as a request would open them
        self.log_manager = LogManager(self.datadir, open_log=state.log)

    # -- life cycle
    def start(self, recover_logs: bool = False) -> None:
        """``recover_logs``: after an unclean shutdown, a thread opens (recovers) every log not
        opened yet."""
        broker = self.datadir.broker
        threads = broker.get("log.cleaner.threads") if broker.get("log.cleaner.enable") else 0
        for i in range(threads):
            self._start_cleaner(i)
        if threads:
            cleaner_log.info(f"Starting the log cleaner: {threads} thread(s), "
                             f"{getattr(self.executor.inner, 'name', 'executor')} executor")
        else:
            cleaner_log.info("The log cleaner is disabled (log.cleaner.enable=false or "
                             "log.cleaner.threads=0)")
        scheduler = threading.Thread(target=self._scheduler_loop, daemon=True, name="kafka-scheduler")
        self.threads.append(scheduler)
        scheduler.start()
        if recover_logs:
            recovery = threading.Thread(target=self._recovery, daemon=True, name="log-recovery")
            self.threads.append(recovery)
            recovery.start()

    def start_remote(self) -> None:
        """The remote log manager's copy task (RLMCopyTask), every
        ``remote.log.manager.task.interval.ms``, on its own thread: an upload never holds up
        retention, flushes or checkpoints. Remote retention runs with the local one."""
        remote = self.state.remote
        if remote is None:
            return
        self.log_manager.remote = remote
        t = threading.Thread(target=self._remote_loop, daemon=True, name="kafka-rlm-copy")
        self.threads.append(t)
        t.start()

    def _remote_loop(self) -> None:
        remote = self.state.remote
        while not self.stop_event.is_set():
            try:
                remote.run_copy_tasks()
            except Exception:
                manager_log.exception("Error in the remote log manager's copy task")
            self.stop_event.wait(self.datadir.broker.get("remote.log.manager.task.interval.ms") / 1000.0)

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop and join the threads: a cleaning in progress is finished or discarded first."""
        self.stop_event.set()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        threads = list(self.cleaner_threads.values()) + self.threads
        for t in threads:
            t.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        if any(t.is_alive() for t in threads):
            manager_log.warning("A background thread did not stop in time")
        self.run_scheduled_once(final=True)

    # -- recovery after an unclean shutdown
    def _recovery(self) -> None:
        """The log manager's recovery of the logs not open yet (``LogManager.recover_logs``),
        behind the listeners, until the shutdown."""
        self.log_manager.recover_logs(self.stop_event.is_set)

    # -- the cleaner: a thread takes the filthiest partition from the manager, cleans it, repeats
    def _start_cleaner(self, n: int) -> None:
        name = f"kafka-log-cleaner-thread-{n}"
        t = threading.Thread(target=self._cleaner_main, args=(n,), daemon=True, name=name)
        self.cleaner_threads[n] = t
        self.activity.thread_started(name)
        t.start()

    def _cleaner_main(self, n: int) -> None:
        """A cleaner thread: its loop, and its death when an exception escapes the loop."""
        name = threading.current_thread().name
        try:
            self._cleaner_loop(n)
        except BaseException as e:  # noqa: BLE001 - a dead thread is reported, then restarted
            if self.stop_event.is_set():
                return
            first_ms = self.datadir.broker.get(RESTART_BACKOFF_SETTING)
            health = self.activity.thread_died(name, f"{type(e).__name__}: {e}", self.clock(),
                                               lambda deaths: restart_delay_ms(deaths, first_ms))
            cleaner_log.error(f"[{name}]: the cleaner thread died ({type(e).__name__}: {e}); "
                              f"{health.deaths} death(s) so far, restarted in "
                              f"{(health.restart_at_ms - health.dead_since_ms) / 1000:g} s",
                              exc_info=not isinstance(e, InjectedCrash))

    def restart_dead_cleaners(self, now: int) -> None:
        """Start again each cleaner thread that died and whose backoff has passed."""
        for n, t in list(self.cleaner_threads.items()):
            if t.is_alive() or self.stop_event.is_set():
                continue
            health = self.activity.threads().get(t.name)
            if health is not None and health.restart_at_ms is not None and now >= health.restart_at_ms:
                cleaner_log.info(f"[{t.name}]: restarting the cleaner thread")
                self._start_cleaner(n)

    def _cleaner_loop(self, n: int) -> None:
        stop = self.stop_event
        name = threading.current_thread().name
        while not stop.is_set():
            if self._crash_file is not None and os.path.exists(self._crash_file):
                os.remove(self._crash_file)
                raise InjectedCrash(f"{CRASH_FILE_ENV} asked {name} to die")
            backoff_s = self.datadir.broker.get("log.cleaner.backoff.ms") / 1000.0
            try:
                now = self.clock()
                outcomes = self.cleaner.clean_filthiest(now)
                self.activity.thread_worked(name)
                if not outcomes:
                    stop.wait(backoff_s)
                    continue
                self.activity.record(name, outcomes, self.executor.engine, self.clock())
                if stop.is_set():
                    break
                self._report(n, outcomes)
            except Exception:       # a bug or a vanished partition: logged, retried after the backoff
                cleaner_log.exception(f"[kafka-log-cleaner-thread-{n}]: Error while cleaning; "
                                      f"backing off {backoff_s:g} s")
                stop.wait(backoff_s)

    def _report(self, n: int, outcomes) -> None:
        backoff = self.datadir.broker.get("log.cleaner.backoff.ms")
        for o in outcomes:
            if o.error:
                cleaner_log.warning(f"[kafka-log-cleaner-thread-{n}]: Unexpected exception thrown when "
                                    f"cleaning log {o.name}; retried after {backoff} ms: {o.error}")
                self.cleaner_file_log.error(o)
            elif o.cleaned:
                s = o.stats
                cleaner_log.info(
                    f"[kafka-log-cleaner-thread-{n}]: Cleaned log {o.name} (dirty section = "
                    f"[{o.status.first_dirty}, {o.end_offset}]): {o.start_size} -> {o.end_size} bytes, "
                    f"{s.messages_read} -> {s.messages_written} messages in {s.elapsed_seconds:.3f} s "
                    f"({self.executor.last_choice})")
                self.cleaner_file_log.cleaned(o)

    # -- the scheduler
    def _scheduler_loop(self) -> None:
        next_run: dict[str, int] = {}
        while not self.stop_event.is_set():
            try:
                wait_ms = self.run_scheduled_once(next_run=next_run)
                self.restart_dead_cleaners(self.clock())
            except Exception:
                manager_log.exception("Error in a scheduled task")
                wait_ms = 1000
            self.stop_event.wait(max(wait_ms, 10) / 1000.0)

    def _intervals(self) -> dict[str, int]:
        b = self.datadir.broker
        out = {"retention": b.get("log.retention.check.interval.ms"),
               "producer-expiration": b.get("producer.id.expiration.check.interval.ms"),
               "checkpoint": b.get("log.flush.offset.checkpoint.interval.ms") or LONG_MAX,
               "events": EVENTS_INTERVAL_MS}
        flush_ms = self.log_manager.flush_interval_ms()
        if flush_ms is not None:
            out["flush"] = flush_ms
        return out

    def run_scheduled_once(self, next_run: dict | None = None, final: bool = False) -> int:
        """Run the due tasks (every task with ``final``); ms until the next one is due."""
        now = self.clock()
        intervals = self._intervals()
        tasks = {"retention": self._retention, "producer-expiration": self._expire_producers,
                 "checkpoint": self._checkpoint, "events": self._events, "flush": self._flush}
        if final:
            self._events(now)
            return 0
        wait = 1000
        for name, interval in intervals.items():
            due = next_run.setdefault(name, now + (0 if name == "events" else interval))
            if now >= due:
                try:
                    tasks[name](now)
                except (OSError, StorageError) as e:
                    # a full or failing disk: one line each time, not a traceback (the task runs
                    # again at its next interval, and succeeds once the disk does)
                    manager_log.error(f"Scheduled task {name} failed: {_reason(e)}")
                except Exception:
                    manager_log.exception(f"Error in scheduled task {name}")
                next_run[name] = now + interval
                due = next_run[name]
            wait = min(wait, due - now)
        return wait

    def _retention(self, now: int) -> None:
        self.log_manager.cleanup_logs(now)

    def _expire_producers(self, now: int) -> None:
        self.log_manager.expire_producers(now)

    def _flush(self, now: int) -> None:
        self.log_manager.flush_dirty_logs(now)

    def _checkpoint(self, now: int) -> None:
        with self.state.metadata_lock:        # checkpoint_logs takes the data dir's own guard
            self.log_manager.checkpoint_logs()

    def _events(self, now: int) -> None:
        for event in self.datadir.drain_data_events():
            self.data_event_counts[event.kind] = self.data_event_counts.get(event.kind, 0) + 1
            if event.sets_data_aside or event.kind == OFFLINE:
                manager_log.warning(str(event))
            else:
                manager_log.info(str(event))

