"""PartitionReader: equal to Log.records(), read-only, Kafka's loader view of leftovers, corpus inputs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct

import numpy as np
import pyarrow as pa
import pytest
from compactlog.record.jit import njit

from compactlog.errors import CorruptRecordError
from compactlog.record import compression as codecs
from compactlog.record.batch import (
    BatchSpec,
    Header,
    columnar_records,
    encode_batch,
    encode_columnar_batch,
    iter_batches,
)
from compactlog.record.kernels import (
    _uvarint_size,
    _write_uvarint,
    _zigzag32,
    _zigzag64,
)
from compactlog.storage.datadir import DataDir
from compactlog.storage.reader import PartitionReader, column_schema, live_segment_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_SAMPLE = os.path.join(ROOT, "tests", "data", "corpus-sample")
T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Clock:
    def __init__(self, t=T0 + 10_000):
        self.t = t

    def __call__(self):
        self.t += 1
        return self.t


# --- helpers ---------------------------------------------------------------------------------

def rows_of(table: pa.Table, with_headers: bool = True) -> list[tuple]:
    cols = [table.column(c).to_pylist() for c in ("offset", "timestamp", "key", "value")]
    hdrs = table.column("headers").to_pylist() if with_headers else [None] * table.num_rows
    out = []
    for off, ts, k, v, h in zip(*cols, hdrs):
        out.append((off, ts, k, v, tuple((x["key"], x["value"]) for x in h) if with_headers else None))
    return out


def rows_of_records(records, with_headers: bool = True) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value,
             tuple((h.key, h.value) for h in r.headers) if with_headers else None) for r in records]


def snapshot_dir(path: str) -> dict:
    """Every file under ``path``: size, mtime (ns) and content hash; plus the directory listing."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        out[os.path.relpath(dirpath, path) + "/"] = sorted(dirnames) + sorted(filenames)
        for f in filenames:
            p = os.path.join(dirpath, f)
            st = os.stat(p)
            with open(p, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(p, path)] = (st.st_size, st.st_mtime_ns, st.st_mode, digest)
    return out


def fill_mixed_log(log, rng, clock, *, batches_per_codec=3, n=40):
    """Batches of every codec with tombstones, null keys, headers, idempotent and transactional
    producers (committed and aborted), control markers."""
    seq = 0
    for round_ in range(batches_per_codec):
        for ci, codec in enumerate(CODECS):
            keys = [None if rng.random() < 0.1 else b"k%d" % rng.integers(0, 50) for _ in range(n)]
            values = [None if rng.random() < 0.15 else bytes(rng.integers(0, 256, rng.integers(0, 60), dtype=np.uint8))
                      for _ in range(n)]
            headers = [() if rng.random() < 0.6 else
                       tuple(Header("h%d" % j, None if rng.random() < 0.2 else b"hv%d" % j)
                             for j in range(rng.integers(1, 4))) for _ in range(n)]
            ts = T0 + np.cumsum(rng.integers(-5, 20, n))
            mode = (round_ + ci) % 3
            if mode == 0:
                log.append_records(keys, values, timestamps=ts, headers=headers, compression=codec)
            elif mode == 1:
                log.append_records(keys, values, timestamps=ts, headers=headers, compression=codec,
                                   producer_id=7, producer_epoch=0, base_sequence=seq)
                seq += n
            else:
                pid = 100 + round_ * 10 + ci
                log.append_records(keys, values, timestamps=ts, headers=headers, compression=codec,
                                   producer_id=pid, producer_epoch=1, base_sequence=0,
                                   transactional=True)
                log.append_control(commit=bool(ci % 2), producer_id=pid, producer_epoch=1,
                                   timestamp=clock())


@pytest.fixture()
def mixed(tmp_path):
    """A closed data dir with one partition of several segments and every kind of batch."""
    clock = Clock()
    root = str(tmp_path / "data")
    dd = DataDir(root, create=True, clock=clock, writable=True)
    dd.create_topic("mixed", 1, {"segment.bytes": "6000", "index.interval.bytes": "500"})
    log = dd.open_log("mixed", 0)
    fill_mixed_log(log, np.random.default_rng(42), clock)
    dd.close()
    return root, os.path.join(root, "mixed-0")


