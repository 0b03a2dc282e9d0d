"""Cleaner benchmark on the reference workload (a script, not a test).

    .venv/bin/python benchmarks/clean.py [--records 5000000] [--keys 1000000] [--dir build/bench-data]
    .venv/bin/python benchmarks/clean.py --trees before=/tmp/main-tree,after=. --rounds 5   (A/B of two checkouts)

Writes 5,000,000 records (1,000,000 distinct uniform keys, 100-byte random values, uncompressed
batches of 200, 100 MiB segments, all cleanable), then:
  1. cleans one copy with the whole command (`compactlog clean --engine spark`, JVM start included);
  2. cleans another copy through the Python API on an already running Spark session (Kafka's
     figure excludes JVM start too): input MB/s = input bytes / wall time of the clean;
  3. runs a plain single-process Python baseline (a dict of key -> latest offset, then a rewrite of
     the kept records) on the same segments, in the same run.
Peak RSS is sampled from /proc for the driver, the JVM and the Python workers.
Reference (the issue): Kafka's own cleaner on this workload, 2-core machine: 76 MB/s cold, 82 MB/s warm.

``--trees NAME=PATH,NAME=PATH`` instead cleans fresh copies of the same workload in this process's
engine (``InProcessExecutor``) with each checkout's code (``PYTHONPATH``), alternating the trees
for ``--rounds`` rounds after one untimed warm-up each (numba's cache), and reports the median
wall and CPU seconds of the clean and their ratios (CPU is the steadier on a loaded machine); the
cleaned partitions must be byte for byte the same. ``--whole-command`` adds the one-shot command
(``compactlog clean --engine local``: start, imports, kernels, clean, exit) of each tree per round
and the dict baseline's CPU, for the issue's "1/11 of the baseline" figure; each tree's sources are
byte-compiled first (``compileall``), as ``make venv`` leaves them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TOPIC = "bench"
NOW = 1_900_000_000_000


def write_workload(path: str, records: int, keys: int, batch: int, segment_bytes: int, seed: int = 1,
                   partitions: int = 1, unique: bool = False, cyclic: bool = False) -> int:
    """The reference workload; ``unique``: every key once (keys = records); ``cyclic``: keys taken
    in turn, so exactly ``keys`` distinct ones; ``partitions``: the records split evenly over that
    many partitions, each with keys/partitions distinct keys."""
    from compactlog.record.batch import BatchSpec, ColumnarRecords, encode_columnar_batch
    from compactlog.storage.datadir import DataDir
    rng = np.random.default_rng(seed)
    t = [NOW - 86_400_000]
    key_len = 10
    with DataDir(path, clock=lambda: t[0], create=True, writable=True) as dd:
        dd.create_topic(TOPIC, partitions, {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                            "min.cleanable.dirty.ratio": "0.01"})
        total = 0
        for part in range(partitions):
            log = dd.open_log(TOPIC, part)
            n_part = records // partitions
            k_part = max(keys // partitions, 1)
            for start in range(0, n_part, batch):
                n = min(batch, n_part - start)
                if unique:
                    ids = np.arange(start, start + n)
                elif cyclic:
                    ids = np.arange(start, start + n) % k_part
                else:
                    ids = rng.integers(0, k_part, n)
                key_buf = np.frombuffer("".join(f"k{i:09d}" for i in ids.tolist()).encode(), dtype=np.uint8)
                val_buf = rng.integers(0, 256, n * 100, dtype=np.uint8)
                cols = ColumnarRecords(key_buf, np.arange(n + 1, dtype=np.int64) * key_len, np.zeros(n, np.bool_),
                                       val_buf, np.arange(n + 1, dtype=np.int64) * 100, np.zeros(n, np.bool_),
                                       np.zeros(0, np.uint8), np.zeros(n + 1, np.int64))
                t[0] += 1
                log.append_as_leader(encode_columnar_batch(BatchSpec(), cols, np.full(n, t[0], dtype=np.int64)))
            log.roll()
            log.append_records([b"tail"], [b"tail"])
            total += sum(s.size for s in log.segments[:-1])
        return total


def warm_workers(spark) -> None:
    """Python workers up, with compactlog and its compiled kernels loaded (a warm session)."""
    def touch(_):
        from compactlog.cleaner import fast_path, task  # noqa: F401
        return 1
    n = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(n), n).map(touch).collect()


class RssSampler:
    """Peak resident set size of this process and of every descendant (JVM, Python workers)."""

    def __init__(self):
        self.peak = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        while not self._stop.is_set():
            for pid, kind in _processes():
                rss = _rss_kb(pid)
                if rss:
                    self.peak[kind] = max(self.peak.get(kind, 0), rss)
            self._stop.wait(0.05)


def _processes():
    me = os.getpid()
    out = [(me, "driver")]
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
                children.setdefault(int(parts[1]), []).append(int(d))
            except OSError:
                pass
    stack = list(children.get(me, []))
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        kind = "jvm" if b"java" in cmd else ("python-worker" if b"python" in cmd else "other")
        out.append((pid, kind))
        stack.extend(children.get(pid, []))
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def python_dict_baseline(src: str, out_path: str) -> tuple[float, int]:
    """Plain Python: decode every record, dict of latest offsets, rewrite the kept records."""
    import resource
    from compactlog.record.batch import BatchSpec, encode_batch, iter_batches
    pdir = os.path.join(src, f"{TOPIC}-0")
    logs = sorted(n for n in os.listdir(pdir) if n.endswith(".log"))[:-1]
    t0 = time.time()
    latest = {}
    for name in logs:
        with open(os.path.join(pdir, name), "rb") as f:
            buf = f.read()
        for b in iter_batches(buf):
            for r in b.records():
                latest[r.key] = r.offset
    with open(out_path, "wb") as out:
        for name in logs:
            with open(os.path.join(pdir, name), "rb") as f:
                buf = f.read()
            for b in iter_batches(buf):
                kept = [r for r in b.records() if latest[r.key] == r.offset]
                if kept:
                    out.write(encode_batch(BatchSpec(base_offset=b.base_offset, partition_leader_epoch=0),
                                           kept, last_offset_delta=b.last_offset_delta))
    return time.time() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


_TREE_RUN = """
import hashlib, json, os, sys, time
from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
data, now, topic = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with DataDir(data, broker=BrokerConfig({}), clock=lambda: now, writable=True) as dd:
    t0, c0 = time.perf_counter(), time.process_time()
    outs = [o for o in Cleaner(dd, InProcessExecutor()).run(now) if o.topic == topic]
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
assert outs and all(o.cleaned for o in outs), [o.error for o in outs]
digest = hashlib.sha256()
for name in sorted(os.listdir(data)):
    pdir = os.path.join(data, name)
    if name.startswith(topic + "-") and os.path.isdir(pdir):
        for f in sorted(os.listdir(pdir)):
            digest.update(f.encode())
            digest.update(open(os.path.join(pdir, f), "rb").read())
