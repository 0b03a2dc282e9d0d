"""Sanity checks of a segment's indexes against its ``.log`` bytes, before anything trusts them.

Kafka's ``AbstractIndex.sanityCheck`` / ``TimeIndex.sanityCheck`` / ``TransactionIndex.sanityCheck``
look only at the index file itself (size, last entry against the base offset); a flipped byte
elsewhere in an index is trusted and makes lookups skip records, consumers serve aborted data and
the cleaner drop the latest value of keys. Here each index is checked against the batches of its
segment, entry by entry, with the rules under which every lookup gives the answer a linear scan of
the log would give (segment-files.md §3-5):

* offset index: entries strictly increasing in offset and position; every position a batch
  boundary inside the log; for entry (O, P): base offset of the batch at P <= O <= the segment's
  last offset, O >= the segment's base offset. Then every batch before P ends below O, so
  ``lookup(t)`` followed by a forward scan finds what a scan from 0 finds.
* time index: timestamps and offsets non-decreasing, offsets within [base, last offset]; for
  entry (T, O), T > the largest max timestamp of the batches before the batch holding O (so no
  record at or after T lies before where a lookup of T starts); a closed segment's last entry is
  its largest timestamp, at the first batch carrying it (retention and MAX_TIMESTAMP use it).
* transaction index: version 0, first <= last offset, last_stable_offset <= last + 1, last offsets
  strictly increasing and inside the segment; an entry's last offset, when a batch holds it, is an
  ABORT marker of the same producer, and its first offset lies after that producer's previous
  marker and at or before the transaction's first data batch; every ABORT marker that closes a
  transaction with data in the log has its entry.

The functions are pure: they take the index bytes and a ``SegmentLayout`` (the batch headers of
the ``.log``, walked by lengths only, no CRC) and return the first bad entry as an
``IndexProblem`` (None when the index can be trusted), for the caller to report and rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from ..record.jit import njit, span

from ..errors import StorageError
from ..record import kernels as K
from ..record.batch import as_u8
from ..record.layout import (ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_FLAG, CRC_OFFSET,
                             HEADER_SIZE_UP_TO_MAGIC, LAST_OFFSET_DELTA_OFFSET, MAGIC_V0, MAGIC_V1,
                             MAGIC_V2, MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD,
                             RECORDS_COUNT_OFFSET, RECORDS_OFFSET, TRANSACTIONAL_FLAG)
from ..record.legacy import LEGACY_ATTRIBUTES_OFFSET, LEGACY_CRC_OFFSET, LEGACY_TIMESTAMP_OFFSET

INT32_MAX = 0x7FFFFFFF
ABORT, COMMIT = 0, 1

# control types in SegmentLayout.ctype besides ABORT/COMMIT
NOT_CONTROL = -1
CONTROL_UNKNOWN = -2     # compressed control batch, or a key that is not a control key
CONTROL_EMPTY = -3       # a control batch emptied of its record

WALK_OK = 0
WALK_BAD_LENGTH = -1
WALK_BAD_MAGIC = -2
WALK_SHORT_V2 = -3

_WALK_ERRORS = {
    WALK_BAD_LENGTH: "record size is smaller than the minimum record overhead (14)",
    WALK_BAD_MAGIC: "invalid magic byte",
    WALK_SHORT_V2: f"record batch size is smaller than the v2 header ({RECORD_BATCH_OVERHEAD})",
}


class CorruptIndexError(StorageError):
    """An index file that contradicts its segment's ``.log``."""

    def __init__(self, problem: "IndexProblem"):
        self.problem = problem
        super().__init__(str(problem))


@dataclass(frozen=True)
class IndexProblem:
    """The first entry of an index file that cannot be trusted."""
    file: str
    entry: int          # entry number in the file (0-based); the entry count for a size problem
    field: str          # offset, position, timestamp, size, version, producerId, firstOffset, ...
    value: int
    why: str
    missing: bool = False   # the entry is absent: ``entry`` is where it belongs

    def __str__(self) -> str:
        return f"{self.file}: entry {self.entry}: {self.field} {self.value}: {self.why}"

    def to_dict(self) -> dict:
        return {"file": self.file, "entry": self.entry, "field": self.field, "value": self.value,
                "why": self.why}

    def error(self) -> CorruptIndexError:
        return CorruptIndexError(self)