def open_log(root, topic="mixed", clock=None):
    dd = DataDir(root, clock=clock or Clock(), writable=True)
    return dd, dd.open_log(topic, 0)


# --- equality with Log.records() -------------------------------------------------------------

def test_columns_equal_log_records(mixed):
    root, pdir = mixed
    reader = PartitionReader(pdir)
    assert len(reader.segments()) > 3
    table = reader.read_columns(with_headers=True)
    assert table.schema == column_schema(with_headers=True)
    dd, log = open_log(root)
    try:
        expected = list(log.records())
        assert rows_of(table) == rows_of_records(expected)
        with_control = list(log.records(include_control=True))
        table_c = reader.read_columns(include_control=True, with_headers=True)
        assert rows_of(table_c) == rows_of_records(with_control)
        assert len(with_control) > len(expected)
        # batch-level columns match the batches the records came from
        by_offset = {}
        for b in log.batches():
            for r in b.records():
                by_offset[r.offset] = b
        for off, pid, epoch, txn, ctl, tst, lep in zip(*(table_c.column(c).to_pylist() for c in (
                "offset", "producer_id", "producer_epoch", "is_transactional", "is_control",
                "timestamp_type", "partition_leader_epoch"))):
            b = by_offset[off]
            assert (pid, epoch, txn, ctl, tst, lep) == (b.producer_id, b.producer_epoch, b.is_transactional,
                                                        b.is_control, b.timestamp_type,
                                                        b.partition_leader_epoch)
        # tombstones and null keys come out as nulls
        assert table.column("value").null_count > 0
        assert table.column("key").null_count > 0
        # without headers: same rows, no headers column
        plain = reader.read_columns()
        assert "headers" not in plain.column_names
        assert rows_of(plain, False) == rows_of_records(expected, False)
        # the Python-object paths
        assert list(reader.records()) == expected
        assert list(reader.records(include_control=True)) == with_control
        assert [(b.position, b.base_offset, b.size) for b in reader.batches()] == \
            [(b.position, b.base_offset, b.size) for b in log.batches()]
    finally:
        dd.close()


@pytest.mark.parametrize("bounds", [(0, None), (1, 2), (37, 38), (37, 121), (120, None), (199, 400),
                                    (250, 260), (10_000, None), (5, 5)])
def test_offset_ranges(mixed, bounds):
    root, pdir = mixed
    start, end = bounds
    reader = PartitionReader(pdir)
    dd, log = open_log(root)
    try:
        everything = list(log.records(include_control=True))
        exp = [r for r in everything if r.offset >= start and (end is None or r.offset < end)]
        got = reader.read_columns(start, end, include_control=True, with_headers=True)
        assert rows_of(got) == rows_of_records(exp)
        assert list(reader.records(start, end, include_control=True)) == exp
        if end is None:
            assert list(reader.records(start, include_control=True)) == list(log.records(start, include_control=True))
    finally:
        dd.close()


@pytest.mark.parametrize("chunk", [(1, 1), (7, 300), (64, 1 << 20), (1 << 20, 64)])
def test_small_chunks_same_result(mixed, chunk):
    _, pdir = mixed
    whole = PartitionReader(pdir).read_columns(include_control=True, with_headers=True)
    records, nbytes = chunk
    reader = PartitionReader(pdir, chunk_records=records, chunk_bytes=nbytes)
    parts = list(reader.iter_columns(include_control=True, with_headers=True))
    assert len(parts) > 1
    assert pa.Table.from_batches(parts).equals(whole)


