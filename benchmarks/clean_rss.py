"""Peak memory of one in-process clean of many distinct keys (a script, not a test; issue 28).

    .venv/bin/python benchmarks/clean_rss.py [--keys 50000000] [--dir /tmp/clean-rss]
    .venv/bin/python benchmarks/clean_rss.py --keys 50000000 --trees before=/tmp/main-tree,after=.

Writes one partition of ``--keys`` records, every key distinct (12-byte keys, 10-byte values,
batches of 1,000 records, 100 MiB segments, ~28 bytes a record: 1.4 GB for 50M), the batches laid
out by a numba kernel (``fill_batches``) and appended as a follower's (CRCs filled per batch), then
cleans it with the in-process engine (``InProcessExecutor``, Kafka's single cleaner thread) in a
fresh interpreter per tree (``PYTHONPATH``), after one untimed clean of a small log there to warm
numba's cache, and reports that process's peak memory:

* the sampled peak of VmRSS (every 10 ms) and, at that moment, its anonymous part (the key map,
  the scans, the output buffers) and its file-backed part (mapped segments), and the sampled peaks
  of each; VmHWM and ru_maxrss at the end (the kernel's own high-water marks);
* the resident size after imports, before the clean (the interpreter, numpy, numba's kernels);
* the key map's keys and bytes (``stats.map_bytes``) and the engine's reason for its map;
* CPU and wall seconds of the clean, and a SHA-256 of the cleaned partition (the trees must agree).

Disk: the source log, a copy per run and the copy's cleaned segments while they are written
(about 3x the log at the peak); all removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from numba import njit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TOPIC = "rss"
NOW = 1_900_000_000_000
KEY_LEN = 12       # b"k" and 11 decimal digits of the key's number
VALUE_LEN = 10
BATCH_RECORDS = 1000
HEADER = 61        # a v2 batch header (RECORD_BATCH_OVERHEAD)


@njit(cache=True, inline="always")
def _put_be(out, p, v, n):
    for k in range(n):
        out[p + n - 1 - k] = np.uint8(v & 0xFF)
        v >>= 8


@njit(cache=True, inline="always")
def _uvarint(out, p, u):
    while u >= 0x80:
        out[p] = np.uint8((u & 0x7F) | 0x80)
        u >>= 7
        p += 1
    out[p] = np.uint8(u)
    return p + 1


@njit(cache=True)
def fill_batches(out, first, n, per_batch, ts, batch_pos):
    """Batches of records ``first .. first + n`` (record i at offset i, key "k" and i in 11
    digits), CRCs left 0; ``batch_pos[j]``: where batch j starts; returns (end, batches)."""
    p = 0
    nb = 0
    i = first
    end = first + n
    while i < end:
        count = min(per_batch, end - i)
        start = p
        batch_pos[nb] = start
        nb += 1
        _put_be(out, p, i, 8)                       # base offset
        _put_be(out, p + 12, 0, 4)                  # partition leader epoch
        out[p + 16] = 2                             # magic
        _put_be(out, p + 17, 0, 4)                  # CRC, filled by the caller
        _put_be(out, p + 21, 0, 2)                  # attributes: uncompressed, create time
        _put_be(out, p + 23, count - 1, 4)          # last offset delta
        _put_be(out, p + 27, ts, 8)                 # base timestamp
        _put_be(out, p + 35, ts, 8)                 # max timestamp
        _put_be(out, p + 43, -1, 8)                 # producer id
        _put_be(out, p + 51, -1, 2)                 # producer epoch
        _put_be(out, p + 53, -1, 4)                 # base sequence
        _put_be(out, p + 57, count, 4)              # records
        p += HEADER
        for d in range(count):
            zod = 2 * d                             # zigzag of a non-negative delta
            body = 1 + 1 + (1 if zod < 128 else 2) + 1 + KEY_LEN + 1 + VALUE_LEN + 1
            p = _uvarint(out, p, 2 * body)
            out[p] = 0                              # attributes
            out[p + 1] = 0                          # timestamp delta
            p = _uvarint(out, p + 2, zod)
            p = _uvarint(out, p, 2 * KEY_LEN)
            out[p] = 107                            # "k"
            k = i + d
            for j in range(KEY_LEN - 1, 0, -1):
                out[p + j] = 48 + k % 10
                k //= 10
            p += KEY_LEN
            p = _uvarint(out, p, 2 * VALUE_LEN)
            v = np.uint64(i + d) * np.uint64(0x9E3779B97F4A7C15)
            for j in range(VALUE_LEN):
                out[p + j] = np.uint8((v >> np.uint64(8 * (j % 8))) & np.uint64(0xFF))
            p += VALUE_LEN
            out[p] = 0                              # no headers
            p += 1
        _put_be(out, start + 8, p - start - 12, 4)  # batch length
        i += count
    return p, nb


def write_log(path: str, keys: int, segment_bytes: int, chunk_records: int = 2_000_000) -> int:
    """One partition of ``keys`` records with distinct keys; the cleanable bytes."""
    from compactlog.record.crc import crc32c
    from compactlog.storage.datadir import DataDir
    ts = NOW - 86_400_000
    per_record = 1 + 1 + 1 + 2 + 1 + KEY_LEN + 1 + VALUE_LEN + 1
    with DataDir(path, clock=lambda: NOW, create=True, writable=True) as dd:
        dd.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                   "min.cleanable.dirty.ratio": "0.01"})
        log = dd.open_log(TOPIC, 0)
        out = np.empty(chunk_records * per_record + (chunk_records // BATCH_RECORDS + 1) * HEADER, dtype=np.uint8)
        batch_pos = np.empty(chunk_records // BATCH_RECORDS + 1, dtype=np.int64)
        for first in range(0, keys, chunk_records):
            n = min(chunk_records, keys - first)
            end, nb = fill_batches(out, first, n, BATCH_RECORDS, ts, batch_pos)
            view = memoryview(out)
            bounds = batch_pos[:nb].tolist() + [end]
            for a, b in zip(bounds, bounds[1:]):      # one CRC a batch (1,000 records)
                view[a + 17:a + 21] = crc32c(view[a + 21:b]).to_bytes(4, "big")
            log.append_as_follower(view[:end])
        log.roll()
        log.append_records([b"tail"], [b"tail"])
        return sum(s.size for s in log.segments[:-1])


_RUN = r"""
import json, os, resource, sys, threading, time
data, now, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    return out

