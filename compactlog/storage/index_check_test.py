"""index_check: each rule on hand-made segments, then the segments Kafka wrote (tests/data).

The corpus and the exhaustive flip tests (every flip caught or harmless) are in
tests/test_index_check_flips.py.
"""

from __future__ import annotations

import copy
import os
import struct

import pytest
from hypothesis import given, settings, strategies as st

from compactlog.record.batch import encode_marker
from compactlog.storage import index_check as IC
from compactlog.storage.conftest import T0, VECTORS, batch

BASE = 100


def segment(*parts: bytes) -> bytes:
    return b"".join(parts)


def plain_segment():
    """Batches 100-102, 103, 104-107 (timestamps T0+...), positions returned too."""
    parts = [batch(100, 3, ts=T0), batch(103, 1, ts=T0 + 10), batch(104, 4, ts=T0 + 5)]
    positions, p = [], 0
    for b in parts:
        positions.append(p)
        p += len(b)
    return segment(*parts), positions


def oi(*entries) -> bytes:
    return b"".join(struct.pack(">ii", o - BASE, p) for o, p in entries)


def ti(*entries) -> bytes:
    return b"".join(struct.pack(">qi", t, o - BASE) for t, o in entries)


def txn(*entries, version=0) -> bytes:
    return b"".join(struct.pack(">hqqqq", version, *e) for e in entries)


def test_walk_reads_every_batch_header():
    data, positions = plain_segment()
    lay = IC.walk_segment(data, BASE)
    assert lay.pos.tolist() == positions and lay.end == len(data) and lay.error == IC.WALK_OK
    assert lay.base.tolist() == [100, 103, 104] and lay.last.tolist() == [102, 103, 107]
    assert lay.max_ts.tolist() == [T0 + 2, T0 + 10, T0 + 8]
    assert lay.ctype.tolist() == [IC.NOT_CONTROL] * 3 and lay.last_offset == 107
    torn = IC.walk_segment(data[:-5], BASE)
    assert torn.batches == 2 and torn.end == positions[2] and "not a complete batch" in torn.error_detail
    bad = bytearray(data)
    struct.pack_into(">i", bad, positions[1] + 8, 3)
    assert IC.walk_segment(bytes(bad), BASE).error == IC.WALK_BAD_LENGTH


