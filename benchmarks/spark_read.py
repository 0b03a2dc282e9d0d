"""Reading a Kafka data dir into Spark (the kafka-log data source) against Parquet (a script, not a test).

    .venv/bin/python benchmarks/spark_read.py [--records 5000000] [--keys 1000000] [--master 'local[*]']

Writes the cleaner benchmark's reference workload (benchmarks/clean.py ``write_workload``: 5,000,000
records, 1,000,000 uniform keys, 100-byte values, uncompressed batches of 200, 100 MiB segments),
then in one Spark session, for each source:

  * kafka-log: ``spark.read.format("kafka-log").load(dir).groupBy("key").count()``;
  * parquet:   the same records written as Parquet by Spark from the data source's DataFrame (not
    timed), then ``spark.read.parquet(out).groupBy("key").count()``: the ceiling;

each run to completion with the ``noop`` sink (every group computed, nothing collected), once to
warm up and ``--repeat`` times timed, the two alternating. Prints rows/s of both (best and median)
and the ratio (target: >= 50%).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from clean import TOPIC, write_workload  # noqa: E402


def timed(actions: dict, repeat: int) -> dict:
    """Seconds of each action, ``repeat`` times, the actions interleaved (a shared machine's load
    drifts: alternating keeps the comparison fair); one untimed warm-up run of each first."""
    for action in actions.values():
        action()                              # Python workers, JIT, page cache
    out = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            t0 = time.perf_counter()
            action()
            out[name].append(time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--dir", default=os.path.join("build", "bench-read"))
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-bytes-per-split", type=int, default=None,
                    help="the data source's maxBytesPerSplit (default: its own)")
    ap.add_argument("--option", action="append", default=[],
                    help="another data source option K=V (repeatable), e.g. recordsPerBatch=65536")
    ap.add_argument("--conf", action="append", default=[],
                    help="a Spark conf K=V for the session (repeatable), e.g. "
                         "spark.driver.extraJavaOptions='-XX:+UseSerialGC' (C2 JIT on)")
    ap.add_argument("--reuse", action="store_true", help="keep an existing workload in --dir")
    ap.add_argument("--keep", action="store_true", help="leave the workload and the Parquet copy")
    args = ap.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    base = os.path.abspath(args.dir)
    src = os.path.join(base, "source")
    parquet = os.path.join(base, "parquet")
    if not (args.reuse and os.path.isdir(src)):
        if os.path.exists(base):
            shutil.rmtree(base)
        os.makedirs(base)
        t0 = time.time()
        write_workload(src, args.records, args.keys, args.batch, args.segment_bytes)
        print(f"workload written in {time.time() - t0:.1f} s")
    pdir = os.path.join(src, f"{TOPIC}-0")
    log_bytes = sum(os.path.getsize(os.path.join(pdir, n)) for n in os.listdir(pdir) if n.endswith(".log"))

    from compactlog.spark.session import session
    t0 = time.time()
    spark = session(args.master, conf=dict(kv.split("=", 1) for kv in args.conf))
    print(f"Spark {spark.version} session ({args.master}, {spark.sparkContext.defaultParallelism} cores) "
          f"in {time.time() - t0:.1f} s")

    def kafka_log():
        r = spark.read.format("kafka-log")
        if args.max_bytes_per_split:
            r = r.option("maxBytesPerSplit", str(args.max_bytes_per_split))
        for kv in args.option:
            k, _, v = kv.partition("=")
            r = r.option(k, v)
        return r.load(src)

    rows = kafka_log().count()
    splits = kafka_log().rdd.getNumPartitions()
    print(f"workload: {rows:,} records, {args.keys:,} keys, {log_bytes / 1e6:,.1f} MB of .log, "
          f"{splits} input splits")
    reused = args.reuse and os.path.isdir(parquet) and spark.read.parquet(parquet).count() == rows
    if not reused:
        if os.path.exists(parquet):
            shutil.rmtree(parquet)
        t0 = time.time()
        kafka_log().write.parquet(parquet)
        print(f"parquet copy written in {time.time() - t0:.1f} s (not timed)")
    pq_bytes = sum(os.path.getsize(os.path.join(parquet, n)) for n in os.listdir(parquet) if n.endswith(".parquet"))
    print(f"parquet copy: {pq_bytes / 1e6:,.1f} MB{' (reused)' if reused else ''}")
    assert spark.read.parquet(parquet).count() == rows

    def run(df):
        return lambda: df().groupBy("key").count().write.format("noop").mode("overwrite").save()

    results = {}
    secs = timed({"kafka-log": run(kafka_log), "parquet": run(lambda: spark.read.parquet(parquet))}, args.repeat)
    for name, times in secs.items():
        best, med = min(times), statistics.median(times)
        results[name] = {"seconds": [round(s, 3) for s in times], "best_s": round(best, 3),
                         "rows/s": round(rows / best), "median_rows/s": round(rows / med),
                         "MB/s (.log)": round(log_bytes / 1e6 / best, 1)}
    results["ratio_best"] = round(results["kafka-log"]["rows/s"] / results["parquet"]["rows/s"], 3)
    results["ratio_median"] = round(results["kafka-log"]["median_rows/s"] / results["parquet"]["median_rows/s"], 3)
    print(json.dumps(results, indent=2))
    k, p = results["kafka-log"], results["parquet"]
    ratio = results["ratio_best"]
    print(f"\nkafka-log: {k['rows/s']:,} rows/s ({k['best_s']:.2f} s, {k['MB/s (.log)']} MB/s of segments)")
    print(f"parquet:   {p['rows/s']:,} rows/s ({p['best_s']:.2f} s)")
    print(f"kafka-log / parquet = {ratio:.0%} best, {results['ratio_median']:.0%} median "
          f"(target >= 50%): {'ok' if ratio >= 0.5 else 'BELOW TARGET'}")
    if not args.keep:
        shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