peak = {"VmRSS": 0}
most = {"RssAnon": 0, "RssFile": 0}
series = []              # (time, VmRSS, RssAnon, RssFile): the peak of each phase of the round
stop = threading.Event()

def sample():
    while not stop.is_set():
        s = status()
        if s["VmRSS"] > peak["VmRSS"]:
            peak.update(s)
        for k in most:
            most[k] = max(most[k], s[k])
        series.append((time.time(), s["VmRSS"], s["RssAnon"], s["RssFile"]))
        stop.wait(0.01)

def phase_peak(lo, hi):
    inside = [x for x in series if lo <= x[0] <= hi]
    return list(max(inside, key=lambda x: x[1])[1:]) if inside else [0, 0, 0]

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
idle = status()["VmRSS"]
t = threading.Thread(target=sample, daemon=True)
t.start()
with DataDir(data, broker=BrokerConfig({}), clock=lambda: now, writable=True) as dd:
    t0, c0 = time.perf_counter(), time.process_time()
    outs = [o for o in Cleaner(dd, InProcessExecutor()).run(now) if o.topic == topic]
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
stop.set()
t.join()
end = status()
assert outs and all(o.cleaned for o in outs), [o.error for o in outs]
s = outs[0].stats
print(json.dumps({"seconds": secs, "cpu": cpu, "idle_rss": idle, "peak": peak, "most": most,
                  "VmHWM": end["VmHWM"], "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "map_phase": phase_peak(s.start_s, s.map_done_s), "rewrite_phase": phase_peak(s.map_done_s, s.end_s),
                  "map_keys": s.map_keys, "map_bytes": s.map_bytes, "map_kind": outs[0].map_kind,
                  "reason": outs[0].map_reason, "records_in": s.messages_read, "records_out": s.messages_written}))
