"""The producer of a data dir: what Kafka's client producer does on its way to the broker, done in
the process that holds the data dir's lock. ``compactlog produce``, the Python API (``send``,
``send_many``, ``send_arrow``) and the Spark sink all write through it.

It follows Kafka's ``KafkaProducer``: the topic's metadata (created on first append when the
broker's auto.create.topics.enable allows, as the broker's auto-creation does; the partition count
cached), ``BuiltInPartitioner`` (an explicit partition, else murmur2 of the key, else the sticky
partition of keyless records, ``storage/partitioner.py``), the ``RecordAccumulator``'s batches per
partition (at most ``batch_records`` records and a batch within 1 MiB, max.message.bytes and
segment.bytes), compression, then ``Log.append_as_leader``. Unlike Kafka's client, it checks every
record against the topic before the first append (``check``), with the broker's rules
(``storage/validator.py``): timestamps, partitions, keys on a compacted topic, sizes. A refused
record is a ``RecordRefused`` naming the row and the rule, which each front-end words its way.

Records travel as columns (``OutgoingRecords``: keys, values and header sections in buffers with
offsets, the encoder's input), so partitioning, sizing and batching run in numpy and numba with no
per-record Python. This module sits on storage and record only: the Spark sink and the API use it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import pyarrow as pa
from .record.jit import njit

from .errors import (CompactlogError, InvalidRecordError, InvalidTimestampError, InvalidTopicError,
                     UnknownTopicError)
from .record import compression as codecs
from .record import kernels as K
from .record.batch import RECORD_BATCH_OVERHEAD, BatchSpec, ColumnarRecords, columnar_records, encode_columnar_batch
from .storage import files
from .storage.column_chunk import HEADERS_TYPE
from .storage.config import LogConfig
from .storage.partitioner import RECORD_OVERHEAD_BOUND, StickyPartitioner, partitions_for_key_buffers
from .storage.validator import batch_size_limit, check_batch_sizes, check_keys, check_timestamps

MAX_BATCH_BYTES = 1 << 20        # a batch, header included, at most (Kafka's default max.request.size)

__all__ = ["Producer", "TopicTarget", "OutgoingRecords", "Appended", "RecordRefused", "BatchRefused",
           "outgoing_records", "encode_arrow_headers", "HEADERS_TYPE", "MAX_BATCH_BYTES"]


class TopicTarget:
    """The topic records go to: its partition count and configs, and whether it exists yet (it is
    created with the first append)."""

    def __init__(self, name: str, partitions: int, config: LogConfig, exists: bool):
        self.name = name
        self.partitions = partitions
        self.config = config
        self.exists = exists


class OutgoingRecords(NamedTuple):
    """Records to send, as columns."""
    columns: ColumnarRecords      # keys, values, encoded header sections
    partitions: np.ndarray        # int64: the partition chosen by the sender where ``assigned``
    assigned: np.ndarray          # bool: the sender chose the partition (else the partitioner does)
    timestamps: np.ndarray        # int64 ms
    sizes: np.ndarray             # int64: each record's bytes as the producer counts them (record_sizes)

    def __len__(self) -> int:
        return self.timestamps.shape[0]


class Appended(NamedTuple):
    """One appended batch: where it went and which input rows it holds."""
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    rows: np.ndarray

    @property
    def records(self) -> int:
        return int(self.rows.size)


class RecordRefused(CompactlogError):
    """The first record (in input order) the topic refuses. ``rule``: timestamp, partition, key or
    size; ``value``: the record's timestamp, partition or size as a one-record batch; ``error``:
    the broker's wording of the rule (what the API raises); ``str()`` is the same text."""

    def __init__(self, row: int, rule: str, value: int, error: CompactlogError, target: TopicTarget):
        super().__init__(str(error))
        self.row, self.rule, self.value, self.error, self.target = row, rule, value, error, target
        self.kafka_error = error.kafka_error


class BatchRefused(CompactlogError):
    """A batch the log refused at append time (``error``, the log's own); ``rows``: its input rows.
    Batches before it are appended."""

    def __init__(self, error: CompactlogError, topic: str, partition: int, rows: np.ndarray):
        super().__init__(str(error))
        self.error, self.topic, self.partition, self.rows = error, topic, partition, rows
        self.kafka_error = error.kafka_error


