"""``produce``: kafka-console-producer.sh into a data dir, from lines on stdin (through a broker with
``--bootstrap-server``: ``broker_produce.py``; stdin read and its lines parsed: ``produce_input.py``).

Input is read a chunk at a time, a chunk being everything stdin has available at that moment (up to
4 MiB): piped input is parsed and validated as a whole chunk and appended in batches of up to
``--batch-size`` records (and 1 MiB), while a line typed at a terminal, or fed slowly, is appended
as soon as it arrives. An invalid line stops the producer before anything of its chunk is appended.

Partitioning follows Kafka's clients: a record with a key goes to ``murmur2(key) % partitions``
(the default partitioner), one with an explicit ``partition`` (JSON input) there; records with
neither stick to one partition until a batch's worth (batch.size, 16384 bytes) went there, then
move to another (Kafka's built-in sticky partitioner, KIP-480/794).
Records without a timestamp get the wall clock at the moment their chunk was read. Partitioning,
batching, the checks against the topic and the appends are the producer's (``compactlog.producer``,
shared with the Python API and the Spark sink); this command reads lines and words what is refused.
"""

from __future__ import annotations

import io
import os
import sys
import time

import typer

from ..storage.config import parse_assignments
from .common import context, fail
from .apps import app
from .produce_input import InputError, LineFormat, PendingRecord, input_chunks, line_format, parse_records
from .progress import progress


# -- the command ----------------------------------------------------------------------------------

@app.command("produce")
def produce_cmd(ctx: typer.Context,
                topic: str = typer.Option(..., "--topic", help="The topic to produce to."),
                prop: list[str] = typer.Option(None, "--property",
                                               help="Line reader property K=V (kafka-console-producer's): "
                                                    "parse.key, key.separator, null.marker, parse.headers, "
                                                    "headers.delimiter, headers.separator, "
                                                    "headers.key.separator, ignore.error. Text input only."),
                input_format: str = typer.Option("text", "--input-format",
                                                 help="text (lines, like the console producer) or jsonl "
                                                      "(one {key, value, timestamp, headers, partition} "
                                                      "object per line, as `consume --output-format jsonl` prints)."),
                batch_size: int = typer.Option(500, "--batch-size",
                                               help="At most this many records per batch (1: every line "
                                                    "is its own batch)."),
                compression: str = typer.Option("none", "--compression-codec",
                                                help="none, gzip, snappy, lz4 or zstd."),
                verbose: bool = typer.Option(False, "--verbose", help="Print each appended batch's offsets "
                                             "(each record's, through a broker)."),
                bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                     help="Produce through this broker (HOST:PORT) with a Kafka "
                                                          "client (confluent-kafka), as kafka-console-producer; "
                                                          "default: append to --data-dir."),
                acks: str = typer.Option("all", "--request-required-acks",
                                         help="With --bootstrap-server: acks all (-1), 1 or 0."),
                producer_prop: list[str] = typer.Option(None, "--producer-property",
                                                        help="With --bootstrap-server: a producer setting K=V "
                                                             "(librdkafka's names, e.g. linger.ms=100), "
                                                             "repeatable.")):
    """Append records read from stdin, one per line; prints nothing on success (like the console producer)."""
    from ..record.compression import CODEC_BY_NAME
    c = context(ctx)
    if input_format not in ("text", "jsonl"):
        fail(f"--input-format {input_format!r}: expected text or jsonl")
    if batch_size < 1:
        fail(f"--batch-size must be at least 1, got {batch_size}")
    if compression not in CODEC_BY_NAME:
        fail(f"--compression-codec {compression!r}: expected one of {', '.join(CODEC_BY_NAME)}")
    props = parse_assignments(prop, "--property")
    if props and input_format == "jsonl":
        fail("--property applies to text input only (JSON lines carry key, value and headers)")
    fmt = line_format(props)
    producer_props = parse_assignments(producer_prop, "--producer-property")
    if bootstrap_server:
        from .broker_produce import ACKS, producer_config, produce_through_broker
        if acks not in ACKS:
            fail(f"--request-required-acks {acks!r}: expected all, -1, 1 or 0", 2)
        conf = producer_config(bootstrap_server, acks, compression, batch_size, producer_props)
        produce_through_broker(bootstrap_server, topic, input_format, fmt, conf, verbose)
        return
    if producer_props or acks != "all":
        fail("--request-required-acks and --producer-property need --bootstrap-server (a data dir is "
             "appended to directly)", 2)
    from ..producer import Producer   # numba and pyarrow: loaded when a record is produced, not for --help
    with c.open(write=True) as dd:
        producer = Producer(dd, compression=compression, batch_records=batch_size)
        target = producer.target(topic)
        line_no = 0
        try:
            with progress("producing", _stdin_file_size(), unit="bytes", min_total=64 << 20) as bar:
                for lines in input_chunks(sys.stdin):
                    now = int(time.time() * 1000)
                    records, outgoing = parse_lines(lines, line_no, input_format, fmt, producer, target, now)
                    line_no += len(lines)
                    append(producer, target, records, outgoing, verbose)
                    bar.advance(sum(len(x) + 1 for x in lines))
        except KeyboardInterrupt:
            pass      # ^C ends the input: what was read before is appended already


