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

One small lock per topic and one for all topics: a Produce partition costs two lock holds and a
few additions (Kafka marks the meters the same way, on the request thread). A deleted topic's
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
    """The meters of one topic, or of all topics."""

    __slots__ = ("lock",) + tuple(f for f, _, _ in PER_TOPIC) + tuple(f for f, _, _ in ALL_TOPICS_ONLY)

    def __init__(self):
        self.lock = threading.Lock()
        for f in self.__slots__[1:]:
            setattr(self, f, 0)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {f: getattr(self, f) for f in self.__slots__[1:]}


class BrokerTopicStats:
    """Per-topic and all-topics traffic of one broker (``state.topic_stats``)."""

    def __init__(self):
        self.all_topics = TopicTraffic()
        self._topics: dict[str, TopicTraffic] = {}
        self._create = threading.Lock()

    def topic(self, name: str) -> TopicTraffic:
        t = self._topics.get(name)
        if t is None:
            with self._create:
                t = self._topics.setdefault(name, TopicTraffic())
        return t

    # -- Produce (ReplicaManager.appendToLocalLog)
    def appended(self, topic: str, records: int, size: int, duplicate: bool) -> None:
        for t in (self.topic(topic), self.all_topics):
            with t.lock:
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
        for t in (self.topic(topic), self.all_topics):
            with t.lock:
                t.total_produce += 1
                t.failed_produce += 1
                if too_large:
                    t.bytes_rejected += size
        if keyless or bad_crc or bad_sequence:
            a = self.all_topics
            with a.lock:
                a.no_key_compacted += keyless
                a.invalid_crc += bad_crc
                a.invalid_sequence += bad_sequence

    # -- Fetch (ReplicaManager.readFromLog, KafkaApis' BytesOut)
    def fetched(self, topic: str, partitions: int, failed: int, size: int) -> None:
        for t in (self.topic(topic), self.all_topics):
            with t.lock:
                t.total_fetch += partitions
                t.failed_fetch += failed
                t.bytes_out += size

    def fetch_failed(self, topic: str) -> None:
        for t in (self.topic(topic), self.all_topics):
            with t.lock:
                t.total_fetch += 1
                t.failed_fetch += 1

    # -- the scrape
    def collect(self, live_topics: set[str] | None):
        """The families, each with the all-topics series and one per live topic (the counts of
        topics no longer in ``live_topics`` are forgotten; None: keep every topic)."""
        if live_topics is not None:
            with self._create:      # handler threads add topics meanwhile: no iteration outside it
                for name in [n for n in self._topics if n not in live_topics]:
                    del self._topics[name]
        per_topic = sorted((name, t.snapshot()) for name, t in list(self._topics.items()))
        total = self.all_topics.snapshot()
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
