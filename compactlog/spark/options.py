"""The ``kafka-log`` source's and sink's options, checked as Spark's Kafka source checks its own.

Names and meanings follow Spark's ``KafkaSourceProvider`` (Structured Streaming + Kafka Integration
Guide): ``assign``/``subscribe``/``subscribePattern``, ``startingOffsets``/``endingOffsets``,
``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``, ``startingTimestamp``/
``endingTimestamp``, ``startingOffsetsByTimestampStrategy``, ``failOnDataLoss``,
``maxOffsetsPerTrigger``/``minOffsetsPerTrigger``/``maxTriggerDelay``, ``minPartitions``,
``maxRecordsPerPartition``, ``includeHeaders``, ``kafka.*`` client configs; plus compactlog's own
(``topic``/``partitions``, ``includeControl``, ``includeMetadata``, ``maxBytesPerSplit``,
``recordsPerBatch``, the old ``isolationLevel``). Options are case-insensitive, as in Spark.

Every problem is one ``KafkaLogError`` line naming the option and the value. An unknown name is
an error (with the closest known names), never ignored. ``kafka.*`` names are Kafka client configs:
``kafka.isolation.level`` (consumer) and ``kafka.compression.type`` (producer) act here; the other
known configs (``kafka.bootstrap.servers``, security, timeouts...) are accepted so that code written
for Spark's Kafka source runs unchanged, and have no effect on a data directory; the ones Spark
refuses (deserializers, ``auto.offset.reset``, ``enable.auto.commit``, interceptors) are refused.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Mapping

from ..errors import CompactlogError
from ..storage.config import did_you_mean

EARLIEST, LATEST = -2, -1


class KafkaLogError(CompactlogError, ValueError):
    """A bad option, an offset that cannot be served, or lost data: one line, naming the option."""


def in_spark_worker() -> bool:
    """Running inside a Python worker Spark started (planner, task, stream runner, commit)?"""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (getattr(spec, "name", None) or "").startswith("pyspark.")


def surface(error: BaseException) -> BaseException:
    """Make Spark show ``error`` as one line: inside a Spark Python worker, ask PySpark's error
    handler (``pyspark.util.handle_worker_exception``, which reads SPARK_HIDE_TRACEBACK when it
    formats) for the exception line without the traceback. The worker exits after reporting an
    error, so the setting dies with it; in any other process nothing changes."""
    if in_spark_worker() and isinstance(error, CompactlogError):
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
    return error


# --- the names -----------------------------------------------------------------------------------

STRATEGIES = ("assign", "subscribe", "subscribePattern")
READ_OPTIONS = (
    "path", "assign", "subscribe", "subscribePattern", "topic", "partitions",
    "startingOffsets", "endingOffsets", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "includeHeaders", "includeControl", "includeMetadata", "isolationLevel",
    "minPartitions", "maxRecordsPerPartition", "maxBytesPerSplit", "recordsPerBatch",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    # Spark's Kafka-client options that mean nothing without a broker: accepted, no effect
    "groupIdPrefix", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafkaConsumer.pollTimeoutMs",
)
WRITE_OPTIONS = ("path", "topic")
STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay")
BATCH_ONLY = ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp")

# Kafka client configs (ConsumerConfig, ProducerConfig, CommonClientConfigs) Spark passes through
KAFKA_CONFIGS = (
    "bootstrap.servers", "client.dns.lookup", "group.id", "group.instance.id", "group.protocol",
    "group.remote.assignor", "session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy",
    "metadata.max.age.ms", "metadata.max.idle.ms", "auto.commit.interval.ms", "client.id", "client.rack",
    "max.partition.fetch.bytes", "send.buffer.bytes", "receive.buffer.bytes", "fetch.min.bytes",
    "fetch.max.bytes", "fetch.max.wait.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "retry.backoff.max.ms", "check.crcs", "metrics.sample.window.ms",
    "metrics.num.samples", "metrics.recording.level", "metric.reporters", "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms", "connections.max.idle.ms", "request.timeout.ms",
    "default.api.timeout.ms", "max.poll.records", "max.poll.interval.ms", "exclude.internal.topics",
    "isolation.level", "allow.auto.create.topics", "security.protocol", "security.providers",
    "enable.metrics.push", "auto.include.jmx.reporter",
    # producer
    "acks", "linger.ms", "batch.size", "buffer.memory", "compression.type", "compression.gzip.level",
    "compression.lz4.level", "compression.zstd.level", "max.request.size", "retries", "delivery.timeout.ms",
    "enable.idempotence", "transactional.id", "transaction.timeout.ms", "max.in.flight.requests.per.connection",
    "max.block.ms", "partitioner.class", "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
)
KAFKA_CONFIG_PREFIXES = ("ssl.", "sasl.")
# Spark's KafkaSourceProvider refuses these, with these reasons
KAFKA_REFUSED = {
    "auto.offset.reset": "set the source option startingOffsets to earliest or latest instead",
    "key.deserializer": "keys are read as bytes; deserialize them with DataFrame operations",
    "value.deserializer": "values are read as bytes; deserialize them with DataFrame operations",
    "enable.auto.commit": "Structured Streaming keeps the offsets in its checkpoint",
    "interceptor.classes": "interceptors could change the records",
    "key.serializer": "keys are written as bytes (a string or binary key column)",
    "value.serializer": "values are written as bytes (a string or binary value column)",
}
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")

_CANONICAL = {n.lower(): n for n in READ_OPTIONS + WRITE_OPTIONS}


def canonical(name: str) -> str:
    return _CANONICAL.get(name.lower(), name)


def check_names(options: Mapping[str, str], allowed: tuple[str, ...], what: str) -> None:
    """Every option is known: one error naming the first unknown one and the closest names."""
    known = {n.lower(): n for n in allowed}
    for raw in options:
        name = raw.lower()
        if name in known or (name.startswith("rsm.config.") and "path" in known):
            continue        # a bucket's store settings (storage.remote.bucket), by Aiven's names
        if name.startswith("kafka."):
            config = name[len("kafka."):]
            if config in KAFKA_REFUSED:
                raise KafkaLogError(f"kafka-log: option kafka.{config} is not supported: {KAFKA_REFUSED[config]}")
            if config in KAFKA_CONFIGS or config.startswith(KAFKA_CONFIG_PREFIXES):
                continue
            hint = did_you_mean(config, KAFKA_CONFIGS, n=2, cutoff=0.75, spell=lambda c: "kafka." + c)
            raise KafkaLogError(f"kafka-log: unknown Kafka client config kafka.{config}{hint}")
        hint = did_you_mean(name, known, n=2, cutoff=0.6, spell=known.get)
        if hint:
            raise KafkaLogError(f"kafka-log: unknown {what} option {raw!r}{hint}")
        raise KafkaLogError(f"kafka-log: unknown {what} option {raw!r}; the {what} options are "
                            f"{', '.join(sorted(set(allowed) - {'path'}, key=str.lower))} and kafka.<client config>")


# --- values --------------------------------------------------------------------------------------

def get(options: Mapping[str, str], name: str) -> str | None:
    v = options.get(name.lower())
    if v is None:
        v = options.get(name)
    return None if v is None else str(v)


def flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = get(options, name)
    if v is None:
        return default
    s = v.strip().lower()
    if s not in ("true", "false"):
        raise KafkaLogError(f"kafka-log: option {name}={v!r}: expected true or false")
    return s == "true"


def integer(options: Mapping[str, str], name: str, default: int | None, *, minimum: int | None = None) -> int | None:
    v = get(options, name)
    if v is None:
        return default
    try:
        n = int(v.strip())
    except ValueError:
        raise KafkaLogError(f"kafka-log: option {name}={v!r}: expected an integer") from None
    if minimum is not None and n < minimum:
        raise KafkaLogError(f"kafka-log: option {name}={v!r}: must be {minimum} or more")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d|us|ns)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(options: Mapping[str, str], name: str, default: str) -> int:
    """Spark's time strings (Utils.timeStringAsMs): a number with ms, s, m, min, h or d; no unit is ms."""
    v = get(options, name)
    raw = default if v is None else v
    m = _DURATION.match(raw)
    if not m:
        raise KafkaLogError(f"kafka-log: option {name}={raw!r}: expected a duration such as 500ms, 30s, 15m or 1h")
    return int(int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()])


