"""The whole-segment scanner (scan_log_uncompressed), its batch framing and the record writers."""

from __future__ import annotations

import numpy as np
import pytest

from compactlog.record import kernels as K
from compactlog.record.batch import BatchSpec, as_u8, encode_batch, iter_batches
from compactlog.record.layout import (CONTROL_FLAG, INT32, LENGTH_OFFSET, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD,
                                      RECORDS_COUNT_OFFSET, TRANSACTIONAL_FLAG)

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def _batch(base: int, n: int, *, ts: int = 1000, **spec) -> bytes:
    return encode_batch(BatchSpec(base_offset=base, **spec),
                        [(base + i, ts + i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else [])
                         for i in range(n)])


def _scan(buf, *, start=INT64_MIN, end=INT64_MAX, stop=0, records=64, batches=16, include_control=False):
    data = as_u8(buf)
    bmeta = np.empty((batches, K.BM_FIELDS), dtype=np.int64)
    r64 = np.empty((K.R64_ROWS, records), dtype=np.int64)
    r32 = np.empty((K.R32_ROWS, records), dtype=np.int32)
    status, pos, nb, nr, where, _ = K.scan_log_uncompressed(data, 0, data.shape[0], start, end, include_control,
                                                            bmeta, 0, r64, r32, 0, INT64_MAX, stop)
    return int(status), int(pos), bmeta[:nb], r64[:, :nr], r32[:, :nr], int(where)


# --- batch_frame: the one framing rule of every walk ------------------------------------------

def test_batch_frame_statuses():
    b = _batch(0, 3)
    data = as_u8(b)
    assert tuple(int(x) for x in K.batch_frame(data, 0, len(b))) == (K.FRAME_OK, len(b), 2)
    assert int(K.batch_frame(data, 0, len(b) - 1)[0]) == K.FRAME_INCOMPLETE
    short = bytearray(b)
    INT32.pack_into(short, LENGTH_OFFSET, 13)
    assert int(K.batch_frame(as_u8(short), 0, len(short))[0]) == K.FRAME_BAD_LENGTH
    INT32.pack_into(short, LENGTH_OFFSET, RECORD_BATCH_OVERHEAD - 1 - 12)
    assert int(K.batch_frame(as_u8(short), 0, len(short))[0]) == K.FRAME_SHORT_V2
    short[MAGIC_OFFSET] = 1          # a legacy entry may be that short
    assert int(K.batch_frame(as_u8(short), 0, len(short))[0]) == K.FRAME_OK


def test_header_walks_agree_on_a_damaged_length():
    good = _batch(0, 2) + _batch(2, 2)
    bad = bytearray(good + _batch(4, 2))
    INT32.pack_into(bad, len(good) + LENGTH_OFFSET, 5)
    data = as_u8(bytes(bad))
    assert int(K.seek_batch(data, 0, data.shape[0], 4)) == -1 - len(good)
    nxt, stop = K.last_batch_end(data, 0, data.shape[0])
    assert (int(nxt), int(stop)) == (4, len(good))
    status, pos, *_ = _scan(bytes(bad))
    assert (status, pos) == (K.ERR_BATCH_SIZE, len(good))


# --- the scanner ------------------------------------------------------------------------------

def test_scan_matches_the_per_batch_decoder():
    log = _batch(0, 5) + _batch(5, 1) + _batch(6, 7, ts=5000)
    status, pos, bm, r64, r32, _ = _scan(log)
    assert (status, pos) == (K.SCAN_END, len(log))
    assert bm.shape[0] == 3 and r64.shape[1] == 13
    row = 0
    for i, b in enumerate(iter_batches(log)):
        cols = b.columns()
        assert bm[i, K.BM_POS] == b.position and bm[i, K.BM_FIRST_RECORD] == row
        for j in range(b.records_count):
            r = row + j
            assert r64[K.R64_OFFSET, r] == b.base_offset + cols.off_delta[j]
            assert r64[K.R64_TIMESTAMP, r] == b.header.base_timestamp + cols.ts_delta[j]
            for got, want in ((K.R64_KEY_POS, cols.key_pos), (K.R64_VAL_POS, cols.val_pos),
                              (K.R64_RECORD_END, cols.rec_end), (K.R64_TAIL_POS, cols.tail_pos)):
                assert r64[got, r] == want[j]       # both index the log buffer
            assert r32[K.R32_KEY_LEN, r] == cols.key_len[j] and r32[K.R32_BATCH, r] == i
        row += b.records_count