# -- records as columns ---------------------------------------------------------------------------

def outgoing_records(keys, values, timestamps, *, headers=None, partitions=None) -> OutgoingRecords:
    """Records to send from keys and values (Python sequences of bytes/str/None or pyarrow
    binary/string arrays), timestamps (one for all, or one each), headers (None, a Python list of
    each record's [(name, value)], or a pyarrow list<struct<key: string, value: binary>> array)
    and partitions (None: the partitioner's choice for all; a Python list with None, an int, or a
    pyarrow int array whose nulls are the partitioner's)."""
    arrow_headers = isinstance(headers, (pa.Array, pa.ChunkedArray))
    c = columnar_records(keys, values, None if arrow_headers else headers)
    n = len(c)
    hdr_buf, hdr_off = encode_arrow_headers(headers) if arrow_headers else (c.hdr_buf, c.hdr_off)
    # (ColumnarRecords' own __len__ keeps NamedTuple._replace from working: built anew)
    cols = ColumnarRecords(_read_only(c.key_buf), c.key_off, c.key_null, _read_only(c.val_buf), c.val_off,
                           c.val_null, _read_only(hdr_buf), hdr_off)
    ts = np.broadcast_to(np.asarray(timestamps, dtype=np.int64), (n,)).copy()
    if partitions is None:
        parts, assigned = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.bool_)
    elif isinstance(partitions, int):
        parts, assigned = np.full(n, partitions, dtype=np.int64), np.ones(n, dtype=np.bool_)
    elif isinstance(partitions, (pa.Array, pa.ChunkedArray)):
        assigned = partitions.is_valid().to_numpy(zero_copy_only=False)
        parts = partitions.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        assigned = np.fromiter((p is not None for p in partitions), dtype=np.bool_, count=n)
        parts = np.fromiter((-1 if p is None else p for p in partitions), dtype=np.int64, count=n)
    return OutgoingRecords(cols, parts, assigned, ts, record_sizes(cols))


def _lengths(off: np.ndarray) -> np.ndarray:
    return np.diff(off)


def record_sizes(cols: ColumnarRecords) -> np.ndarray:
    """Each record's bytes as the producer counts them against batch.size and a batch's limit:
    key, value and header section, plus Kafka's bound on a record's framing."""
    return _lengths(cols.key_off) + _lengths(cols.val_off) + _lengths(cols.hdr_off) + RECORD_OVERHEAD_BOUND


def _varint_sizes(n: np.ndarray) -> np.ndarray:
    """Bytes of the zigzag varint of each non-negative ``n``."""
    z = 2 * n.astype(np.int64)
    size = np.ones(z.shape, dtype=np.int64)
    largest = int(z.max()) if z.size else 0
    for k in range(1, 10):
        if largest < 1 << (7 * k):
            break
        size += z >= (1 << (7 * k))
    return size


def single_record_batch_sizes(cols: ColumnarRecords) -> np.ndarray:
    """The exact size of a batch holding each record alone (timestamp and offset deltas 0): what
    must fit the topic's batch limit for the record to be appendable at all."""
    def field(lengths, null):
        return np.where(null, 1, _varint_sizes(lengths) + lengths)
    # attributes, timestamp delta and offset delta: one byte each; no headers: a zero count
    body = 3 + field(_lengths(cols.key_off), cols.key_null) + field(_lengths(cols.val_off), cols.val_null) \
        + np.maximum(_lengths(cols.hdr_off), 1)
    return RECORD_BATCH_OVERHEAD + _varint_sizes(body) + body


# how much a one-record batch may exceed ``record_sizes``: the batch header, the record's length
# varint (5), attributes and both deltas (3), two length varints (5 each), a header count (1),
# less the framing record_sizes already counts
_SINGLE_BATCH_SLACK = RECORD_BATCH_OVERHEAD + 5 + 3 + 5 + 5 + 1 - RECORD_OVERHEAD_BOUND


# -- the producer ---------------------------------------------------------------------------------