def isolation_level(options: Mapping[str, str]) -> str:
    """Spark's default, a Kafka consumer's: read_uncommitted; kafka.isolation.level (or the old
    isolationLevel) changes it."""
    new, old = get(options, "kafka.isolation.level"), get(options, "isolationLevel")
    if new is not None and old is not None and new.strip().lower() != old.strip().lower():
        raise KafkaLogError(f"kafka-log: kafka.isolation.level={new!r} and isolationLevel={old!r} disagree "
                            f"(isolationLevel is the old name of kafka.isolation.level)")
    raw = new if new is not None else old
    if raw is None:
        return "read_uncommitted"
    level = raw.strip().lower()
    if level not in ("read_committed", "read_uncommitted"):
        name = "kafka.isolation.level" if new is not None else "isolationLevel"
        raise KafkaLogError(f"kafka-log: option {name}={raw!r}: expected read_committed or read_uncommitted")
    return level


# --- topic and partition selection ---------------------------------------------------------------

class Strategy:
    """Which topics and partitions a query reads (Spark's ConsumerStrategy: Assign, Subscribe,
    SubscribePattern), plus compactlog's ``topic``/``partitions`` and the path."""

    def __init__(self, kind: str, topics: tuple = (), pattern=None, assigned: frozenset = frozenset(),
                 partitions: frozenset | None = None, internal: bool = False):
        self.kind = kind                # all, assign, subscribe, pattern
        self.topics = topics
        self.pattern = pattern
        self.assigned = assigned        # {(topic, partition)} for assign
        self.partitions = partitions    # compactlog's partitions filter
        self.internal = internal        # subscribePattern matches internal topics

    def wants(self, topic: str, partition: int) -> bool:
        if self.partitions is not None and partition not in self.partitions:
            return False
        if self.kind == "assign":
            return (topic, partition) in self.assigned
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "pattern":
            # Java's Pattern.matcher(topic).matches(): the whole name; Kafka's consumer leaves
            # internal topics out of pattern subscriptions (exclude.internal.topics=true)
            return (self.internal or topic not in INTERNAL_TOPICS) and self.pattern.fullmatch(topic) is not None
        return True

    def describe(self) -> str:
        if self.kind == "assign":
            return "assign " + ", ".join(f"{t}-{p}" for t, p in sorted(self.assigned))
        if self.kind == "subscribe":
            return "subscribe " + ",".join(self.topics)
        if self.kind == "pattern":
            return f"subscribePattern {self.pattern.pattern}"
        return "every topic"


