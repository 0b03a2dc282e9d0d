"""The maintenance of a data dir's logs: Kafka's ``LogManager`` tasks (``cleanupLogs``,
``flushDirtyLogs``, ``checkpointLogRecoveryOffsets`` / ``checkpointLogStartOffsets``, the
recovery of ``loadLogs`` after an unclean shutdown) and producer-id expiration, one implementation driven by the broker's scheduler
(server/background.py) and by offline runs (``cleaner run``: cleaner/service.py).

Retention (``cleanup_logs``) has one rule, Kafka's: every log is visited except the ones the log
cleaner is working on or that back off as uncleanable (Kafka's ``LogCleanerManager.deletableLogs``
and ``pauseCleaningForNonCompactedPartitions``); each gets ``deleteOldSegments``: the log start
rule always, size and time for a topic whose ``cleanup.policy`` includes delete
(storage/retention.py), nothing for a topic whose configs are unknown (a copied Kafka dir). Kafka
has every log loaded; compactlog opens logs on first use, so the logs not open yet are opened
only where retention may have work: a topic that deletes by time or size, or a partition whose
log start lies above its first segment (it has an entry in ``log-start-offset-checkpoint``).
Kafka splits the visit in two (LogManager for the logs that are not compacted, the cleaner
threads for the compacted ones), so with ``log.cleaner.enable=false`` its compacted logs get no
retention at all; here one loop does both, whether a cleaner runs or not.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Callable

from ..errors import CompactlogError, StorageError, TopicError
from .config_def import LONG_MAX

if TYPE_CHECKING:
    from .datadir import DataDir
    from .log import Log

manager_log = logging.getLogger("kafka.log.LogManager")

MIN_FLUSH_INTERVAL_MS = 100
# logs the recovery flushes together (``DataDir.flush_logs``): their fsyncs wait at once
RECOVERY_FLUSH_BATCH = 256


class LogManager:
    """The data dir's maintenance tasks. ``open_log(topic, partition)`` opens a log not open yet
    (None when its topic or partition is gone meanwhile); by default the data dir's."""

    def __init__(self, datadir: DataDir, *, open_log: Callable[[str, int], Log | None] | None = None):
        self.datadir = datadir
        self._open_log = open_log or self._open_existing
        self._last_flush: dict[tuple[str, int], int] = {}
        # the remote tier's manager (storage/remote/manager.py) when tiered storage is on: its
        # retention (RLMExpirationTask) runs with the local one
        self.remote = None

    def _open_existing(self, topic: str, partition: int) -> Log | None:
        try:
            return self.datadir.open_log(topic, partition)
        except (TopicError, FileNotFoundError):
            return None         # deleted since it was listed

    # -- which logs
    def maintained_logs(self) -> list[Log]:
        """The open logs to maintain (an offline one is left alone until the next start)."""
        return [log for log in list(self.datadir.logs.values()) if not log.closed and log.offline is None]

    def retention_logs(self, now_ms: int) -> list[Log]:
        """The logs ``cleanup_logs`` visits (the rule in the module's docstring), in partition order."""
        dd = self.datadir
        busy = dd.cleaner.busy_partitions(now_ms)
        opened = dd.logs
        starts = _log_start_entries(dd)
        by_topic: dict[str, bool] = {}
        out = []
        for key in dd.all_partitions():
            if key in busy:
                continue
            log = opened.get(key)
            if log is None:
                topic = key[0]
                if topic not in by_topic:
                    config = dd.topic_config(topic)
                    by_topic[topic] = bool(config.known and config.delete and
                                           (config.get("retention.ms") >= 0 or config.get("retention.bytes") >= 0))
                if not by_topic[topic] and key not in starts:
                    continue
                log = self._open_log(*key)
            if log is not None and not log.closed and log.offline is None:
                out.append(log)
        return out

    # -- the tasks
    def cleanup_logs(self, now_ms: int) -> int:
        """Retention (Kafka's cleanupLogs): the segments deleted. A log whose deletion fails (a
        full or failing disk) is reported in one line and retried at the next run."""
        total = 0
        for log in self.retention_logs(now_ms):
            try:
                total += self.datadir.delete_old_segments(log)
            except (OSError, StorageError) as e:
                manager_log.error(f"Retention of {log.name} failed: {reason(e)}")
            except TopicError:
                pass            # its topic was deleted meanwhile
            except Exception:   # a bug: reported, and the other logs still get their retention
                manager_log.exception(f"Error while deleting old segments of {log.name}")
        if total:
            manager_log.info(f"Retention deleted {total} segment(s)")
        if self.remote is not None:
            total += self.remote.run_expiration(now_ms)
        return total

    def expire_producers(self, now_ms: int) -> None:
        """Producer ids idle for ``producer.id.expiration.ms`` forgotten (Kafka's
        removeExpiredProducers task)."""
        for log in self.maintained_logs():
            with log.lock:
                log.producer_state.remove_expired(now_ms)

    def flush_interval_ms(self) -> int | None:
        """How often ``flush_dirty_logs`` is due: the smallest finite ``flush.ms`` of the open logs
        (at least MIN_FLUSH_INTERVAL_MS), None when none flushes by time."""
        finite = [ms for log in list(self.datadir.logs.values()) if (ms := log.config.get("flush.ms")) < LONG_MAX]
        return max(min(finite), MIN_FLUSH_INTERVAL_MS) if finite else None

    def flush_dirty_logs(self, now_ms: int) -> None:
        """Kafka's flushDirtyLogs: each log whose ``flush.ms`` has passed since its last flush
        here, and that holds what is not flushed yet, is flushed."""
        for log in self.maintained_logs():
            flush_ms = log.config.get("flush.ms")
            if flush_ms >= LONG_MAX:
                continue
            key = (log.topic, log.partition)
            last = self._last_flush.setdefault(key, now_ms)
            if now_ms - last >= flush_ms:
                if log.log_end_offset > log.recovery_point:
                    log.flush()
                self._last_flush[key] = now_ms

    def recover_logs(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Kafka's LogManager.loadLogs after an unclean shutdown, behind the broker's listeners:
        every log not open yet is opened, which recovers what lies past its recovery point, one
        at a time (a request, the cleaner or retention that needs a log sooner opens it itself).
        Once every log is open, a clean shutdown writes the clean-shutdown marker again; a stop
        before that (``should_stop``) leaves the rest to the next start.

        Each log whose recovery point is behind its end (the batches its recovery checked, and
        any appended since) is flushed right after, RECOVERY_FLUSH_BATCH at a time: the clean
        shutdown then has that much less to fsync at once (10,000 recovered logs: 20,000 fsyncs)."""
        started = time.monotonic()
        dd = self.datadir
        keys = dd.all_partitions()
        opened = failed = 0
        behind: list = []
        for key in keys:
            if should_stop():
                manager_log.info(f"Log recovery stopped by the shutdown after {opened} log(s); the "
                                 f"others are recovered after the next start")
                return
            if len(behind) >= RECOVERY_FLUSH_BATCH:
                failed += self._flush_recovered(behind)
                behind = []
            try:
                log = dd.logs.get(key)      # opened (recovered) by its first user already
                if log is None:
                    log = self._open_log(*key)      # None: its topic was deleted meanwhile
                    opened += log is not None
                if log is not None and log.recovery_point < log.log_end_offset:
                    behind.append(log)
            except CompactlogError as e:
                failed += 1
                manager_log.error(f"Error while recovering log {key[0]}-{key[1]}: {e}")
            except OSError as e:            # a full or failing disk: one line, retried on first use
                failed += 1
                manager_log.error(f"Error while recovering log {key[0]}-{key[1]}: {e.strerror or e} "
                                  f"(retried when the log is first used)")
            except Exception:
                failed += 1
                manager_log.exception(f"Error while recovering log {key[0]}-{key[1]}")
        failed += self._flush_recovered(behind)
        manager_log.info(f"Recovered {len(keys) - failed} log(s) after an unclean shutdown in "
                         f"{1000 * (time.monotonic() - started):.0f} ms ({opened} by this thread, the "
                         f"others on first use)" + (f"; {failed} could not be opened" if failed else ""))

    def _flush_recovered(self, logs: list) -> int:
        """Flush recovered logs, many at a time (``DataDir.flush_logs``); how many failed (each
        logged in one line, and offline until the next start)."""
        failed = 0
        for log, error in zip(logs, self.datadir.flush_logs(logs)):
            if error is not None:
                failed += 1
                manager_log.error(f"Error while flushing recovered log {log.name}: {reason(error)}")
        return failed

    def checkpoint_logs(self) -> None:
        """The recovery points and log start offsets of the open logs written (Kafka's
        checkpointLogRecoveryOffsets and checkpointLogStartOffsets)."""
        self.datadir.checkpoint_logs()


def _log_start_entries(dd: DataDir) -> frozenset[tuple[str, int]]:
    """The partitions with a log start above their first segment (the checkpoint has an entry only
    for those); none when the file is missing or unreadable."""
    path = dd.log_start_checkpoint.path
    if not os.path.exists(path):
        return frozenset()
    try:
        return frozenset(dd.log_start_checkpoint.read_cached())
    except StorageError:
        return frozenset()


def reason(e: BaseException) -> str:
    """An OSError or StorageError in one line (no traceback)."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}" + (f": {e.filename}" if e.filename else "")
    return str(e)