# --- the batch headers of a segment -----------------------------------------------------------

class SegmentLayout(NamedTuple):
    """Every complete batch of a segment's ``.log`` (header fields only), in file order."""
    base_offset: int        # the segment's base offset (from its file name)
    log_size: int
    pos: np.ndarray         # int64 start position of each batch
    size: np.ndarray        # int64 batch size (length + 12)
    base: np.ndarray        # int64 base offset (legacy: the entry's offset field)
    last: np.ndarray        # int64 last offset
    max_ts: np.ndarray      # int64 max timestamp (legacy v1: its timestamp; v0: -1)
    attrs: np.ndarray       # int64 attributes
    pid: np.ndarray         # int64 producer id (legacy: -1)
    magic: np.ndarray       # int64
    count: np.ndarray       # int64 records count (legacy: -1)
    crc: np.ndarray         # int64 stored CRC (unsigned)
    ctype: np.ndarray       # int64 control type: ABORT, COMMIT, NOT_CONTROL, CONTROL_UNKNOWN, CONTROL_EMPTY
    end: int                # where the walk stopped: log_size, or an incomplete or impossible batch
    error: int              # WALK_OK, or why the batch at ``end`` cannot be read
    error_detail: str

    @property
    def batches(self) -> int:
        return int(self.pos.shape[0])

    @property
    def last_offset(self) -> int | None:
        return int(self.last[-1]) if self.pos.shape[0] else None

    @property
    def max_timestamp(self) -> int:
        return int(self.max_ts.max()) if self.pos.shape[0] else -1

    def batch_holding(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= ``offset`` (batches count if none)."""
        return int(np.searchsorted(self.last, offset, side="left"))


@njit(cache=True)
def _control_type(buf, pos, size):
    """ABORT/COMMIT of an uncompressed v2 control batch's first record, or CONTROL_UNKNOWN."""
    end = pos + size
    p = pos + RECORDS_OFFSET
    _, p = K._read_varint(buf, p, end)           # record length
    if p < 0:
        return CONTROL_UNKNOWN
    p += 1                                        # attributes
    _, p = K._read_varlong(buf, p, end)           # timestamp delta
    if p < 0:
        return CONTROL_UNKNOWN
    _, p = K._read_varint(buf, p, end)            # offset delta
    if p < 0:
        return CONTROL_UNKNOWN
    klen, p = K._read_varint(buf, p, end)
    if p < 0 or klen < 4 or p + 4 > end:
        return CONTROL_UNKNOWN
    if K._be_i16(buf, p) < 0:                     # control key version (newer ones keep the type)
        return CONTROL_UNKNOWN
    return K._be_i16(buf, p + 2)


@njit(cache=True, work=span)
def _walk(buf, start, end, fill, pos_a, size_a, base_a, last_a, ts_a, attrs_a, pid_a, magic_a,
          count_a, crc_a, ctype_a):
    """Walk the batch headers of buf[start:end]: (batches, stop position, WALK_* status).

    Lengths only, framed by ``kernels.batch_frame`` as every batch walk is (record-format.md
    §12); with ``fill`` the arrays receive each batch's header fields.
    """
    pos = start
    n = 0
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        frame, size, magic = K.batch_frame(buf, pos, end)
        if frame == K.FRAME_BAD_LENGTH:
            return n, pos, WALK_BAD_LENGTH
        if frame == K.FRAME_INCOMPLETE:
            return n, pos, WALK_OK
        if frame == K.FRAME_SHORT_V2:
            return n, pos, WALK_SHORT_V2
        if magic != MAGIC_V2 and magic != MAGIC_V0 and magic != MAGIC_V1:
            return n, pos, WALK_BAD_MAGIC
        if fill:
            base = K._be_i64(buf, pos)
            pos_a[n] = pos
            size_a[n] = size
            base_a[n] = base
            magic_a[n] = magic
            crc_a[n] = np.int64(K._be_u(buf, pos + (CRC_OFFSET if magic == MAGIC_V2 else LEGACY_CRC_OFFSET), 4))
            if magic == MAGIC_V2:
                attrs = K._be_i16(buf, pos + ATTRIBUTES_OFFSET)
                count = K._be_i32(buf, pos + RECORDS_COUNT_OFFSET)
                last_a[n] = base + K._be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET)
                ts_a[n] = K._be_i64(buf, pos + MAX_TIMESTAMP_OFFSET)
                attrs_a[n] = attrs
                pid_a[n] = K._be_i64(buf, pos + PRODUCER_ID_OFFSET)
                count_a[n] = count
                if attrs & CONTROL_FLAG:
                    if count == 0:
                        ctype_a[n] = CONTROL_EMPTY
                    elif attrs & COMPRESSION_MASK:
                        ctype_a[n] = CONTROL_UNKNOWN
                    else:
                        ctype_a[n] = _control_type(buf, pos, size)
                else:
                    ctype_a[n] = NOT_CONTROL
            else:
                last_a[n] = base
                has_ts = magic == MAGIC_V1 and size >= LEGACY_TIMESTAMP_OFFSET + 8
                ts_a[n] = K._be_i64(buf, pos + LEGACY_TIMESTAMP_OFFSET) if has_ts else -1
                attrs_a[n] = np.int64(buf[pos + LEGACY_ATTRIBUTES_OFFSET])
                pid_a[n] = -1
                count_a[n] = -1
                ctype_a[n] = NOT_CONTROL
        n += 1
        pos += size
    return n, pos, WALK_OK