def strategy(options: Mapping[str, str]) -> Strategy:
    given = [(n, get(options, n)) for n in STRATEGIES + ("topic",) if get(options, n) is not None]
    if len(given) > 1:
        raise KafkaLogError("kafka-log: only one of assign, subscribe, subscribePattern (or topic) can be given, "
                            f"not {' and '.join(n for n, _ in given)}")
    parts = _partition_list(get(options, "partitions"))
    internal = not flag(options, "kafka.exclude.internal.topics", True)
    if not given:
        return Strategy("all", partitions=parts)
    name, value = given[0]
    if name == "assign":
        if parts is not None:
            raise KafkaLogError("kafka-log: partitions cannot be combined with assign (assign names the partitions)")
        return Strategy("assign", assigned=frozenset(_assign(value)))
    if name in ("subscribe", "topic"):
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaLogError(f"kafka-log: option {name}={value!r}: no topic to subscribe to")
        return Strategy("subscribe", topics=topics, partitions=parts)
    pattern = value.strip()
    if not pattern:
        raise KafkaLogError(f"kafka-log: option subscribePattern={value!r}: the pattern is empty")
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise KafkaLogError(f"kafka-log: option subscribePattern={value!r}: not a valid pattern: {e}") from None
    return Strategy("pattern", pattern=compiled, partitions=parts, internal=internal)


def _assign(value: str) -> set[tuple[str, int]]:
    text = value.strip()
    if not text.startswith("{"):
        raise KafkaLogError(f"kafka-log: option assign={value!r}: expected JSON such as "
                            f'{{"topicA":[0,1],"topicB":[2,4]}}')
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise KafkaLogError(f"kafka-log: option assign={value!r}: not valid JSON ({e.msg} at character {e.pos})") from None
    out = set()
    if not isinstance(doc, dict):
        raise KafkaLogError(f"kafka-log: option assign={value!r}: expected a JSON object of topic -> [partitions]")
    for topic, parts in doc.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                                                   for p in parts):
            raise KafkaLogError(f"kafka-log: option assign: topic {topic!r} needs a list of partition "
                                f"numbers, got {json.dumps(parts)}")
        out.update((topic, p) for p in parts)
    if not out:
        raise KafkaLogError(f"kafka-log: option assign={value!r}: no topic partition to assign")
    return out