def test_filtered_records_keep_their_spans():
    """A record moved down past left-out ones carries its spans along (the cleaner reads them)."""
    log = _batch(0, 6)
    _, _, _, full, full32, _ = _scan(log)
    _, _, _, part, part32, _ = _scan(log, start=2, end=5)
    assert part[K.R64_OFFSET].tolist() == [2, 3, 4]
    assert np.array_equal(part[K.R64_KEY_POS:], full[K.R64_KEY_POS:, 2:5])
    assert np.array_equal(part32[:K.R32_BATCH], full32[:K.R32_BATCH, 2:5])


def test_stop_attributes_stop_before_the_batch():
    plain = _batch(0, 2)
    log = plain + _batch(2, 2, transactional=True, producer_id=7, producer_epoch=0, base_sequence=0)
    status, pos, bm, *_ = _scan(log, stop=TRANSACTIONAL_FLAG | CONTROL_FLAG)
    assert (status, pos, bm.shape[0]) == (K.SCAN_STOPPED, len(plain), 1)
    status, pos, bm, *_ = _scan(log)          # the reader stops at nothing
    assert (status, pos, bm.shape[0]) == (K.SCAN_END, len(log), 2)


def test_full_arrays_resume_where_they_stopped():
    log = _batch(0, 5) + _batch(5, 5)
    status, pos, bm, r64, *_ = _scan(log, records=7)
    assert (status, pos, bm.shape[0], r64.shape[1]) == (K.SCAN_FULL, len(_batch(0, 5)), 1, 5)


@pytest.mark.parametrize("ts_delta,off_delta", [(0, 0), (-5, 3), (2**40, 2**31 - 1)])
def test_write_record_from_tail_round_trips(ts_delta, off_delta):
    b = next(iter_batches(_batch(0, 3)))
    cols = b.columns()
    out = np.zeros(256, dtype=np.uint8)
    j = 1
    end = K.write_record_from_tail(out, 0, ts_delta, off_delta, cols.data, cols.tail_pos[j], cols.rec_end[j])
    assert end == K.record_size(ts_delta, off_delta, cols.rec_end[j] - cols.tail_pos[j])
    rec_pos, rec_end, tsd, od, tail, kpos, vpos = (np.zeros(1, dtype=np.int64) for _ in range(7))
    klen, vlen, hdr = (np.zeros(1, dtype=np.int32) for _ in range(3))
    err, stop = K.scan_records(out, 0, end, 1, rec_pos, rec_end, tsd, od, tail, kpos, klen, vpos, vlen, hdr)
    assert (err, stop) == (0, end)
    assert (tsd[0], od[0]) == (ts_delta, off_delta)
    assert bytes(out[tail[0]:rec_end[0]]) == bytes(cols.data[cols.tail_pos[j]:cols.rec_end[j]])


def test_scan_capacity_bounds_what_the_scan_enters():
    log = _batch(0, 5) + _batch(5, 1) + _batch(6, 7)
    assert tuple(int(x) for x in K.scan_capacity(as_u8(log), 0, len(log))) == (3, 13)
    bogus = bytearray(_batch(0, 2))
    INT32.pack_into(bogus, RECORDS_COUNT_OFFSET, 2**31 - 1)     # a count no batch of that size holds
    nb, nr = K.scan_capacity(as_u8(bytes(bogus)), 0, len(bogus))
    assert (int(nb), int(nr)) == (1, (len(bogus) - RECORD_BATCH_OVERHEAD) // K.MIN_RECORD_SIZE)
    assert _scan(bytes(bogus))[0] == K.ERR_RECORDS_COUNT
