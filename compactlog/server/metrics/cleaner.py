"""The log cleaner's metrics: Kafka's ``LogCleaner`` and ``LogCleanerManager`` gauges, and
compactlog's own account of each cleaning (metrics.md §4.1, §4.9).

Kafka's gauges are computed at scrape time, as Kafka's are when JMX reads them, from what the
cleaner already keeps: each thread's last completed round (``CleanerActivity.last_rounds``:
recopy percent, clean time, buffer utilization), each thread's last look for work
(``CleanerManager.selections``: compaction delay, dirtiest ratio), the time of the last look
(``time_of_last_run_ms``), the uncleanable partitions and the dead threads. Values are integers,
as Kafka's gauges are. ``max-buffer-utilization-percent`` is what Kafka's fixed-size
``SkimpyOffsetMap`` (24 bytes a key: an MD5 and an offset) would have filled of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` in the thread's last round, computed as
Kafka's Java ``LogCleaner`` does (the Scala one of Kafka <= 4.0 truncates before multiplying and
reads 0 or 100); compactlog's own map grows, so above 100 means Kafka would have needed several
rounds.

compactlog's counters come from each finished cleaning (``CleanerCounters``, subscribed to the
cleaner's activity): rounds by engine and result, their duration by phase, records and bytes read
and written, records removed by reason, bytes reclaimed, the last success. Counts of a deleted
topic go at the next scrape. The dirty ratio and first dirty offset of every compacted partition
are per-partition families (``partitions.py``).
"""

from __future__ import annotations

import threading
import time

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ...cleaner.activity import OK, Cleaning
from ...cleaner.manager import IN_PROGRESS
from .collector import gauge

SKIMPY_BYTES_PER_ENTRY = 24         # Kafka's SkimpyOffsetMap: MD5 (16) + offset (8)
ROUND_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

# (field of CleanerStats, metric, help)
TOPIC_COUNTS = (
    ("bytes_read", "compactlog_cleaner_read_bytes", "Bytes read by the cleaner's rewrites"),
    ("bytes_written", "compactlog_cleaner_written_bytes", "Bytes written by the cleaner's rewrites"),
    ("messages_read", "compactlog_cleaner_read_records", "Records read by the cleaner's rewrites"),
    ("messages_written", "compactlog_cleaner_written_records", "Records written by the cleaner's rewrites"),
)


class CleanerCounters:
    """Running totals of the finished cleanings (fed by ``CleanerActivity.subscribe``)."""

    def __init__(self, registry):
        self.rounds = Counter("compactlog_cleaner_rounds", "Cleanings finished, by engine and result (discarded: "
                              "thrown away because the log changed)", ["engine", "result"], registry=registry)
        self.duration = Histogram("compactlog_cleaner_round_duration_seconds", "Duration of completed cleanings "
                                  "by phase (map: building the key map; rewrite; total)", ["engine", "phase"],
                                  buckets=ROUND_BUCKETS, registry=registry)
        self._lock = threading.Lock()
        self._by_topic: dict[str, dict[str, int]] = {}          # topic -> field -> total
        self._removed: dict[tuple[str, str], int] = {}          # (topic, reason) -> records

    def on_cleaning(self, c: Cleaning) -> None:
        self.rounds.labels(c.engine, c.result).inc()
        if c.result != OK or c.stats is None:
            return
        s = c.stats
        for phase, seconds in (("map", s.map_seconds), ("rewrite", s.clean_seconds), ("total", s.elapsed_seconds)):
            self.duration.labels(c.engine, phase).observe(seconds)
        with self._lock:
            totals = self._by_topic.setdefault(c.topic, {})
            for field, _, _ in TOPIC_COUNTS:
                totals[field] = totals.get(field, 0) + getattr(s, field)
            totals["reclaimed"] = totals.get("reclaimed", 0) + c.reclaimed_bytes
            for reason, n in s.removed.items():
                self._removed[(c.topic, reason)] = self._removed.get((c.topic, reason), 0) + n

    def collect(self, live_topics: set[str] | None):
        with self._lock:
            if live_topics is not None:
                for t in [t for t in self._by_topic if t not in live_topics]:
                    del self._by_topic[t]
                for key in [k for k in self._removed if k[0] not in live_topics]:
                    del self._removed[key]
            by_topic = {t: dict(v) for t, v in sorted(self._by_topic.items())}
            removed = sorted(self._removed.items())
        for field, name, doc in TOPIC_COUNTS + (("reclaimed", "compactlog_cleaner_reclaimed_bytes",
                                                 "Bytes the cleaned segments shrank by"),):
            f = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, totals in by_topic.items():
                f.add_metric([topic], totals.get(field, 0))
            yield f
        f = CounterMetricFamily("compactlog_cleaner_removed_records", "Records the cleaner removed, by reason "
                                "(superseded, tombstone-expired, keyless, aborted, marker, discarded)",
                                labels=["topic", "reason"])
        for (topic, reason), n in removed:
            f.add_metric([topic, reason], n)
        yield f