class Producer:
    """Sends records to the topics of a writable ``DataDir``.

    ``batch_records``: at most this many records a batch (None: no limit but the bytes);
    ``max_batch_bytes``: a batch's size at most, header included, also within max.message.bytes
    and segment.bytes; ``create_topics``: False refuses a missing topic even when the broker
    would create it; ``partitioner``: the sticky partitioner, whose state spans every send."""

    def __init__(self, dd, *, compression: str | int = "none", batch_records: int | None = None,
                 max_batch_bytes: int = MAX_BATCH_BYTES, create_topics: bool = True,
                 partitioner: StickyPartitioner | None = None):
        self.dd = dd
        self.compression = compression
        self.batch_records = batch_records
        self.max_batch_bytes = max_batch_bytes
        self.create_topics = create_topics
        self.partitioner = partitioner or StickyPartitioner()

    # -- metadata
    def target(self, topic: str) -> TopicTarget:
        """The topic as the producer sends to it now (DataDir caches the metadata of a data dir
        it holds the lock of: asking is cheap). A topic that does not exist yet is created with
        the first append, unless the broker's auto.create.topics.enable=false (or
        ``create_topics``) says no."""
        dd = self.dd
        if dd.has_topic(topic):
            # a Kafka dir may hold only some partitions of a topic: the count is the highest + 1
            return TopicTarget(topic, max(dd.partitions(topic)) + 1, dd.topic_config(topic), True)
        # Kafka's broker creates a topic on first produce unless auto.create.topics.enable=false
        if not self.create_topics or not dd.broker.get("auto.create.topics.enable"):
            raise UnknownTopicError(f"topic {topic!r} does not exist in {dd.path} "
                                    f"(auto.create.topics.enable=false)")
        try:
            files.validate_topic_name(topic)
        except ValueError as e:
            raise InvalidTopicError(str(e)) from None
        return TopicTarget(topic, dd.broker.get("num.partitions"), LogConfig({}, dd.broker), False)

    # -- validation
    def check(self, target: TopicTarget, records: OutgoingRecords, now: int) -> None:
        """Every record against the topic, before anything is appended; the first refused one (in
        input order, and for it the first rule broken in this order: timestamp, partition, key,
        size) raised as RecordRefused."""
        cfg, name = target.config, target.name
        cols = records.columns
        found = []          # (row, rule order, rule, value, error)
        try:
            check_timestamps(cfg, records.timestamps, now, where=name)
        except InvalidTimestampError as e:
            row = e.record_errors[0][0]
            found.append((row, 0, "timestamp", int(records.timestamps[row]), e))
        bad = np.flatnonzero(records.assigned & ((records.partitions < 0) | (records.partitions >= target.partitions)))
        if bad.size:
            row, p = int(bad[0]), int(records.partitions[bad[0]])
            found.append((row, 1, "partition", p, UnknownTopicError(
                f"partition {name}-{p} does not exist ({target.partitions} partitions)")))
        try:
            check_keys(cfg, np.where(cols.key_null, -1, _lengths(cols.key_off)), partition=name, where=name)
        except InvalidRecordError as e:
            found.append((e.record_errors[0][0], 2, "key", -1, e))
        # the exact sizes only when a record could be too large (they cost a few passes)
        if len(records) and int(records.sizes.max()) + _SINGLE_BATCH_SLACK > batch_size_limit(cfg)[0]:
            sizes = single_record_batch_sizes(cols)
            try:
                check_batch_sizes(cfg, sizes, where=name)
            except InvalidRecordError as e:
                row = e.record_errors[0][0]
                found.append((row, 3, "size", int(sizes[row]), e))
        if found:
            row, _, rule, value, error = min(found, key=lambda f: f[:2])
            raise RecordRefused(row, rule, value, error, target)

    # -- sending
    def partitions_of(self, target: TopicTarget, records: OutgoingRecords) -> np.ndarray:
        """Each record's partition: the sender's, else murmur2 of the key, else the sticky one
        (keyless records in input order, as one producer would place them)."""
        chosen = records.partitions.copy()
        todo = ~records.assigned
        if todo.any():
            cols = records.columns
            by_key = partitions_for_key_buffers(cols.key_buf, cols.key_off, cols.key_null, target.partitions)
            chosen[todo] = by_key[todo]
            keyless = np.flatnonzero(todo & cols.key_null)
            if keyless.size:
                chosen[keyless] = self.partitioner.assign(target.name, target.partitions, records.sizes[keyless])
        return chosen

    def send(self, target: TopicTarget, records: OutgoingRecords, *, compression: str | int | None = None,
             on_append: Callable[[Appended], None] | None = None) -> list[Appended]:
        """Partition, batch and append ``records`` (checked already: ``check``), partition by
        partition in partition order, each partition's records in input order. A batch the log
        refuses stops the send (BatchRefused); ``on_append`` hears of each batch as it lands."""
        if not len(records):
            return []
        codec = _codec(self.compression if compression is None else compression)
        cols = records.columns
        chosen = self.partitions_of(target, records)
        # a stable sort of small ints is a radix sort: partition numbers fit 16 bits in practice
        order = np.argsort(chosen.astype(np.int16) if target.partitions <= 1 << 15 else chosen, kind="stable")
        bounds = np.flatnonzero(np.diff(chosen[order])) + 1
        out = []
        for idx in np.split(order, bounds):
            p = int(chosen[idx[0]])
            log = self._log(target, p)
            for take in self._batches(target.config, idx, records.sizes):
                data = encode_columnar_batch(BatchSpec(compression=codec), take_records(cols, take),
                                             records.timestamps[take])
                try:
                    info = log.append_as_leader(data)
                except CompactlogError as e:
                    raise BatchRefused(e, target.name, p, take) from e
                appended = Appended(target.name, p, info.first_offset, info.last_offset, take)
                out.append(appended)
                if on_append is not None:
                    on_append(appended)
        return out

    def _log(self, target: TopicTarget, partition: int):
        if not target.exists:
            self.dd.create_topic(target.name, target.partitions, {})
            target.exists = True
        return self.dd.open_log(target.name, partition)

    def _batches(self, config: LogConfig, idx: np.ndarray, sizes: np.ndarray):
        """Consecutive runs of ``idx`` filling a batch: as many records as fit the byte limit (at
        least one), at most ``batch_records``."""
        limit = max(min(self.max_batch_bytes, config.max_message_size, config.segment_bytes)
                    - RECORD_BATCH_OVERHEAD, 1)
        cum = np.cumsum(sizes[idx])
        lo = 0
        while lo < idx.size:
            base = cum[lo - 1] if lo else 0
            hi = max(int(np.searchsorted(cum, base + limit, side="right")), lo + 1)
            if self.batch_records:
                hi = min(hi, lo + self.batch_records)
            yield idx[lo:hi]
            lo = hi


