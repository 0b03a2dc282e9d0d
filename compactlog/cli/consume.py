"""``consume``: kafka-console-consumer.sh over a data dir; prints and exits at the end of the log
(through a broker with ``--bootstrap-server``: ``broker_consume.py``; the text and JSON lines
printed for a record: ``record_format.py``; kcat's ``-f`` output with ``--format``: ``kcat_format.py``).

Read-only: partitions are read through ``storage.reader.PartitionReader`` (no log loader, no
recovery, no snapshot, no clean-shutdown marker), so consuming never changes the data dir. Every
batch read is CRC-checked; a corrupt one stops the command with the file, position and offset.

``read_committed`` (the default here; Kafka's consumer defaults to read_uncommitted) reads up to
the last stable offset and hides the records of aborted transactions, found in the ``.txnindex``
files exactly as a Kafka fetch collects them. Transaction markers are never printed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import nullcontext
from typing import Iterator

import typer

from ..errors import TopicError
from ..storage import files
from ..storage.config import parse_assignments
from ..storage.isolation import ISOLATION_LEVELS
from .common import closed_pipe_is_success, context, fail
from .apps import app
from .progress import partition_log_bytes, progress
from .record_format import TextFormat, formatted_line, json_record, text_format


# -- the command ----------------------------------------------------------------------------------

@app.command("consume")
def consume_cmd(ctx: typer.Context,
                topic: str = typer.Option(..., "--topic", help="The topic to read."),
                from_beginning: bool = typer.Option(False, "--from-beginning",
                                                    help="Start at the log start offset of each partition "
                                                         "(default: the log end, which prints nothing)."),
                partition: int = typer.Option(None, "--partition", help="Only this partition."),
                offset: str = typer.Option(None, "--offset",
                                           help="Start offset in --partition: a number, earliest or latest."),
                timestamp: int = typer.Option(None, "--timestamp",
                                              help="Start at the first record with a timestamp >= this (ms), "
                                                   "or at Kafka's ListOffsets special times: -1 latest, "
                                                   "-2 earliest, -3 the record with the largest timestamp."),
                prop: list[str] = typer.Option(None, "--property",
                                               help="Formatter property K=V (kafka-console-consumer's): "
                                                    "print.key, print.timestamp, print.partition, "
                                                    "print.offset, print.headers, print.value, key.separator, "
                                                    "line.separator, headers.separator, "
                                                    "headers.key.separator, null.literal."),
                max_messages: int = typer.Option(None, "--max-messages",
                                                 help="Stop after this many records."),
                output_format: str = typer.Option("text", "--output-format",
                                                  help="text, or jsonl: one {topic, partition, offset, "
                                                       "timestamp, key, value, headers} object per record "
                                                       "(key_b64/value_b64 for non-UTF-8 bytes), which "
                                                       "`produce --input-format jsonl` reads back."),
                isolation_level: str = typer.Option("read_uncommitted", "--isolation-level",
                                                    help="read_uncommitted (Kafka's console consumer's default) "
                                                         "or read_committed (hide aborted transactions, stop "
                                                         "at the last stable offset)."),
                follow: bool = typer.Option(False, "--follow", "-f",
                                            help="At the end of the log, wait for new records (Kafka's console "
                                                 "consumer does; ^C stops). Default: exit at the end, as "
                                                 "kcat -e."),
                timeout_ms: int = typer.Option(None, "--timeout-ms",
                                               help="Wait for new records, and exit once none came for this "
                                                    "long (kafka-console-consumer's --timeout-ms)."),
                kcat_format: str = typer.Option(None, "--format",
                                                help="Print each record through kcat's -f format string: %t "
                                                     "topic, %p partition, %o offset, %k key, %K key length, "
                                                     "%s value, %S value length, %R value length (binary), %T "
                                                     "timestamp, %h headers, %% a percent sign; \\n \\t \\r "
                                                     "\\xNN escapes. E.g. '%k:%s\\n'."),
                bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                     help="Consume through this broker (HOST:PORT) with a Kafka "
                                                          "client (confluent-kafka), as kafka-console-consumer; "
                                                          "default: read --data-dir."),
                group: str = typer.Option(None, "--group",
                                          help="With --bootstrap-server: the consumer group; it resumes from the "
                                               "group's committed offsets and commits each printed record's "
                                               "offset."),
                consumer_prop: list[str] = typer.Option(None, "--consumer-property",
                                                        help="With --bootstrap-server: a consumer setting K=V "
                                                             "(librdkafka's names), repeatable.")):
    """Print the records of a topic, partition by partition; exit at the end of the log (or wait:
    --follow, --timeout-ms). 'Processed a total of N messages' goes to stderr, as Kafka's tool says."""
    start = start_at(from_beginning, partition, offset, timestamp)
    if output_format not in ("text", "jsonl"):
        fail(f"--output-format {output_format!r}: expected text or jsonl")
    if isolation_level not in ISOLATION_LEVELS:
        fail(f"--isolation-level {isolation_level!r}: expected read_committed or read_uncommitted")
    if max_messages is not None and max_messages < 0:
        fail(f"--max-messages must not be negative, got {max_messages}")
    if timeout_ms is not None and timeout_ms < 0:
        fail(f"--timeout-ms must not be negative, got {timeout_ms}")
    props = parse_assignments(prop, "--property")
    if props and output_format == "jsonl":
        fail("--property applies to text output only (JSON lines carry every field)")
    if kcat_format is not None and (props or output_format == "jsonl"):
        fail("--format replaces --property and --output-format jsonl: give one of them", 2)
    fmt = text_format(props)
    if kcat_format is not None:
        from .kcat_format import parse
        fmt = parse(kcat_format)
    consumer_props = parse_assignments(consumer_prop, "--consumer-property")
    if not bootstrap_server and (group or consumer_props):
        fail("--group and --consumer-property need --bootstrap-server (reading a data dir commits nothing; "
             "consumer-groups --reset-offsets sets a group's offsets offline)", 2)
    total = [0]
    from .common import InterruptToStop
    # ^C ends a read that waits (--follow, --timeout-ms) at its next check, as the end of the log
    # would (a second ^C at once); a plain read ends by itself and keeps Python's default
    interrupt = InterruptToStop() if follow or timeout_ms is not None else nullcontext(None)
    if follow:
        # a command that runs until ^C: ``kill -QUIT`` prints where it is (as serve, cleaner run)
        from .common import dump_stacks_on_sigquit
        dump_stacks_on_sigquit()
    try:
        with interrupt as waiting, closed_pipe_is_success():
            stop = waiting.stop if waiting is not None else None
            if bootstrap_server:
                from .broker_consume import consume_through_broker
                consume_through_broker(bootstrap_server, topic, group=group, partition=partition, start=start,
                                       isolation_level=isolation_level, output_format=output_format, fmt=fmt,
                                       max_messages=max_messages, follow=follow or timeout_ms is not None,
                                       timeout_ms=timeout_ms, overrides=consumer_props, total=total,
                                       stop=stop)
            else:
                root, partitions, sources = _partitions(context(ctx), topic, partition)
                print_partitions(root, topic, partitions, start, isolation_level,
                                 output_format, fmt, max_messages, follow=follow or timeout_ms is not None,
                                 timeout_ms=timeout_ms, total=total, sources=sources, stop=stop)
    except KeyboardInterrupt:
        pass
    typer.echo(f"Processed a total of {total[0]} messages", err=True)
    if total[0] == 0 and start.kind == "latest" and not follow and timeout_ms is None and group is None:
        typer.echo("note: nothing new after the end of the log: consume starts at the end unless told "
                   "otherwise; use --from-beginning, --offset or --timestamp to read what is there, or "
                   "--follow to wait for new records", err=True)


