"""``dump-log``: kafka-dump-log.sh for segment, index, snapshot and checkpoint files (read-only).

The text output follows Kafka's DumpLogSegments line for line (``baseOffset: 0 lastOffset: 1
count: 2 ...`` per batch, ``| offset: 0 CreateTime: ... key: p3 payload: 10$`` per record);
``--json`` prints one object per line instead: a ``file`` object, then ``batch``/``record`` (or
``indexEntry``, ``timeIndexEntry``, ``abortedTxn``, ``producer``, ``checkpointEntry``...) objects
with the camelCase field names of the cleaner corpus dumps.

What a file holds is taken from its name (a trailing ``.cleaned``/``.swap``/``.deleted`` is looked
through); anything unrecognised is read as record batches, so raw batch blobs dump like a
``.log``. Invalid content is reported, not fatal: a batch whose CRC does not match shows
``isvalid: false``, bytes that do not form a batch are reported as invalid bytes at the end, and a
batch whose records do not decode gets an error line. Unreadable files fail the command.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
import sys
from typing import TYPE_CHECKING

import typer

from ..errors import CompactlogError, CorruptRecordError, StorageError
from ..storage import files
from .common import closed_pipe_is_success, context, fail, headers_json, put_bytes
from .apps import app

if TYPE_CHECKING:
    from ..record.legacy import LegacyEntry

OFFSET_CHECKPOINTS = (files.CLEANER_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT,
                      files.LOG_START_OFFSET_CHECKPOINT, files.REPLICATION_CHECKPOINT)
MARKER_SUFFIXES = (files.CLEANED_SUFFIX, files.SWAP_SUFFIX, files.DELETED_SUFFIX)
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")


class Dump:
    """Output of one run: Kafka's text lines or JSON objects, written to stdout."""

    def __init__(self, as_json: bool, deep: bool, print_data: bool, offsets: bool = False, *,
                 transactions: bool = False, verify_index_only: bool = False, index_sanity_check: bool = False,
                 max_bytes: int | None = None):
        self.as_json = as_json
        # a decoder implies --print-data-log, which implies --deep-iteration (as in Kafka)
        self.deep = deep or print_data or offsets or transactions
        self.print_data = print_data or offsets or transactions
        self.offsets = offsets
        self.transactions = transactions
        self.verify_index_only = verify_index_only
        self.index_sanity_check = index_sanity_check
        self.max_bytes = max_bytes
        self.write = sys.stdout.write

    def line(self, text: str) -> None:
        self.write(text + "\n")

    def obj(self, d: dict) -> None:
        self.write(json.dumps(d) + "\n")


# -- the command ----------------------------------------------------------------------------------

