"""The remote tier's counters: Kafka's ``RemoteStorageMetrics`` as ``BrokerTopicStats`` keeps them
(the meters ``RemoteCopyBytesPerSec``, ``RemoteCopyRequestsPerSec``, ``RemoteCopyErrorsPerSec``,
``RemoteFetchBytesPerSec``, ``RemoteFetchRequestsPerSec``, ``RemoteFetchErrorsPerSec``,
``RemoteDeleteRequestsPerSec``, ``RemoteDeleteErrorsPerSec`` per topic and for all topics, and
``DelayedRemoteFetchMetrics``' expirations), counted where Kafka marks them:

* copy (``RLMCopyTask.copyLogSegment``): a request per segment whose upload starts, its bytes
  once the copy committed, an error when it failed;
* fetch (``RemoteLogReader``): a request per remote read scheduled, the bytes of the records it
  returned, an error when the store failed (an offset out of range is not one);
* delete (``RemoteLogManager.deleteRemoteLogSegment``): a request per segment whose objects are
  deleted, an error when that failed.

The fetch side runs on every reader thread at once, so nothing here takes a lock per event: each
thread adds into its own dict (one writer per dict, so no update is lost), and the scrape sums
the dicts (``totals``). A thread's dict is registered once, under a lock, the first time it counts.

The gauges (copy lag, remote log size, metadata count) are not counted: the scrape reads them
from the partitions' manifests and logs (``server/metrics/remote.py``); the delete lag is set by
the expiration task while it deletes (``RLMExpirationTask`` sets it the same way).
"""

from __future__ import annotations

import threading
import time
from collections import deque

# (field, metric name after kafka_server_brokertopicmetrics_, help): Kafka's meters, as the JMX
# exporter names them (the PerSec dropped, _total added by the counter)
COUNTERS = (
    ("copy_bytes", "remotecopybytes", "Bytes of segments copied to the remote tier (RemoteCopyBytesPerSec)"),
    ("copy_requests", "remotecopyrequests", "Segment copies started (RemoteCopyRequestsPerSec)"),
    ("copy_errors", "remotecopyerrors", "Segment copies that failed (RemoteCopyErrorsPerSec)"),
    ("fetch_bytes", "remotefetchbytes", "Record bytes read from the remote tier for Fetch "
                                        "(RemoteFetchBytesPerSec)"),
    ("fetch_requests", "remotefetchrequests", "Remote reads scheduled for Fetch (RemoteFetchRequestsPerSec)"),
    ("fetch_errors", "remotefetcherrors", "Remote reads that failed (RemoteFetchErrorsPerSec)"),
    ("delete_requests", "remotedeleterequests", "Remote segments deleted or being deleted "
                                                "(RemoteDeleteRequestsPerSec)"),
    ("delete_errors", "remotedeleteerrors", "Remote segment deletions that failed (RemoteDeleteErrorsPerSec)"),
    # a single node has no follower to rebuild its auxiliary state from the remote tier: always 0
    ("aux_requests", "buildremotelogauxstaterequests", "Always 0 on one node (BuildRemoteLogAuxStateRequestsPerSec)"),
    ("aux_errors", "buildremotelogauxstateerrors", "Always 0 on one node (BuildRemoteLogAuxStateErrorsPerSec)"),
)
FIELDS = tuple(f for f, _, _ in COUNTERS)
# not a topic meter: DelayedRemoteFetchMetrics.expires (kafka_server_delayedremotefetchmetrics_expires_total),
# counted per topic here and summed by the scrape
EXPIRED = "fetch_expired"
# broker-level sums (counted under the topic None): remote reads done and the time they took, the
# time the copy and expiration tasks ran (for the thread pools' AvgIdlePercent gauges)
READS, READ_MS, TASKS_MS = "reads", "read_ms", "tasks_ms"
RESERVOIR = 1024        # the last remote read times kept for the timer's percentiles (metrics.md §5)