def print_partitions(root: str, topic: str, partitions: list[int], start: StartSpec, isolation_level: str,
                     output_format: str, fmt: TextFormat, max_messages: int | None, *, follow: bool = False,
                     timeout_ms: int | None = None, total: list | None = None,
                     poll_interval: float = 0.1, sources: dict | None = None, stop=None) -> None:
    """Each partition's records in turn, as bytes (values are not necessarily text); with
    ``follow``, passes over the partitions again for new records until ``timeout_ms`` of quiet."""
    out = sys.stdout
    out.flush()
    sink = getattr(out, "buffer", None)
    remaining = max_messages
    total = total if total is not None else [0]
    positions: dict[int, int | None] = {}
    idle_since = time.monotonic()
    with progress("consuming", 0 if follow or start.kind != "earliest" else
                  sum(partition_log_bytes(root, topic, p) for p in partitions),
                  unit="bytes", min_total=256 << 20, data_on_stdout=True) as bar:
        _print_passes(root, topic, partitions, start, isolation_level, output_format, fmt, follow, timeout_ms,
                      total, poll_interval, out, sink, remaining, positions, idle_since, bar, sources or {},
                      stop if stop is not None else threading.Event())


def _print_passes(root, topic, partitions, start, isolation_level, output_format, fmt, follow, timeout_ms,
                  total, poll_interval, out, sink, remaining, positions, idle_since, bar, sources, stop) -> None:
    while not stop.is_set():
        got = 0
        for p in partitions:
            if remaining == 0 or stop.is_set():
                break
            pdir = os.path.join(root, files.partition_dir_name(topic, p))
            if p not in sources and not os.path.isdir(pdir):
                continue
            # a tiered partition: its remote segments, then the local ones (storage.remote.tiered_read)
            for chunk, n, size in partition_output(sources.get(p, pdir), topic, p, start, isolation_level,
                                                   output_format, fmt, remaining, positions):
                bar.advance(size)
                if sink is not None:
                    sink.write(chunk)
                else:
                    out.write(chunk.decode("utf-8", errors="replace"))
                got += n
                total[0] += n
                if remaining is not None:
                    remaining -= n
                if stop.is_set():
                    break           # ^C: what was printed stands, the total says how much
        if sink is not None:
            sink.flush()
        if not follow or remaining == 0:
            return
        if got:
            idle_since = time.monotonic()
        elif timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= timeout_ms:
            return
        stop.wait(poll_interval)


