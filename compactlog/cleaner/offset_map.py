"""The cleaner's key -> latest offset map.

Kafka's SkimpyOffsetMap stores an MD5 per key in a fixed buffer and stops a round when it fills.
Here keys are identified by a 128-bit digest (two independent xxHash64 values) in an open-addressing
table of numpy arrays that grows as needed, so any number of keys is mapped in one pass. The rest
of the cleaner sees only ``put`` / ``get`` / ``latest_offset`` (the ``OffsetMap`` protocol), so
another map (e.g. a distributed one) can stand in.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from ..record.jit import intrinsic, njit
from .strategy import beats

EMPTY = -1
# a map's bytes a key where a budget binds (past 16M keys; 32 and 48 below: CompactOffsetMap)
BYTES_PER_KEY = 27   # the compact map's 16-byte slots sized 0.6 full (CompactOffsetMap.SIZED_LOAD)
VERSION_BYTES_PER_KEY = 40   # the version map's 24-byte slots (compaction.strategy timestamp/header)


class OffsetMap(Protocol):
    latest_offset: int

    def put(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> None: ...

    def get(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For each record (key digest, offset): the latest offset of its key, -1 when unmapped.

        Only the comparison with the record's own offset matters to the rules, which lets a map
        that knows the winning offsets (the distributed one) answer without the keys' table."""
        ...

    def __len__(self) -> int: ...


@njit(cache=True)
def _slot(h1, mask):
    return np.int64(h1 & np.uint64(mask))


@njit(cache=True)
def _put_all(t1, t2, toff, h1, h2, offsets, size, keep_max):
    """Insert keys; an existing key takes the new offset (in offset order), or the larger one
    with ``keep_max`` (keys arriving in any order)."""
    mask = t1.shape[0] - 1
    for i in range(h1.shape[0]):
        a = h1[i]
        b = h2[i]
        s = _slot(a ^ (b >> np.uint64(17)), mask)
        while True:
            if toff[s] == EMPTY:
                t1[s] = a
                t2[s] = b
                toff[s] = offsets[i]
                size += 1
                break
            if t1[s] == a and t2[s] == b:
                if not keep_max or offsets[i] > toff[s]:
                    toff[s] = offsets[i]
                break
            s = (s + 1) & mask
    return size


@njit(cache=True)
def _get_all(t1, t2, toff, h1, h2, out):
    mask = t1.shape[0] - 1
    for i in range(h1.shape[0]):
        a = h1[i]
        b = h2[i]
        s = _slot(a ^ (b >> np.uint64(17)), mask)
        out[i] = EMPTY
        while toff[s] != EMPTY:
            if t1[s] == a and t2[s] == b:
                out[i] = toff[s]
                break
            s = (s + 1) & mask


class _KeyTable:
    """What both in-task maps share: the key count and the map's latest offset."""

    size: int
    latest_offset: int

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def __len__(self) -> int:
        return self.size


