"""The cleaner's view of the one whole-segment scanner (SegmentScan): what it takes, what it leaves
to the per-batch path, and that it accepts exactly the bytes the reader and the per-batch decoder
accept."""

from __future__ import annotations

import os

import numpy as np
import pytest

from compactlog.cleaner.fast_path import SegmentScan
from compactlog.errors import CorruptRecordError
from compactlog.record import compression
from compactlog.record.batch import BatchSpec, as_u8, encode_batch, iter_batches
from compactlog.record.layout import RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK
from compactlog.record.legacy_test import message
from compactlog.storage import files
from compactlog.storage.reader import PartitionReader


def _batch(base: int, n: int, **spec) -> bytes:
    return encode_batch(BatchSpec(base_offset=base, **spec),
                        [(base + i, 1000 + i, None if i % 7 == 3 else b"k%d" % i, None if i % 5 == 4 else b"v",
                          [("h", b"x")] if i % 3 == 1 else []) for i in range(n)])


def _log(sizes) -> bytes:
    out, base = [], 0
    for n in sizes:
        out.append(_batch(base, n))
        base += n
    return b"".join(out)


def _scan(log: bytes, start: int = 0) -> SegmentScan:
    return SegmentScan(as_u8(log), start, len(log))


def test_the_scan_is_the_per_batch_decoding():
    # many one-record batches, then a batch of many records
    log = _log([1] * 300 + [2000, 3])
    scan = _scan(log)
    assert scan.ok and scan.nb == 302 and scan.nr == 2303
    batches = list(iter_batches(log))
    assert scan.b_pos.tolist() == [b.position for b in batches]
    assert scan.b_size.tolist() == [b.size for b in batches]
    assert scan.b_rec.tolist() == np.cumsum([0] + [b.records_count for b in batches]).tolist()
    cols = [b.columns() for b in batches]
    assert scan.r_offset.tolist() == [b.base_offset + int(d) for b, c in zip(batches, cols) for d in c.off_delta]
    assert scan.r_ts.tolist() == [b.header.base_timestamp + int(d) for b, c in zip(batches, cols) for d in c.ts_delta]
    for mine, theirs in ((scan.r_kpos, "key_pos"), (scan.r_klen, "key_len"), (scan.r_vlen, "val_len"),
                         (scan.r_tail, "tail_pos"), (scan.r_end, "rec_end")):
        assert mine.tolist() == np.concatenate([getattr(c, theirs) for c in cols]).tolist()


def test_log_append_time_records_take_the_max_timestamp():
    log = encode_batch(BatchSpec(timestamp_type=1), [(0, 5, b"a", b"1"), (1, 9, b"b", b"2")])
    assert next(iter_batches(log)).header.attributes & TIMESTAMP_TYPE_MASK
    scan = _scan(log)
    assert scan.ok and scan.r_ts.tolist() == [9, 9]


def test_an_incomplete_last_batch_ends_the_scan():
    log = _log([3, 4])
    scan = _scan(log[:-1])
    assert scan.ok and scan.nb == 1 and scan.nr == 3


@pytest.mark.parametrize("other", [
    dict(compression=compression.GZIP),
    dict(transactional=True, producer_id=1, producer_epoch=0, base_sequence=0),
    dict(control=True, producer_id=1, producer_epoch=0),
])
def test_batches_that_are_not_simple_leave_the_segment_to_the_per_batch_path(other):
    log = _log([3]) + encode_batch(BatchSpec(base_offset=3, **other), [(3, 1, b"k", b"v")])
    assert not _scan(log).ok
    assert _scan(_log([3])).ok


def test_a_legacy_entry_is_not_simple():
    assert not _scan(_log([2]) + message(1, 2, b"k", b"v")).ok


def _reader_accepts(tmp_path, log: bytes) -> bool:
    pdir = tmp_path / "t-0"
    pdir.mkdir(exist_ok=True)
    (tmp_path / files.CLEAN_SHUTDOWN_FILE).write_bytes(b"")   # no torn-tail leniency
    (pdir / "00000000000000000000.log").write_bytes(log)
    try:
        PartitionReader(str(pdir)).read_columns(validate_crc=False)
    except CorruptRecordError:
        return False
    finally:
        os.remove(pdir / "00000000000000000000.log")
    return True


