"""Many small partitions in one cleaner run, on a warm Spark session (a script, not a test).

    .venv/bin/python benchmarks/many_partitions.py [--partitions 200] [--records 100] [--keys 20]

Prints the wall time of the run and the cost per partition, split into the driver's work before
the Spark job (opening logs, planning), the Spark job (all partitions' tasks), and the driver's
work after it (swaps, checkpoint, closing the logs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

NOW = 1_900_000_000_000


def build(path: str, partitions: int, records: int, keys: int) -> None:
    from compactlog.storage.datadir import DataDir
    with DataDir(path, clock=lambda: NOW - 60_000, create=True, writable=True) as dd:
        dd.create_topic("small", partitions, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(partitions):
            log = dd.open_log("small", p)
            log.append_records([f"k{i % keys}".encode() for i in range(records)], [b"v" * 50] * records)
            log.roll()
            log.append_records([b"tail"], [b"x"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--dir", default=os.path.join("build", "bench-many"))
    args = ap.parse_args(argv)
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    from clean import warm_workers
    from compactlog.cleaner import cleaner as cleaner_mod
    from compactlog.spark.executor import SparkExecutor
    from compactlog.spark.session import session
    from compactlog.storage.datadir import DataDir
    base = os.path.abspath(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    src = os.path.join(base, "src")
    build(src, args.partitions, args.records, args.keys)
    spark = session()
    warm_workers(spark)
    results = []
    for trial in range(2):   # the first run also warms the workers' code paths
        work = os.path.join(base, f"w{trial}")
        shutil.copytree(src, work)
        os.sync()
        executor = SparkExecutor(spark=spark)
        spans = {}
        run = executor.run

        def timed_run(plans):
            spans["job_start"] = time.perf_counter()
            out = run(plans)
            spans["job_end"] = time.perf_counter()
            return out
        executor.run = timed_run
        t0 = time.perf_counter()
        with DataDir(work, clock=lambda: NOW, writable=True) as dd:
            outs = cleaner_mod.Cleaner(dd, executor).run(NOW)
            t_swapped = time.perf_counter()
        t1 = time.perf_counter()
        cleaned = sum(o.cleaned for o in outs)
        assert cleaned == args.partitions, [o.error or o.status.reason for o in outs if not o.cleaned][:3]
        results.append((t1 - t0, spans["job_start"] - t0, spans["job_end"] - spans["job_start"],
                        t_swapped - spans["job_end"], t1 - t_swapped))
    total, plan_s, job_s, swap_s, close_s = results[-1]
    n = args.partitions
    print(f"{n} partitions cleaned in one run: {total:.2f} s = {1000 * total / n:.1f} ms per partition")
    print(f"  driver before the job (open logs, plan): {1000 * plan_s / n:.2f} ms per partition")
    print(f"  Spark job (every partition's task):      {1000 * job_s / n:.2f} ms per partition")
    print(f"  driver after the job (swap, checkpoint): {1000 * swap_s / n:.2f} ms per partition")
    print(f"  closing the logs (snapshots, fsync):     {1000 * close_s / n:.2f} ms per partition")
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