def _codec(compression: str | int) -> int:
    return codecs.CODEC_BY_NAME[compression] if isinstance(compression, str) else compression


# -- gathering a partition's records --------------------------------------------------------------

def take_records(cols: ColumnarRecords, take: np.ndarray) -> ColumnarRecords:
    """The records of ``take`` (row numbers, increasing) for the encoder, which reads each record
    at [off[i], off[i+1]) of a buffer: adjacent rows are a slice, others are copied out."""
    if int(take[-1]) - int(take[0]) + 1 == take.size:
        return cols.slice(int(take[0]), int(take[-1]) + 1)
    kbuf, ko = _gather(cols.key_buf, cols.key_off, take)
    vbuf, vo = _gather(cols.val_buf, cols.val_off, take)
    hb, ho = _gather(cols.hdr_buf, cols.hdr_off, take)
    return ColumnarRecords(kbuf, ko, cols.key_null[take], vbuf, vo, cols.val_null[take], hb, ho)


def _gather(buf: np.ndarray, off: np.ndarray, take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spans ``take`` of ``buf`` (span i at [off[i], off[i+1])) copied out one after another,
    by Arrow's take (a memcpy per span in C++: faster than a numba loop of slice copies)."""
    if not buf.size:
        return buf, np.zeros(take.size + 1, dtype=np.int64)
    spans = pa.Array.from_buffers(pa.large_binary(), off.size - 1, [None, pa.py_buffer(off), pa.py_buffer(buf)])
    # indices wrapped as an Arrow array from their buffer: pa.array(ndarray) would import pandas
    index = np.ascontiguousarray(take, dtype=np.int64)
    got = spans.take(pa.Array.from_buffers(pa.int64(), index.size, [None, pa.py_buffer(index)]))
    _, out_off, data = got.buffers()
    out_off = np.frombuffer(out_off, dtype=np.int64)[got.offset:got.offset + take.size + 1]
    out = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return _read_only(out), out_off


def _read_only(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False       # the encoder's buffers are read-only (one numba specialization)
    return a


# -- header sections from Arrow -------------------------------------------------------------------

def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, int64 offsets from 0, valid) of a binary/string array, from its buffers."""
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64) \
        if bufs[1] is not None else np.zeros(n + 1, dtype=np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lo = int(off[0]) if n else 0
    data = data[lo:int(off[-1])] if n else data[:0]
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(n, dtype=np.bool_)
    return data, off - lo, valid


def _header_sizes_of(headers: pa.Array):
    """(encoded header section size per record, the flattened header columns or None)."""
    n = len(headers)
    if headers.null_count == n:
        return np.zeros(n, dtype=np.int64), None
    list_off = headers.offsets.to_numpy().astype(np.int64)
    list_valid = headers.is_valid().to_numpy(zero_copy_only=False)
    struct = headers.values
    hkey, hval = struct.flatten()
    if hkey.null_count:
        raise InvalidRecordError("a header has a null key (Kafka header keys are strings)")
    kdata, koff, _ = _binary_parts(hkey)
    vdata, voff, vvalid = _binary_parts(hval)
    sizes = np.zeros(n, dtype=np.int64)
    _header_sizes(list_off, list_valid, koff, voff, vvalid, sizes)
    return sizes, (list_off, list_valid, kdata, koff, vdata, voff, vvalid)


def encode_arrow_headers(headers) -> tuple[np.ndarray, np.ndarray]:
    """Each record's encoded header section (Kafka's: count varint, then key and value per header)
    from a list<struct<key, value>> array, in one numba pass: (buffer, int64 offsets)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if headers.type != HEADERS_TYPE:
        headers = headers.cast(HEADERS_TYPE)
    sizes, cols = _header_sizes_of(headers)
    out_off = np.zeros(len(headers) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_off[1:])
    if cols is None:
        return _read_only(np.zeros(0, np.uint8)), out_off
    list_off, list_valid, kdata, koff, vdata, voff, vvalid = cols
    out = np.empty(int(out_off[-1]), dtype=np.uint8)
    _write_headers(list_off, list_valid, kdata, koff, vdata, voff, vvalid, out_off, out)
    return _read_only(out), out_off