def test_log_append_time(tmp_path):
    clock = Clock()
    dd = DataDir(str(tmp_path / "d"), create=True, clock=clock, writable=True)
    dd.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime", "segment.bytes": "2000"})
    log = dd.open_log("lat", 0)
    for codec in CODECS:
        log.append_records([b"a", b"b", None], [b"1", None, b"3"], timestamps=[T0, T0 + 5, T0 - 3],
                           compression=codec)
    expected = list(log.records())
    dd.close()
    table = PartitionReader(os.path.join(str(tmp_path / "d"), "lat-0")).read_columns(with_headers=True)
    assert rows_of(table) == rows_of_records(expected)
    assert set(table.column("timestamp_type").to_pylist()) == {1}
    assert all(ts > T0 + 10_000 for ts in table.column("timestamp").to_pylist())


def test_log_start_offset_checkpoint_and_empty(tmp_path, mixed):
    root, pdir = mixed
    full = PartitionReader(pdir).read_columns()
    # a log start offset in the data dir's checkpoint hides what lies below it, as in Log
    with open(os.path.join(root, "log-start-offset-checkpoint"), "w") as f:
        f.write("0\n1\nmixed 0 100\n")
    reader = PartitionReader(pdir)
    assert reader.log_start_offset == 100
    got = reader.read_columns()
    assert got.column("offset").to_pylist() == [o for o in full.column("offset").to_pylist() if o >= 100]
    assert PartitionReader(pdir, log_start_offset=0).read_columns().num_rows == full.num_rows
    # an empty partition directory
    empty = tmp_path / "e" / "t-0"
    empty.mkdir(parents=True)
    r = PartitionReader(str(empty))
    assert r.segments() == [] and r.read_columns().num_rows == 0 and list(r.records()) == []
    assert r.read_columns(with_headers=True).schema == column_schema(with_headers=True)


# --- read-only, and the loader's view of leftovers ----------------------------------------------

def _batches_of(path):
    with open(path, "rb") as f:
        data = f.read()
    return data, list(iter_batches(data))


def make_leftovers(pdir):
    """Leftovers of an interrupted cleaning: a .swap replacing the first two segments (a subset of
    their batches), .cleaned files, a .swap at/above the lowest .cleaned offset (an interrupted
    split, to be discarded), and .deleted files."""
    segs = live_segment_files(pdir)
    assert len(segs) >= 4
    s0, s1, s2, s3 = segs[:4]
    kept = []
    for seg in (s0, s1):
        data, batches = _batches_of(seg.path)
        for i, b in enumerate(batches):
            if i % 2 == 0 or b is batches[-1]:
                kept.append(b.raw())
    swap = os.path.join(pdir, f"{s0.base_offset:020d}.log.swap")
    with open(swap, "wb") as f:
        f.write(b"".join(kept))
    open(os.path.join(pdir, f"{s0.base_offset:020d}.index.swap"), "wb").close()
    # an interrupted split above the lowest .cleaned offset: discarded by the loader
    with open(os.path.join(pdir, f"{s3.base_offset:020d}.log.swap"), "wb") as f:
        f.write(b"garbage that must never be read" * 10)
    with open(os.path.join(pdir, f"{s2.base_offset:020d}.log.cleaned"), "wb") as f:
        f.write(b"\x00" * 100)
    with open(os.path.join(pdir, f"{s1.base_offset:020d}.log.deleted"), "wb") as f:
        f.write(b"\xff" * 100)
    with open(os.path.join(pdir, f"{s3.base_offset:020d}.timeindex.deleted"), "wb") as f:
        f.write(b"\xff" * 24)
    return s0, s1, s2, s3


def test_read_only_and_post_swap_view(tmp_path, mixed):
    root, pdir = mixed
    s0, s1, s2, s3 = make_leftovers(pdir)
    before = snapshot_dir(root)

    reader = PartitionReader(pdir)
    segs = reader.segments()
    assert segs[0].path.endswith(".log.swap") and segs[0].base_offset == s0.base_offset
    assert s1.base_offset not in [s.base_offset for s in segs]
    assert segs[1].base_offset == s2.base_offset and segs[2].path == s3.path
    table = reader.read_columns(include_control=True, with_headers=True)
    recs = list(reader.records(include_control=True))
    list(reader.batches())
    reader.read_columns(validate_crc=False)
    reader.read_columns(start_offset=s1.base_offset)
    del reader
    assert snapshot_dir(root) == before

    # Kafka's loader on a copy (it renames and deletes) sees exactly what the reader saw
    copy = str(tmp_path / "copy")
    shutil.copytree(root, copy)
    dd, log = open_log(copy)
    try:
        assert [s.base_offset for s in log.segments] == [s.base_offset for s in segs]
        expected = list(log.records(include_control=True))
        assert rows_of(table) == rows_of_records(expected)
        assert recs == expected
    finally:
        dd.close()