@app.command("dump-log")
def dump_log_cmd(ctx: typer.Context, file_args: list[str] = typer.Option(..., "--files",
                                                     help="Files to dump (repeatable, or comma-separated): "
                                                          ".log, .index, .timeindex, .txnindex, .snapshot, "
                                                          "checkpoint files, partition.metadata; other names "
                                                          "are read as record batches."),
                 print_data_log: bool = typer.Option(False, "--print-data-log",
                                                     help="Print every record with its key and payload "
                                                          "(implies --deep-iteration)."),
                 deep_iteration: bool = typer.Option(False, "--deep-iteration",
                                                     help="Print every record, not only the batches."),
                 as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
                 offsets_decoder: bool = typer.Option(False, "--offsets-decoder",
                                                      help="Decode records as __consumer_offsets keys "
                                                           "and values (implies --print-data-log)."),
                 transaction_log_decoder: bool = typer.Option(False, "--transaction-log-decoder",
                                                              help="Decode records as __transaction_state keys and "
                                                                   "values (implies --print-data-log)."),
                 verify_index_only: bool = typer.Option(False, "--verify-index-only",
                                                        help="For index files, only report entries that do not "
                                                             "match the log, without printing the entries."),
                 index_sanity_check: bool = typer.Option(False, "--index-sanity-check",
                                                         help="For index files, only run the check a broker runs at "
                                                              "startup, and say whether it passes."),
                 max_bytes: int = typer.Option(None, "--max-bytes",
                                               help="Read at most this many bytes of batches from each .log.")):
    """Print the contents of Kafka log files, as kafka-dump-log.sh does. Needs no --data-dir.
    A directory in --files stands for all its segment files (.log)."""
    if offsets_decoder and transaction_log_decoder:
        fail("--offsets-decoder and --transaction-log-decoder cannot be given together", 2)
    if max_bytes is not None and max_bytes < 0:
        fail(f"--max-bytes must not be negative, got {max_bytes}", 2)
    paths: list = []            # a file's path, or a segment pinned with the rest of its directory
    for arg in file_args:
        for p in arg.split(","):
            if not p:
                continue
            if p.lower().startswith(("s3://", "file://")):      # a bucket (storage.remote.bucket)
                paths.extend(_bucket_segments(p, context(ctx)))
            elif os.path.isdir(p):
                found = _pinned_segments(p)
                if not found:
                    fail(f"{p}: no segment files (.log) in this directory")
                paths.extend(found)
            elif not os.path.isfile(p):
                fail(f"{p}: no such file")
            else:
                paths.append(p)
    dump = Dump(as_json, deep_iteration, print_data_log, offsets_decoder, transactions=transaction_log_decoder,
                verify_index_only=verify_index_only, index_sanity_check=index_sanity_check, max_bytes=max_bytes)
    with closed_pipe_is_success():
        for path in paths:
            if isinstance(path, str):
                dump_file(dump, path)
            else:
                dump_file(dump, path.path, data=path.data)


def _bucket_segments(url: str, c) -> list:
    """A partition of a bucket (``s3://bucket/prefix/<topic>-<N>``, or a remote tier's
    ``…/<topic>-<topicId>/<N>``) or one ``.log`` object of one: its segments, each read from its
    object when dumped (ranged GETs only; nothing copied to disk)."""
    from ..storage.remote.bucket import partition_url_source, use_settings
    use_settings(c.overrides)
    head, _, name = url.rstrip("/").rpartition("/")
    try:
        if name.endswith(files.LOG_SUFFIX):
            source = partition_url_source(head)
            segments = [s for s in source.pin().segments if source.location(s.base_offset) == url]
            if not segments:
                fail(f"{url}: no such segment object")
            return segments
        if "." in name:
            fail(f"{url}: dump-log reads a partition or its .log objects from a bucket")
        source = partition_url_source(url)
        if not source.exists():
            fail(f"{url}: no segment objects (.log) under this partition URL")
        return source.pin().segments
    except CompactlogError as e:
        fail(str(e))


def _pinned_segments(directory: str) -> list:
    """The live segments of a partition directory, all of one state of the log (``storage.pinned``):
    a broker's cleaner or retention renaming files while they are dumped changes nothing."""
    from ..storage.pinned import pin_live_segments
    try:
        tiered = _tiered_source(directory)
        if tiered is not None:
            return tiered.pin().segments
        return pin_live_segments(directory).segments
    except (StorageError, OSError) as e:
        fail(f"{directory}: {e}" if directory not in str(e) else str(e))


def _tiered_source(directory: str):
    """A partition directory of a tiered topic, in a data dir whose ``server.properties`` names a
    store: its segments across both tiers (the remote ones read from the bucket, named by their
    object's URL; nothing written); None otherwise."""
    root = os.path.dirname(os.path.abspath(directory))
    if not os.path.isfile(os.path.join(root, "server.properties")):
        return None
    from ..storage.datadir import DataDir, load_broker_config
    broker = load_broker_config(root)
    if not broker.get("remote.log.storage.system.enable"):
        return None
    try:
        topic, partition = files.parse_partition_dir(directory)
    except ValueError:
        return None
    from ..storage.remote.tiered_read import RemoteTier, TieredSource
    tier = RemoteTier.of(DataDir(root, broker=broker))
    if not tier.datadir.has_topic(topic) or not tier.tiered(topic):
        return None
    source = tier.source(topic, partition)
    return source if isinstance(source, TieredSource) else None