def walk_segment(buf, base_offset: int, *, start: int = 0, end: int | None = None) -> SegmentLayout:
    """The batch headers of a segment's bytes (an mmap, bytes or uint8 array)."""
    data = as_u8(buf)
    end = data.shape[0] if end is None else end
    z = np.zeros(0, dtype=np.int64)
    n, _, _ = _walk(data, start, end, False, z, z, z, z, z, z, z, z, z, z, z)
    arrays = [np.empty(n, dtype=np.int64) for _ in range(11)]
    n2, stop, err = _walk(data, start, end, True, *arrays)
    assert n2 == n
    detail = _WALK_ERRORS.get(int(err), "")
    if err == WALK_OK and stop < end:
        detail = f"{end - stop} bytes at the end are not a complete batch"
    return SegmentLayout(base_offset, end, *arrays, int(stop), int(err), detail)


# --- batch order ------------------------------------------------------------------------------

def breaks_order(base, prev_last):
    """Whether a batch's base offset is not above the previous batch's last offset (elementwise
    over arrays): the order rule every reader of batches enforces. The base offset lies outside
    the CRC, so a flipped byte there passes every CRC check and makes reads skip or repeat records
    without a word; this rule is what catches it."""
    return base <= prev_last


def previous_lasts(last: np.ndarray, before: int) -> np.ndarray:
    """The last offset before each batch of a run: ``before`` for the first, then ``last[:-1]``."""
    return np.concatenate(([before], last[:-1]))


# --- offset index -----------------------------------------------------------------------------

def _entries(raw, width: int, dtype) -> tuple[np.ndarray, int]:
    data = as_u8(raw)
    n = data.shape[0] // width
    return np.frombuffer(data[:n * width].tobytes(), dtype=dtype), data.shape[0] % width


_OFFSET_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])
_TXN_DTYPE = np.dtype([("version", ">i2"), ("pid", ">i8"), ("first", ">i8"), ("last", ">i8"),
                       ("lso", ">i8")])


def _first(*conditions) -> tuple[int, int]:
    """(entry, rule) of the earliest entry failing any rule (rules earlier in the list win ties)."""
    best = (-1, -1)
    for rule, bad in enumerate(conditions):
        idx = np.flatnonzero(bad)
        if idx.size and (best[0] < 0 or idx[0] < best[0]):
            best = (int(idx[0]), rule)
    return best