def test_swap_with_no_cleaned_replaces_range(mixed):
    """A complete swap set (no .cleaned left): swapped segments replace [min base, max next offset)."""
    _, pdir = mixed
    segs = live_segment_files(pdir)
    s0, s1, s2 = segs[:3]
    _, b1 = _batches_of(s1.path)
    _, b2 = _batches_of(s2.path)
    # one swap segment named after s1 holding s1's and s2's last batches
    with open(os.path.join(pdir, f"{s1.base_offset:020d}.log.swap"), "wb") as f:
        f.write(b1[-1].raw() + b2[-1].raw())
    view = live_segment_files(pdir)
    bases = [s.base_offset for s in view]
    assert s0.base_offset in bases and s1.base_offset in bases and s2.base_offset not in bases
    reader = PartitionReader(pdir)
    offs = reader.read_columns(include_control=True).column("offset").to_pylist()
    in_swap = [r.offset for r in b1[-1].records() + b2[-1].records()]
    s3_base = segs[3].base_offset
    assert [o for o in offs if s1.base_offset <= o < s3_base] == in_swap


# --- corruption ------------------------------------------------------------------------------

def test_corrupt_crc_and_truncated_tail(tmp_path, mixed):
    root, pdir = mixed
    segs = live_segment_files(pdir)
    full = PartitionReader(pdir).read_columns(include_control=True)
    # an incomplete trailing batch is not an error: the reader stops before it
    last = segs[-1].path
    with open(last, "ab") as f:
        f.write(struct.pack(">qiib", 10_000, 500, 0, 2) + b"\x00" * 40)
    assert PartitionReader(pdir).read_columns(include_control=True).equals(full)
    # a flipped byte inside a batch: CRC error located in file and position
    data, batches = _batches_of(segs[1].path)
    target = next(b for b in batches if b.records_count > 2 and b.compression == 0)
    pos = target.position + target.size - 3
    with open(segs[1].path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)
        f.seek(pos)
        f.write(bytes([byte[0] ^ 0x55]))
    reader = PartitionReader(pdir)
    with pytest.raises(CorruptRecordError) as e:
        reader.read_columns()
    assert e.value.file == segs[1].path and e.value.position == target.position and e.value.field == "crc"
    with pytest.raises(CorruptRecordError):
        list(reader.records())
    # reading around it, or without CRC checks, works
    assert reader.read_columns(end_offset=target.base_offset).num_rows > 0
    reader.read_columns(validate_crc=False)


def test_structurally_corrupt_batch_with_valid_crc(tmp_path):
    """A batch whose records section lies (count too large) but whose CRC matches."""
    spec = BatchSpec(base_offset=0)
    raw = bytearray(encode_batch(spec, [(0, T0, b"k", b"v"), (1, T0, b"k2", b"v2")]))
    struct.pack_into(">i", raw, 57, 3)
    import crc32c
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(bytes(raw))
    with pytest.raises(CorruptRecordError) as e:
        PartitionReader(str(pdir)).read_columns()
    assert e.value.position == 0


# --- legacy (magic 0/1) entries -------------------------------------------------------------

