"""``produce``: kafka-console-producer.sh into a data dir, from lines on stdin (through a broker with
``--bootstrap-server``: ``broker_produce.py``).

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

import base64
import binascii
import io
import json
import os
import select
import sys
import time
from dataclasses import dataclass
from typing import Iterator

import typer

from ..errors import CompactlogError
from ..storage.config import parse_assignments
from .common import context, fail
from .apps import app
from .progress import progress

READ_BLOCK = 1 << 16
MAX_CHUNK_BYTES = 4 << 20
LONG_MAX = 2**63 - 1
UTF8_BOM = b"\xef\xbb\xbf"

# kafka-console-producer's LineMessageReader properties and their defaults
TEXT_PROPERTIES = {"parse.key": "false", "key.separator": "\t", "parse.headers": "false",
                   "headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": ":",
                   "null.marker": None, "ignore.error": "false"}
JSON_FIELDS = {"key", "key_b64", "value", "value_b64", "timestamp", "headers", "partition",
               "topic", "offset"}   # topic and offset: what `consume --output-format jsonl` adds


class InputError(CompactlogError):
    """A line of input that cannot become a record (message names the line)."""


@dataclass(frozen=True)
class LineFormat:
    parse_key: bool
    key_separator: bytes
    parse_headers: bool
    headers_delimiter: bytes
    headers_separator: bytes
    headers_key_separator: bytes
    null_marker: bytes | None
    ignore_error: bool


@dataclass
class PendingRecord:
    line: int
    partition: int | None
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list | None


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


# -- reading stdin --------------------------------------------------------------------------------

def input_chunks(stream) -> Iterator[list[bytes]]:
    """Lines of ``stream`` (without their line ends), grouped by what was available at once."""
    raw = getattr(stream, "buffer", stream)
    try:
        fd = raw.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        fd = None
    if fd is None:          # an in-memory stream (tests, embedding): one chunk
        data = raw.read()
        data = data.encode("utf-8") if isinstance(data, str) else data
        lines = _split_lines(data)
        if lines:
            yield lines
        return
    pending = b""
    eof = False
    while not eof:
        parts = [pending]
        size = len(pending)
        block = os.read(fd, READ_BLOCK)
        eof = not block
        parts.append(block)
        size += len(block)
        while not eof and size < MAX_CHUNK_BYTES and _readable(fd):
            block = os.read(fd, READ_BLOCK)
            eof = not block
            parts.append(block)
            size += len(block)
        data = b"".join(parts)
        cut = len(data) if eof else data.rfind(b"\n") + 1
        pending = data[cut:]
        lines = _split_lines(data[:cut])
        if lines:
            yield lines


def _readable(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _split_lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    # Java's readLine ends a line at \n or \r\n alike
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]


# -- parsing lines --------------------------------------------------------------------------------

def line_format(props: dict[str, str]) -> LineFormat:
    unknown = sorted(set(props) - set(TEXT_PROPERTIES))
    if unknown:
        raise InputError(f"--property {unknown[0]}: unknown property (known: {', '.join(TEXT_PROPERTIES)})")
    p = {**TEXT_PROPERTIES, **props}
    for name in ("parse.key", "parse.headers", "ignore.error"):
        if p[name].strip().lower() not in ("true", "false"):
            raise InputError(f"--property {name}={p[name]}: expected true or false")
    for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
        if p[name] == "":
            raise InputError(f"--property {name} may not be empty")
    marker = p["null.marker"]
    if marker is not None:
        for name in ("key.separator", "headers.delimiter", "headers.separator", "headers.key.separator"):
            if marker == p[name]:
                raise InputError(f"--property null.marker={marker!r} may not equal {name}")
    enc = (lambda s: s.encode("utf-8"))
    return LineFormat(p["parse.key"].strip().lower() == "true", enc(p["key.separator"]),
                      p["parse.headers"].strip().lower() == "true", enc(p["headers.delimiter"]),
                      enc(p["headers.separator"]), enc(p["headers.key.separator"]),
                      None if marker is None else enc(marker), p["ignore.error"].strip().lower() == "true")


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


def parse_records(lines: list[bytes], first_line: int, input_format: str, fmt: LineFormat,
                  now: int) -> Iterator[PendingRecord]:
    """The records of one chunk's lines, in order; InputError at the first line that does not parse."""
    for i, line in enumerate(lines, start=first_line + 1):
        if input_format == "jsonl":
            if line.startswith(UTF8_BOM):
                # RFC 8259 lets a parser ignore a BOM at the start of the text, and editors on
                # Windows write one; anywhere else it means files were concatenated
                if i != 1:
                    raise InputError(f"line {i}: a UTF-8 byte order mark (BOM) in the middle of the input "
                                     f"(only the first line may start with one: were files concatenated?)")
                line = line[len(UTF8_BOM):]
            if not line.strip():
                continue
            yield parse_json_line(line, i, now)
        else:
            yield parse_text_line(line, i, fmt, now)