def _stdin_file_size() -> int:
    """The size of stdin when it is a regular file (a progress bar's total), else 0."""
    try:
        st = os.fstat(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0
    import stat
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


# -- validation against the topic -----------------------------------------------------------------

def parse_lines(lines: list[bytes], first_line: int, input_format: str, fmt: LineFormat, producer: Producer,
                target: TopicTarget, now: int) -> tuple[list[PendingRecord], OutgoingRecords]:
    """Records of one chunk, each checked against the topic (nothing is appended yet). A line that
    does not parse is reported after any refused record before it, as a check line by line would."""
    out = []
    try:
        for rec in parse_records(lines, first_line, input_format, fmt, now):
            out.append(rec)
    except InputError:
        check_records(producer, target, out, now)
        raise
    return out, check_records(producer, target, out, now)


def check_records(producer: Producer, target: TopicTarget, records: list[PendingRecord],
                  now: int) -> OutgoingRecords:
    """The records as the producer sends them, after its checks: what the log would refuse,
    refused up front with the line number."""
    import numpy as np
    from ..producer import RecordRefused, outgoing_records
    outgoing = outgoing_records([r.key for r in records], [r.value for r in records],
                                np.fromiter((r.timestamp for r in records), dtype=np.int64, count=len(records)),
                                headers=[r.headers for r in records], partitions=[r.partition for r in records])
    try:
        producer.check(target, outgoing, now)
    except RecordRefused as e:
        raise InputError(refusal_message(e, records[e.row], now)) from None
    return outgoing


def refusal_message(e: RecordRefused, rec: PendingRecord, now: int) -> str:
    """The producer's refusal of ``rec``, worded for a line of input."""
    from ..storage.validator import batch_size_limit
    topic, cfg = e.target, e.target.config
    where = f"line {rec.line}"
    if e.rule == "timestamp":
        before = cfg.get("message.timestamp.before.max.ms")
        after = cfg.get("message.timestamp.after.max.ms")
        return (f"{where}: timestamp {rec.timestamp} is out of range (message.timestamp."
                f"before.max.ms={before}, message.timestamp.after.max.ms={after}, now={now})")
    if e.rule == "partition":
        return f"{where}: partition {rec.partition} does not exist (topic {topic.name!r} has {topic.partitions} partitions)"
    if e.rule == "key":
        return (f"{where}: topic {topic.name!r} is compacted (cleanup.policy="
                f"{','.join(cfg.get('cleanup.policy'))}): a record without a key is refused")
    limit, name = batch_size_limit(cfg)
    return f"{where}: a batch of this record alone is {e.value} bytes, above {name} ({limit})"


# -- appending ------------------------------------------------------------------------------------

def append(producer: Producer, target: TopicTarget, records: list[PendingRecord], outgoing: OutgoingRecords,
           verbose: bool) -> None:
    """Append a checked chunk; with ``verbose``, each batch's offsets as it lands."""
    from ..producer import BatchRefused
    def report(a) -> None:
        typer.echo(f"{a.topic}-{a.partition}: appended {a.records} records at offsets "
                   f"{a.first_offset}..{a.last_offset}")

    try:
        producer.send(target, outgoing, on_append=report if verbose else None)
    except BatchRefused as e:
        first, last = records[int(e.rows[0])].line, records[int(e.rows[-1])].line
        lines = f"line {first}" if e.rows.size == 1 else f"lines {first}-{last}"
        fail(f"{lines}: {e.error}")