def test_legacy_entries(tmp_path):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    parts = []
    off = 0
    for magic, codec in ((0, 0), (1, 0), (1, 1)):
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i in range(3):
            b.append(i, timestamp=T0 + i if magic else None,
                     key=None if i == 1 else b"k%d" % i, value=None if i == 2 else b"v%d" % i)
        data = bytearray(b.build())
        if codec == 0:   # three plain entries: absolute offsets
            pos = 0
            for i in range(3):
                struct.pack_into(">q", data, pos, off + i)
                pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        else:            # a v1 wrapper carries the last absolute offset, inner offsets relative
            struct.pack_into(">q", data, 0, off + 2)
        parts.append(bytes(data))
        off += 3
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    seg = pdir / f"{0:020d}.log"
    seg.write_bytes(b"".join(parts[:3]))
    reader = PartitionReader(str(pdir))
    expected = list(reader.records())
    assert [r.offset for r in expected] == list(range(9))
    table = reader.read_columns(with_headers=True)
    assert rows_of(table) == rows_of_records(expected)
    assert table.column("timestamp_type").to_pylist() == [0] * 9
    assert table.column("timestamp").to_pylist()[:3] == [-1] * 3
    assert table.column("producer_id").to_pylist() == [-1] * 9
    assert rows_of(reader.read_columns(4, 8, with_headers=True)) == \
        rows_of_records([r for r in expected if 4 <= r.offset < 8])
    # legacy entries mixed with v2 batches in one segment, and small chunks
    v2 = encode_batch(BatchSpec(base_offset=9), [(9, T0, b"x", b"y"), (10, T0 + 1, None, b"z")])
    seg.write_bytes(b"".join(parts[:3]) + v2)
    reader = PartitionReader(str(pdir), chunk_records=2)
    expected = list(reader.records())
    assert len(expected) == 11
    assert rows_of(reader.read_columns(with_headers=True)) == rows_of_records(expected)


# --- the corpus inputs ------------------------------------------------------------------------

def corpus_cases():
    if not os.path.isdir(CORPUS_SAMPLE):
        return []
    return sorted(os.listdir(CORPUS_SAMPLE))


def _jb(obj, name):
    if name in obj:
        v = obj[name]
        return None if v is None else v.encode("utf-8")
    if name + "_b64" in obj:
        return base64.b64decode(obj[name + "_b64"])
    return None


def expected_from_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d["type"] != "record":
                continue
            headers = tuple((h["key"], _jb(h, "value")) for h in d.get("headers", []))
            out.append(((d["offset"], d["timestamp"], _jb(d, "key"), _jb(d, "value"), headers),
                        "controlType" in d))
    return out


@pytest.mark.parametrize("case", corpus_cases())
def test_corpus_inputs(tmp_path, case):
    case_dir = os.path.join(CORPUS_SAMPLE, case)
    src = os.path.join(case_dir, "input", "topic-0")
    pdir = str(tmp_path / "topic-0")
    shutil.copytree(src, pdir)
    before = snapshot_dir(pdir)
    expected = expected_from_jsonl(os.path.join(case_dir, "input.jsonl"))
    assert expected
    reader = PartitionReader(pdir)
    got = rows_of(reader.read_columns(include_control=True, with_headers=True))
    assert got == [e for e, _ in expected]
    got = rows_of(reader.read_columns(with_headers=True))
    assert got == [e for e, ctl in expected if not ctl]
    assert rows_of_records(reader.records(include_control=True)) == [e for e, _ in expected]
    assert snapshot_dir(pdir) == before


def test_corpus_sample_present():
    assert len(corpus_cases()) >= 3


# --- bulk append inputs: pyarrow and numpy columns --------------------------------------------

def _batch_bytes(keys, values, headers=None):
    ts = np.arange(T0, T0 + len(keys), dtype=np.int64)
    return encode_columnar_batch(BatchSpec(), columnar_records(keys, values, headers), ts)