# The two header kernels (only the Spark sink's Arrow headers reach them) stay nogil, which keeps
# them out of the ahead-of-time build: exported beside the cleaner's kernels, numba.pycc failed to
# type fast_path.decide_segment ("No conversion from int64 to Literal[int](61)"), and the whole
# build with it, once a run had cached a signature of theirs.
@njit(cache=True, nogil=True, work=lambda list_off, list_valid, koff, *_: 16 * (list_off.shape[0] + koff.shape[0]))
def _header_sizes(list_off, list_valid, koff, voff, vvalid, sizes):
    for i in range(sizes.shape[0]):
        lo, hi = list_off[i], list_off[i + 1]
        if not list_valid[i] or hi == lo:
            continue            # no headers: the record encoder writes the zero count itself
        size = K._uvarint_size(K._zigzag32(hi - lo))
        for h in range(lo, hi):
            klen = koff[h + 1] - koff[h]
            size += K._uvarint_size(K._zigzag32(klen)) + klen
            if vvalid[h]:
                vlen = voff[h + 1] - voff[h]
                size += K._uvarint_size(K._zigzag32(vlen)) + vlen
            else:
                size += 1
        sizes[i] = size


@njit(cache=True, nogil=True, work=lambda *a: a[-1].shape[0])
def _write_headers(list_off, list_valid, kdata, koff, vdata, voff, vvalid, out_off, out):
    for i in range(out_off.shape[0] - 1):
        lo, hi = list_off[i], list_off[i + 1]
        if not list_valid[i] or hi == lo:
            continue
        pos = K._write_uvarint(out, out_off[i], K._zigzag32(hi - lo))
        for h in range(lo, hi):
            klen = koff[h + 1] - koff[h]
            pos = K._write_uvarint(out, pos, K._zigzag32(klen))
            out[pos:pos + klen] = kdata[koff[h]:koff[h] + klen]
            pos += klen
            if vvalid[h]:
                vlen = voff[h + 1] - voff[h]
                pos = K._write_uvarint(out, pos, K._zigzag32(vlen))
                out[pos:pos + vlen] = vdata[voff[h]:voff[h] + vlen]
                pos += vlen
            else:
                pos = K._write_uvarint(out, pos, K._zigzag32(-1))
