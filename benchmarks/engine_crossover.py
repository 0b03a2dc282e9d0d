"""Where Spark starts to pay: `clean` and `snapshot` of growing sizes, in this process vs local Spark.

    .venv/bin/python benchmarks/engine_crossover.py [--clean-mb 1,8,32,128,512] [--partitions 1,4]
        [--snapshot-records 54,10000,100000,1000000,4000000] [--only clean|snapshot] [--repeat 2]
        [--out build/engine-crossover.json]

For every size it times, on copies of one workload (benchmarks/clean.py's reference records: 10-byte
keys, 100-byte random values, batches of 200, a fifth as many distinct keys as records):

* cold: the whole command in a new process, as a user runs it (`compactlog clean --engine local`
  vs `--engine spark`; `compactlog snapshot --engine local` vs `--engine spark`): imports, numba's
  cached kernels and, for Spark, the JVM, the session and the Python workers;
* warm: the same work through the Python API in this process, numba compiled and (for Spark) a
  running session whose workers have loaded compactlog.

The best of ``--repeat`` runs is kept. The fitted model (fixed cost + bytes / rate, Spark's rate
times the tasks that run at once) is printed with the table and written to ``--out``; the
constants of ``compactlog/cleaner/executor.py``'s ``CostModel`` come from this output, and the
README records the crossover.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from clean import NOW, TOPIC, warm_workers, write_workload  # noqa: E402

EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
RECORD_BYTES = 120          # about, on disk, per record of the reference workload


def _records_for_mb(mb: float) -> int:
    return max(int(mb * 1e6 / RECORD_BYTES), 10)


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.pop("COMPACTLOG_SPARK_MASTER", None)
    env.pop("COMPACTLOG_SPARK_QUICK_START", None)
    return env


def _timed(cmd: list[str]) -> float:
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3600)
    secs = time.time() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return secs


def _fresh_copy(src: str, dst: str) -> str:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    os.sync()
    return dst


def _log_bytes(path: str, *, cleanable: bool = False) -> int:
    """The topic's segment bytes; ``cleanable``: without each partition's active (last) segment."""
    total = 0
    for d in os.listdir(path):
        full = os.path.join(path, d)
        if os.path.isdir(full) and d.startswith(TOPIC + "-"):
            logs = sorted(n for n in os.listdir(full) if n.endswith(".log"))
            total += sum(os.path.getsize(os.path.join(full, n)) for n in (logs[:-1] if cleanable else logs))
    return total


def _best(repeat: int, run) -> float:
    """The fastest of ``repeat`` calls of ``run`` (which returns its seconds), rounded to ms."""
    return round(min(run() for _ in range(repeat)), 3)


def bench_clean(base: str, mb: float, partitions: int, repeat: int, spark) -> dict:
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.cleaner.executor import InProcessExecutor
    from compactlog.spark.executor import SparkExecutor
    from compactlog.storage.datadir import DataDir
    src = os.path.join(base, "src")
    if os.path.exists(src):
        shutil.rmtree(src)
    records = _records_for_mb(mb)
    write_workload(src, records, max(records // 5, 1), 200, 64 << 20, partitions=partitions)
    size = _log_bytes(src, cleanable=True)
    row = {"kind": "clean", "MB": round(size / 1e6, 2), "partitions": partitions, "records": records}
    copy = os.path.join(base, "copy")

    def cold(engine: str) -> float:
        _fresh_copy(src, copy)
        return _timed([EXE, "--data-dir", copy, "clean", "--engine", engine, "--now-ms", str(NOW), "--json"])

    def warm(engine: str) -> float:
        _fresh_copy(src, copy)
        executor = InProcessExecutor() if engine == "local" else SparkExecutor(spark=spark)
        with DataDir(copy, clock=lambda: NOW, writable=True) as dd:
            t0 = time.time()
            outs = Cleaner(dd, executor).run(NOW)
            secs = time.time() - t0
        assert all(o.cleaned for o in outs if o.topic == TOPIC), [o.error for o in outs]
        return secs

    for start, run in (("cold", cold), ("warm", warm)):
        for engine in ("local", "spark"):
            row[f"{engine}_{start}_s"] = _best(repeat, lambda: run(engine))
    shutil.rmtree(copy, ignore_errors=True)
    return row


def bench_snapshot(base: str, records: int, partitions: int, repeat: int, spark) -> dict:
    from compactlog.spark.snapshot import latest_state, latest_state_local, write_state, write_table
    src = os.path.join(base, "src")
    if os.path.exists(src):
        shutil.rmtree(src)
    write_workload(src, records, max(records // 5, 1), 200, 64 << 20, partitions=partitions)
    size = _log_bytes(src)
    row = {"kind": "snapshot", "MB": round(size / 1e6, 2), "partitions": partitions, "records": records}
    out = os.path.join(base, "out")

    def cold(engine: str) -> float:
        shutil.rmtree(out, ignore_errors=True)
        return _timed([EXE, "--data-dir", src, "snapshot", "--topic", TOPIC, "--out", out,
                       "--format", "parquet", "--engine", engine])

    def warm(engine: str) -> float:
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.time()
        if engine == "local":
            write_table(latest_state_local(src, TOPIC), out, "parquet")
        else:
            write_state(latest_state(spark, src, TOPIC), out, "parquet")
        return time.time() - t0

    for start, run in (("cold", cold), ("warm", warm)):
        for engine in ("local", "spark"):
            row[f"{engine}_{start}_s"] = _best(repeat, lambda: run(engine))
    shutil.rmtree(out, ignore_errors=True)
    return row


def fit(rows: list[dict], slots: int) -> dict:
    """Least squares of seconds = fixed + MB / rate, per engine and start (cold/warm); Spark's MB
    are divided by the tasks that run at once (min(partitions, slots))."""
    import numpy as np
    model = {}
    for kind in sorted({r["kind"] for r in rows}):
        for engine in ("local", "spark"):
            for start in ("cold", "warm"):
                pts = [(r["MB"] / (min(r["partitions"], slots) if engine == "spark" else 1),
                        r[f"{engine}_{start}_s"]) for r in rows if r["kind"] == kind]
                if len(pts) < 2:
                    continue
                x = np.array([p[0] for p in pts])
                y = np.array([p[1] for p in pts])
                a = np.vstack([np.ones_like(x), x]).T
                (fixed, per_mb), *_ = np.linalg.lstsq(a, y, rcond=None)
                model[f"{kind}.{engine}.{start}"] = {"fixed_s": round(float(max(fixed, 0.0)), 3),
                                                     "MB_per_s": round(float(1 / per_mb), 1) if per_mb > 0 else None}
    return model


def crossover(rows: list[dict], kind: str, start: str) -> str:
    """The first measured size at which Spark was faster, per partition count."""
    out = []
    for p in sorted({r["partitions"] for r in rows if r["kind"] == kind}):
        sizes = [r for r in rows if r["kind"] == kind and r["partitions"] == p]
        faster = [r for r in sizes if r[f"spark_{start}_s"] < r[f"local_{start}_s"]]
        out.append(f"{p} partition(s): " + (f"Spark faster from {faster[0]['MB']} MB" if faster
                                            else f"in-process faster up to {sizes[-1]['MB']} MB (largest measured)"))
    return "; ".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clean-mb", default="1,8,32,128,512")
    ap.add_argument("--snapshot-records", default="54,10000,100000,1000000,4000000")
    ap.add_argument("--partitions", default="1,4")
    ap.add_argument("--only", choices=["clean", "snapshot"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=os.path.join("build", "engine-crossover"))
    ap.add_argument("--out", default=os.path.join("build", "engine-crossover.json"))
    args = ap.parse_args(argv)
    base = os.path.abspath(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    from compactlog.spark.session import session
    spark = session()
    warm_workers(spark)
    slots = spark.sparkContext.defaultParallelism
    parts = [int(x) for x in args.partitions.split(",")]
    rows = []

    def show(row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    if args.only in (None, "clean"):
        for p in parts:
            for mb in [float(x) for x in args.clean_mb.split(",")]:
                show(bench_clean(base, mb, p, args.repeat, spark))
    if args.only in (None, "snapshot"):
        for p in parts:
            for n in [int(float(x)) for x in args.snapshot_records.split(",")]:
                show(bench_snapshot(base, n, p, args.repeat, spark))
    model = fit(rows, slots)
    result = {"machine": {"cores": os.cpu_count(), "spark_slots": slots}, "rows": rows, "model": model}
    for kind in sorted({r["kind"] for r in rows}):
        for start in ("cold", "warm"):
            result.setdefault("crossover", {})[f"{kind}.{start}"] = crossover(rows, kind, start)
    print(json.dumps({"model": model, "crossover": result["crossover"]}, indent=2))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