print(json.dumps({"seconds": secs, "cpu": cpu, "digest": digest.hexdigest(), "map_keys": outs[0].stats.map_keys,
                  "map_bytes": outs[0].stats.map_bytes, "reason": outs[0].map_reason}))
"""


def one_shot(tree: str, data: str) -> tuple[float, float]:
    """(wall s, CPU s) of the whole command ``compactlog clean --engine local`` run by ``tree``'s
    code: interpreter start, imports, numba's cached kernels, the clean and exit."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "compactlog", "--data-dir", data, "clean", "--engine", "local",
                          "--now-ms", str(NOW), "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                         cwd=os.path.abspath(tree))
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        raise RuntimeError(f"compactlog clean failed ({tree}): {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def ab_trees(trees: dict, src: str, base: str, mb: float, rounds: int, whole_command: bool = False,
             baseline: bool = False) -> int:
    """Each tree cleans a fresh copy of ``src`` in turn; medians and the ratio (see the docstring).
    ``whole_command``: each round also runs the one-shot ``compactlog clean`` of each tree on a
    fresh copy; ``baseline``: the dict baseline's CPU once, for the ratio of each tree's."""
    import statistics
    names = list(trees)
    if whole_command:
        # each tree's sources byte-compiled, as `make venv` and an installed package have them: with
        # PYTHONDONTWRITEBYTECODE set, a tree without them compiles ~80 modules in every command
        for n in names:
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(os.path.abspath(trees[n]),
                            "compactlog")], check=True, stdout=subprocess.DEVNULL)
    times: dict = {n: [] for n in names}
    cpus: dict = {n: [] for n in names}
    shots: dict = {n: [] for n in names}
    digests: dict = {n: set() for n in names}
    for r in range(rounds + 1):
        for n in (names if r % 2 == 0 else names[::-1]):
            copy = os.path.join(base, f"tree-{n}")
            shutil.copytree(src, copy)
            os.sync()
            env = {**os.environ, "PYTHONPATH": os.path.abspath(trees[n])}
            # run from the tree: `python -c` puts the working directory first on sys.path, and
            # from another checkout it would import that checkout's package, not this tree's
            p = subprocess.run([sys.executable, "-c", _TREE_RUN, copy, str(NOW), TOPIC], capture_output=True,
                               text=True, env=env, cwd=os.path.abspath(trees[n]))
            shutil.rmtree(copy)
            if p.returncode != 0:
                print(f"[{n}] failed:\n{p.stderr}")
                return 1
            out = json.loads(p.stdout.strip().splitlines()[-1])
            digests[n].add(out["digest"])
            if r:                  # round 0 warms numba's cache of each tree
                times[n].append(out["seconds"])
                cpus[n].append(out["cpu"])
                print(f"round {r} [{n}]: {out['seconds']:.3f} s = {mb / out['seconds']:.1f} MB/s, "
                      f"CPU {out['cpu']:.3f} s; map of {out.get('map_keys', 0):,} keys in "
                      f"{out.get('map_bytes', 0) / 2**20:.0f} MiB ({out.get('reason', '')})", flush=True)
            if whole_command and r:
                shutil.copytree(src, copy)
                os.sync()
                wall, cpu = one_shot(trees[n], copy)
                shutil.rmtree(copy)
                shots[n].append(cpu)
                print(f"round {r} [{n}]: whole command `compactlog clean` {wall:.3f} s, CPU {cpu:.3f} s", flush=True)
    med = {n: statistics.median(times[n]) for n in names}
    cpu = {n: statistics.median(cpus[n]) for n in names}
    for n in names:
        print(f"{n}: median {med[n]:.3f} s = {mb / med[n]:.1f} MB/s, CPU {cpu[n]:.3f} s over {rounds} "
              f"round(s) ({trees[n]})")
    base_cpu = None
    if baseline:
        c0 = time.process_time()
        python_dict_baseline(src, os.path.join(base, "baseline.log"))
        base_cpu = time.process_time() - c0
        print(f"python dict baseline: CPU {base_cpu:.3f} s")
    if whole_command:
        for n in names:
            shot = statistics.median(shots[n])
            vs = f" = 1/{base_cpu / shot:.1f} of the dict baseline's" if base_cpu else ""
            print(f"{n}: whole command median CPU {shot:.3f} s{vs}")
    same = len(set().union(*digests.values())) == 1
    print(f"cleaned partitions byte for byte the same in every run: {'yes' if same else 'NO'}")
    if len(names) == 2:
        a, b = names
        print(f"{b} / {a}: wall {med[b] / med[a]:.3f}, CPU {cpu[b] / cpu[a]:.3f} (medians)")
        if whole_command:
            print(f"{b} / {a}: whole command CPU {statistics.median(shots[b]) / statistics.median(shots[a]):.3f}")
    return 0 if same else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--unique", action="store_true", help="every key once (keys = records)")
    ap.add_argument("--cyclic", action="store_true", help="keys in turn: exactly --keys distinct keys")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--map", default="auto", choices=["auto", "task", "distributed"])
    ap.add_argument("--dir", default=os.path.join("build", "bench-data"))
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--trees", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), default=None,
                    help="NAME=PATH,NAME=PATH: an A/B of two checkouts' cleaners (in-process engine) on the "
                         "same workload, e.g. before=/tmp/main-tree,after=.")
    ap.add_argument("--rounds", type=int, default=5, help="timed runs of each tree with --trees")
    ap.add_argument("--whole-command", action="store_true",
                    help="with --trees: each round also times the one-shot `compactlog clean --engine local` "
                         "(CPU of the whole process), and the dict baseline's CPU is measured once for the ratio")
    args = ap.parse_args(argv)
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    base = os.path.abspath(args.dir)
    if os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(base)
    src = os.path.join(base, "source")
    t0 = time.time()
    input_bytes = write_workload(src, args.records, args.records if args.unique else args.keys, args.batch,
                                 args.segment_bytes, partitions=args.partitions, unique=args.unique,
                                 cyclic=args.cyclic)
    os.sync()
    mb = input_bytes / 1e6
    print(f"workload: {args.records:,} records, {args.records if args.unique else args.keys:,} keys, "
          f"{args.partitions} partition(s), {mb:,.1f} MB cleanable (written in {time.time() - t0:.1f} s)")
    if args.trees:
        code = ab_trees(args.trees, src, base, mb, args.rounds, args.whole_command,
                        args.whole_command and not args.skip_baseline)
        if not args.keep:
            shutil.rmtree(base)
        return code
    results = {}
    overrides = {"compactlog.cleaner.map": args.map}
    exe = os.path.join(os.path.dirname(sys.executable), "compactlog")

    # 1. the whole command, cold JVM
    if not args.skip_cold:
        cold = os.path.join(base, "cold")
        shutil.copytree(src, cold)
        os.sync()
        with RssSampler() as rss:
            t0 = time.time()
            p = subprocess.run([exe, "--data-dir", cold, "--override", f"compactlog.cleaner.map={args.map}",
                                "clean", "--engine", "spark", "--now-ms", str(NOW), "--json"],
                               capture_output=True, text=True)
            cold_s = time.time() - t0
        if p.returncode != 0:
            print(p.stderr)
            return 1
        results["command"] = {"seconds": cold_s, "MB/s": mb / cold_s,
                              "peak_rss_mb": {k: v / 1024 for k, v in rss.peak.items()}}
        shutil.rmtree(cold)

    # 2. warm session, through the API
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.spark.executor import SparkExecutor
    from compactlog.spark.session import session
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    spark = session()
    warm_workers(spark)
    warm = os.path.join(base, "warm")
    shutil.copytree(src, warm)
    os.sync()   # the copy's dirty pages must not be flushed during the timed clean
    with RssSampler() as rss:
        with DataDir(warm, broker=BrokerConfig(overrides), clock=lambda: NOW, writable=True) as dd:
            t0 = time.time()
            outs = [x for x in Cleaner(dd, SparkExecutor(spark=spark)).run(NOW) if x.topic == TOPIC]
            warm_s = time.time() - t0
    for o in outs:
        assert o.cleaned, o.error or o.status.reason
    stats = [o.stats for o in outs]
    task_s = max(s.elapsed_seconds for s in stats)
    results["warm"] = {"seconds": warm_s, "MB/s": mb / warm_s,
                       "records/s": sum(s.messages_read for s in stats) / warm_s,
                       "map": sorted({o.map_kind for o in outs}), "map_reason": outs[0].map_reason,
                       "map_s": sum(s.map_seconds for s in stats),
                       "rewrite_s": sum(s.clean_seconds - s.write_seconds for s in stats),
                       "write_io_s": sum(s.write_seconds for s in stats),
                       "task_s_sum": sum(s.elapsed_seconds for s in stats), "task_s_max": task_s,
                       "spark_and_driver_s": warm_s - task_s,
                       "records_in": sum(s.messages_read for s in stats),
                       "records_out": sum(s.messages_written for s in stats),
                       "peak_rss_mb": {k: v / 1024 for k, v in rss.peak.items()}}
    shutil.rmtree(warm)

    # 3. plain Python dict baseline
    if not args.skip_baseline and args.partitions == 1:
        secs, rss_kb = python_dict_baseline(src, os.path.join(base, "baseline.log"))
        results["python-dict"] = {"seconds": secs, "MB/s": mb / secs, "records/s": args.records / secs,
                                  "peak_rss_mb": rss_kb / 1024}
    print(json.dumps(results, indent=2))
    w = results["warm"]
    print(f"\nwarm clean: {w['MB/s']:.1f} MB/s ({w['records/s']:,.0f} records/s) in {w['seconds']:.2f} s "
          f"with the {'/'.join(w['map'])} map; in tasks: map {w['map_s']:.2f} s, rewrite {w['rewrite_s']:.2f} s, "
          f"writing {w['write_io_s']:.2f} s; Spark and driver {w['spark_and_driver_s']:.2f} s")
    if "command" in results:
        print(f"whole command (cold JVM): {results['command']['seconds']:.2f} s = {results['command']['MB/s']:.1f} MB/s")
    if "python-dict" in results:
        b = results["python-dict"]
        print(f"python dict baseline: {b['MB/s']:.1f} MB/s; compactlog warm is {w['MB/s'] / b['MB/s']:.1f}x")
    print("Kafka's cleaner (issue reference, same machine class): 76 MB/s cold, 82 MB/s warm")
    if not args.keep:
        shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