def test_columnar_inputs_encode_like_python_lists():
    keys = [b"k%d" % i if i % 4 else None for i in range(50)]
    values = [bytes([i]) * (i % 9) if i % 5 else None for i in range(50)]
    expected = _batch_bytes(keys, values)
    assert _batch_bytes(pa.array(keys, pa.binary()), pa.array(values, pa.binary())) == expected
    assert _batch_bytes(pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())) == expected
    chunked = pa.chunked_array([pa.array(values[:20], pa.binary()), pa.array(values[20:], pa.binary())])
    assert _batch_bytes(pa.array(keys, pa.binary()), chunked) == expected
    # a slice of a larger array, strings, and a mix of inputs
    big_k = pa.array([b"zz"] * 7 + keys + [b"yy"] * 3, pa.binary())
    big_v = pa.array([b"q" * 100] * 7 + values + [b"r"] * 3, pa.binary())
    assert _batch_bytes(big_k.slice(7, 50), big_v.slice(7, 50)) == expected
    skeys = [None if k is None else k.decode() for k in keys]
    assert _batch_bytes(pa.array(skeys, pa.string()), values) == expected
    assert _batch_bytes(skeys, values) == expected
    # fixed-width rows as a 2-D uint8 array
    rows = np.arange(50 * 16, dtype=np.uint8).reshape(50, 16)
    assert _batch_bytes(rows, values) == _batch_bytes([r.tobytes() for r in rows], values)
    assert _batch_bytes(pa.array([r.tobytes() for r in rows], pa.binary(16)), values) == \
        _batch_bytes([r.tobytes() for r in rows], values)
    with pytest.raises(TypeError):
        columnar_records(pa.array([1, 2]), pa.array([b"a", b"b"]))


def test_append_records_accepts_arrow(tmp_path):
    clock = Clock()
    dd = DataDir(str(tmp_path / "d"), create=True, clock=clock, writable=True)
    dd.create_topic("a", 1)
    dd.create_topic("b", 1)
    la, lb = dd.open_log("a", 0), dd.open_log("b", 0)
    keys = [b"key-%d" % i for i in range(300)]
    values = [None if i % 11 == 0 else b"value-%d" % i for i in range(300)]
    ts = np.arange(T0, T0 + 300, dtype=np.int64)
    ka, va = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    for i in range(0, 300, 100):
        la.append_records(keys[i:i + 100], values[i:i + 100], timestamps=ts[i:i + 100], compression="lz4")
        lb.append_records(ka.slice(i, 100), va.slice(i, 100), timestamps=ts[i:i + 100], compression="lz4")
    assert list(la.records()) == list(lb.records())
    dd.close()
    ta = PartitionReader(os.path.join(str(tmp_path / "d"), "a-0")).read_columns()
    tb = PartitionReader(os.path.join(str(tmp_path / "d"), "b-0")).read_columns()
    assert ta.equals(tb)
    assert ta.column("key").to_pylist() == keys and ta.column("value").to_pylist() == values


def test_compressed_codecs_all_decoded(mixed):
    _, pdir = mixed
    seen = set()
    for b in PartitionReader(pdir).batches():
        seen.add(codecs.CODEC_NAMES[b.compression])
    assert seen == set(CODECS)


def test_empty_and_delete_horizon_batches(tmp_path):
    """Batches the cleaner writes: emptied (61-byte header) and with a delete horizon."""
    from compactlog.record.batch import BatchHeader, empty_batch
    horizon = T0 + 86_400_000
    b0 = encode_batch(BatchSpec(base_offset=0), [(0, T0, b"a", b"1"), (2, T0 + 2, b"b", b"2")],
                      last_offset_delta=3)
    b1 = encode_batch(BatchSpec(base_offset=4, producer_id=9, producer_epoch=0, base_sequence=0),
                      [(4, T0 + 4, b"c", b"3")])
    b1_empty = empty_batch(BatchHeader.unpack(b1, 0))
    b2 = encode_batch(BatchSpec(base_offset=5, delete_horizon_ms=horizon, compression=codecs.ZSTD),
                      [(5, T0 + 5, b"d", None), (7, T0 + 7, b"e", b"5")])
    b3 = encode_batch(BatchSpec(base_offset=8, delete_horizon_ms=horizon), [(9, T0 + 9, b"f", None)])
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(b0 + b1_empty + b2 + b3)
    reader = PartitionReader(str(pdir))
    expected = [(0, T0, b"a", b"1", ()), (2, T0 + 2, b"b", b"2", ()), (5, T0 + 5, b"d", None, ()),
                (7, T0 + 7, b"e", b"5", ()), (9, T0 + 9, b"f", None, ())]
    assert rows_of(reader.read_columns(with_headers=True)) == expected
    assert rows_of_records(reader.records()) == expected
    assert reader.log_end_offset == 10
    assert rows_of(reader.read_columns(3, 6, with_headers=True)) == expected[2:3]
    assert [b.records_count for b in reader.batches(3)] == [2, 0, 2, 1]   # b0 ends at 3
    assert [b.records_count for b in reader.batches(4)] == [0, 2, 1]