class CleanerCollector:
    """The cleaner families of one broker (``metrics``: its ``BrokerMetrics``)."""

    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self, live_topics: set[str] | None):
        m = self.metrics
        background = m.background
        manager = m.manager
        if background is None or manager is None:
            return
        broker = m.datadir.broker
        now_ms = int(time.time() * 1000)
        activity = background.activity
        yield from self._log_cleaner(activity, manager, broker)
        yield from self._log_cleaner_manager(manager, m.datadir.path, now_ms)
        dead_total = activity.deaths()
        yield CounterMetricFamily("compactlog_cleaner_thread_deaths", "Cleaner threads whose loop died (each "
                                  "is restarted after a backoff)", value=dead_total)
        last = activity.last_success_ms
        g = GaugeMetricFamily("compactlog_cleaner_last_success_timestamp_seconds", "Wall time of the last "
                              "completed cleaning (no sample before the first)")
        if last is not None:
            g.add_metric([], last / 1000)
        yield g
        events = CounterMetricFamily("compactlog_log_data_events", "What recovery and retention removed, cut, "
                                     "quarantined or rebuilt, by kind", labels=["kind"])
        for kind, n in sorted(dict(background.data_event_counts).items()):
            events.add_metric([kind], n)
        yield events
        yield from m.cleaner_counters.collect(live_topics)

    def _log_cleaner(self, activity, manager, broker):
        rounds = [c.stats for c in activity.last_rounds() if c.stats is not None]
        read = sum(s.bytes_read for s in rounds)
        written = sum(s.bytes_written for s in rounds)
        threads = max(broker.get("log.cleaner.threads"), 1)
        per_thread = broker.get("log.cleaner.dedupe.buffer.size") / threads
        utilization = max((s.map_keys * SKIMPY_BYTES_PER_ENTRY / per_thread for s in rounds), default=0.0) \
            if per_thread > 0 else 0.0
        selections = list(manager.selections.values())
        prefix = "kafka_log_logcleaner_"
        yield gauge(prefix + "cleaner_recopy_percent", "100 x bytes written / bytes read over the threads' "
                    "last rounds", int(100 * written / max(read, 1)))
        yield gauge(prefix + "max_clean_time_secs", "Longest last round of a cleaner thread (s)",
                    int(max((s.elapsed_seconds for s in rounds), default=0)))
        yield gauge(prefix + "max_compaction_delay_secs", "Largest max.compaction.lag.ms overrun seen at a "
                    "thread's last look (s)", int(max((s.max_compaction_delay_ms for s in selections),
                                                      default=0) / 1000))
        yield gauge(prefix + "max_buffer_utilization_percent", "Fill of a Kafka-sized dedupe buffer in a "
                    "thread's last round (%)", int(utilization * 100))
        yield gauge(prefix + "deadthreadcount", "Cleaner threads whose loop died and are not restarted yet",
                    activity.dead_threads())

    def _log_cleaner_manager(self, manager, data_dir: str, now_ms: int):
        prefix = "kafka_log_logcleanermanager_"
        selections = list(manager.selections.values())
        latest = max(selections, key=lambda s: s.time_ms) if selections else None
        yield gauge(prefix + "max_dirty_percent", "Highest dirty ratio among the compacted logs at the last "
                    "look for work (%)", int(100 * latest.dirtiest_ratio) if latest else 0)
        last_run = manager.time_of_last_run_ms
        since = now_ms - last_run if last_run is not None else int(1000 * self.metrics.lifecycle.uptime_s)
        yield gauge(prefix + "time_since_last_run_ms", "ms since a cleaner thread last looked for work",
                    max(since, 0))
        backing_off = manager.backing_off(now_ms)
        labels = {"logDirectory": data_dir}
        yield gauge(prefix + "uncleanable_partitions_count", "Partitions skipped after a failed clean, until "
                    "log.cleaner.backoff.ms has passed", len(backing_off), labels)
        yield gauge(prefix + "uncleanable_bytes", "Cleanable bytes of those partitions",
                    manager.uncleanable_bytes(backing_off, now_ms) if backing_off else 0, labels)
        states = manager.cleaning_states()
        g = GaugeMetricFamily("compactlog_cleaner_partitions", "Compacted partitions by cleaner state at the "
                              "last look (in_progress and uncleanable: now)", labels=["state"])
        g.add_metric(["cleanable"], latest.cleanable if latest else 0)
        g.add_metric(["delayed"], latest.delayed if latest else 0)
        g.add_metric(["in_progress"], sum(1 for s in states.values() if s == IN_PROGRESS))
        g.add_metric(["uncleanable"], len(backing_off))
        yield g