class RemoteStorageStats:
    """Per-topic remote counters of one broker (``RemoteLogManager.metrics``)."""

    def __init__(self):
        self._local = threading.local()
        self._shards: list[dict] = []
        self._register = threading.Lock()
        # (topic, partition) -> (bytes, segments) being deleted now (RemoteDeleteLagBytes/Segments)
        self.delete_lag: dict[tuple[str, int], tuple[int, int]] = {}
        # ms of the last remote reads (RemoteLogReaderFetchRateAndTimeMs); a deque's append is
        # atomic, so the reader threads share it without a lock
        self.read_times: deque = deque(maxlen=RESERVOIR)
        self.started = time.monotonic()

    def _counts(self) -> dict:
        try:
            return self._local.counts
        except AttributeError:
            counts: dict = {}
            with self._register:
                self._shards.append(counts)
            self._local.counts = counts
            return counts

    def read_done(self, ms: float) -> None:
        """A remote read finished after ``ms`` (on a reader thread)."""
        self.read_times.append(ms)
        self.add(None, READS)
        self.add(None, READ_MS, ms)

    def add(self, topic: str | None, field: str, n: float = 1) -> None:
        """Count ``n`` for ``topic`` (the all-topics sum is the scrape's; None: the broker's own)."""
        counts = self._counts()
        key = (topic, field)
        counts[key] = counts.get(key, 0) + n

    def totals(self) -> dict[str | None, dict[str, float]]:
        """topic -> field -> count, summed over the threads' dicts (a count added meanwhile is in
        the next scrape); the broker-level sums under None."""
        with self._register:
            shards = list(self._shards)
        out: dict[str, dict[str, int]] = {}
        for shard in shards:
            for (topic, field), n in list(shard.items()):    # one C-level copy: safe beside its writer
                per = out.setdefault(topic, dict.fromkeys(FIELDS, 0))
                per[field] = per.get(field, 0) + n
        return out


# -- the store's requests (compactlog_remote_store_requests_total, ..._request_seconds) ----------------

# request seconds histogram buckets: a ranged GET on loopback takes milliseconds, a 64 MiB PUT seconds
STORE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STORE_OPS = ("put_if_absent", "put_if_match", "get", "get_range", "get_ranges", "head", "list", "delete",
             "delete_many")


def store_result(e: BaseException | None) -> str:
    """The ``result`` label of a store request: ok, precondition_failed (a conditional write that
    lost: expected under contention), not_found, unavailable, or error."""
    from .store import ObjectNotFound, PreconditionFailed, StoreUnavailable
    if e is None:
        return "ok"
    if isinstance(e, PreconditionFailed):
        return "precondition_failed"
    if isinstance(e, ObjectNotFound):
        return "not_found"
    if isinstance(e, StoreUnavailable):
        return "unavailable"
    return "error"


class CountedStore:
    """An ``ObjectStore`` whose every request is counted into a ``RemoteStorageStats`` by
    operation and result, and timed; everything else (``config``, ``close``) is the inner store's.
    Pickled, it is the inner store (a Spark task elsewhere counts into nothing of this broker)."""

    def __init__(self, inner, stats: RemoteStorageStats):
        self.inner = inner
        self.stats = stats
        self.config = inner.config

    def __getattr__(self, name):
        if name == "inner":             # not set yet (unpickling, copying): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    def __reduce_ex__(self, protocol):
        return _inner_store, (self.inner,)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _inner_store(inner):
    return inner


def _counted(op: str):
    from bisect import bisect_left

    def call(self, *args, **kwargs):
        started = time.perf_counter()
        error = None
        try:
            return getattr(self.inner, op)(*args, **kwargs)
        except BaseException as e:
            error = e
            raise
        finally:
            took = time.perf_counter() - started
            stats = self.stats
            stats.add(None, ("store", op, store_result(error)))
            stats.add(None, ("store_le", op, bisect_left(STORE_BUCKETS, took)))
            stats.add(None, ("store_sum", op), took)
    call.__name__ = op
    return call


for _op in STORE_OPS:
    setattr(CountedStore, _op, _counted(_op))


def counted_store(inner, stats: RemoteStorageStats) -> CountedStore:
    """``inner`` with every request counted into ``stats`` (``CountedStore``)."""
    return CountedStore(inner, stats)