@pytest.mark.slow          # random flips and truncations, fuzzing
def test_random_corruption_never_crashes(tmp_path):
    """Random byte flips and truncations: the kernels either decode what the Python codec decodes
    or raise CorruptRecordError, never anything else (and never read out of bounds)."""
    clock = Clock()
    root = str(tmp_path / "data")
    dd = DataDir(root, create=True, clock=clock, writable=True)
    dd.create_topic("fz", 1, {"segment.bytes": "3000"})
    fill_mixed_log(dd.open_log("fz", 0), np.random.default_rng(3), clock, batches_per_codec=1, n=10)
    dd.close()
    pdir = os.path.join(root, "fz-0")
    segs = [s.path for s in live_segment_files(pdir) if s.size]
    originals = {p: open(p, "rb").read() for p in segs}
    rng = np.random.default_rng(11)
    for _ in range(120):
        path = segs[rng.integers(len(segs))]
        data = bytearray(originals[path])
        for _ in range(rng.integers(1, 4)):
            data[rng.integers(len(data))] = rng.integers(256)
        if rng.random() < 0.2:
            data = data[:rng.integers(len(data))]
        with open(path, "wb") as f:
            f.write(data)
        for ctl in (False, True):
            try:
                got = rows_of(PartitionReader(pdir).read_columns(include_control=ctl, validate_crc=False,
                                                                 with_headers=True))
            except CorruptRecordError:
                got = None
            try:
                exp = rows_of_records(PartitionReader(pdir).records(include_control=ctl, validate=False))
            except CorruptRecordError:
                exp = None
            assert got == exp
            try:
                PartitionReader(pdir).read_columns(include_control=ctl)
            except CorruptRecordError:
                pass
        with open(path, "wb") as f:
            f.write(originals[path])


def test_header_keys_not_utf8(tmp_path):
    raw = encode_batch(BatchSpec(base_offset=0),
                       [(0, T0, b"k", b"v", ((b"\xffbad", b"x"), ("ok", None))), (1, T0, b"k2", b"v2", ())])
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(raw)
    reader = PartitionReader(str(pdir))
    got = rows_of(reader.read_columns(with_headers=True))
    assert got == rows_of_records(reader.records())
    assert got[0][4] == (("\ufffdbad", b"x"), ("ok", None))