def file_kind(path: str) -> str:
    name = os.path.basename(path)
    for marker in MARKER_SUFFIXES:
        if name.endswith(marker):
            name = name[:-len(marker)]
    if name in OFFSET_CHECKPOINTS:
        return "offsetCheckpoint"
    if name == files.LEADER_EPOCH_CHECKPOINT:
        return "leaderEpochCheckpoint"
    if name == files.PARTITION_METADATA:
        return "partitionMetadata"
    for suffix, kind in ((files.INDEX_SUFFIX, "offsetIndex"), (files.TIME_INDEX_SUFFIX, "timeIndex"),
                         (files.TXN_INDEX_SUFFIX, "txnIndex"), (files.SNAPSHOT_SUFFIX, "snapshot")):
        if name.endswith(suffix):
            return kind
    return "log"


def base_offset_of(path: str) -> int | None:
    prefix = os.path.basename(path).split(".", 1)[0]
    return int(prefix) if prefix.isdecimal() else None


def dump_file(dump: Dump, path: str, *, data=None) -> None:
    """Dump one file; ``data``: a segment's bytes already mapped (a pinned segment of a directory)."""
    kind = file_kind(path)
    if dump.as_json:
        dump.obj({"type": "file", "file": path, "kind": kind, "baseOffset": base_offset_of(path)})
    else:
        dump.line(f"Dumping {path}")
    try:
        if data is not None and kind == "log":
            dump_records(dump, path, data)
        else:
            DUMPERS[kind](dump, path)
    except BrokenPipeError:
        raise
    except (StorageError, OSError) as e:
        fail(f"{path}: {e}" if path not in str(e) else str(e))


# -- record batches -------------------------------------------------------------------------------