def _partition_list(value: str | None) -> frozenset | None:
    if value is None:
        return None
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items or not all(x.isascii() and x.isdigit() for x in items):
        raise KafkaLogError(f"kafka-log: option partitions={value!r}: expected a comma list of partition numbers")
    return frozenset(int(x) for x in items)


# --- offsets -------------------------------------------------------------------------------------

class OffsetSpec:
    """One side (start or end) of the range to read: earliest, latest, per-partition offsets,
    per-partition timestamps or one timestamp for all (Spark's KafkaOffsetRangeLimit kinds)."""

    def __init__(self, kind: str, option: str, per_partition: dict | None = None, timestamp: int | None = None,
                 strategy_latest: bool = False):
        self.kind = kind                # earliest, latest, offsets, timestamps, timestamp
        self.option = option            # the option it came from, for messages
        self.per_partition = per_partition or {}   # {(topic, partition): offset or timestamp}
        self.timestamp = timestamp
        self.strategy_latest = strategy_latest     # no record at/after the timestamp: latest, not an error


def offset_spec(options: Mapping[str, str], side: str, default: str) -> OffsetSpec:
    """Spark's preference: <side>Timestamp, then <side>OffsetsByTimestamp, then <side>Offsets."""
    strategy_raw = get(options, "startingOffsetsByTimestampStrategy")
    latest_on_miss = False
    if strategy_raw is not None:
        s = strategy_raw.strip().lower()
        if s not in ("error", "latest"):
            raise KafkaLogError(f"kafka-log: option startingOffsetsByTimestampStrategy={strategy_raw!r}: "
                                f"expected error or latest")
        latest_on_miss = s == "latest"
    if side == "ending":
        latest_on_miss = True          # Spark: an ending timestamp nothing reaches means latest
    ts_name, by_ts_name, off_name = f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"
    ts = get(options, ts_name)
    if ts is not None:
        try:
            value = int(ts.strip())
        except ValueError:
            raise KafkaLogError(f"kafka-log: option {ts_name}={ts!r}: expected a timestamp in ms "
                                f"since the epoch") from None
        return OffsetSpec("timestamp", ts_name, timestamp=value, strategy_latest=latest_on_miss)
    by_ts = get(options, by_ts_name)
    if by_ts is not None:
        return OffsetSpec("timestamps", by_ts_name, _partition_json(by_ts, by_ts_name, "timestamp"),
                          strategy_latest=latest_on_miss)
    raw = get(options, off_name)
    text = (raw if raw is not None else default).strip()
    if text.lower() == "earliest":
        return OffsetSpec("earliest", off_name)
    if text.lower() == "latest":
        return OffsetSpec("latest", off_name)
    return OffsetSpec("offsets", off_name, _partition_json(text, off_name, "offset"))


def _partition_json(value: str, name: str, what: str) -> dict[tuple[str, int], int]:
    example = ('{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}' if what == "offset"
               else '{"topicA":{"0":1700000000000,"1":1700000000000}}')
    try:
        doc = json.loads(value)
    except json.JSONDecodeError:
        words = "earliest, latest or " if what == "offset" else ""
        raise KafkaLogError(f"kafka-log: option {name}={value!r}: expected {words}JSON such as {example}") from None
    if not isinstance(doc, dict):
        raise KafkaLogError(f"kafka-log: option {name}={value!r}: expected a JSON object such as {example}")
    out = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise KafkaLogError(f"kafka-log: option {name}: topic {topic!r} needs an object of "
                                f"partition -> {what}, got {json.dumps(parts)}")
        for p, v in parts.items():
            if not (isinstance(p, str) and p.isascii() and p.isdigit()):
                raise KafkaLogError(f"kafka-log: option {name}: {topic!r} partition {p!r} is not a partition number")
            if not isinstance(v, int) or isinstance(v, bool):
                raise KafkaLogError(f"kafka-log: option {name}: {topic}-{p}: {json.dumps(v)} is not an integer {what}")
            if what == "offset" and v < EARLIEST:
                raise KafkaLogError(f"kafka-log: option {name}: {topic}-{p}: offset {v} is invalid "
                                    f"(-2 is earliest, -1 latest, else 0 or more)")
            out[(topic, int(p))] = v
    return out
