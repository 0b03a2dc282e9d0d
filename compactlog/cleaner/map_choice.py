"""In-task or distributed key map: an estimate of the dirty range's distinct keys against the
per-task memory budget (``compactlog.cleaner.task.memory.bytes``), or forced with
``compactlog.cleaner.map=task|distributed``."""

from __future__ import annotations

import numpy as np

from ..record import kernels
from ..record.batch import iter_batches
from .offset_map import BYTES_PER_KEY

SAMPLE_BYTES = 512 * 1024
SAMPLES = 3
_LENGTH_END = 12     # a batch's base offset (8 bytes) and length (4 bytes): its size is 12 + length


def _sample(seg) -> bytes:
    """The segment's first whole batches, about SAMPLE_BYTES of them and always at least one:
    a batch bigger than the sample (a bulk load's batches reach megabytes) is read whole."""
    data = seg.log.read(0, SAMPLE_BYTES)
    if len(data) >= _LENGTH_END:
        first = _LENGTH_END + int.from_bytes(data[8:_LENGTH_END], "big", signed=True)
        if len(data) < first <= seg.size:
            data = seg.log.read(0, first)
    return data


def estimate_keys(log, first_dirty: int, end: int) -> tuple[int, int, int]:
    """(dirty bytes, estimated records, estimated distinct keys) from whole batches at the start of
    up to three segments (first, middle, last of the range), scaled by the bytes of those batches."""
    segs = log.segments_in_range(first_dirty, end)
    dirty_bytes = sum(s.size for s in segs)
    if not segs or dirty_bytes == 0:
        return 0, 0, 0
    picks = sorted({0, len(segs) // 2, len(segs) - 1})[:SAMPLES]
    records = 0
    sampled_bytes = 0
    digests = []
    for i in picks:
        for b in iter_batches(_sample(segs[i])):
            sampled_bytes += b.size
            if b.magic < 2 or b.is_control or b.records_count == 0:
                continue
            try:
                cols = b.columns()
            except Exception:   # a damaged sample says nothing; the clean reports real errors
                continue
            keyed = cols.key_len >= 0
            h1 = np.zeros(int(keyed.sum()), dtype=np.uint64)
            h2 = np.zeros_like(h1)
            kernels.hash_keys(cols.data, cols.key_pos[keyed], cols.key_len[keyed], h1, h2)
            digests.append(h1 ^ (h2 << np.uint64(1)))
            records += len(cols)
    if records == 0:
        return dirty_bytes, 0, 0
    distinct = np.unique(np.concatenate(digests)).size if digests else 0
    est_records = int(dirty_bytes * records / max(sampled_bytes, 1))
    est_keys = int(est_records * distinct / records)
    return dirty_bytes, est_records, est_keys


def choose_map(log, first_dirty: int, end: int, broker, bytes_per_key: int = BYTES_PER_KEY) -> tuple[str, str, int]:
    """(map kind, why, expected keys for sizing an in-task map); ``bytes_per_key``: the map's
    (a version strategy's map is bigger: offset_map.VERSION_BYTES_PER_KEY)."""
    setting = broker.get("compactlog.cleaner.map")
    budget = broker.get("compactlog.cleaner.task.memory.bytes")
    dirty_bytes, est_records, est_keys = estimate_keys(log, first_dirty, end)
    presize = min(est_keys, budget // bytes_per_key)
    if setting in ("task", "distributed"):
        return setting, f"compactlog.cleaner.map={setting}", presize
    need = est_keys * bytes_per_key
    if need > budget:
        return "distributed", (f"about {est_keys:,} distinct keys in {dirty_bytes:,} dirty bytes need ~{need:,} "
                               f"bytes of map, over the task budget of {budget:,}"), 0
    return ("task", f"about {est_keys:,} distinct keys (~{need:,} bytes of map) fit the task budget of {budget:,}",
            presize)
