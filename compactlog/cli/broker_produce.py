"""``produce --bootstrap-server``: kafka-console-producer.sh through a broker, with confluent-kafka's
Producer (librdkafka).

Lines are read and parsed as the offline ``produce`` reads them (``--property parse.key=true``,
``key.separator``, ``null.marker``, headers, or JSON lines), a chunk at a time: a line that does not
parse stops the command before anything of its chunk is sent. Records go where Kafka's Java producer
sends them (``partitioner=murmur2_random``: murmur2 of the key, a sticky partition without one),
with the console producer's defaults: ``acks=all`` (``--request-required-acks``) and, as Java's
producer since Kafka 3.0, idempotence when acks is all. ``--producer-property K=V`` passes any
librdkafka setting (``linger.ms``, ``enable.idempotence``, ...). The first record the broker refuses
stops the reading; what was sent before it is delivered, and the command exits 1 naming the line.
"""

from __future__ import annotations

import sys
import time

import typer

from .remote import TIMEOUT_S, BrokerError, ClientLog

# kafka-console-producer's --request-required-acks values -> librdkafka's acks
ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}


def producer_config(bootstrap: str, acks: str, compression: str, batch_records: int,
                    overrides: dict[str, str]) -> dict:
    conf = {"bootstrap.servers": bootstrap, "acks": ACKS[acks], "compression.type": compression,
            "partitioner": "murmur2_random", "batch.num.messages": batch_records,
            "message.timeout.ms": TIMEOUT_S * 1000, "enable.idempotence": ACKS[acks] == "all"}
    conf.update(overrides)
    return conf


class _Deliveries:
    """What the broker answered for each record: the first refusal, and with ``verbose`` each
    record's place as it is acknowledged."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.failed: tuple[int, str] | None = None      # the first refused line and why
        self.failed_lines: list[int] = []

    def where(self) -> str:
        """``line 3``, or ``lines 1-4 (2 records)`` when the broker refused several (a batch is
        refused whole: its good records with its bad one)."""
        lines = sorted(self.failed_lines)
        if len(lines) == 1:
            return f"line {lines[0]}"
        return f"lines {lines[0]}-{lines[-1]} ({len(lines)} records)"

    def callback(self, line: int):
        def on_delivery(err, msg) -> None:
            if err is not None:
                self.failed_lines.append(line)
                if self.failed is None or line < self.failed[0]:
                    self.failed = (line, f"{err.name()}: {err.str()}")
            elif self.verbose:
                typer.echo(f"{msg.topic()}-{msg.partition()}: appended 1 record at offset {msg.offset()}")
        return on_delivery


def produce_through_broker(bootstrap: str, topic: str, input_format: str, fmt, conf: dict, verbose: bool) -> None:
    from confluent_kafka import KafkaException, Producer
    from .produce import input_chunks, parse_records
    log = ClientLog()
    try:
        producer = Producer({**conf, **log.config()})
    except (KafkaException, ValueError, TypeError) as e:
        raise BrokerError(f"--producer-property: {e.args[0].str() if e.args and hasattr(e.args[0], 'str') else e}") from None
    deliveries = _Deliveries(verbose)
    line_no = 0
    try:
        for lines in input_chunks(sys.stdin):
            # the whole chunk parsed first: a bad line sends nothing of its chunk; no timestamp
            # (-1) unless the line gives one: the producer stamps the record when it is sent
            records = list(parse_records(lines, line_no, input_format, fmt, -1))
            line_no += len(lines)
            for rec in records:
                if deliveries.failed is not None:
                    break
                _send(producer, topic, rec, deliveries)
            producer.poll(0)
            if deliveries.failed is not None:
                break
    except KeyboardInterrupt:
        pass            # ^C ends the input: what was read is still delivered
    left = producer.flush(TIMEOUT_S)
    if deliveries.failed is not None:
        why = deliveries.failed[1]
        if why.startswith("_"):         # librdkafka's own (a timeout, a closed connection)
            raise BrokerError(f"{deliveries.where()}: not delivered to {bootstrap}: {why}{log.why()}")
        raise BrokerError(f"{deliveries.where()}: the broker refused the record: {why}")
    if left:
        raise BrokerError(f"{left} record(s) not acknowledged by {bootstrap} within {TIMEOUT_S} s{log.why()}")


def _send(producer, topic: str, rec, deliveries: _Deliveries) -> None:
    kwargs = {"value": rec.value, "key": rec.key, "on_delivery": deliveries.callback(rec.line)}
    if rec.partition is not None:
        kwargs["partition"] = rec.partition
    if rec.timestamp >= 0:
        kwargs["timestamp"] = rec.timestamp
    if rec.headers:
        kwargs["headers"] = rec.headers
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:         # librdkafka's queue is full: let deliveries drain it
            if time.monotonic() > deadline:
                raise BrokerError(f"line {rec.line}: the producer's queue stayed full for {TIMEOUT_S} s") from None
            producer.poll(0.1)
