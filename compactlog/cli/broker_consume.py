"""``consume --bootstrap-server``: kafka-console-consumer.sh through a broker, with confluent-kafka's
Consumer (librdkafka); the same output as the offline ``consume`` (``--property print.*``, kcat's
``--format``, JSON lines: ``record_format.py``) and the same end: at the end of every partition
read (as ``kcat -e``) unless ``--follow`` or ``--timeout-ms``.

As the console consumer: with ``--group``, the topic is subscribed in that group (the group's
committed offsets first, then ``--from-beginning``'s earliest or the end), or with ``--partition``
assigned at the offset asked; the offset after each printed record is committed (stored after
printing, committed every 5 s and at exit), so a run that stops at ``--max-messages`` resumes
after the last record it printed. Without ``--group`` partitions are assigned and nothing is
committed (Kafka's tool makes up a ``console-consumer-NNNNN`` group; compactlog leaves no trace).
"""

from __future__ import annotations

import sys
import time

from .record_format import TextFormat, formatted_line, json_record
from .remote import TIMEOUT_S, BrokerError, ClientLog

UNUSED_GROUP = "compactlog-console-consumer"     # librdkafka wants a group.id; never joined nor committed


def consume_through_broker(bootstrap: str, topic: str, *, group: str | None, partition: int | None, start,
                           isolation_level: str, output_format: str, fmt, max_messages: int | None,
                           follow: bool, timeout_ms: int | None, overrides: dict, total: list,
                           stop=None) -> None:
    from confluent_kafka import Consumer, KafkaException
    log = ClientLog()
    conf = {"bootstrap.servers": bootstrap, "group.id": group or UNUSED_GROUP, "enable.partition.eof": True,
            "isolation.level": isolation_level, "enable.auto.commit": group is not None,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest" if start.kind == "earliest" else "latest", **log.config(), **overrides}
    try:
        consumer = Consumer(conf)
    except (KafkaException, ValueError, TypeError) as e:
        raise BrokerError(f"--consumer-property: {_text(e)}") from None
    try:
        partitions = _partitions(consumer, bootstrap, topic, partition, log)
        assigned: set[int] = set()
        if group is not None and partition is None and start.kind in ("earliest", "latest"):
            def on_assign(c, tps) -> None:
                assigned.update(tp.partition for tp in tps)

            def on_revoke(c, tps) -> None:
                assigned.difference_update(tp.partition for tp in tps)
            consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        else:
            consumer.assign(_start_positions(bootstrap, topic, partitions, start))
            assigned.update(partitions)
        positions = _print_messages(consumer, bootstrap, assigned, group is not None, output_format, fmt,
                                    max_messages, follow, timeout_ms, total, log, stop)
        if group is not None:
            _keep_positions(consumer, topic, assigned, positions, conf["auto.offset.reset"])
    finally:
        consumer.close()        # with --group: the stored offsets are committed here


def _text(e) -> str:
    err = e.args[0] if e.args else e
    return err.str() if hasattr(err, "str") else str(err)


def _partitions(consumer, bootstrap: str, topic: str, partition: int | None, log: ClientLog) -> list[int]:
    from confluent_kafka import KafkaException
    try:
        md = consumer.list_topics(topic, timeout=TIMEOUT_S)
    except KafkaException as e:
        raise BrokerError(f"{bootstrap}: cannot read metadata: {_text(e)}{log.why()}") from None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        why = f"{t.error.name()}: {t.error.str()}" if t is not None else "not in the broker's metadata"
        raise BrokerError(f"topic {topic!r}: {why}")
    parts = sorted(t.partitions)
    if partition is not None:
        if partition not in parts:
            raise BrokerError(f"partition {topic}-{partition} does not exist on {bootstrap} "
                              f"(partitions: {', '.join(map(str, parts))})")
        return [partition]
    return parts


def _start_positions(bootstrap: str, topic: str, partitions: list[int], start) -> list:
    """A TopicPartition at the start offset of each partition (ListOffsets for times)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition
    if start.kind in ("earliest", "latest", "offset"):
        at = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}.get(start.kind, start.value)
        return [TopicPartition(topic, p, at) for p in partitions]
    from confluent_kafka.admin import OffsetSpec
    from .remote import admin_client, result
    admin = admin_client(bootstrap)     # referenced until its futures resolve (librdkafka)
    spec = OffsetSpec.max_timestamp() if start.kind == "max-timestamp" else OffsetSpec.for_timestamp(start.value)
    futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions})
    out = []
    for tp, fut in futures.items():
        info = result(fut, f"{tp.topic}-{tp.partition}")
        if info.offset >= 0:
            out.append(TopicPartition(topic, tp.partition, info.offset))
        elif start.kind == "timestamp":      # no record at or after the time yet: wait at the end
            out.append(TopicPartition(topic, tp.partition, OFFSET_END))
    return sorted(out, key=lambda tp: tp.partition)


def _keep_positions(consumer, topic: str, assigned: set[int], positions: dict[int, int], reset: str) -> None:
    """Store, for the commit at close, where each assigned partition stands: after its last
    printed record, at the first record fetched but not printed, at the end it reached; and a
    partition nothing was seen of keeps its committed offset, or, having none, where
    auto.offset.reset started it (as Kafka's consumer commits its position at close)."""
    from confluent_kafka import KafkaException, TopicPartition
    unknown = [TopicPartition(topic, p) for p in sorted(assigned - set(positions))]
    try:
        if unknown:
            for tp in consumer.committed(unknown, timeout=TIMEOUT_S):
                if tp.offset < 0:
                    low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
                    positions[tp.partition] = low if reset == "earliest" else high
        stored = [TopicPartition(topic, p, o) for p, o in sorted(positions.items()) if p in assigned]
        if stored:
            consumer.store_offsets(offsets=stored)
    except KafkaException:
        pass        # the group moved on (a rebalance): what was stored before stands


def _print_messages(consumer, bootstrap: str, assigned: set[int], commit: bool, output_format: str, fmt,
                    max_messages: int | None, follow: bool, timeout_ms: int | None, total: list,
                    log: ClientLog, stop=None) -> dict[int, int]:
    """Print until the end (or the limit, or the quiet time); each partition's position after what
    was printed: the offset to resume at."""
    from confluent_kafka import KafkaError
    out = sys.stdout
    out.flush()
    sink = getattr(out, "buffer", None)
    render = _renderer(output_format, fmt)
    at_end: set[int] = set()
    positions: dict[int, int] = {}
    remaining = max_messages
    idle_since = time.monotonic()
    while remaining != 0 and not (stop is not None and stop.is_set()):
        messages = consumer.consume(num_messages=500, timeout=0.2)
        chunk = []
        progressed = False
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    progressed |= m.partition() not in at_end
                    at_end.add(m.partition())
                    if remaining != 0:
                        positions[m.partition()] = m.offset()
                    else:
                        positions.setdefault(m.partition(), m.offset())
                elif err.fatal() or not err.retriable() and err.code() > 0:
                    raise BrokerError(f"{bootstrap}: {m.topic()}-{m.partition()}: {err.name()}: {err.str()}")
                else:
                    log.last = f"{err.name()}: {err.str()}"
                continue
            if remaining == 0:
                # fetched after the last record to print: a partition nothing was printed of resumes at it
                positions.setdefault(m.partition(), m.offset())
                continue
            chunk.append(render(m))
            at_end.discard(m.partition())
            positions[m.partition()] = m.offset() + 1
            if commit:
                consumer.store_offsets(message=m)
            progressed = True
            if remaining is not None:
                remaining -= 1
        if chunk:
            data = b"".join(chunk)
            if sink is not None:
                sink.write(data)
                sink.flush()
            else:
                out.write(data.decode("utf-8", errors="replace"))
            total[0] += len(chunk)
        now = time.monotonic()
        if chunk or progressed:
            idle_since = now
        if follow:
            if timeout_ms is not None and chunk == [] and (now - idle_since) * 1000 >= timeout_ms:
                break
        elif assigned and at_end >= assigned:
            break
        elif now - idle_since > TIMEOUT_S:
            raise BrokerError(f"no answer from {bootstrap} within {TIMEOUT_S} s{log.why()}")
    return positions


def _renderer(output_format: str, fmt):
    """message -> the bytes printed for it."""
    if output_format == "jsonl":
        return lambda m: json_record(m.topic(), m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                                     m.headers())
    if isinstance(fmt, TextFormat):
        return lambda m: formatted_line(fmt, m.partition(), m.offset(), _timestamp_text(m.timestamp()), m.key(),
                                        m.value(), m.headers())
    return lambda m: fmt.render(m.topic(), m.partition(), m.offset(), _timestamp_ms(m.timestamp()), m.key(),
                                m.value(), m.headers())


def _timestamp_text(stamp: tuple[int, int]) -> str:
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
    kind, ms = stamp
    if kind == TIMESTAMP_CREATE_TIME:
        return f"CreateTime:{ms}"
    if kind == TIMESTAMP_LOG_APPEND_TIME:
        return f"LogAppendTime:{ms}"
    return "NO_TIMESTAMP"


def _timestamp_ms(stamp: tuple[int, int]) -> int:
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE
    return -1 if stamp[0] == TIMESTAMP_NOT_AVAILABLE else stamp[1]
