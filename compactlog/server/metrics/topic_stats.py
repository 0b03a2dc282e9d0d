"""Topic traffic: Kafka's ``BrokerTopicStats`` and ``BrokerTopicMetrics`` (meters per topic and
for all topics), counted by the Produce and Fetch handlers and served as the JMX exporter names
them: ``kafka_server_brokertopicmetrics_<x>_total{topic="t"}`` beside the label-less all-topics
series of the same family.

Counts are per batch and per partition, never per record (Kafka's semantics, metrics.md §1):
``totalproducerequests`` once per partition that reached the append, ``messagesin``/``bytesin``
only for appended batches (not for duplicates), ``failedproducerequests`` once per partition
whose append raised, ``bytesrejected`` for a batch larger than max.message.bytes,
``totalfetchrequests`` once per partition answered, ``bytesout`` the record bytes placed in Fetch
answers. Requests refused before the log (unknown topic) count in neither. The all-topics-only
meters: records without a key refused on a compacted topic, batches failing their CRC, sequence
errors (magic numbers other than 2 are refused before the log here, so that meter stays 0).

No lock on the request path: each thread that counts (the event loop, each worker thread) has
its own meters per topic and for all topics, which it alone changes; a scrape adds up every
thread's (issue 28: the per-topic mutex was 10% of a consume's samples). A deleted topic's
counts are dropped at the next scrape (``collect`` is given the topics that exist).
"""

from __future__ import annotations

import threading

from prometheus_client.core import CounterMetricFamily

from ...errors import CorruptRecordError, OutOfOrderSequenceError, RecordTooLargeError

PREFIX = "kafka_server_brokertopicmetrics_"

# (field, metric name, help)
PER_TOPIC = (
    ("messages_in", "messagesin", "Records appended (Kafka's MessagesInPerSec)"),
    ("bytes_in", "bytesin", "Batch bytes appended by Produce (BytesInPerSec)"),
    ("bytes_out", "bytesout", "Record bytes placed in Fetch answers (BytesOutPerSec)"),
    ("total_produce", "totalproducerequests", "Partitions of Produce requests that reached the log "
                                              "(TotalProduceRequestsPerSec)"),
    ("total_fetch", "totalfetchrequests", "Partitions of Fetch requests answered (TotalFetchRequestsPerSec)"),
    ("failed_produce", "failedproducerequests", "Partitions whose append failed (FailedProduceRequestsPerSec)"),
    ("failed_fetch", "failedfetchrequests", "Partitions whose read failed (FailedFetchRequestsPerSec)"),
    ("bytes_rejected", "bytesrejected", "Bytes of batches refused as too large (BytesRejectedPerSec)"),
)
ALL_TOPICS_ONLY = (
    ("no_key_compacted", "nokeycompactedtopicrecords", "Records without a key refused on a compacted topic "
                                                       "(NoKeyCompactedTopicRecordsPerSec)"),
    ("invalid_magic", "invalidmagicnumberrecords", "Batches with a magic number other than 2 refused by "
                                                   "the log (InvalidMagicNumberRecordsPerSec)"),
    ("invalid_crc", "invalidmessagecrcrecords", "Batches whose CRC did not match (InvalidMessageCrcRecordsPerSec)"),
    ("invalid_sequence", "invalidoffsetorsequencerecords", "Batches refused for their offsets or producer "
                                                           "sequence (InvalidOffsetOrSequenceRecordsPerSec)"),
)


class TopicTraffic:
    """The meters of one topic, or of all topics, as one thread counts them."""

    __slots__ = tuple(f for f, _, _ in PER_TOPIC) + tuple(f for f, _, _ in ALL_TOPICS_ONLY)

    def __init__(self):
        for f in self.__slots__:
            setattr(self, f, 0)

    def snapshot(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in self.__slots__}


ALL = None      # the key of the all-topics meters in a thread's table