def _map(path: str):
    """A read-only mapping of the file (b"" when empty); batches keep it alive while in use."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def dump_records(dump: Dump, path: str, buf=None) -> None:
    from ..record.batch import iter_batches
    buf = _map(path) if buf is None else buf
    base = base_offset_of(path)
    if base is not None and not dump.as_json:
        dump.line(f"Log starting offset: {base}")
    valid_bytes = 0
    error = None
    try:
        for b in iter_batches(buf):
            if dump.max_bytes is not None and b.position + b.size > dump.max_bytes:
                return          # Kafka's --max-bytes: the batches within the first max-bytes
            dump_batch(dump, b)
            valid_bytes = b.position + b.size
    except CorruptRecordError as e:
        error = e.detail
    invalid = len(buf) - valid_bytes
    if invalid > 0:
        if dump.as_json:
            dump.obj({"type": "invalidBytes", "position": valid_bytes, "bytes": invalid, "reason": error})
        else:
            reason = f" ({error})" if error else ""
            dump.line(f"Found {invalid} invalid bytes at the end of {os.path.basename(path)}{reason}")


def dump_batch(dump: Dump, b) -> None:
    from ..record.legacy import LegacyEntry
    legacy = isinstance(b, LegacyEntry)
    try:
        valid = b.is_valid()
    except CorruptRecordError:
        valid = False
    if dump.as_json:
        dump.obj(legacy_json(b, valid) if legacy else batch_json(b, valid))
    else:
        dump.line(legacy_text(b, valid) if legacy else batch_text(b, valid))
    if not dump.deep:
        return
    try:
        records = b.inner() if legacy else b.records()
    except CorruptRecordError as e:
        _record_error(dump, b, e)
        return
    for r in records:
        try:
            if legacy:
                _emit_legacy_record(dump, b, r)
            else:
                _emit_record(dump, b, r)
        except CorruptRecordError as e:
            _record_error(dump, b, e)


def _record_error(dump: Dump, b, e: CorruptRecordError) -> None:
    if dump.as_json:
        dump.obj({"type": "error", "position": b.position, "message": e.detail,
                  "field": e.field, "offset": e.offset})
    else:
        dump.line(f"| error: records of the batch at position {b.position} do not decode: {e}")


def _timestamp_type_name(b) -> str:
    from ..record.batch import LOG_APPEND_TIME
    if b.magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if b.timestamp_type == LOG_APPEND_TIME else "CreateTime"


def _codec_name(codec: int) -> str:
    from ..record.compression import CODEC_NAMES
    return CODEC_NAMES.get(codec, f"unknown({codec})")


def batch_text(b, valid: bool) -> str:
    h = b.header
    horizon = f"OptionalLong[{h.delete_horizon_ms}]" if h.has_delete_horizon else "OptionalLong.empty"
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_b(h.is_transactional)} isControl: {_b(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {b.position} {_timestamp_type_name(b)}: {h.max_timestamp} "
            f"size: {h.size} magic: {h.magic} compresscodec: {_codec_name(h.compression)} crc: {h.crc} "
            f"isvalid: {_b(valid)}")


def batch_json(b, valid: bool) -> dict:
    h = b.header
    return {"type": "batch", "baseOffset": h.base_offset, "lastOffset": h.last_offset,
            "count": h.records_count, "position": b.position, "sizeInBytes": h.size, "magic": h.magic,
            "crc": h.crc, "isValid": valid, "compression": _codec_name(h.compression),
            "timestampType": _timestamp_type_name(b), "baseTimestamp": h.base_timestamp,
            "maxTimestamp": h.max_timestamp, "deleteHorizonMs": h.delete_horizon_ms,
            "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
            "baseSequence": h.base_sequence, "lastSequence": h.last_sequence,
            "transactional": h.is_transactional, "control": h.is_control,
            "partitionLeaderEpoch": h.partition_leader_epoch}


def _emit_record(dump: Dump, b, r) -> None:
    from ..record.batch import last_sequence
    h = b.header
    seq = last_sequence(h.base_sequence, r.offset - h.base_offset)
    control = _control_fields(r) if h.is_control else None
    if dump.as_json:
        d = {"type": "record", "offset": r.offset, "timestamp": r.timestamp,
             "keySize": _size(r.key), "valueSize": _size(r.value), "sequence": seq}
        if dump.print_data or control is not None:
            put_bytes(d, "key", r.key)
            put_bytes(d, "value", r.value)
            d["headers"] = headers_json(r.headers)
        if control is not None:
            d.update(control)
        elif dump.offsets:
            d.update(_offsets_json(r))
        elif dump.transactions:
            d.update(_decoded_json(*_transactions_text(r)))
        dump.obj(d)
        return
    text = (f"| offset: {r.offset} {_timestamp_type_name(b)}: {r.timestamp} keySize: {_size(r.key)} "
            f"valueSize: {_size(r.value)} sequence: {seq} "
            f"headerKeys: [{','.join(hk for hk, _ in r.headers)}]")
    if control is not None:
        if "coordinatorEpoch" in control:
            text += f" endTxnMarker: {control['controlType']} coordinatorEpoch: {control['coordinatorEpoch']}"
        else:
            text += f" controlType: {control['controlType']}({control['controlTypeId']})"
    elif dump.offsets:
        key, payload = _offsets_text(r)
        text += f" key: {key}" + (f" payload: {payload}" if payload is not None else "")
    elif dump.transactions:
        key, payload = _transactions_text(r)
        text += f" key: {key}" + (f" payload: {payload}" if payload is not None else "")
    elif dump.print_data:
        text += _key_payload(r.key, r.value)
    dump.line(text)


def _offsets_text(r) -> tuple[str, str | None]:
    """Kafka's OffsetsMessageParser; a record without a key is reported like any record that
    does not decode (Kafka's tool stops at it with an exception)."""
    from ..record.consumer_offsets import RecordFormatError, offsets_decoder_text
    try:
        return offsets_decoder_text(r.key, r.value, r.offset)
    except RecordFormatError as e:
        return f"Error at offset {r.offset}, skipping. {e}", None


def _transactions_text(r) -> tuple[str, str | None]:
    """Kafka's TransactionLogMessageParser."""
    from ..record.transaction_log import decoder_text
    return decoder_text(r.key, r.value, r.offset)


def _offsets_json(r) -> dict:
    return _decoded_json(*_offsets_text(r))


def _decoded_json(key: str, payload: str | None) -> dict:
    out = {}
    for name, text in (("decodedKey", key), ("decodedValue", payload)):
        try:
            out[name] = json.loads(text) if text is not None and text[:1] == "{" else text
        except ValueError:
            out[name] = text
    return out


def _control_fields(r) -> dict:
    """The control record's type (and a transaction marker's coordinator epoch)."""
    from ..record.control import ABORT, COMMIT, CONTROL_TYPE_NAMES, parse_control_key, parse_marker_value
    key = parse_control_key(r.key)
    d = {"controlType": CONTROL_TYPE_NAMES.get(key.type, "UNKNOWN"),
         "controlTypeId": struct.unpack_from(">h", r.key, 2)[0]}
    if key.type in (ABORT, COMMIT):
        d["coordinatorEpoch"] = parse_marker_value(r.value)
    return d


def legacy_text(e: LegacyEntry, valid: bool) -> str:
    return (f"offset: {e.last_offset} position: {e.position} {_timestamp_type_name(e)}: "
            f"{_legacy_max_timestamp(e)} size: {e.size} magic: {e.magic} "
            f"compresscodec: {_codec_name(e.compression)} crc: {e.crc} isvalid: {_b(valid)}")


def legacy_json(e: LegacyEntry, valid: bool) -> dict:
    try:
        first, count = e.base_offset, e.records_count
    except CorruptRecordError:
        first, count = None, None
    return {"type": "batch", "baseOffset": first, "lastOffset": e.last_offset, "count": count,
            "position": e.position, "sizeInBytes": e.size, "magic": e.magic, "crc": e.crc,
            "isValid": valid, "compression": _codec_name(e.compression),
            "timestampType": _timestamp_type_name(e), "maxTimestamp": _legacy_max_timestamp(e),
            "producerId": -1, "producerEpoch": -1, "baseSequence": -1, "transactional": False,
            "control": False, "partitionLeaderEpoch": -1}


def _legacy_max_timestamp(e: LegacyEntry) -> int:
    # the wrapper's own timestamp, as Kafka's AbstractLegacyRecordBatch.maxTimestamp reports it
    return e.timestamp


def _emit_legacy_record(dump: Dump, e: LegacyEntry, m: LegacyEntry) -> None:
    valid = m.is_valid()
    if dump.as_json:
        d = {"type": "record", "offset": m.offset, "timestamp": m.timestamp, "keySize": _size(m.key),
             "valueSize": _size(m.value), "crc": m.crc, "isValid": valid}
        if dump.print_data:
            put_bytes(d, "key", m.key)
            put_bytes(d, "value", m.value)
            d["headers"] = []
        dump.obj(d)
        return
    text = (f"| offset: {m.offset} {_timestamp_type_name(e)}: {m.timestamp} keySize: {_size(m.key)} "
            f"valueSize: {_size(m.value)} crc: {m.crc} isvalid: {_b(valid)}")
    if dump.print_data:
        text += _key_payload(m.key, m.value)
    dump.line(text)


def _key_payload(key: bytes | None, value: bytes | None) -> str:
    # Kafka's StringDecoder: UTF-8 with replacement; a null key or value is left out
    text = ""
    if key is not None:
        text += f" key: {key.decode('utf-8', errors='replace')}"
    if value is not None:
        text += f" payload: {value.decode('utf-8', errors='replace')}"
    return text


def _size(b: bytes | None) -> int:
    return -1 if b is None else len(b)


def _b(v: bool) -> str:
    return "true" if v else "false"


# -- indexes --------------------------------------------------------------------------------------

def _index_entries(path: str, entry: struct.Struct, offset_field: int) -> tuple[list[tuple], int]:
    """(entries, base offset) of an index file, stopping at the zero tail of an untrimmed index."""
    base = base_offset_of(path) or 0
    with open(path, "rb") as f:
        raw = f.read()
    out = []
    for i, fields in enumerate(entry.iter_unpack(raw[:len(raw) - len(raw) % entry.size])):
        if i > 0 and fields[offset_field] == 0:
            break       # Kafka's dump stops at the first entry equal to the base offset after slot 0
        out.append(fields)
    return out, base


class LogFacts:
    """Position, last offset and max timestamp of each batch of the ``.log`` beside an index."""

    def __init__(self, batches: list):
        self.positions = {b.position: i for i, b in enumerate(batches)}
        self.last_offsets = [b.last_offset for b in batches]
        self.max_timestamps = []
        for b in batches:
            try:
                self.max_timestamps.append(b.max_timestamp)
            except CorruptRecordError:
                self.max_timestamps.append(None)

    def last_offset_at(self, position: int) -> int:
        i = self.positions.get(position)
        return -1 if i is None else self.last_offsets[i]

    def batch_ending_at_or_after(self, offset: int) -> int | None:
        i = bisect.bisect_left(self.last_offsets, offset)
        return i if i < len(self.last_offsets) else None


def _log_beside(path: str) -> LogFacts | None:
    """Facts of the ``.log`` next to an index file (None when there is none)."""
    from ..record.batch import iter_batches
    log_path = _beside(path, files.LOG_SUFFIX)
    if not os.path.isfile(log_path):
        return None
    batches = []
    try:
        for b in iter_batches(_map(log_path)):
            batches.append(b)
    except CorruptRecordError:
        pass        # the index is checked against the valid part of the log
    return LogFacts(batches)


def _beside(path: str, suffix: str) -> str:
    name = os.path.basename(path)
    prefix = name.split(".", 1)[0]
    extra = next((m for m in MARKER_SUFFIXES if name.endswith(m)), "")
    return os.path.join(os.path.dirname(path), prefix + suffix + extra)


def _sanity_check(dump: Dump, path: str, entry_size: int, time_index: bool) -> None:
    """Kafka's AbstractIndex/OffsetIndex/TimeIndex.sanityCheck, as a broker runs it at startup
    (every whole slot of the file counts as an entry)."""
    base = base_offset_of(path) or 0
    with open(path, "rb") as f:
        raw = f.read()
    problem = None
    n = len(raw) // entry_size
    if len(raw) % entry_size:
        problem = (f"Index file {os.path.basename(path)} is corrupt, found {len(raw)} bytes which is neither "
                   f"positive nor a multiple of {entry_size}.")
    elif n and time_index:
        first_ts = struct.unpack_from(">q", raw, 0)[0]
        last_ts, last_rel = struct.unpack_from(">qi", raw, (n - 1) * entry_size)
        if last_ts < first_ts:
            problem = (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                       f"timestamp is {last_ts} which is less than the first timestamp {first_ts}")
        elif base + last_rel < base:
            problem = (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                       f"offset is {base + last_rel} which is less than the first offset {base}")
    elif n:
        last_rel = struct.unpack_from(">i", raw, (n - 1) * entry_size)[0]
        if base + last_rel < base:
            problem = (f"Corrupt index found, index file ({path}) has non-zero size but the last offset is "
                       f"{base + last_rel} which is less than the base offset {base}.")
    if dump.as_json:
        dump.obj({"type": "sanityCheck", "file": path, "passed": problem is None, "problem": problem})
    elif problem is None:
        dump.line(f"{path} passed sanity check.")
    else:
        dump.line(f"{path} failed sanity check: {problem}")


def dump_offset_index(dump: Dump, path: str) -> None:
    if dump.index_sanity_check:
        _sanity_check(dump, path, _OFFSET_ENTRY.size, time_index=False)
        return
    entries, base = _index_entries(path, _OFFSET_ENTRY, 0)
    log = _log_beside(path)
    mismatches = []
    for rel, position in entries:
        offset = base + rel
        if dump.verify_index_only:
            pass
        elif dump.as_json:
            dump.obj({"type": "indexEntry", "offset": offset, "position": position})
        else:
            dump.line(f"offset: {offset} position: {position}")
        if log is not None:
            log_offset = log.last_offset_at(position)
            if log_offset != offset:
                mismatches.append((offset, log_offset))
    for offset, log_offset in mismatches:
        if dump.as_json:
            dump.obj({"type": "indexMismatch", "offset": offset, "logOffset": log_offset})
    if mismatches and not dump.as_json:
        dump.line(f"Mismatches in :{path}")
        for offset, log_offset in mismatches:
            dump.line(f"  Index offset: {offset}, log offset: {log_offset}")


def dump_time_index(dump: Dump, path: str) -> None:
    if dump.index_sanity_check:
        _sanity_check(dump, path, _TIME_ENTRY.size, time_index=True)
        return
    entries, base = _index_entries(path, _TIME_ENTRY, 1)
    log = _log_beside(path)
    problems = []
    prev_ts = None
    for ts, rel in entries:
        offset = base + rel
        if dump.verify_index_only:
            pass
        elif dump.as_json:
            dump.obj({"type": "timeIndexEntry", "timestamp": ts, "offset": offset})
        else:
            dump.line(f"timestamp: {ts} offset: {offset}")
        if log is not None:
            problems.extend(_time_entry_problems(log, ts, offset, prev_ts))
        prev_ts = ts
    for kind, a, b in problems:
        if dump.as_json:
            dump.obj({"type": "timeIndexMismatch", "problem": kind, "indexed": a, "found": b})
        else:
            dump.line({"timestamp": f"Found timestamp mismatch in :{path}\n  Index timestamp: {a}, "
                                    f"log timestamp: {b}",
                       "order": f"Found out of order timestamp in :{path}\n  Index timestamp: {a}, "
                                f"Previously indexed timestamp: {b}",
                       "offset": f"The following indexed offsets are not found in the log.\n"
                                 f"Indexed offset: {a}, found log offset: {b}"}[kind])


def _time_entry_problems(log: LogFacts, ts: int, offset: int, prev_ts: int | None) -> list[tuple]:
    """Kafka's checks of a time-index entry: a batch ends at its offset, with that max timestamp."""
    i = log.batch_ending_at_or_after(offset)
    if i is None or log.last_offsets[i] != offset:
        return [("offset", offset, -1 if i is None else log.last_offsets[i])]
    problems = []
    if log.max_timestamps[i] != ts:
        problems.append(("timestamp", ts, log.max_timestamps[i]))
    if prev_ts is not None and prev_ts >= ts:
        problems.append(("order", ts, prev_ts))
    return problems


def dump_txn_index(dump: Dump, path: str) -> None:
    with open(path, "rb") as f:
        raw = f.read()
    whole = len(raw) - len(raw) % _TXN_ENTRY.size
    for pos in range(0, whole, _TXN_ENTRY.size):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(raw, pos)
        if dump.as_json:
            dump.obj({"type": "abortedTxn", "version": version, "producerId": pid, "firstOffset": first,
                      "lastOffset": last, "lastStableOffset": lso})
        else:
            dump.line(f"AbortedTxn(version={version}, producerId={pid}, firstOffset={first}, "
                      f"lastOffset={last}, lastStableOffset={lso})")
    if whole != len(raw):
        if dump.as_json:
            dump.obj({"type": "invalidBytes", "position": whole, "bytes": len(raw) - whole})
        else:
            dump.line(f"Found {len(raw) - whole} invalid bytes at the end of {os.path.basename(path)}")


# -- producer snapshots and checkpoints -----------------------------------------------------------

def dump_snapshot(dump: Dump, path: str) -> None:
    from ..storage.producer_state import read_snapshot
    entries = read_snapshot(path)
    if dump.as_json:
        dump.obj({"type": "snapshot", "version": 1, "producers": len(entries)})
    for e in entries:
        meta = e.batches[-1] if e.batches else None
        txn = e.current_txn_first_offset
        if dump.as_json:
            dump.obj({"type": "producer", "producerId": e.producer_id, "producerEpoch": e.producer_epoch,
                      "coordinatorEpoch": e.coordinator_epoch, "currentTxnFirstOffset": txn,
                      "lastTimestamp": e.last_timestamp,
                      "firstSequence": meta.first_seq if meta else None,
                      "lastSequence": meta.last_seq if meta else None,
                      "lastOffset": meta.last_offset if meta else None,
                      "offsetDelta": meta.offset_delta if meta else None,
                      "timestamp": meta.timestamp if meta else None})
            continue
        text = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if txn is None else f'OptionalLong[{txn}]'} "
                f"lastTimestamp: {e.last_timestamp}")
        if meta is not None:
            text += (f" firstSequence: {meta.first_seq} lastSequence: {meta.last_seq} "
                     f"lastOffset: {meta.last_offset} offsetDelta: {meta.offset_delta} timestamp: {meta.timestamp}")
        dump.line(text)


