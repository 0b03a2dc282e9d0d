"""Where a producer sends a record, as Kafka's ``BuiltInPartitioner``: murmur2 of the key bytes,
made positive, modulo the partition count; keyless records to the sticky partition."""

from __future__ import annotations

import random

import numpy as np
from ..record.jit import njit


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (32-bit, seed 0x9747b28c), as a signed int32."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (data[i4] & 0xFF) | ((data[i4 + 1] & 0xFF) << 8) | ((data[i4 + 2] & 0xFF) << 16) | ((data[i4 + 3] & 0xFF) << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rem = length % 4
    tail = length & ~3
    if rem == 3:
        h ^= (data[tail + 2] & 0xFF) << 16
    if rem >= 2:
        h ^= (data[tail + 1] & 0xFF) << 8
    if rem >= 1:
        h ^= data[tail] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= (1 << 31) else h


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


@njit(cache=True, work=lambda data, offsets, *_: data.shape[0] + 16 * offsets.shape[0])
def _murmur2_partitions(data, offsets, valid, num_partitions, out):
    # 64-bit arithmetic masked to 32 bits (numba widens uint32 products)
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    for i in range(offsets.shape[0] - 1):
        if not valid[i]:
            out[i] = -1
            continue
        start = offsets[i]
        length = offsets[i + 1] - start
        h = (0x9747B28C ^ length) & mask
        for j in range(length // 4):
            p = start + 4 * j
            k = (np.int64(data[p]) | (np.int64(data[p + 1]) << 8)
                 | (np.int64(data[p + 2]) << 16) | (np.int64(data[p + 3]) << 24))
            k = (k * m) & mask
            k ^= k >> 24
            k = (k * m) & mask
            h = (h * m) & mask
            h ^= k
        tail = start + (length & ~3)
        rem = length % 4
        if rem == 3:
            h ^= np.int64(data[tail + 2]) << 16
        if rem >= 2:
            h ^= np.int64(data[tail + 1]) << 8
        if rem >= 1:
            h ^= np.int64(data[tail])
            h = (h * m) & mask
        h ^= h >> 13
        h = (h * m) & mask
        h ^= h >> 15
        out[i] = (h & 0x7FFFFFFF) % num_partitions


def partitions_for_keys(keys, num_partitions: int) -> np.ndarray:
    """Kafka's default partition of every key of a pyarrow binary/string array (-1 for a null key),
    in one numba pass: murmur2 in Python runs at well under a million keys a second."""
    import pyarrow as pa
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        raise TypeError(f"keys must be a binary or string array, not {arr.type}")
    validity, offsets_buf, data_buf = arr.buffers()
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=odt)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    out = np.empty(len(arr), dtype=np.int64)
    _murmur2_partitions(data, offsets, valid, num_partitions, out)
    return out


def partitions_for_key_buffers(data: np.ndarray, offsets: np.ndarray, null: np.ndarray,
                               num_partitions: int) -> np.ndarray:
    """``partitions_for_keys`` over keys already laid out as one buffer: key i is
    ``data[offsets[i]:offsets[i + 1]]`` (int64 offsets), or no key where ``null``."""
    out = np.empty(null.shape[0], dtype=np.int64)
    _murmur2_partitions(data, offsets, ~null, num_partitions, out)
    return out


STICKY_BATCH_BYTES = 16384         # the producer's batch.size: how much a sticky partition takes
RECORD_OVERHEAD_BOUND = 21         # Kafka's DefaultRecord.MAX_RECORD_OVERHEAD: a record's bytes besides
                                   # key, value and headers, at most


@njit(cache=True, work=lambda sizes, *_: 16 * sizes.shape[0])
def _sticky_spans(sizes, produced, batch_size, spans):
    # the producer switches once the bytes produced to the sticky partition reach batch.size; the
    # count restarts at 0 on the new partition (the record that crossed the line is not carried)
    span = 0
    for i in range(sizes.shape[0]):
        if produced >= batch_size:
            span += 1
            produced = 0
        spans[i] = span
        produced += max(sizes[i], 1)
    return produced


class StickyPartitioner:
    """Kafka's built-in partitioner (``BuiltInPartitioner``, KIP-794): a keyed record goes to
    murmur2(key) % partitions; keyless records stick to one partition until the bytes produced
    there reach ``batch_size`` (the producer's batch.size, 16384), then move to another, chosen
    drawn uniformly among all of them, as ``BuiltInPartitioner.nextPartition`` draws it without
    load statistics (so a switch may draw the same partition again and start a new span there).

    ``partition`` places one record, ``assign`` a whole array of keyless records in one numba
    pass; both follow the same rule and share the per-topic state, so any mix of calls places
    records as one producer would."""

    def __init__(self, batch_size: int = STICKY_BATCH_BYTES, rng: random.Random | None = None):
        self.batch_size = batch_size
        self.rng = rng or random.Random()
        self._sticky: dict[str, tuple[int, int]] = {}     # topic -> (partition, bytes produced there)

    def _current(self, topic: str, num_partitions: int) -> tuple[int, int]:
        state = self._sticky.get(topic)
        if state is None or state[0] >= num_partitions:   # first record, or the partition count changed
            return self.rng.randrange(num_partitions), 0
        return state

    def _next(self, current: int, num_partitions: int) -> int:
        return self.rng.randrange(num_partitions)

    def partition(self, topic: str, key: bytes | None, num_partitions: int, size: int = 0) -> int:
        """The partition of one record of ``size`` bytes (key, value, headers and framing)."""
        if key is not None:
            return partition_for_key(key, num_partitions)
        current, produced = self._current(topic, num_partitions)
        if produced >= self.batch_size:
            current, produced = self._next(current, num_partitions), 0
        self._sticky[topic] = (current, produced + max(size, 1))
        return current

    def assign(self, topic: str, num_partitions: int, sizes) -> np.ndarray:
        """The partitions of consecutive keyless records of ``sizes`` bytes each (int64 array),
        as ``partition`` called on each in turn would give them."""
        sizes = np.ascontiguousarray(sizes, dtype=np.int64)
        if sizes.size == 0:
            return np.empty(0, dtype=np.int64)
        current, produced = self._current(topic, num_partitions)
        spans = np.empty(sizes.size, dtype=np.int64)
        produced = _sticky_spans(sizes, np.int64(produced), np.int64(self.batch_size), spans)
        # one draw per span of batch.size bytes, not per record
        picks = [current]
        for _ in range(int(spans[-1])):
            picks.append(self._next(picks[-1], num_partitions))
        self._sticky[topic] = (picks[-1], int(produced))
        return np.asarray(picks, dtype=np.int64)[spans]