class BrokerTopicStats:
    """Per-topic and all-topics traffic of one broker (``state.topic_stats``)."""

    def __init__(self):
        self._local = threading.local()
        self._tables: list[dict] = []       # each counting thread's {topic or ALL: TopicTraffic}
        self._register = threading.Lock()   # taken once per thread, at its first count

    def _table(self) -> dict:
        table = getattr(self._local, "table", None)
        if table is None:
            table = self._local.table = {ALL: TopicTraffic()}
            with self._register:
                self._tables.append(table)
        return table

    def _pair(self, topic: str) -> tuple[TopicTraffic, TopicTraffic]:
        """This thread's meters of ``topic`` and of all topics (only this thread changes them)."""
        table = self._table()
        t = table.get(topic)
        if t is None:
            t = table[topic] = TopicTraffic()
        return t, table[ALL]

    @property
    def all_topics(self) -> TopicTraffic:
        """Every thread's all-topics meters added up (a copy)."""
        return self._sum(ALL)

    def topic(self, name: str) -> TopicTraffic:
        """Every thread's meters of ``name`` added up (a copy)."""
        return self._sum(name)

    def _sum(self, key) -> TopicTraffic:
        out = TopicTraffic()
        for table in list(self._tables):
            t = table.get(key)
            if t is not None:
                for f, v in t.snapshot().items():
                    setattr(out, f, getattr(out, f) + v)
        return out

    # -- Produce (ReplicaManager.appendToLocalLog)
    def appended(self, topic: str, records: int, size: int, duplicate: bool) -> None:
        for t in self._pair(topic):
            t.total_produce += 1
            if not duplicate:
                t.messages_in += records
                t.bytes_in += size

    def append_error(self, topic: str, size: int, error: Exception) -> None:
        """A partition's append raised ``error``: counted by what it says of the batch."""
        self.append_failed(topic, size, too_large=isinstance(error, RecordTooLargeError),
                           keyless=getattr(error, "keyless_records", 0),
                           bad_crc=isinstance(error, CorruptRecordError) and error.field == "crc",
                           bad_sequence=isinstance(error, OutOfOrderSequenceError))

    def append_failed(self, topic: str, size: int, *, too_large: bool = False, keyless: int = 0,
                      bad_crc: bool = False, bad_sequence: bool = False) -> None:
        t, a = self._pair(topic)
        for x in (t, a):
            x.total_produce += 1
            x.failed_produce += 1
            if too_large:
                x.bytes_rejected += size
        a.no_key_compacted += keyless
        a.invalid_crc += bad_crc
        a.invalid_sequence += bad_sequence

    # -- Fetch (ReplicaManager.readFromLog, KafkaApis' BytesOut)
    def fetched(self, topic: str, partitions: int, failed: int, size: int) -> None:
        for t in self._pair(topic):
            t.total_fetch += partitions
            t.failed_fetch += failed
            t.bytes_out += size

    def fetch_failed(self, topic: str) -> None:
        for t in self._pair(topic):
            t.total_fetch += 1
            t.failed_fetch += 1

    # -- the scrape
    def collect(self, live_topics: set[str] | None):
        """The families, each with the all-topics series and one per live topic (the counts of
        topics no longer in ``live_topics`` are forgotten; None: keep every topic). A thread
        counting a topic as it is forgotten may lose that count: the topic is gone."""
        totals: dict = {}
        for table in list(self._tables):
            for name, t in list(table.items()):
                if name is not ALL and live_topics is not None and name not in live_topics:
                    table.pop(name, None)       # one C call: the owner's next count makes a new one
                    continue
                into = totals.get(name)
                if into is None:
                    totals[name] = t.snapshot()
                else:
                    for f, v in t.snapshot().items():
                        into[f] += v
        zero = TopicTraffic().snapshot()
        total = totals.pop(ALL, zero)
        per_topic = sorted(totals.items())
        for field, name, doc in PER_TOPIC:
            family = CounterMetricFamily(PREFIX + name, doc, labels=["topic"])
            family.add_metric([], total[field])
            for topic, counts in per_topic:
                family.add_metric([topic], counts[field])
            yield family
        for field, name, doc in ALL_TOPICS_ONLY:
            family = CounterMetricFamily(PREFIX + name, doc, labels=[])
            family.add_metric([], total[field])
            yield family