"""


def partition_digest(data: str) -> str:
    digest = hashlib.sha256()
    pdir = os.path.join(data, f"{TOPIC}-0")
    for name in sorted(os.listdir(pdir)):
        digest.update(name.encode())
        with open(os.path.join(pdir, name), "rb") as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def clean_in(tree: str, data: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    # run from the tree: `python -c` puts the working directory first on sys.path
    p = subprocess.run([sys.executable, "-c", _RUN, data, str(NOW), TOPIC], capture_output=True, text=True,
                       env=env, cwd=os.path.abspath(tree))
    if p.returncode != 0:
        raise RuntimeError(f"clean failed ({tree}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def du(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=50_000_000)
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--dir", default="/tmp/clean-rss")
    ap.add_argument("--trees", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), default={"this": "."},
                    help="NAME=PATH,...: clean a fresh copy with each checkout's code, in turn")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}", flush=True)
    base = os.path.abspath(args.dir)
    if os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(base)
    src, warm = os.path.join(base, "source"), os.path.join(base, "warm")
    c0, t0 = time.process_time(), time.time()
    cleanable = write_log(src, args.keys, args.segment_bytes)
    write_log(warm, 100_000, args.segment_bytes)
    os.sync()
    print(f"log: {args.keys:,} distinct keys, {gb(cleanable)} cleanable, {gb(du(src))} on disk; written in "
          f"{time.time() - t0:.1f} s, {time.process_time() - c0:.1f} CPU-s", flush=True)
    results, most_disk = {}, 0
    try:
        for name, tree in args.trees.items():
            copy = os.path.join(base, f"warm-{name}")
            shutil.copytree(warm, copy)
            clean_in(tree, copy)       # numba's cache of this tree, untimed
            shutil.rmtree(copy)
            copy = os.path.join(base, f"run-{name}")
            shutil.copytree(src, copy)
            os.sync()
            r = clean_in(tree, copy)
            most_disk = max(most_disk, du(base))
            r["digest"] = partition_digest(copy)
            shutil.rmtree(copy)
            results[name] = r
            p = r["peak"]
            print(f"[{name}] peak VmRSS {gb(p['VmRSS'])} (anonymous {gb(p['RssAnon'])}, file-backed "
                  f"{gb(p['RssFile'])}); peaks apart: anonymous {gb(r['most']['RssAnon'])}, file-backed "
                  f"{gb(r['most']['RssFile'])}; VmHWM {gb(r['VmHWM'])}, ru_maxrss {gb(r['ru_maxrss'])}; "
                  f"after imports {gb(r['idle_rss'])}", flush=True)
            for phase in ("map", "rewrite"):
                rss, anon, mapped = r[f"{phase}_phase"]
                print(f"[{name}] {phase} phase: peak VmRSS {gb(rss)} (anonymous {gb(anon)}, file-backed {gb(mapped)})")
            print(f"[{name}] {r['map_kind']} map of {r['map_keys']:,} keys in {gb(r['map_bytes'])} "
                  f"({r['map_bytes'] / max(r['map_keys'], 1):.1f} B/key; {r['reason']}); {r['records_in']:,} records "
                  f"in, {r['records_out']:,} out; CPU {r['cpu']:.1f} s, wall {r['seconds']:.1f} s", flush=True)
    finally:
        print(f"disk: at most {gb(most_disk)} under {base}")
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    names = list(results)
    same = len({r["digest"] for r in results.values()}) == 1
    print(f"cleaned partitions byte for byte the same: {'yes' if same else 'NO'}")
    if len(names) == 2:
        a, b = (results[n] for n in names)
        print(f"{names[1]} / {names[0]}: peak VmRSS {b['peak']['VmRSS'] / a['peak']['VmRSS']:.3f}, "
              f"VmHWM {b['VmHWM'] / a['VmHWM']:.3f}, CPU {b['cpu'] / a['cpu']:.3f}, wall {b['seconds'] / a['seconds']:.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