def _decoder_accepts(log: bytes) -> bool:
    try:
        for b in iter_batches(log):
            b.columns()
    except CorruptRecordError:
        return False
    return True


def test_the_cleaner_and_the_reader_accept_the_same_bytes(tmp_path):
    """Bytes flipped in the records sections (the CRC is left for others to check): the scan is
    ok exactly when the reader and the per-batch decoder read the log."""
    log = _log([4, 6, 5])
    sections = [(b.position + RECORD_BATCH_OVERHEAD, b.position + b.size) for b in iter_batches(log)]
    rng = np.random.default_rng(15)
    verdicts = set()
    for _ in range(150):
        damaged = bytearray(log)
        lo, hi = sections[int(rng.integers(len(sections)))]
        for p in rng.integers(lo, hi, int(rng.integers(1, 3))).tolist():
            damaged[p] = int(rng.integers(256))
        damaged = bytes(damaged)
        ok = _scan(damaged).ok
        assert ok == _decoder_accepts(damaged) == _reader_accepts(tmp_path, damaged), damaged.hex()
        verdicts.add(ok)
    assert verdicts == {True, False}


def _clean_copy(src, dst, monkeypatch, fresh: bool) -> tuple[dict, list]:
    """Clean a copy of ``src``, every scan in fresh matrices when ``fresh``: (file -> bytes, the
    record matrix of every scan made, in order)."""
    import shutil
    from compactlog.cleaner import fast_path
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.cleaner.executor import InProcessExecutor
    from compactlog.storage.datadir import DataDir
    shutil.copytree(src, dst)
    made = []
    real = fast_path.ScanScratch.matrices

    def matrices(self, *args):
        if fresh:
            self.release()
        out = real(self, *args)
        made.append(out[1])      # held, so that no later matrix can take a freed one's id
        return out

    monkeypatch.setattr(fast_path.ScanScratch, "matrices", matrices)
    now = 1_900_000_000_000
    with DataDir(str(dst), writable=True, clock=lambda: now) as dd:
        outs = Cleaner(dd, InProcessExecutor()).run(now)
    assert outs and all(o.cleaned for o in outs), [o.error for o in outs]
    pdir = os.path.join(str(dst), "t-0")
    files_ = {n: open(os.path.join(pdir, n), "rb").read() for n in sorted(os.listdir(pdir))
              if not n.endswith(".checkpoint")}
    monkeypatch.undo()
    return files_, made


def test_the_scans_of_a_clean_share_one_set_of_matrices(tmp_path, monkeypatch):
    """The map and the rewrite scan every dirty segment into the log's one scratch (grown, never
    renewed per segment), and the cleaned segments are byte for byte those of fresh matrices."""
    import pyarrow as pa
    import compactlog
    src = tmp_path / "src"
    rng = np.random.default_rng(11)
    with compactlog.open(str(src), write=True, create=True) as c:
        c.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(16 << 10),
                                "min.cleanable.dirty.ratio": "0.01"})
        for _ in range(40):
            ids = rng.integers(0, 300, 100).tolist()
            c.send_arrow("t", pa.array([b"k%d" % i for i in ids]),
                         pa.array([None if i % 17 == 0 else b"v" * 30 for i in ids]), partition=0)
    fresh, fresh_scans = _clean_copy(src, tmp_path / "a", monkeypatch, True)
    shared, shared_scans = _clean_copy(src, tmp_path / "b", monkeypatch, False)
    assert shared == fresh
    dirty = sum(1 for n in os.listdir(src / "t-0") if n.endswith(".log")) - 1   # the active one stays
    assert dirty >= 3
    assert len(shared_scans) == len(fresh_scans) == 2 * dirty     # the map's scan and the rewrite's
    assert len({id(m) for m in fresh_scans}) == 2 * dirty
    # a new matrix only where a segment held more records than any before it
    grown = [i for i in range(1, len(shared_scans)) if shared_scans[i] is not shared_scans[i - 1]]
    assert all(shared_scans[i].shape[1] > shared_scans[i - 1].shape[1] for i in grown)
    assert len({id(m) for m in shared_scans}) <= 3, [m.shape for m in shared_scans]
