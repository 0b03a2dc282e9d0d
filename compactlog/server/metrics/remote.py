"""The remote tier's metrics (Kafka's ``RemoteStorageMetrics``), served as the JMX exporter names
them (tiered-storage.md §7, metrics.md §2): the ``kafka.server:type=BrokerTopicMetrics`` meters
as ``kafka_server_brokertopicmetrics_<name>_total{topic}`` beside the label-less all-topics series,
and its aggregated gauges (``RemoteCopyLagBytes``/``Segments``, ``RemoteDeleteLagBytes``/``Segments``,
``RemoteLogSizeBytes``, ``RemoteLogMetadataCount``, ``RemoteLogSizeComputationTime``) per topic
(the sum of its partitions, as ``BrokerTopicAggregatedMetric`` sums them) and for all topics.

Kafka registers these only when ``remote.log.storage.system.enable`` is true; so does this: a
broker without a remote tier serves none of them. The counters come from
``storage.remote.stats.RemoteStorageStats`` (counted lock-free by the RemoteLogManager); the
gauges are read now, from what the broker holds: each tiered partition's manifest (an immutable
value: no lock, no request to the store) and journal state, and its local segments (under the
log's lock, a moment per partition) for the copy lag — read at every scrape, so a copy stalled by
a store outage shows its lag growing, where Kafka's value stays at its last successful copy.

Beside them, as Kafka's ``RemoteStorageMetrics`` names them: the reader pool's queue and idle
ratio, the copy and expiration tasks' idle ratio, and the remote read timer (percentiles of the
last reads and a ``_count``, as the request timers here), and compactlog's cache hits and misses.
"""

from __future__ import annotations

import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ...storage.remote.stats import COUNTERS, EXPIRED, READ_MS, READS, STORE_BUCKETS, TASKS_MS
from .requests import QUANTILES, percentile

PREFIX = "kafka_server_brokertopicmetrics_"

GAUGES = (
    ("copy_lag_bytes", "remotecopylagbytes", "Bytes of rolled local segments not yet copied to the remote tier "
                                             "(RemoteCopyLagBytes)"),
    ("copy_lag_segments", "remotecopylagsegments", "Rolled local segments not yet copied (RemoteCopyLagSegments)"),
    ("delete_lag_bytes", "remotedeletelagbytes", "Bytes of remote segments being deleted (RemoteDeleteLagBytes)"),
    ("delete_lag_segments", "remotedeletelagsegments", "Remote segments being deleted (RemoteDeleteLagSegments)"),
    ("metadata_count", "remotelogmetadatacount", "Remote segments the metadata journal knows, in any state but "
                                                 "deleted (RemoteLogMetadataCount)"),
    ("size_bytes", "remotelogsizebytes", "Bytes of the partition's remote segments (RemoteLogSizeBytes)"),
    ("size_ms", "remotelogsizecomputationtime", "Milliseconds this scrape spent summing the remote log's size "
                                                "(RemoteLogSizeComputationTime)"),
)


def copy_lag(log, highest_remote_offset: int) -> tuple[int, int]:
    """(bytes, segments) of the rolled local segments above the highest remote offset (Kafka's
    ``onlyLocalLogSegmentsSize - activeSegment.size`` and ``onlyLocalLogSegmentsCount - 1``)."""
    with log.lock:
        rolled = list(log.segments)[:-1]
        pending = [s for s in rolled if s.base_offset > highest_remote_offset]
        return sum(s.size for s in pending), len(pending)


def tier_row(remote, log) -> dict | None:
    """One tiered partition's two tiers, for the status page, ``cleaner status`` and the gauges;
    None when the partition has no remote state in this broker yet (nothing copied or read)."""
    rp = remote.partitions.get((log.topic, log.partition))
    manifest = rp.manifest if rp is not None else None
    if manifest is None:
        return None
    hro = manifest.highest_offset
    lag_bytes, lag_segments = copy_lag(log, hro)
    journal = remote.journal.get((rp.topic_id, rp.partition), {})
    return {"remoteSegmentCount": len(manifest.segments),
            "remoteSizeBytes": sum(s.size_in_bytes for s in manifest.segments),
            "remoteStartOffset": manifest.segments[0].start_offset if manifest.segments else None,
            "highestRemoteOffset": hro, "localLogStartOffset": log.local_log_start_offset,
            "logStartOffset": log.log_start_offset, "copyLagBytes": lag_bytes, "copyLagSegments": lag_segments,
            "metadataCount": len(journal), "pendingDeletion": len(manifest.pending_deletion),
            "generation": manifest.generation}


