"""Kafka's default partitioner for keyed records: murmur2 of the key bytes, made positive, modulo."""

from __future__ import annotations

import random

import numpy as np
from numba import njit


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


@njit(cache=True, nogil=True)
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


class StickyPartitioner:
    """Kafka's built-in partitioner (KIP-480/794): a keyed record goes to murmur2(key) % partitions;
    keyless records stick to one partition until ``batch_size`` bytes of them went there (the
    producer's batch.size, 16384), then to another partition chosen at random."""

    def __init__(self, batch_size: int = 16384, rng: random.Random | None = None):
        self.batch_size = batch_size
        self.rng = rng or random.Random()
        self._sticky: dict[str, tuple[int, int]] = {}     # topic -> (partition, bytes sent there)

    def partition(self, topic: str, key: bytes | None, num_partitions: int, size: int = 0) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        current, sent = self._sticky.get(topic, (-1, 0))
        if current < 0 or current >= num_partitions or sent >= self.batch_size:
            # Kafka picks at random among all partitions; another one is picked here, so that a
            # switch is a switch (the spread is the same)
            nxt = self.rng.randrange(num_partitions - 1) if num_partitions > 1 and current >= 0 else \
                self.rng.randrange(num_partitions)
            if num_partitions > 1 and 0 <= current <= nxt:
                nxt += 1
            current, sent = nxt, 0
        self._sticky[topic] = (current, sent + max(size, 1))
        return current