def start_at(from_beginning: bool, partition: int | None, offset: str | None,
             timestamp: int | None) -> StartSpec:
    from ..storage.visible import StartSpec     # pyarrow and the kernels: not for --help
    if offset is not None and partition is None:
        fail("--offset needs --partition")
    if offset is not None and from_beginning:
        fail("--from-beginning and --offset cannot be given together")
    if timestamp is not None and (from_beginning or offset is not None):
        fail("--timestamp cannot be given with --from-beginning or --offset")
    if timestamp is not None:
        return start_at_time(timestamp)
    if offset is not None:
        if offset in ("earliest", "latest"):
            return StartSpec(offset)
        try:
            value = int(offset)
        except ValueError:
            value = -1
        if value < 0:
            fail(f"--offset {offset!r}: expected a non-negative number, earliest or latest")
        return StartSpec("offset", value)
    return StartSpec("earliest" if from_beginning else "latest")


# Kafka's ListOffsetsRequest special timestamps (kafka-get-offsets.sh --time) that mean something
# without tiered storage; -4 (earliest-local) and -5 (latest-tiered) only exist with it
SPECIAL_TIMES = {-1: "latest", -2: "earliest", -3: "max-timestamp"}


def start_at_time(timestamp: int) -> StartSpec:
    from ..storage.visible import StartSpec
    if timestamp >= 0:
        return StartSpec("timestamp", timestamp)
    if timestamp in SPECIAL_TIMES:
        return StartSpec(SPECIAL_TIMES[timestamp])
    fail(f"--timestamp {timestamp}: expected a time in ms since the epoch (0 or more), or -1 (latest), "
         f"-2 (earliest) or -3 (the record with the largest timestamp), as Kafka's ListOffsets; "
         f"-4 and -5 name tiered storage, which a data dir does not have", 2)