class RemoteCollector:
    """The remote families of one broker (``BrokerMetrics.remote_collector``)."""

    def __init__(self, metrics):
        self.metrics = metrics
        self._last: dict[str, tuple[float, float]] = {}     # pool -> (monotonic s, busy ms) at the last scrape

    def collect(self, live_topics: set[str] | None):
        state = self.metrics.state
        remote = getattr(state, "remote", None) if state is not None else None
        if remote is None:
            return
        live = (lambda t: True) if live_topics is None else live_topics.__contains__
        totals = remote.metrics.totals()
        own = totals.get(None, {})
        counts = {t: c for t, c in totals.items() if t is not None and live(t)}
        for field, name, doc in COUNTERS:
            family = CounterMetricFamily(PREFIX + name, doc, labels=["topic"])
            family.add_metric([], sum(c.get(field, 0) for c in counts.values()))
            for topic in sorted(counts):
                family.add_metric([topic], counts[topic].get(field, 0))
            yield family
        yield CounterMetricFamily("kafka_server_delayedremotefetchmetrics_expires",
                                  "Remote reads answered empty after remote.fetch.max.wait.ms "
                                  "(DelayedRemoteFetchMetrics.ExpiresPerSec)",
                                  value=sum(c.get(EXPIRED, 0) for c in counts.values()))
        gauges = self._gauges(remote, state, live)
        for field, name, doc in GAUGES:
            family = GaugeMetricFamily(PREFIX + name, doc, labels=["topic"])
            family.add_metric([], sum(g[field] for g in gauges.values()))
            for topic in sorted(gauges):
                family.add_metric([topic], gauges[topic][field])
            yield family
        yield from self._caches(remote)
        yield from self._pools(remote, own)
        yield from self._store(own)

    @staticmethod
    def _store(own: dict):
        """compactlog's: the store's requests by operation and result, and their seconds (what
        S3 charges for, and how long it takes)."""
        requests = CounterMetricFamily("compactlog_remote_store_requests", "Requests to the object store by "
                                       "operation and result", labels=["op", "result"])
        for (kind, *rest), n in sorted((k, v) for k, v in own.items() if isinstance(k, tuple) and k[0] == "store"):
            requests.add_metric(rest, n)
        yield requests
        seconds = HistogramMetricFamily("compactlog_remote_store_request_seconds", "Seconds of each request to "
                                        "the object store", labels=["op"])
        ops = sorted({k[1] for k in own if isinstance(k, tuple) and k[0] == "store_sum"})
        for op in ops:
            cumulative, buckets = 0, []
            for i, le in enumerate(STORE_BUCKETS):
                cumulative += own.get(("store_le", op, i), 0)
                buckets.append((repr(le), cumulative))
            cumulative += own.get(("store_le", op, len(STORE_BUCKETS)), 0)
            buckets.append(("+Inf", cumulative))
            seconds.add_metric([op], buckets, own.get(("store_sum", op), 0.0))
        yield seconds

    def _idle(self, pool: str, busy_ms: float, threads: int, since: float) -> float:
        """The fraction of the pool's thread time idle since the last scrape (Kafka's
        AvgIdlePercent, 0-1)."""
        now = time.monotonic()
        then, busy_then = self._last.get(pool, (since, 0.0))
        self._last[pool] = (now, busy_ms)
        elapsed = (now - then) * 1000 * max(threads, 1)
        return 1.0 if elapsed <= 0 else min(max(1.0 - (busy_ms - busy_then) / elapsed, 0.0), 1.0)

    def _pools(self, remote, own: dict):
        stats = remote.metrics
        yield GaugeMetricFamily("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidlepercent",
                                "Fraction of the copy and expiration tasks' time idle since the last scrape "
                                "(RemoteLogManagerTasksAvgIdlePercent)",
                                value=self._idle("tasks", own.get(TASKS_MS, 0.0), 1, stats.started))
        pool = "org_apache_kafka_storage_internals_log_remotestoragethreadpool_remotelogreader"
        queue = getattr(getattr(remote.readers, "_work_queue", None), "qsize", lambda: 0)()
        yield GaugeMetricFamily(pool + "taskqueuesize", "Remote reads waiting for a reader thread "
                                "(RemoteLogReaderTaskQueueSize)", value=queue)
        yield GaugeMetricFamily(pool + "avgidlepercent", "Fraction of the reader threads' time idle since the last "
                                "scrape (RemoteLogReaderAvgIdlePercent)",
                                value=self._idle("reader", own.get(READ_MS, 0.0), remote.readers._max_workers,
                                                 stats.started))
        name = "kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems"
        values = sorted(stats.read_times)           # one C-level copy beside the appending readers
        g = GaugeMetricFamily(name, "Remote read time in ms, percentiles of the last reads "
                                    "(RemoteLogReaderFetchRateAndTimeMs)", labels=["quantile"])
        for text, q in QUANTILES:
            g.add_metric([text], percentile(values, q))
        yield g
        yield GaugeMetricFamily(name + "_count", "Remote reads timed", value=own.get(READS, 0))

    def _gauges(self, remote, state, live) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        deleting = dict(remote.metrics.delete_lag)
        for (topic, partition), log in sorted(list(state.datadir.logs.items()), key=lambda x: x[0]):
            if not live(topic) or log.closed or not log.remote_log_enabled:
                continue
            t0 = time.perf_counter()
            row = tier_row(remote, log)
            took = (time.perf_counter() - t0) * 1000
            g = out.setdefault(topic, {f: 0 for f, _, _ in GAUGES})
            if row is None:
                continue
            del_bytes, del_segments = deleting.get((topic, partition), (0, 0))
            g["copy_lag_bytes"] += row["copyLagBytes"]
            g["copy_lag_segments"] += row["copyLagSegments"]
            g["delete_lag_bytes"] += del_bytes
            g["delete_lag_segments"] += del_segments
            g["metadata_count"] += row["metadataCount"]
            g["size_bytes"] += row["remoteSizeBytes"]
            g["size_ms"] += took
        return out

    @staticmethod
    def _caches(remote):
        family = CounterMetricFamily("compactlog_remote_cache_hits", "Remote reads served from the broker's "
                                     "cache", labels=["cache"])
        misses = CounterMetricFamily("compactlog_remote_cache_misses", "Remote reads that went to the store",
                                     labels=["cache"])
        for name, lru in (("chunk", remote.chunks), ("index", remote.indexes)):
            family.add_metric([name], lru.hits)
            misses.add_metric([name], lru.misses)
        yield family
        yield misses
