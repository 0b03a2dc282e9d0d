#!/usr/bin/env python3
"""Append and read-back throughput of compactlog, beside kafka-python's batch codec.

Appends N records (16-byte keys, random values) in batches of B through the Python API
(DataDir -> create_topic -> open_log -> Log.append_records), then reads them back with the
columnar reader (PartitionReader.read_columns -> pyarrow.Table) and, on a subset, with the
Python-object paths (Log.records, PartitionReader.records). kafka-python's
DefaultRecordBatchBuilder encodes the same records in batches of the same size, and its
MemoryRecords/DefaultRecordBatch decodes the very segment bytes compactlog wrote (CRC checked),
as a baseline. Not a test: a script that prints a table.

    .venv/bin/python benchmarks/append_read.py [--records N] [--batch-size B] [--dir PATH]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from compactlog.storage.datadir import DataDir  # noqa: E402
from compactlog.storage.reader import PartitionReader  # noqa: E402

MB = 1e6


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000, help="records to append (default 2,000,000)")
    p.add_argument("--batch-size", type=int, default=1000, help="records per batch (default 1000)")
    p.add_argument("--dir", default=None,
                   help="where to put the temporary data dir (default ./build/bench-data); "
                        "a fresh subdirectory is created there and removed afterwards")
    p.add_argument("--key-size", type=int, default=16)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--python-records", type=int, default=200_000,
                   help="records read through the Python-object paths (default 200,000)")
    p.add_argument("--baseline-records", type=int, default=None,
                   help="records for kafka-python (default: all)")
    p.add_argument("--no-arrow-append", action="store_true", help="skip the pyarrow-input append")
    p.add_argument("--keep", action="store_true", help="keep the data dir")
    p.add_argument("--repeat", type=int, default=3, help="columnar reads repeated, best reported (default 3)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


class Timer:
    """Wall-clock and CPU time (this process) of a block."""

    def __enter__(self):
        self.t, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t
        self.cpu = time.process_time() - self.c


class Table:
    def __init__(self):
        self.rows = []

    def add(self, name, records, seconds, nbytes, cpu=None):
        self.rows.append((name, records, seconds, nbytes, cpu))
        cpu_s = f" (CPU {cpu:.3f} s)" if cpu is not None else ""
        print(f"  {name}: {records:,} records in {seconds:.3f} s{cpu_s}", flush=True)

    def rate(self, name):
        for n, r, s, _, _ in self.rows:
            if n == name:
                return r / s
        return None

    def render(self):
        w = max(len(r[0]) for r in self.rows)
        out = [f"{'operation':<{w}}  {'records':>11}  {'wall s':>8}  {'CPU s':>8}  {'records/s':>12}  {'MB/s':>8}",
               "-" * (w + 59)]
        for name, recs, sec, nbytes, cpu in self.rows:
            cpu_s = f"{cpu:>8.3f}" if cpu is not None else f"{'':>8}"
            out.append(f"{name:<{w}}  {recs:>11,}  {sec:>8.3f}  {cpu_s}  {recs / sec:>12,.0f}  {nbytes / sec / MB:>8.1f}")
        return "\n".join(out)


def make_records(n, key_size, value_size, seed):
    rng = np.random.default_rng(seed)
    keys = [(b"%0*d" % (key_size, i))[-key_size:] for i in range(n)]
    val_buf = rng.integers(0, 256, n * value_size, dtype=np.uint8).tobytes()
    values = [val_buf[i * value_size:(i + 1) * value_size] for i in range(n)]
    return keys, values, val_buf


def log_files(pdir):
    return sorted(os.path.join(pdir, f) for f in os.listdir(pdir) if f.endswith(".log"))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    n, bsz = args.records, args.batch_size
    shown, skip = [f"--records {n}", f"--batch-size {bsz}"], False
    for a in argv:   # the other options as given
        if skip:
            skip = False
        elif a in ("--records", "--batch-size"):
            skip = True
        elif not a.startswith(("--records=", "--batch-size=")):
            shown.append(shlex.quote(a))
    print("# reproduce: .venv/bin/python benchmarks/append_read.py " + " ".join(shown))
    print(f"# {n:,} records, key {args.key_size} B, value {args.value_size} B (random), "
          f"batches of {bsz}; uncompressed; default topic configs; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")

    parent = args.dir or os.path.join(ROOT, "build", "bench-data")
    os.makedirs(parent, exist_ok=True)
    root = tempfile.mkdtemp(prefix="append-read-", dir=parent)
    table = Table()
    try:
        run(args, root, table)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"# data kept in {root}")
    print()
    print(table.render())
    print()
    ratios = [
        ("append: compactlog (Python lists) / kafka-python encode",
         "compactlog append_records (Python bytes lists)", "kafka-python DefaultRecordBatchBuilder (encode only)"),
        ("append: compactlog (pyarrow arrays) / kafka-python encode",
         "compactlog append_records (pyarrow BinaryArray)", "kafka-python DefaultRecordBatchBuilder (encode only)"),
        ("read: compactlog read_columns (first call) / kafka-python decode",
         "compactlog PartitionReader.read_columns (CRC checked), first call",
         "kafka-python MemoryRecords iterate (CRC checked)"),
        ("read: compactlog read_columns (best of N) / kafka-python decode",
         f"compactlog PartitionReader.read_columns (CRC checked), best of {args.repeat}",
         "kafka-python MemoryRecords iterate (CRC checked)"),
        ("read: compactlog Log.records() / kafka-python decode",
         "compactlog Log.records() (Python objects)", "kafka-python MemoryRecords iterate (CRC checked)"),
    ]
    for label, a, b in ratios:
        ra, rb = table.rate(a), table.rate(b)
        if ra and rb:
            print(f"{label}: {ra / rb:.1f}x")


def run(args, root, table):
    n, bsz = args.records, args.batch_size
    t = time.perf_counter()
    keys, values, val_buf = make_records(n, args.key_size, args.value_size, args.seed)
    now = int(time.time() * 1000)
    timestamps = np.arange(now - n, now, dtype=np.int64)
    print(f"# generated records in {time.perf_counter() - t:.1f} s; data dir {root}")

    dd = DataDir(os.path.join(root, "data"), create=True, writable=True)
    # warm-up: load (or compile) the numba kernels outside the timings
    t = time.perf_counter()
    dd.create_topic("warmup", 1)
    wlog = dd.open_log("warmup", 0)
    wlog.append_records(keys[:10], values[:10], timestamps=timestamps[:10])
    import pyarrow as pa
    wlog.append_records(pa.array(keys[:10], pa.binary()), pa.array(values[:10], pa.binary()),
                        timestamps=timestamps[:10])
    PartitionReader(wlog.dir).read_columns(with_headers=True)
    PartitionReader(wlog.dir).read_columns(validate_crc=False)
    list(wlog.records())
    print(f"# warm-up (numba kernels loaded/compiled) {time.perf_counter() - t:.1f} s")

    # -- append, Python lists of bytes
    dd.create_topic("bench", 1)
    log = dd.open_log("bench", 0)
    with Timer() as tm:
        for i in range(0, n, bsz):
            log.append_records(keys[i:i + bsz], values[i:i + bsz], timestamps=timestamps[i:i + bsz])
    pdir = log.dir
    assert log.log_end_offset == n, log.log_end_offset
    log_bytes = log.size()
    table.add("compactlog append_records (Python bytes lists)", n, tm.wall, log_bytes, tm.cpu)

    # -- append, pyarrow arrays (no Python bytes objects on the way)
    if not args.no_arrow_append:
        k_arr = pa.array(keys, pa.binary())
        v_arr = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            (np.arange(n + 1, dtype=np.int64) * args.value_size).astype(np.int32)), pa.py_buffer(val_buf)])
        dd.create_topic("bench-arrow", 1)
        alog = dd.open_log("bench-arrow", 0)
        with Timer() as tm:
            for i in range(0, n, bsz):
                alog.append_records(k_arr.slice(i, bsz), v_arr.slice(i, bsz), timestamps=timestamps[i:i + bsz])
        assert alog.log_end_offset == n
        table.add("compactlog append_records (pyarrow BinaryArray)", n, tm.wall, alog.size(), tm.cpu)
        a_files, b_files = log_files(alog.dir), log_files(pdir)
        same = len(a_files) == len(b_files) and all(
            open(x, "rb").read() == open(y, "rb").read() for x, y in zip(a_files, b_files))
        print(f"  (pyarrow-input log identical to the Python-input log: {same})")
        del k_arr, v_arr
    with Timer() as tm:
        dd.close()
    print(f"# clean close (fsync of {log_bytes / MB:.0f} MB, indexes, snapshots) {tm.wall:.2f} s")
    nsegs = len(log_files(pdir))
    print(f"# log: {log_bytes / MB:.1f} MB in {nsegs} segment(s); payload (keys + values) "
          f"{n * (args.key_size + args.value_size) / MB:.1f} MB; MB/s below = log (batch) bytes")

    # -- kafka-python encode, same records, same batch size
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
    nb = n if args.baseline_records is None else min(n, args.baseline_records)
    ts_list = timestamps.tolist()
    built = []
    with Timer() as tm:
        for i in range(0, nb, bsz):
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                          producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                          batch_size=2**31 - 1)
            for j in range(i, min(i + bsz, nb)):
                b.append(j - i, ts_list[j], keys[j], values[j], [])
            built.append(b.build())
    table.add("kafka-python DefaultRecordBatchBuilder (encode only)", nb, tm.wall,
              sum(len(b) for b in built), tm.cpu)
    del built

    # -- columnar read
    reader = PartitionReader(pdir)
    with Timer() as tm:
        tab = reader.read_columns()
    table.add("compactlog PartitionReader.read_columns (CRC checked), first call", tab.num_rows,
              tm.wall, log_bytes, tm.cpu)
    check_table(tab, keys, val_buf, timestamps, n, args.value_size)
    del tab
    for label, kw in (("CRC checked", {}), ("no CRC check", {"validate_crc": False}),
                      ("CRC checked, with headers column", {"with_headers": True})):
        best = None
        for _ in range(args.repeat):
            with Timer() as tm:
                tab = reader.read_columns(**kw)
            rows = tab.num_rows
            del tab
            if best is None or tm.wall < best.wall:
                best = tm
        table.add(f"compactlog PartitionReader.read_columns ({label}), best of {args.repeat}", rows,
                  best.wall, log_bytes, best.cpu)

    # -- Python objects, on a subset
    ns = min(n, args.python_records)
    frac = ns / n
    dd2 = DataDir(os.path.join(root, "data"), writable=True)
    log2 = dd2.open_log("bench", 0)
    with Timer() as tm:
        got = sum(1 for _ in itertools.islice(log2.records(), ns))
    table.add("compactlog Log.records() (Python objects)", got, tm.wall, log_bytes * frac, tm.cpu)
    with Timer() as tm:
        got = sum(1 for _ in itertools.islice(reader.records(), ns))
    table.add("compactlog PartitionReader.records() (Python objects)", got, tm.wall, log_bytes * frac, tm.cpu)
    dd2.close()

    # -- kafka-python decode of the segment bytes compactlog wrote
    data = b"".join(open(f, "rb").read() for f in log_files(pdir))
    if nb < n:
        # cut at the batch holding record nb (batches are whole: iterate headers)
        import struct
        pos, count = 0, 0
        while count < nb:
            length = struct.unpack_from(">i", data, pos + 8)[0]
            count += struct.unpack_from(">i", data, pos + 57)[0]
            pos += 12 + length
        data = data[:pos]
    got = 0
    first_key = None
    with Timer() as tm:
        mr = MemoryRecords(data)
        while True:
            batch = mr.next_batch()
            if batch is None:
                break
            if not batch.validate_crc():
                raise SystemExit("kafka-python: CRC mismatch")
            for rec in batch:
                _ = (rec.offset, rec.timestamp, rec.key, rec.value)
                if first_key is None:
                    first_key = rec.key
                got += 1
    assert first_key == keys[0]
    table.add("kafka-python MemoryRecords iterate (CRC checked)", got, tm.wall, len(data), tm.cpu)


def check_table(tab, keys, val_buf, timestamps, n, value_size):
    assert tab.num_rows == n, tab.num_rows
    off = tab.column("offset").to_numpy()
    assert (off == np.arange(n)).all()
    assert (tab.column("timestamp").to_numpy() == timestamps).all()
    vals = tab.column("value").combine_chunks()
    vdata = np.frombuffer(vals.buffers()[2], dtype=np.uint8)[:n * value_size]
    assert vdata.tobytes() == val_buf
    kk = tab.column("key").combine_chunks()
    kdata = np.frombuffer(kk.buffers()[2], dtype=np.uint8)
    assert kdata[:sum(map(len, keys[:1000]))].tobytes() == b"".join(keys[:1000])
    assert kk[n - 1].as_py() == keys[-1]
    print("  (read-back verified: offsets, timestamps, keys, values)")


if __name__ == "__main__":
    main()