def check_offset_index(raw, layout: SegmentLayout, *, path: str = "") -> IndexProblem | None:
    """The first offset-index entry (of the trimmed file's bytes ``raw``) a lookup cannot trust."""
    e, rest = _entries(raw, 8, _OFFSET_DTYPE)
    if rest:
        return IndexProblem(path, e.shape[0], "size", as_u8(raw).shape[0], "the file size is not a multiple of 8")
    if e.shape[0] == 0:
        return None
    base = layout.base_offset
    rel = e["rel"].astype(np.int64)
    off = base + rel
    pos = e["pos"].astype(np.int64)
    if layout.batches == 0:
        return IndexProblem(path, 0, "offset", int(off[0]), "the segment holds no batch")
    k = np.searchsorted(layout.pos, pos)
    kc = np.minimum(k, layout.batches - 1)
    boundary = (k < layout.batches) & (layout.pos[kc] == pos)
    last = layout.last_offset
    prev_off = np.concatenate(([np.iinfo(np.int64).min], off[:-1]))
    prev_pos = np.concatenate(([-1], pos[:-1]))
    i, rule = _first(rel < 0,
                     off <= prev_off,
                     pos <= prev_pos,
                     (pos < 0) | (pos >= layout.log_size),
                     ~boundary,
                     boundary & (layout.base[kc] > off),
                     off > last)
    if i < 0:
        return None
    o, p = int(off[i]), int(pos[i])
    if rule == 0:
        return IndexProblem(path, i, "offset", o, f"below the segment's base offset {base}")
    if rule == 1:
        return IndexProblem(path, i, "offset", o, f"not above the previous entry's offset {int(off[i - 1])}")
    if rule == 2:
        return IndexProblem(path, i, "position", p, f"not above the previous entry's position {int(pos[i - 1])}")
    if rule == 3:
        return IndexProblem(path, i, "position", p, f"outside the log's {layout.log_size} bytes")
    if rule == 4:
        return IndexProblem(path, i, "position", p, "not the start of a batch in the log")
    if rule == 5:
        return IndexProblem(path, i, "offset", o, f"below the base offset {int(layout.base[kc[i]])} of the "
                                                  f"batch at position {p}")
    return IndexProblem(path, i, "offset", o, f"beyond the segment's last offset {last}")


# --- time index -------------------------------------------------------------------------------

def check_time_index(raw, layout: SegmentLayout, *, closed: bool, path: str = "") -> IndexProblem | None:
    """The first time-index entry a timestamp lookup (or, for a closed segment, retention and
    MAX_TIMESTAMP) cannot trust."""
    e, rest = _entries(raw, 12, _TIME_DTYPE)
    if rest:
        return IndexProblem(path, e.shape[0], "size", as_u8(raw).shape[0], "the file size is not a multiple of 12")
    n = e.shape[0]
    last = layout.last_offset
    if n == 0:
        if closed and layout.batches and layout.max_timestamp >= 0:
            return IndexProblem(path, 0, "size", 0, f"a closed segment's time index needs its final entry "
                                                    f"(largest timestamp {layout.max_timestamp})")
        return None
    base = layout.base_offset
    ts = e["ts"].astype(np.int64)
    rel = e["rel"].astype(np.int64)
    off = base + rel
    # running max of the batches strictly before the batch holding each entry's offset
    k = np.searchsorted(layout.last, off, side="left")
    before = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(layout.max_ts))) \
        if layout.batches else np.full(1, np.iinfo(np.int64).min)
    prior = before[np.minimum(k, layout.batches)]
    lo = np.iinfo(np.int64).min
    i, rule = _first(rel < 0,
                     np.full(n, last is None) if last is None else off > last,
                     ts < np.concatenate(([lo], ts[:-1])),
                     off < np.concatenate(([lo], off[:-1])),
                     ts <= prior)
    if i >= 0:
        t, o = int(ts[i]), int(off[i])
        if rule == 0:
            return IndexProblem(path, i, "offset", o, f"below the segment's base offset {base}")
        if rule == 1:
            return IndexProblem(path, i, "offset", o, f"beyond the segment's last offset {last}"
                                if last is not None else "the segment holds no batch")
        if rule == 2:
            return IndexProblem(path, i, "timestamp", t, f"below the previous entry's timestamp {int(ts[i - 1])}")
        if rule == 3:
            return IndexProblem(path, i, "offset", o, f"below the previous entry's offset {int(off[i - 1])}")
        return IndexProblem(path, i, "timestamp", t, f"not above {int(prior[i])}, the largest timestamp of the "
                                                     f"batches before offset {o}: a lookup would skip records")
    if closed:
        t, o = int(ts[-1]), int(off[-1])
        if t != layout.max_timestamp:
            return IndexProblem(path, n - 1, "timestamp", t, f"the last entry of a closed segment must be its "
                                                            f"largest timestamp {layout.max_timestamp}")
        kb = int(k[-1])
        if int(layout.max_ts[kb]) != t:
            return IndexProblem(path, n - 1, "offset", o, f"the batch holding it (offsets {int(layout.base[kb])}-"
                                                          f"{int(layout.last[kb])}) does not carry timestamp {t}")
    return None