def _offset_checkpoint_entry(tokens: list[str]) -> tuple[str, int, int]:
    if len(tokens) != 3:
        raise ValueError("need 3 tokens")
    return tokens[0], int(tokens[1]), int(tokens[2])


def dump_offset_checkpoint(dump: Dump, path: str) -> None:
    from ..storage.checkpoint import read_checkpoint
    entries = read_checkpoint(path, 0, _offset_checkpoint_entry)
    if dump.as_json:
        dump.obj({"type": "checkpoint", "version": 0, "entries": len(entries)})
    else:
        dump.line(f"version: 0 entries: {len(entries)}")
    for topic, partition, offset in entries:
        if dump.as_json:
            dump.obj({"type": "checkpointEntry", "topic": topic, "partition": partition, "offset": offset})
        else:
            dump.line(f"topic: {topic} partition: {partition} offset: {offset}")


def dump_leader_epochs(dump: Dump, path: str) -> None:
    from ..storage.checkpoint import LeaderEpochCheckpointFile
    entries = LeaderEpochCheckpointFile(path).read()
    if dump.as_json:
        dump.obj({"type": "checkpoint", "version": 0, "entries": len(entries)})
    else:
        dump.line(f"version: 0 entries: {len(entries)}")
    for epoch, start in entries:
        if dump.as_json:
            dump.obj({"type": "leaderEpochEntry", "epoch": epoch, "startOffset": start})
        else:
            dump.line(f"epoch: {epoch} startOffset: {start}")


def dump_partition_metadata(dump: Dump, path: str) -> None:
    from ..storage.checkpoint import PartitionMetadataFile
    topic_id = PartitionMetadataFile(path).read()
    if dump.as_json:
        dump.obj({"type": "partitionMetadata", "version": 0, "topicId": topic_id})
    else:
        dump.line(f"version: 0 topicId: {topic_id}")


DUMPERS = {"log": dump_records, "offsetIndex": dump_offset_index, "timeIndex": dump_time_index,
           "txnIndex": dump_txn_index, "snapshot": dump_snapshot, "offsetCheckpoint": dump_offset_checkpoint,
           "leaderEpochCheckpoint": dump_leader_epochs, "partitionMetadata": dump_partition_metadata}
