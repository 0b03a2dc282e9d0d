"""Ground truth for index lookups, written from segment-files.md independently of compactlog.

An index entry (or a flipped byte in it) is *harmless* when every lookup that uses the index gives
the answer a linear scan of the ``.log`` gives:

* offset index: for every target offset t, Kafka's binary search for the entry with the largest
  offset <= t, then a forward scan from its position (which must be a batch boundary) for the
  first batch whose last offset >= t, finds the batch a scan from position 0 finds; and
  ``readNextOffset`` (a scan from the last entry's position) gives the true next offset.
* time index: for every target timestamp t, the binary search for the entry with the largest
  timestamp <= t, then a scan from the batch holding its offset for the first batch whose max
  timestamp >= t, finds the batch a scan from the first batch finds (so the same record); for a
  closed segment, the last entry gives the segment's largest timestamp (retention) and the first
  batch carrying it (MAX_TIMESTAMP).
* transaction index: for every fetch range [f, u) of the partition, a read_committed consumer
  returns the same records: Kafka's collectAbortedTxns (entries with last >= f and first < u,
  walking the txn indexes from the segment holding f until an entry's last stable offset >= u)
  then the consumer's filter (a producer is aborted from an entry's first offset until its ABORT
  marker). A reader refusing the file (unknown version) counts as harmful.

Lookups are compared over every target where any answer can change (offsets and timestamps of
batches and entries, each +-1), so "harmless" is checked exhaustively, not sampled.
"""

from __future__ import annotations

import struct

import crc32c


class Batch:
    __slots__ = ("pos", "size", "base", "last", "max_ts", "pid", "txn", "control", "ctype")

    def __init__(self, pos, size, base, last, max_ts, pid, txn, control, ctype):
        self.pos, self.size, self.base, self.last = pos, size, base, last
        self.max_ts, self.pid, self.txn, self.control, self.ctype = max_ts, pid, txn, control, ctype


def _skip_varint(data: bytes, p: int) -> int:
    while data[p] & 0x80:
        p += 1
    return p + 1


def parse_log(data: bytes) -> list[Batch]:
    """The v2 batches of a segment (raises on anything else: the tests pick v2 segments)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = length + 12
        assert data[pos + 16] == 2 and pos + size <= len(data), "not a whole v2 segment"
        attrs, lod = struct.unpack_from(">hi", data, pos + 21)
        max_ts, pid = struct.unpack_from(">qq", data, pos + 35)
        count = struct.unpack_from(">i", data, pos + 57)[0]
        assert struct.unpack_from(">I", data, pos + 17)[0] == crc32c.crc32c(data[pos + 21:pos + size])
        ctype = None
        if attrs & 0x20 and count > 0:
            # the control record: length, attributes, timestamp delta, offset delta, key length, key
            p = _skip_varint(data, pos + 61) + 1
            for _ in range(3):
                p = _skip_varint(data, p)
            ctype = struct.unpack_from(">h", data, p + 2)[0]
        out.append(Batch(pos, size, base, base + lod, max_ts, pid, bool(attrs & 0x10), bool(attrs & 0x20), ctype))
        pos += size
    assert pos == len(data)
    return out


def _binary_search(keys: list[int], target: int) -> int:
    """Kafka's largestLowerBoundSlotFor: the slot of the largest key <= target, -1 if none."""
    if not keys or keys[0] > target:
        return -1
    lo, hi = 0, len(keys) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if keys[mid] > target:
            hi = mid - 1
        elif keys[mid] < target:
            lo = mid
        else:
            return mid
    return lo


# --- offset index -----------------------------------------------------------------------------

def offset_entries(raw: bytes, base: int) -> list[tuple[int, int]]:
    return [(base + r, p) for r, p in struct.iter_unpack(">ii", raw[:len(raw) - len(raw) % 8])]


def offset_index_harmless(raw: bytes, original: bytes, batches: list[Batch], base: int, log_size: int) -> bool:
    entries = offset_entries(raw, base)
    starts = {b.pos: i for i, b in enumerate(batches)}
    targets = {base - 1, base, 0}
    for b in batches:
        targets.update((b.base - 1, b.base, b.last, b.last + 1))
    for o, _ in entries + offset_entries(original, base):
        targets.update((o - 1, o, o + 1))
    keys = [o for o, _ in entries]

    def truth(t):
        return next((i for i, b in enumerate(batches) if b.last >= t), None)

    for t in targets:
        slot = _binary_search(keys, t)
        pos = entries[slot][1] if slot >= 0 else 0
        if pos == log_size and not batches:
            continue
        if pos not in starts and not (pos == 0 and not batches):
            return False
        first = starts.get(pos, 0)
        found = next((i for i in range(first, len(batches)) if batches[i].last >= t), None)
        if found != truth(t):
            return False
    if entries:
        pos = entries[-1][1]
        if pos not in starts:
            return False
    return True