class InTaskOffsetMap(_KeyTable):
    """Open addressing over (h1, h2, offset) arrays, resized at a load factor of 1/2."""

    def __init__(self, expected_keys: int = 1024):
        cap = 1
        while cap < max(16, expected_keys * 2):
            cap <<= 1
        self._alloc(cap)
        self.size = 0
        self.latest_offset = -1

    def _alloc(self, cap: int) -> None:
        self.t1 = np.empty(cap, dtype=np.uint64)
        self.t2 = np.empty(cap, dtype=np.uint64)
        self.toff = np.full(cap, EMPTY, dtype=np.int64)

    def _grow(self, needed: int) -> None:
        cap = self.toff.shape[0]
        if needed * 2 <= cap:
            return
        while needed * 2 > cap:
            cap <<= 1
        live = self.toff != EMPTY
        o1, o2, oo = self.t1[live], self.t2[live], self.toff[live]
        self._alloc(cap)
        self.size = _put_all(self.t1, self.t2, self.toff, o1, o2, oo, 0, False)

    def put(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> None:
        """Record keys in offset order; a later offset for the same key replaces the earlier one."""
        if h1.shape[0] == 0:
            return
        self._grow(self.size + h1.shape[0])
        self.size = _put_all(self.t1, self.t2, self.toff, h1, h2, offsets, self.size, False)
        self.latest_offset = int(offsets[-1])

    def put_max(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> None:
        """Record keys arriving in any order, keeping each key's largest offset."""
        if h1.shape[0] == 0:
            return
        self._grow(self.size + h1.shape[0])
        self.size = _put_all(self.t1, self.t2, self.toff, h1, h2, offsets, self.size, True)

    def offsets(self) -> np.ndarray:
        """Every key's stored offset (the winners, once all keys are in)."""
        return self.toff[self.toff != EMPTY]

    def get(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(h1.shape[0], dtype=np.int64)
        if h1.shape[0]:
            _get_all(self.t1, self.t2, self.toff, h1, h2, out)
        return out

    @property
    def bytes_used(self) -> int:
        return self.toff.shape[0] * 24


# --- the compact map: 16-byte slots ---------------------------------------------------------------

OFFSET_BITS = 40
OFFSET_MASK = (1 << OFFSET_BITS) - 1
CHECK_BITS = 64 - OFFSET_BITS           # the compact map's digest bits beside the offset
CHECK_SHIFT = np.uint64(OFFSET_BITS)
# how many keys ahead the probes ask for their slot's cache line: a table of 2M slots (32 MB) is
# not in cache, and each probe otherwise waits for memory in turn (5M gets: 0.13 -> 0.08 CPU-s)
PREFETCH_AHEAD = 16


@njit(cache=True, inline="always")
def _home(h1, cap):
    """A key's first slot in a table of ``cap`` slots (any size below 2**32, not only a power of
    two): the top 32 bits of its digest scaled to the table (Lemire's multiply-shift), so a table
    is sized to its keys instead of to the next power of two (up to 2x the memory)."""
    return np.int64(((h1 >> np.uint64(32)) * np.uint64(cap)) >> np.uint64(32))


def _no_prefetch(array, index):
    """In Python a prefetch does nothing."""


@intrinsic(python=_no_prefetch)
def _prefetch(typingctx, array, index):
    """Ask for the cache line of ``array[index]`` (llvm.prefetch: read, keep in all levels); no
    bounds check is needed, a prefetch never faults."""
    from llvmlite import ir
    from numba import types
    sig = types.void(array, types.int64)

    def codegen(context, builder, signature, args):
        a, i = args
        ptr = builder.gep(context.make_array(signature.args[0])(context, builder, a).data, [i])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True)
def _cput_all(t1, tv, h1, h2, offsets, base, size):
    cap = t1.shape[0]
    n = h1.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:
            ahead = _home(h1[i + PREFETCH_AHEAD], cap)
            _prefetch(t1, ahead)
            _prefetch(tv, ahead)
        a = h1[i]
        check = h2[i] >> np.uint64(64 - CHECK_BITS)
        v = (check << CHECK_SHIFT) | np.uint64(offsets[i] - base + 1)
        s = _home(a, cap)
        while True:
            cur = tv[s]
            if cur == 0:
                t1[s] = a
                tv[s] = v
                size += 1
                break
            if t1[s] == a and (cur >> CHECK_SHIFT) == check:
                tv[s] = v
                break
            s += 1
            if s == cap:
                s = 0
    return size


@njit(cache=True)
def _checked_get_all(t1, tv, h1, h2, base, out, check_bits):
    """The offsets of a table whose value word holds ``check_bits`` more digest bits at its top
    and the offset + 1 (relative to ``base``) in its low 40 bits: the compact map's 24, the
    version map's 23 (its has-version bit sits between the two)."""
    cap = t1.shape[0]
    low = np.uint64(OFFSET_MASK)
    shift = np.uint64(64 - check_bits)
    n = h1.shape[0]
    for i in range(n):
        if i + PREFETCH_AHEAD < n:
            ahead = _home(h1[i + PREFETCH_AHEAD], cap)
            _prefetch(t1, ahead)
            _prefetch(tv, ahead)
        a = h1[i]
        check = h2[i] >> shift
        s = _home(a, cap)
        out[i] = -1
        while True:
            cur = tv[s]
            if cur == 0:
                break
            if t1[s] == a and (cur >> shift) == check:
                out[i] = base + np.int64(cur & low) - 1
                break
            s += 1
            if s == cap:
                s = 0


class CompactOffsetMap(_KeyTable):
    """16-byte slots: the key digest's first 64 bits, and one word holding the offset (40 bits,
    relative to the map's base offset) and 24 more bits of the digest, checked on every match so
    that two keys sharing the first 64 bits stay apart (an 88-bit digest in all).

    Slots start as zero pages the OS hands out lazily (``np.zeros``: nothing is written to memory
    the map never uses). The table is sized for the expected keys (any slot count: ``_home``) and
    doubles past ``LOAD``: half full up to ``FAST_BYTES`` (32 bytes a key: 16M keys in 512 MiB),
    beyond at ``SIZED_LOAD`` (16 / 0.6 = ~27 bytes a key, ``BYTES_PER_KEY``; 50M keys: 1.33 GB,
    where the next power of two at 3/4 took 2.1 GB). Either leaves room for an estimate 25% low.
    Probes cost more the fuller the table: 1M keys put and got at 0.64 full took 1.15x and 1.3x
    the CPU of 0.47 full (the power of two they had), hence half full while memory is no concern.
    """

    LOAD = 0.8
    SIZED_LOAD = 0.6
    FAST_BYTES = 512 << 20
    SLOT_BYTES = 16
    COLUMNS: tuple[str, ...] = ()       # per-slot arrays beside the two words (the version map's)

    def __init__(self, base_offset: int, expected_keys: int = 1024):
        self.base = base_offset
        cap = slots_for(expected_keys, 0.5)
        if cap * self.SLOT_BYTES > self.FAST_BYTES:
            cap = max(slots_for(expected_keys, self.SIZED_LOAD), self.FAST_BYTES // self.SLOT_BYTES)
        self._alloc(cap)
        self.size = 0
        self.latest_offset = -1

    def _alloc(self, cap: int) -> None:
        self.t1 = np.zeros(cap, dtype=np.uint64)
        self.tv = np.zeros(cap, dtype=np.uint64)

    @staticmethod
    def fits(base_offset: int, end_offset: int) -> bool:
        return end_offset - base_offset < OFFSET_MASK

    def _grow(self, needed: int) -> None:
        cap = self.t1.shape[0]
        if needed <= cap * self.LOAD:
            return
        if cap * self.SLOT_BYTES >= self.FAST_BYTES:
            # a big table (an estimate 25% low) grows to SIZED_LOAD, ~1.4x, not 2x
            cap = slots_for(needed, self.SIZED_LOAD)
        while needed > cap * self.LOAD:
            cap <<= 1
        if cap >= MAX_SLOTS:
            raise MemoryError(f"a key map of {cap:,} slots is past the in-task map's {MAX_SLOTS:,}")
        live = self.tv != 0
        o1, ov = self.t1[live], self.tv[live]
        beside = [getattr(self, c)[live] for c in self.COLUMNS]
        # the old table freed before the new one is allocated: the live slots' copies (16 bytes a
        # key) and the new table are resident while it moves, not the old table too
        self.t1 = self.tv = None
        for c in self.COLUMNS:
            setattr(self, c, None)
        self._alloc(cap)
        # reinsert whole slots: digest word and value word as they are, the columns beside them
        # moved to the slots they went to
        slots = np.empty(o1.shape[0], dtype=np.int64)
        self.size = _reinsert(self.t1, self.tv, o1, ov, slots)
        for c, values in zip(self.COLUMNS, beside):
            getattr(self, c)[slots] = values

    def put(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> None:
        n = h1.shape[0]
        if n == 0:
            return
        # in slices no bigger than 1/16 of the table's room, the growth checked before each: a
        # segment's records put at once (most of them keys already mapped) would double a table
        # sized for the keys there are (the worst case, every record a new key)
        step = max(1 << 10, int(self.t1.shape[0] * self.LOAD) >> 4)
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            self._grow(self.size + hi - lo)
            # offsets relative to the base inside the kernel: no array of them (8 B a record)
            self.size = _cput_all(self.t1, self.tv, h1[lo:hi], h2[lo:hi], offsets[lo:hi], self.base, self.size)
        self.latest_offset = int(offsets[-1])

    def get(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
        out = np.empty(h1.shape[0], dtype=np.int64)
        if h1.shape[0]:
            _checked_get_all(self.t1, self.tv, h1, h2, self.base, out, CHECK_BITS)
        return out

    @property
    def bytes_used(self) -> int:
        return self.t1.shape[0] * 16


MAX_SLOTS = 1 << 32       # _home scales 32 digest bits to the table
SLOT_ROUND = 1 << 10      # slot counts in whole KiB


def slots_for(keys: int, load: float) -> int:
    """Slots for ``keys`` at ``load`` (in whole ``SLOT_ROUND``s; at least one)."""
    need = int(max(keys, 1) / load) + 1
    return min(-(-need // SLOT_ROUND) * SLOT_ROUND, MAX_SLOTS - SLOT_ROUND)


@njit(cache=True)
def _reinsert(t1, tv, o1, ov, slots):
    """Whole slots into a grown table (no two alike); ``slots``: where each one went, for the
    columns beside the two words (the version map's versions)."""
    cap = t1.shape[0]
    for i in range(o1.shape[0]):
        s = _home(o1[i], cap)
        while tv[s] != 0:
            s += 1
            if s == cap:
                s = 0
        t1[s] = o1[i]
        tv[s] = ov[i]
        slots[i] = s
    return o1.shape[0]


# --- the version map: 24-byte slots, for the version strategies (cleaner/strategy.py) ---------------

VCHECK_BITS = CHECK_BITS - 1                 # 23 bits of digest above the has-version bit
VCHECK_SHIFT = np.uint64(64 - VCHECK_BITS)
VHAS = np.uint64(1 << OFFSET_BITS)
VTIE_MASK = np.uint64((1 << (OFFSET_BITS + 1)) - 1)


@njit(cache=True)
def _vput_all(t1, tv, tver, h1, h2, rel_offsets, ver, has, size, insert):
    """Keep each key's winner (strategy.beats over (version, has | offset)); new keys only when
    ``insert`` (the clean section's records only update keys the dirty range mapped)."""
    cap = t1.shape[0]
    low = VTIE_MASK
    for i in range(h1.shape[0]):
        a = h1[i]
        check = h2[i] >> np.uint64(64 - VCHECK_BITS)
        tie = np.uint64(rel_offsets[i] + 1) | (VHAS if has[i] else np.uint64(0))
        v = (check << VCHECK_SHIFT) | tie
        s = _home(a, cap)
        while True:
            cur = tv[s]
            if cur == 0:
                if insert:
                    t1[s] = a
                    tv[s] = v
                    tver[s] = ver[i]
                    size += 1
                break
            if t1[s] == a and (cur >> VCHECK_SHIFT) == check:
                if beats(ver[i], np.int64(tie), tver[s], np.int64(cur & low)):
                    tv[s] = v
                    tver[s] = ver[i]
                break
            s += 1
            if s == cap:
                s = 0
    return size


class VersionMap(CompactOffsetMap):
    """The compact map with a version column, for ``compaction.strategy`` timestamp or header:
    24-byte slots (KIP-280's 8 more bytes a key), the digest word, one word holding the winner's
    offset (40 bits, relative to the log start: the clean section's records are ranked too), its
    has-version bit and 23 more digest bits (an 87-bit digest), and the winner's version.

    ``put`` keeps each key's winner by ``strategy.beats``; ``update`` does the same for keys
    already mapped only (the clean section's records); ``get`` answers the winner's offset, which
    the rewrite compares for equality (``rules.record_fates(exact=True)``)."""

    COLUMNS = ("tver",)
    SLOT_BYTES = 24

    def _alloc(self, cap: int) -> None:
        super()._alloc(cap)
        self.tver = np.zeros(cap, dtype=np.int64)

    def _rel(self, offsets: np.ndarray) -> np.ndarray:
        rel = np.asarray(offsets, dtype=np.int64) - self.base
        if rel.size and (int(rel.min()) < 0 or int(rel.max()) >= OFFSET_MASK - 1):
            raise ValueError(f"offsets outside the version map's range from {self.base}")
        return rel

    def put(self, h1, h2, offsets, ver=None, has=None) -> None:
        if h1.shape[0] == 0:
            return
        self._grow(self.size + h1.shape[0])
        self.size = _vput_all(self.t1, self.tv, self.tver, h1, h2, self._rel(offsets), ver, has, self.size, True)
        self.latest_offset = max(self.latest_offset, int(offsets[-1]))

    def update(self, h1, h2, offsets, ver, has) -> None:
        if h1.shape[0]:
            _vput_all(self.t1, self.tv, self.tver, h1, h2, self._rel(offsets), ver, has, self.size, False)

    def get(self, h1, h2, offsets=None) -> np.ndarray:
        out = np.empty(h1.shape[0], dtype=np.int64)
        if h1.shape[0]:
            _checked_get_all(self.t1, self.tv, h1, h2, self.base, out, VCHECK_BITS)
        return out

    def offsets(self) -> np.ndarray:
        """Every key's winning offset."""
        live = self.tv[self.tv != 0]
        return self.base + (live & np.uint64(OFFSET_MASK)).astype(np.int64) - 1

    @property
    def bytes_used(self) -> int:
        return self.t1.shape[0] * 24