# --- transaction index ------------------------------------------------------------------------

@dataclass
class TxnCarry:
    """What a walk over consecutive segments knows of each producer's transactions so far:
    pid -> offset of its last marker, and pid -> first offset of its transactional data since."""
    last_marker: dict = field(default_factory=dict)
    open_first: dict = field(default_factory=dict)


def txn_entries(raw) -> np.ndarray:
    """The 34-byte entries of a ``.txnindex`` (a trailing partial entry is ignored, as Kafka does)."""
    return _entries(raw, 34, _TXN_DTYPE)[0]


def check_txn_entry(version: int, pid: int, first: int, last: int, lso: int) -> tuple[str, int, str] | None:
    """(field, value, why) when one aborted-transaction entry is impossible on its own."""
    if version >> 8 != 0:   # Kafka reads the first byte of the version only
        return "version", version, "unsupported aborted transaction version (only 0 exists)"
    if pid < 0:
        return "producerId", pid, "an aborted transaction always has a producer id"
    if first > last:
        return "firstOffset", first, f"above the last offset {last}"
    if lso > last + 1:
        return "lastStableOffset", lso, f"above last offset + 1 ({last + 1}): a read would stop collecting " \
                                        f"aborted transactions too early"
    return None


def check_txn_index(raw, layout: SegmentLayout, *, next_base: int | None = None, path: str = "",
                    carry: TxnCarry | None = None) -> IndexProblem | None:
    """The first ``.txnindex`` entry that contradicts the segment's markers, or an ABORT marker of a
    transaction with data whose entry is missing (reported as the entry that should hold it).

    ``carry`` (updated in place) continues the producers' transaction state from the previous
    segments of a walk from the log start; without it, rules needing earlier segments are skipped.
    """
    e = txn_entries(raw)
    carry = carry if carry is not None else TxnCarry()
    seg_base = layout.base_offset
    seg_last = layout.last_offset
    by_last = {}
    prev_last = None
    for i in range(e.shape[0]):
        version, pid, first, last, lso = (int(e["version"][i]), int(e["pid"][i]), int(e["first"][i]),
                                          int(e["last"][i]), int(e["lso"][i]))
        bad = check_txn_entry(version, pid, first, last, lso)
        if bad is not None:
            return IndexProblem(path, i, *bad)
        if last < seg_base or seg_last is None or last > seg_last or (next_base is not None and last >= next_base):
            return IndexProblem(path, i, "lastOffset", last, f"outside the segment's offsets [{seg_base}, "
                                                             f"{seg_last if seg_last is not None else seg_base}]")
        if prev_last is not None and last <= prev_last:
            return IndexProblem(path, i, "lastOffset", last, f"not above the previous entry's {prev_last}")
        prev_last = last
        by_last[last] = (i, pid, first, lso)
    # markers, and transactional data batches (only the first of each transaction matters)
    ctrl = np.flatnonzero((layout.ctype != NOT_CONTROL) | (((layout.attrs & TRANSACTIONAL_FLAG) != 0) & (layout.magic == MAGIC_V2)))
    # entries whose offset is held by a batch must point at that producer's ABORT marker
    for last, (i, pid, first, _) in by_last.items():
        k = layout.batch_holding(last)
        if k >= layout.batches or layout.base[k] > last:
            # Kafka's cleaner keeps an entry only together with its marker: an entry whose offset no
            # batch holds was moved there (a stale entry hides the producer's later transactions)
            return IndexProblem(path, i, "lastOffset", last, "no batch holds this offset: it is not an ABORT "
                                                             "marker")
        ct = int(layout.ctype[k])
        if ct == NOT_CONTROL:
            return IndexProblem(path, i, "lastOffset", last, f"offset {last} is a data batch "
                                                             f"({int(layout.base[k])}-{int(layout.last[k])}), "
                                                             f"not an ABORT marker")
        if ct == COMMIT:
            return IndexProblem(path, i, "lastOffset", last, f"offset {last} is a COMMIT marker, not an ABORT")
        if int(layout.pid[k]) != pid:
            return IndexProblem(path, i, "producerId", pid, f"the ABORT marker at offset {last} belongs to "
                                                            f"producer {int(layout.pid[k])}")
        if int(layout.base[k]) != last:
            return IndexProblem(path, i, "lastOffset", last, f"inside the control batch {int(layout.base[k])}-"
                                                             f"{int(layout.last[k])}, not at its marker")
    # markers against the producers' transactions, in log order
    for k in ctrl.tolist():
        pid = int(layout.pid[k])
        ct = int(layout.ctype[k])
        if ct == NOT_CONTROL:        # transactional data
            carry.open_first.setdefault(pid, int(layout.base[k]))
            continue
        marker = int(layout.last[k])
        open_first = carry.open_first.pop(pid, None)
        prev_marker = carry.last_marker.get(pid)
        carry.last_marker[pid] = marker
        if ct != ABORT:
            continue
        found = by_last.get(marker)
        if found is None:
            if open_first is not None:
                at = int(np.searchsorted(e["last"].astype(np.int64), marker))
                return IndexProblem(path, at, "lastOffset", marker,
                                    f"missing entry: the ABORT marker at offset {marker} of producer {pid} "
                                    f"closes a transaction with data from offset {open_first}", missing=True)
            continue
        i, _, first, lso = found
        # Kafka's LSO at the abort: the first offset of the earliest other open transaction
        others = [v for p, v in carry.open_first.items() if p != pid]
        stable = min(others) if others and min(others) <= marker else marker + 1
        if lso > stable:
            return IndexProblem(path, i, "lastStableOffset", lso, f"above {stable}, the last stable offset at the "
                                                                  f"ABORT marker {marker}: a read would stop "
                                                                  f"collecting aborted transactions too early")
        if open_first is not None and first > open_first:
            return IndexProblem(path, i, "firstOffset", first, f"above the transaction's first data offset "
                                                               f"{open_first}: its data would be served")
        if prev_marker is not None and first <= prev_marker:
            return IndexProblem(path, i, "firstOffset", first, f"not above producer {pid}'s previous marker at "
                                                               f"offset {prev_marker}: committed data would be "
                                                               f"treated as aborted")
    return None


# --- files ------------------------------------------------------------------------------------

def read_file(path: str) -> bytes:
    """The bytes of an index file (empty when it does not exist)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def check_segment(dir_path: str, base_offset: int, buf, *, closed: bool, next_base: int | None = None,
                  carry: TxnCarry | None = None, layout: SegmentLayout | None = None) -> list[IndexProblem]:
    """Every index of one segment checked against its log bytes ``buf``; the problems found (at
    most one per index file)."""
    from . import files
    layout = layout if layout is not None else walk_segment(buf, base_offset)
    out = []
    p = files.segment_file(dir_path, base_offset, files.INDEX_SUFFIX)
    pr = check_offset_index(read_file(p), layout, path=p)
    if pr:
        out.append(pr)
    p = files.segment_file(dir_path, base_offset, files.TIME_INDEX_SUFFIX)
    pr = check_time_index(read_file(p), layout, closed=closed, path=p)
    if pr:
        out.append(pr)
    p = files.segment_file(dir_path, base_offset, files.TXN_INDEX_SUFFIX)
    pr = check_txn_index(read_file(p), layout, next_base=next_base, path=p, carry=carry)
    if pr:
        out.append(pr)
    return out