def test_walk_decodes_marker_types():
    data = segment(batch(100, 1, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
                   encode_marker(offset=101, commit=False, producer_id=7, producer_epoch=0,
                                 coordinator_epoch=0, timestamp=T0),
                   encode_marker(offset=102, commit=True, producer_id=8, producer_epoch=0,
                                 coordinator_epoch=0, timestamp=T0))
    lay = IC.walk_segment(data, BASE)
    assert lay.ctype.tolist() == [IC.NOT_CONTROL, IC.ABORT, IC.COMMIT]
    assert lay.pid.tolist() == [7, 7, 8]


# --- offset index -------------------------------------------------------------------------------

def test_offset_index_rules():
    data, pos = plain_segment()
    lay = IC.walk_segment(data, BASE)
    ok = oi((103, pos[1]), (107, pos[2]))
    assert IC.check_offset_index(ok, lay) is None
    assert IC.check_offset_index(b"", lay) is None

    def problem(raw):
        pr = IC.check_offset_index(raw, lay, path="x.index")
        assert pr is not None
        return pr.entry, pr.field, pr.why

    assert problem(ok + b"\0")[1:] == ("size", "the file size is not a multiple of 8")
    assert problem(oi((99, 0)))[:2] == (0, "offset")                       # below the segment base
    assert problem(oi((104, pos[2]), (103, pos[1])))[:2] == (1, "offset")  # not increasing
    assert problem(oi((104, pos[2]), (105, pos[1])))[:2] == (1, "position")  # positions decrease
    assert problem(oi((103, pos[1]), (105, pos[1])))[:2] == (1, "position")
    assert problem(oi((103, len(data))))[1:] == ("position", f"outside the log's {len(data)} bytes")
    assert problem(oi((103, pos[1] + 1)))[1:] == ("position", "not the start of a batch in the log")
    assert problem(oi((103, pos[2])))[1] == "offset"                       # the batch at pos[2] starts at 104
    assert "below the base offset 104" in problem(oi((103, pos[2])))[2]
    assert "beyond the segment's last offset 107" in problem(oi((108, pos[2])))[2]
    # a cleaner chunk's entry: its largest retained offset, below the batch's last offset
    assert IC.check_offset_index(oi((105, pos[2])), lay) is None


# --- time index ---------------------------------------------------------------------------------

def test_time_index_rules():
    data, pos = plain_segment()          # batch max timestamps T0+2, T0+10, T0+8
    lay = IC.walk_segment(data, BASE)
    ok = ti((T0 + 2, 102), (T0 + 10, 103))
    assert IC.check_time_index(ok, lay, closed=True) is None
    assert IC.check_time_index(ti((T0 + 2, 102)), lay, closed=False) is None

    def problem(raw, closed=False):
        pr = IC.check_time_index(raw, lay, closed=closed, path="x.timeindex")
        assert pr is not None
        return pr.entry, pr.field

    assert problem(ok + b"\0")[1] == "size"
    assert problem(ti((T0 + 10, 103), (T0 + 2, 104))) == (1, "timestamp")     # decreasing
    assert problem(ti((T0 + 2, 102), (T0 + 10, 101))) == (1, "offset")        # offsets decrease
    assert problem(ti((T0 + 2, 99))) == (0, "offset")
    assert problem(ti((T0 + 20, 108))) == (0, "offset")
    # T0+2 at the batch 103 (after a batch whose max is T0+2): a lookup of T0+2 would skip offset 102
    assert problem(ti((T0 + 2, 103))) == (0, "timestamp")
    assert problem(ti((T0 + 9, 104))) == (0, "timestamp")      # batch 103 (T0+10) lies before 104
    # closed: the last entry is the segment's largest timestamp, at the first batch carrying it
    assert problem(ti((T0 + 2, 102)), closed=True) == (0, "timestamp")
    assert problem(ti((T0 + 10, 102)), closed=True) == (0, "offset")
    assert problem(b"", closed=True) == (0, "size")
    # a timestamp above the true maximum only makes a lookup start earlier
    assert IC.check_time_index(ti((T0 + 5, 102)), lay, closed=False) is None


# --- transaction index --------------------------------------------------------------------------

def txn_segment():
    """pid 7: data 100-101, ABORT 102; pid 8: data 103, COMMIT 104; pid 7: data 105, ABORT 106;
    pid 9: data 107 (open at 108); pid 10: data 108, ABORT 109."""
    d = dict(producer_epoch=0, base_sequence=0, transactional=True)
    m = dict(producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    return segment(batch(100, 2, producer_id=7, **d), encode_marker(offset=102, commit=False, producer_id=7, **m),
                   batch(103, 1, producer_id=8, **d), encode_marker(offset=104, commit=True, producer_id=8, **m),
                   batch(105, 1, producer_id=7, **d), encode_marker(offset=106, commit=False, producer_id=7, **m),
                   batch(107, 1, producer_id=9, **d),
                   batch(108, 1, producer_id=10, **d), encode_marker(offset=109, commit=False, producer_id=10, **m))


GOOD = [(7, 100, 102, 103), (7, 105, 106, 107), (10, 108, 109, 107)]


def test_txn_index_rules():
    lay = IC.walk_segment(txn_segment(), BASE)
    assert IC.check_txn_index(txn(*GOOD), lay, next_base=110) is None

    def problem(entries, **kw):
        pr = IC.check_txn_index(txn(*entries, **kw), lay, next_base=110, path="x.txnindex")
        assert pr is not None
        return pr.entry, pr.field, pr.why

    g0, g1, g2 = GOOD
    assert problem(GOOD, version=1 << 8)[:2] == (0, "version")
    assert IC.check_txn_index(txn(*GOOD, version=1), lay) is None   # Kafka reads the first byte only
    assert problem([(-1, 100, 102, 103), g1, g2])[:2] == (0, "producerId")
    assert problem([(7, 103, 102, 103), g1, g2])[:2] == (0, "firstOffset")
    assert problem([(7, 100, 102, 104), g1, g2])[:2] == (0, "lastStableOffset")
    assert problem([g1, g0, g2])[:2] == (1, "lastOffset")                 # not increasing
    assert "is a data batch" in problem([(7, 100, 101, 102), g1, g2])[2]
    assert "COMMIT" in problem([(8, 103, 104, 105), g1, g2])[2]
    assert problem([(8, 100, 102, 103), g1, g2])[:2] == (0, "producerId")
    assert problem([(7, 101, 102, 103), g1, g2])[:2] == (0, "firstOffset")  # data from 100 would be served
    assert problem([g0, (7, 102, 106, 107), g2])[:2] == (1, "firstOffset")  # reaches pid 7's previous marker
    # pid 9's transaction (from 107) is open at the ABORT at 109: the LSO is at most 107
    assert problem([g0, g1, (10, 108, 109, 110)])[:2] == (2, "lastStableOffset")
    missing = problem([g0, g2])
    assert missing[:2] == (1, "lastOffset") and "missing entry: the ABORT marker at offset 106" in missing[2]
    assert problem([g0, g1, g2, (7, 110, 110, 111)])[1] == "lastOffset"     # beyond the segment
    # an entry whose marker no batch holds (a flipped last offset landing in a gap)
    gap = IC.walk_segment(batch(100, 1) + batch(105, 1), BASE)
    pr = IC.check_txn_index(txn((7, 100, 102, 103)), gap)
    assert pr is not None and "no batch holds this offset" in pr.why


def test_txn_carry_continues_the_producers_history_across_segments():
    d = dict(producer_epoch=0, base_sequence=0, transactional=True)
    m = dict(producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    first = IC.walk_segment(batch(100, 2, producer_id=7, **d), 100)
    second = IC.walk_segment(encode_marker(offset=102, commit=False, producer_id=7, **m), 102)
    carry = IC.TxnCarry()
    assert IC.check_txn_index(b"", first, next_base=102, carry=carry) is None
    # the marker's transaction began in the previous segment: its entry must start at 100 or before
    pr = IC.check_txn_index(txn((7, 101, 102, 103)), second, carry=copy.deepcopy(carry))
    assert pr is not None and pr.field == "firstOffset"
    assert IC.check_txn_index(txn((7, 100, 102, 103)), second, carry=copy.deepcopy(carry)) is None
    pr = IC.check_txn_index(b"", second, carry=carry)
    assert pr is not None and pr.missing and pr.entry == 0


# --- Kafka-written segments -----------------------------------------------------------------------

def test_kafka_3_7_segment_passes():
    d = os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6")
    data = open(os.path.join(d, "00000000000000000000.log"), "rb").read()
    problems = IC.check_segment(d, 0, data, closed=False)
    assert problems == []
    lay = IC.walk_segment(data, 0)
    assert lay.batches == 13 and lay.last_offset == 12


@pytest.mark.parametrize("entry", range(2))
@pytest.mark.parametrize("byte", range(8))
def test_kafka_3_7_offset_index_flips_are_caught(entry, byte):
    d = os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6")
    data = open(os.path.join(d, "00000000000000000000.log"), "rb").read()
    raw = bytearray(open(os.path.join(d, "00000000000000000000.index"), "rb").read())
    raw[entry * 8 + byte] ^= 0x10
    assert IC.check_offset_index(bytes(raw), IC.walk_segment(data, 0)) is not None


def test_problem_renders_as_one_line():
    pr = IC.IndexProblem("/d/t-0/00000000000000000000.index", 3, "position", 4730, "not the start of a batch")
    assert str(pr) == "/d/t-0/00000000000000000000.index: entry 3: position 4730: not the start of a batch"
    err = pr.error()
    assert isinstance(err, IC.CorruptIndexError) and err.problem is pr and str(err) == str(pr)


def test_empty_segment_accepts_only_empty_indexes():
    lay = IC.walk_segment(b"", BASE)
    assert IC.check_offset_index(b"", lay) is None and IC.check_time_index(b"", lay, closed=True) is None
    assert IC.check_txn_index(b"", lay) is None
    assert IC.check_offset_index(oi((100, 0)), lay) is not None
    assert IC.check_time_index(ti((T0, 100)), lay, closed=False) is not None
    assert IC.check_txn_index(txn((7, 100, 100, 101)), lay) is not None


@pytest.mark.slow          # hypothesis fuzzing: 300 garbage indexes
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.binary(max_size=120), st.binary(max_size=60), st.binary(max_size=110),
       st.booleans())
def test_garbage_never_raises(log, offset_raw, time_raw, txn_raw, closed):
    lay = IC.walk_segment(log, BASE)
    assert lay.end <= len(log)
    for pr in (IC.check_offset_index(offset_raw, lay), IC.check_time_index(time_raw, lay, closed=closed),
               IC.check_txn_index(txn_raw, lay, next_base=BASE + 1000, carry=IC.TxnCarry())):
        assert pr is None or isinstance(pr, IC.IndexProblem)


@pytest.mark.slow          # hypothesis fuzzing: 200 garbage indexes over a real segment
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_garbage_indexes_over_a_real_segment_never_raise(data):
    log = txn_segment()
    lay = IC.walk_segment(log, BASE)
    n = data.draw(st.integers(0, 6))
    raw = data.draw(st.binary(min_size=n * 34, max_size=n * 34))
    pr = IC.check_txn_index(raw, lay, carry=IC.TxnCarry())
    assert pr is None or isinstance(pr, IC.IndexProblem)
    raw = data.draw(st.binary(max_size=64))
    for pr in (IC.check_offset_index(raw, lay), IC.check_time_index(raw, lay, closed=True)):
        assert pr is None or isinstance(pr, IC.IndexProblem)