def _partitions(c, topic: str, partition: int | None) -> tuple[str, list[int], dict]:
    """The data dir, the partitions to read and, for a tiered topic of a data dir whose broker
    config names a store, each partition's source across both tiers; only metadata is read (no
    log is opened; the bucket's partition manifests are read, nothing is written to it). A bucket
    URL as the data dir: its partitions of the topic, each read from its objects."""
    from ..storage.remote.bucket import is_bucket_url
    if is_bucket_url(c.data_dir):
        from .bucket_dir import topic_sources
        sources = topic_sources(c, topic, partition)
        return c.data_dir, list(sources), sources
    with c.open(write=False) as dd:
        if not dd.has_topic(topic):
            raise TopicError(f"topic {topic!r} does not exist in {dd.path}")
        parts = dd.partitions(topic)
        root = dd.path
        if partition is not None:
            if partition not in parts:
                raise TopicError(f"partition {topic}-{partition} does not exist in {root} "
                                 f"(partitions: {', '.join(map(str, parts))})")
            parts = [partition]
        from ..storage.remote.tiered_read import RemoteTier
        tier = RemoteTier.of(dd)
        sources = {p: tier.source(topic, p) for p in parts} if tier is not None and tier.tiered(topic) else {}
    return root, parts, sources


# -- one partition --------------------------------------------------------------------------------

def partition_output(pdir: str, topic: str, partition: int, start: StartSpec, isolation_level: str,
                     output_format: str, fmt: TextFormat, limit: int | None,
                     positions: dict | None = None) -> Iterator[tuple[bytes, int]]:
    """(bytes to print, records in them), a batch at a time, at most ``limit`` records.

    ``positions`` (partition -> next offset) carries a follow's progress between passes."""
    from ..storage.reader import PartitionReader
    positions = positions if positions is not None else {}
    reader = PartitionReader(pdir)
    view = reader.visible(isolation_level)
    if partition in positions:
        first = max(positions[partition], reader.log_start_offset)
    else:
        first = view.start_offset(start, f"{topic}-{partition}")
        if first is None:
            if start.kind != "timestamp":
                return
            first = reader.log_end_offset        # no record at/after the time yet: wait at the end
    end = view.end
    positions[partition] = max(first, end)
    left = limit
    for batch, records in view.batches(first, end):
        if left is not None:
            records = records[:left]
            left -= len(records)
        if output_format == "jsonl":
            lines = [json_line(topic, partition, r) for r in records]
        elif isinstance(fmt, TextFormat):
            lines = [text_line(fmt, partition, batch, r) for r in records]
        else:       # kcat's -f (--format); a magic 0 record has no timestamp: -1, as kcat prints it
            no_time = batch.magic == 0
            lines = [fmt.render(topic, partition, r.offset, -1 if no_time else r.timestamp, r.key, r.value,
                                r.headers) for r in records]
        yield b"".join(lines), len(records), batch.size
        if left == 0:
            positions[partition] = records[-1].offset + 1
            break
    for note in reader.notes:
        typer.echo(f"note: {note}", err=True)


# -- a data-dir record's fields for the formatter -------------------------------------------------

def text_line(fmt: TextFormat, partition: int, batch, r) -> bytes:
    """kafka-console-consumer's DefaultMessageFormatter: the chosen columns, key.separator between."""
    return formatted_line(fmt, partition, r.offset, _timestamp_text(batch, r.timestamp) if fmt.print_timestamp
                          else "", r.key, r.value, r.headers)


def _timestamp_text(batch, ts: int) -> str:
    from ..record.batch import LOG_APPEND_TIME
    if batch.magic == 0 or ts < 0:
        return "NO_TIMESTAMP"
    return f"{'LogAppendTime' if batch.timestamp_type == LOG_APPEND_TIME else 'CreateTime'}:{ts}"


def json_line(topic: str, partition: int, r) -> bytes:
    return json_record(topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers)
