"""In-task or distributed key map: an estimate of the dirty range's distinct keys against the
per-task memory budget (``compactlog.cleaner.task.memory.bytes``), or forced with
``compactlog.cleaner.map=task|distributed``."""

from __future__ import annotations

import numpy as np

from ..record import jit, kernels
from ..record.batch import iter_batches
from .offset_map import BYTES_PER_KEY

SAMPLE_BYTES = 32 * 1024        # one read: the whole batches at one sampled place
MIN_PLACES, MAX_PLACES = 48, 512
BYTES_PER_PLACE = 8 << 20       # one place per 8 MB of dirty segments (2.4 MB read of 600 MB)
_LENGTH_END = 12     # a batch's base offset (8 bytes) and length (4 bytes): its size is 12 + length


def _read_whole_batches(seg, position: int) -> bytes:
    """About SAMPLE_BYTES of whole batches from ``position``, always at least one: a batch bigger
    than the sample (a bulk load's batches reach megabytes) is read whole."""
    data = seg.log.read(position, SAMPLE_BYTES)
    if len(data) >= _LENGTH_END:
        first = _LENGTH_END + int.from_bytes(data[8:_LENGTH_END], "big", signed=True)
        if len(data) < first <= seg.size - position:
            data = seg.log.read(position, first)
    return data


def _places(segs, dirty_bytes: int) -> list[tuple[int, int]]:
    """(segment index, batch position) of places spread evenly over the dirty bytes: a place's
    byte is turned into an offset by the segment's offsets per byte, and the offset index gives
    the start of a batch at or before it."""
    n = min(MAX_PLACES, max(MIN_PLACES, dirty_bytes // BYTES_PER_PLACE))
    out: list[tuple[int, int]] = []
    i, seg_start = 0, 0
    for j in range(n):
        target = (2 * j + 1) * dirty_bytes // (2 * n)
        while i < len(segs) - 1 and target >= seg_start + segs[i].size:
            seg_start += segs[i].size
            i += 1
        seg = segs[i]
        if target - seg_start < SAMPLE_BYTES:
            position = 0
        else:
            span = (segs[i + 1].base_offset if i + 1 < len(segs) else seg.offset_index.last_offset + 1) - seg.base_offset
            _, position = seg.offset_index.lookup(seg.base_offset + span * (target - seg_start) // max(seg.size, 1))
        if not out or out[-1] != (i, position):
            out.append((i, position))
    return out


def distinct_estimate(counts: np.ndarray, population: int) -> int:
    """Distinct keys among ``population`` keyed records from a sample's key counts: Chao and Lin's
    estimator for a sample drawn without replacement, ``d + f1^2 / (2 f2 n/(n-1) + f1 q/(1-q))``
    (d distinct, f1 seen once, f2 twice, n sampled, q = n / population), at most the population.
    A uniform sample of 1M keys in 5M records reads ~20k records and ~200 pairs: within ~10%."""
    n = int(counts.sum())
    d = int(counts.size)
    if n == 0:
        return 0
    if n >= population:
        return d
    f1 = int((counts == 1).sum())
    f2 = int((counts == 2).sum())
    q = n / population
    denominator = (2 * f2 * n / (n - 1) if n > 1 else 0.0) + f1 * q / (1 - q)
    unseen = f1 * f1 / denominator if denominator > 0 else 0.0
    return int(min(d + unseen, population))


def estimate_keys(log, first_dirty: int, end: int) -> tuple[int, int, int]:
    """(dirty bytes, estimated records, estimated distinct keys) from whole batches at places
    spread over the dirty segments (``_places``), scaled by the bytes of those batches.

    Places spread over the range see keys that recur across it: the first batches of three
    segments (the sample before) saw each key about once and counted every record as a new key
    (4.96M estimated for 1M keys, a table four times too big)."""
    segs = log.segments_in_range(first_dirty, end)
    dirty_bytes = sum(s.size for s in segs)
    if not segs or dirty_bytes == 0:
        return 0, 0, 0
    jit.expect(dirty_bytes)      # the clean will walk all of it: its kernels compiled from the start
    records = 0
    sampled_bytes = 0
    digests = []
    seen: set[tuple[int, int]] = set()      # (segment, batch position) already sampled
    for i, position in _places(segs, dirty_bytes):
        try:
            batches = list(iter_batches(_read_whole_batches(segs[i], position)))
        except Exception:   # a damaged place says nothing; the clean reports real errors
            continue
        for b in batches:
            where = (i, position + b.position)
            if where in seen:
                continue
            seen.add(where)
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
    est_records = int(dirty_bytes * records / max(sampled_bytes, 1))
    if not digests:
        return dirty_bytes, est_records, 0
    sample = np.concatenate(digests)
    counts = np.unique(sample, return_counts=True)[1]
    keyed_records = max(int(est_records * sample.size / records), sample.size)
    if sampled_bytes >= dirty_bytes:
        keyed_records = sample.size
    return dirty_bytes, est_records, distinct_estimate(counts, keyed_records)


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