def parse_text_line(line: bytes, line_no: int, fmt: LineFormat, now: int) -> PendingRecord:
    """kafka-console-producer's LineMessageReader: [headers<delim>][key<sep>]value."""
    headers = None
    rest = line
    if fmt.parse_headers:
        cut = rest.find(fmt.headers_delimiter)
        if cut < 0:
            if not fmt.ignore_error:
                raise InputError(f"line {line_no}: no headers delimiter {_show(fmt.headers_delimiter)} "
                                 f"found in {_show(line)}")
        else:
            headers = _text_headers(rest[:cut], line_no, fmt)
            rest = rest[cut + len(fmt.headers_delimiter):]
    key = None
    if fmt.parse_key:
        cut = rest.find(fmt.key_separator)
        if cut < 0:
            if not fmt.ignore_error:
                raise InputError(f"line {line_no}: no key separator {_show(fmt.key_separator)} found in {_show(line)}")
        else:
            key = rest[:cut]
            rest = rest[cut + len(fmt.key_separator):]
            if key == fmt.null_marker:
                key = None
    value = None if rest == fmt.null_marker else rest
    return PendingRecord(line_no, None, key, value, now, headers)


def _text_headers(text: bytes, line_no: int, fmt: LineFormat) -> list:
    headers = []
    for item in text.split(fmt.headers_separator):
        if not item:
            continue
        hkey, sep, hval = item.partition(fmt.headers_key_separator)
        if hkey == fmt.null_marker:
            raise InputError(f"line {line_no}: header key {_show(hkey)} equals null.marker: header keys cannot be null")
        try:
            name = hkey.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"line {line_no}: header key {_show(hkey)} is not UTF-8") from None
        headers.append((name, None if not sep or hval == fmt.null_marker else hval))
    return headers


def parse_json_line(line: bytes, line_no: int, now: int) -> PendingRecord:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"line {line_no}: byte 0x{line[e.start]:02x} at column {e.start + 1} is not UTF-8 "
                         f"(JSON lines are UTF-8 text; binary data goes in \"key_b64\"/\"value_b64\")") from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise InputError(f"line {line_no}: not a JSON object (nested too deeply)") from None
    except ValueError as e:     # JSONDecodeError, or an integer too long to convert
        raise InputError(f"line {line_no}: not a JSON object ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"line {line_no}: expected a JSON object, found {type(obj).__name__}")
    unknown = sorted(set(obj) - JSON_FIELDS)
    if unknown:
        raise InputError(f"line {line_no}: unknown field {unknown[0]!r} (fields: {', '.join(sorted(JSON_FIELDS))})")
    if "value" not in obj and "value_b64" not in obj:
        raise InputError(f"line {line_no}: no \"value\" (use \"value\": null for a tombstone)")
    key = json_bytes(obj, "key", line_no)
    value = json_bytes(obj, "value", line_no)
    timestamp = obj.get("timestamp")
    if timestamp is None:
        timestamp = now
    elif not _is_int(timestamp) or not 0 <= timestamp <= LONG_MAX:
        raise InputError(f"line {line_no}: timestamp {timestamp!r} is not a time in ms from 0 to {LONG_MAX} "
                         f"(a record timestamp is a signed 64-bit integer)")
    partition = obj.get("partition")
    if partition is not None and (not _is_int(partition) or partition < 0):
        raise InputError(f"line {line_no}: partition {partition!r} is not a non-negative integer")
    headers = json_headers(obj.get("headers"), line_no)
    return PendingRecord(line_no, partition, key, value, timestamp, headers)


def json_bytes(obj: dict, name: str, line_no: int, what: str | None = None) -> bytes | None:
    """``name`` as UTF-8 text or ``name_b64`` as base64; absent or null is None."""
    what = what or name
    if name in obj and f"{name}_b64" in obj:
        raise InputError(f"line {line_no}: both \"{name}\" and \"{name}_b64\" given for {what}")
    if f"{name}_b64" in obj:
        raw = obj[f"{name}_b64"]
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise InputError(f"line {line_no}: {what}_b64 must be a base64 string, found {type(raw).__name__}")
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"line {line_no}: {what}_b64 {raw[:40]!r} is not valid base64") from None
    raw = obj.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InputError(f"line {line_no}: {what} must be a string or null, found {type(raw).__name__}"
                         f" (binary data goes in \"{name}_b64\")")
    return raw.encode("utf-8")


def json_headers(raw, line_no: int) -> list | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InputError(f"line {line_no}: headers must be a list of {{\"key\", \"value\"}} objects")
    headers = []
    for j, h in enumerate(raw):
        if not isinstance(h, dict) or not isinstance(h.get("key"), str):
            raise InputError(f"line {line_no}: header {j} must be an object with a string \"key\"")
        extra = set(h) - {"key", "value", "value_b64"}
        if extra:
            raise InputError(f"line {line_no}: header {j}: unknown field {sorted(extra)[0]!r}")
        headers.append((h["key"], json_bytes(h, "value", line_no, f"header {j} value")))
    return headers


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _show(b: bytes, limit: int = 60) -> str:
    text = b.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- validation against the topic -----------------------------------------------------------------

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