# --- time index -------------------------------------------------------------------------------

def time_entries(raw: bytes, base: int) -> list[tuple[int, int]]:
    return [(ts, base + r) for ts, r in struct.iter_unpack(">qi", raw[:len(raw) - len(raw) % 12])]


def time_index_harmless(raw: bytes, original: bytes, batches: list[Batch], base: int, closed: bool) -> bool:
    entries = time_entries(raw, base)
    targets = {-1, 0, 2**62}
    for b in batches:
        targets.update((b.max_ts - 1, b.max_ts, b.max_ts + 1))
    for ts, _ in entries + time_entries(original, base):
        targets.update((ts - 1, ts, ts + 1))
    keys = [ts for ts, _ in entries]

    def first_from(i, t):
        return next((j for j in range(i, len(batches)) if batches[j].max_ts >= t), None)

    for t in targets:
        slot = _binary_search(keys, t)
        off = entries[slot][1] if slot >= 0 else base
        start = next((i for i, b in enumerate(batches) if b.last >= off), len(batches))
        if first_from(start, t) != first_from(0, t):
            return False
    if closed and batches:
        largest = max(b.max_ts for b in batches)
        last_ts = entries[-1][0] if entries else -1
        if last_ts != largest:
            return False
        if entries:
            holder = next((i for i, b in enumerate(batches) if b.last >= entries[-1][1]), None)
            if holder != first_from(0, largest):
                return False
    return True


# --- transaction index ------------------------------------------------------------------------

def txn_entries(raw: bytes) -> list[tuple[int, int, int, int, int]]:
    """(version byte, pid, first, last, lso) per 34-byte entry."""
    out = []
    for i in range(len(raw) // 34):
        v, pid, first, last, lso = struct.unpack_from(">hqqqq", raw, i * 34)
        out.append((v >> 8, pid, first, last, lso))
    return out


class Partition:
    """The segments of a partition: (base offset, batches, txn index bytes) in offset order."""

    def __init__(self, segments: list[tuple[int, list[Batch], bytes]]):
        self.bases = [s[0] for s in segments]
        self.batches = [b for s in segments for b in s[1]]
        self.seg_batches = [s[1] for s in segments]
        self.txn = [txn_entries(s[2]) for s in segments]


def _collect(partition: Partition, txn: list, f: int, u: int):
    """Kafka's collectAbortedTxns: from the segment holding f on, entries with last >= f and
    first < u, until an entry's last stable offset >= u; None when a reader would refuse a file."""
    i = max(0, next((k for k in range(len(partition.bases) - 1, -1, -1) if partition.bases[k] <= f), 0))
    found = []
    for entries in txn[i:]:
        for v, pid, first, last, lso in entries:
            if v != 0:
                return None
            if last >= f and first < u:
                found.append((pid, first))
            if lso >= u:
                return found
    return found


def _read_committed(batches: list[Batch], aborted, f: int, u: int) -> list[int]:
    """Kafka consumer's aborted-transaction filter over the batches overlapping [f, u)."""
    queue = sorted(aborted, key=lambda a: a[1])
    active = set()
    out = []
    for b in batches:
        if b.last < f or b.base >= u:
            continue
        while queue and queue[0][1] <= b.last:
            active.add(queue.pop(0)[0])
        if b.control:
            if b.ctype == 0:
                active.discard(b.pid)
            continue
        if b.txn and b.pid in active:
            continue
        out.append(b.base)
    return out


def txn_index_harmless(partition: Partition, seg: int, raw: bytes) -> bool:
    """Whether segment ``seg``'s txn index replaced by ``raw`` leaves every read_committed read
    [f, u) of the partition unchanged (``f``, ``u`` over every offset where an answer can change)."""
    flipped = list(partition.txn)
    flipped[seg] = txn_entries(raw)
    points = {0, 2**62}
    for b in partition.batches:
        points.update((b.base, b.last + 1))
    for entries in (flipped[seg], *partition.txn):
        for _, _, first, last, lso in entries:
            points.update((first, first + 1, last, last + 1, lso, lso + 1))
    points = sorted(p for p in points if p >= 0)
    for f in points:
        if f > (partition.seg_batches[seg][-1].last if partition.seg_batches[seg] else partition.bases[seg]):
            break   # the walk starts after the segment: its index is never read
        for u in points:
            if u <= f:
                continue
            a, b = _collect(partition, flipped, f, u), _collect(partition, partition.txn, f, u)
            if a is None:
                return False
            if sorted(a) == sorted(b):
                continue
            if _read_committed(partition.batches, a, f, u) != _read_committed(partition.batches, b, f, u):
                return False
    return True