def test_encode_columnar_batch_in_place_matches_assemble_batch():
    """The append path assembles uncompressed batches in place: the bytes assemble_batch makes."""
    from compactlog.record.batch import assemble_batch
    rng = np.random.default_rng(5)
    for trial in range(150):
        n = int(rng.integers(1, 40))
        keys = [None if rng.random() < .2 else bytes(rng.integers(0, 256, rng.integers(0, 300), dtype=np.uint8))
                for _ in range(n)]
        vals = [None if rng.random() < .2 else bytes(rng.integers(0, 256, rng.integers(0, 2000), dtype=np.uint8))
                for _ in range(n)]
        hdrs = [() if rng.random() < .5 else (("a", b"x"), ("b", None)) for _ in range(n)] \
            if rng.random() < .5 else None
        spec = BatchSpec(base_offset=int(rng.integers(0, 1 << 40)), partition_leader_epoch=int(rng.integers(-1, 9)),
                         compression=int(rng.integers(0, 5)) if rng.random() < .2 else 0,
                         timestamp_type=int(rng.integers(0, 2)), transactional=bool(rng.integers(0, 2)),
                         producer_id=int(rng.integers(-1, 1000)), producer_epoch=int(rng.integers(-1, 10)),
                         base_sequence=int(rng.integers(-1, 1 << 31)),
                         delete_horizon_ms=None if rng.random() < .7 else int(rng.integers(0, 1 << 42)))
        ts = rng.integers(-1, 1 << 42, n)
        offs = np.sort(rng.choice(1000, n, replace=False)) if rng.random() < .3 else None
        lod = None if offs is None else int(offs[-1]) + int(rng.integers(0, 5))
        cols = columnar_records(keys, vals, hdrs)
        got = encode_columnar_batch(spec, cols, ts, offs, lod)
        deltas = np.arange(n, dtype=np.int64) if offs is None else offs
        base_ts = spec.delete_horizon_ms if spec.delete_horizon_ms is not None else int(ts[0])
        out = np.empty(cols.encoded_size_bound(), dtype=np.uint8)
        end = reference_encode_records(out, 0, ts - base_ts, deltas, cols.key_buf, cols.key_off, cols.key_null,
                                     cols.val_buf, cols.val_off, cols.val_null, cols.hdr_buf, cols.hdr_off)
        expected = assemble_batch(spec, int(deltas[-1]) if lod is None else lod, base_ts, int(ts.max()), n,
                                  out[:end].tobytes())
        assert got == expected, trial


def test_large_binary_when_a_chunk_needs_it(mixed, monkeypatch):
    from compactlog.storage import column_chunk
    _, pdir = mixed
    small = PartitionReader(pdir).read_columns(include_control=True, with_headers=True)
    monkeypatch.setattr(column_chunk, "MAX_BINARY_BYTES", 800)   # some chunks exceed it, some not
    reader = PartitionReader(pdir, chunk_records=64)
    kinds = {b.schema.field("value").type for b in reader.iter_columns(include_control=True)}
    assert kinds == {pa.binary(), pa.large_binary()}
    table = reader.read_columns(include_control=True, with_headers=True)
    assert table.schema == column_schema(with_headers=True, large=True)
    assert rows_of(table) == rows_of(small)


# the plain, byte-by-byte encoder the memcpy one must match
@njit(cache=True)
def reference_encode_records(out, pos, ts_delta, off_delta, key_buf, key_off, key_null,
                             val_buf, val_off, val_null, hdr_buf, hdr_off):
    """Reference encoder: records from columns, byte by byte.

    Keys/values are slices [off[i], off[i+1]) of their buffers (null when the flag is set);
    ``hdr_buf[hdr_off[i]:hdr_off[i+1]]`` is the record's already-encoded header section
    (count varint and headers), empty meaning "no headers".
    """
    n = ts_delta.shape[0]
    for i in range(n):
        klen = key_off[i + 1] - key_off[i]
        vlen = val_off[i + 1] - val_off[i]
        hlen = hdr_off[i + 1] - hdr_off[i]
        zts = _zigzag64(ts_delta[i])
        zod = _zigzag32(off_delta[i])
        body = 1 + _uvarint_size(zts) + _uvarint_size(zod)
        if key_null[i]:
            body += 1
        else:
            body += _uvarint_size(_zigzag32(klen)) + klen
        if val_null[i]:
            body += 1
        else:
            body += _uvarint_size(_zigzag32(vlen)) + vlen
        body += hlen if hlen > 0 else 1
        pos = _write_uvarint(out, pos, _zigzag32(body))
        out[pos] = 0
        pos += 1
        pos = _write_uvarint(out, pos, zts)
        pos = _write_uvarint(out, pos, zod)
        if key_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(klen))
            out[pos:pos + klen] = key_buf[key_off[i]:key_off[i + 1]]
            pos += klen
        if val_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(vlen))
            out[pos:pos + vlen] = val_buf[val_off[i]:val_off[i + 1]]
            pos += vlen
        if hlen > 0:
            out[pos:pos + hlen] = hdr_buf[hdr_off[i]:hdr_off[i + 1]]
            pos += hlen
        else:
            out[pos] = 0
            pos += 1
    return pos


