"""Benchmark of transactions on ``compactlog serve`` (a script, not a test).

A confluent-kafka (librdkafka) transactional producer writes N records (16-byte keys, 100-byte
values) into 1 and 4 partitions in transactions of 10,000 and of 100 records, beside a
non-transactional idempotent producer writing the same records in the same run (streamed, and
flushed every 10,000 records as the transactional runs flush before each commit), against a broker
the script starts (loopback, free port, stopped by its pid at the end). For each: records/s,
transactions/s, commit latency p50/p99 (``commit_transaction()`` after a ``flush()``, so that
it times EndTxn alone: the coordinator's PrepareCommit, the markers, CompleteCommit), and the
broker's CPU seconds per million records (utime + stime from /proc/<pid>/stat before and after).
A last run times single-record transactions with nothing else going on (the commit's cost alone).

Every run is checked: the topic holds every record, and the last stable offset (ListOffsets
read_committed) is the log end: no transaction left hanging.

On this 2-core machine the client competes with the broker for the cores: librdkafka's idempotent
and transactional producers wake their broker thread for nearly every message (its statistics
count ~100,000 wakeups per 300,000 records against ~200 for acks=all without idempotence), so
the client's CPU, not the broker's, often bounds these rates; the broker's CPU per million
records is the figure that belongs to compactlog.

    .venv/bin/python benchmarks/transactions.py [--records N] [--small-records N] [--repeat R]
    .venv/bin/python benchmarks/transactions.py --txn-size 1 [--commits N] [--trees before=/work/main,after=.]
    ... --trees before=/work/main,after=.,off=/work/main --off off   (off: metrics.listener empty)
    ... --trees venv=.,pgo=. --python pgo=/path/to/venv/bin/python   (the same tree on another interpreter)

``--txn-size 1`` (or 100) runs only transactions of that size (``--commits`` of them, 1
partition), the broker's CPU per transaction being the figure (issue 28: under 0.5 ms for one
record); ``--producers N`` has N transactional producers (threads, one transactional id each)
share the ``--commits`` at once, into the same partition: the broker's CPU per transaction when
requests from several clients keep its thread busy, rather than idle between one client's
requests; ``--trees`` starts one broker per checkout (PYTHONPATH) and runs the same work on each in
turn, ``--repeat`` times, alternating the order: same-run ratios on a shared machine.

Targets (issue 16): transactions of 10,000 records reach at least 70% of the idempotent
producer's records/s; a commit under 10 ms at p99 with no other load. The machine is shared:
--repeat R runs everything R times and prints the median with the range.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from broker_support import Broker  # noqa: E402

KEY_BYTES = 16
VALUE_BYTES = 100
TARGET_RATIO = 0.70
TARGET_COMMIT_P99_MS = 10.0
PRODUCER = {"linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000,
            "queue.buffering.max.kbytes": 1048576}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def records(n: int) -> tuple[list[bytes], bytes]:
    """n distinct 16-byte keys and one 100-byte value (the producer copies it per record)."""
    return [b"%016d" % i for i in range(n)], b"v" * VALUE_BYTES


def produce_all(p, topic: str, keys: list[bytes], value: bytes, start: int, end: int) -> None:
    for i in range(start, end):
        while True:
            try:
                p.produce(topic, value, keys[i])
                break
            except BufferError:
                p.poll(0.005)


def run_idempotent(bootstrap: str, topic: str, keys, value, flush_every: int | None = None) -> dict:
    """The baseline: the same records through a non-transactional idempotent producer, streamed
    (``flush_every`` None) or flushed every ``flush_every`` records as the transactional runs
    flush before each commit (so that the two differ by the transaction alone)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER})
    n = len(keys)
    step = flush_every or n
    t0 = time.perf_counter()
    for start in range(0, n, step):
        produce_all(p, topic, keys, value, start, min(n, start + step))
        if p.flush(300):
            raise RuntimeError("the idempotent producer could not deliver every record")
    return {"wall": time.perf_counter() - t0, "txns": 0, "commits": []}


def run_transactional(bootstrap: str, topic: str, keys, value, txn_size: int, tid: str) -> dict:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **PRODUCER})
    p.init_transactions(30)
    commits = []
    t0 = time.perf_counter()
    n = len(keys)
    for start in range(0, n, txn_size):
        p.begin_transaction()
        produce_all(p, topic, keys, value, start, min(n, start + txn_size))
        if p.flush(300):
            raise RuntimeError("the transactional producer could not deliver every record")
        c0 = time.perf_counter()
        p.commit_transaction(60)
        commits.append(time.perf_counter() - c0)
    wall = time.perf_counter() - t0
    return {"wall": wall, "txns": len(commits), "commits": commits}


def run_concurrently(bootstrap: str, topic: str, keys, value, txn_size: int, tid: str, producers: int) -> dict:
    """``run_transactional`` in ``producers`` threads at once, each with its own transactional id
    and a share of ``keys`` (librdkafka's blocking calls release the GIL)."""
    if producers == 1:
        return run_transactional(bootstrap, topic, keys, value, txn_size, tid)
    import concurrent.futures
    share = -(-len(keys) // producers)
    with concurrent.futures.ThreadPoolExecutor(producers) as pool:
        t0 = time.perf_counter()
        runs = list(pool.map(lambda i: run_transactional(bootstrap, topic, keys[i * share:(i + 1) * share], value,
                                                         txn_size, f"{tid}-{i}"), range(producers)))
        wall = time.perf_counter() - t0
    return {"wall": wall, "txns": sum(r["txns"] for r in runs), "commits": [c for r in runs for c in r["commits"]]}


def check_topic(bootstrap: str, topic: str, partitions: int, n: int, txns: int) -> None:
    """Every record stored (log end = the records plus one marker per transaction and partition
    it touched, at most), and the last stable offset is the log end: no transaction hanging."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ends = {}
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        asked = {TopicPartition(topic, part): OffsetSpec.latest() for part in range(partitions)}
        answers = admin.list_offsets(asked, isolation_level=level, request_timeout=30)
        ends[level] = sorted((tp.partition, f.result(30).offset) for tp, f in answers.items())
    total = sum(o for _, o in ends[IsolationLevel.READ_UNCOMMITTED])
    if not n <= total <= n + txns * partitions:
        raise RuntimeError(f"{topic}: log ends {ends[IsolationLevel.READ_UNCOMMITTED]} for {n} records "
                           f"in {txns} transactions")
    if ends[IsolationLevel.READ_COMMITTED] != ends[IsolationLevel.READ_UNCOMMITTED]:
        raise RuntimeError(f"{topic}: last stable offsets {ends[IsolationLevel.READ_COMMITTED]} behind the "
                           f"log ends {ends[IsolationLevel.READ_UNCOMMITTED]}")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def one_round(broker: Broker, rnd: int, args) -> list[dict]:
    rows = []
    big_keys, value = records(args.records)
    small_keys, _ = records(args.small_records)
    for parts in args.partitions:
        for mode, txn_size, keys in (("idempotent", 0, big_keys), ("idem flush/1e4", -10000, big_keys),
                                     ("txn 10000", 10000, big_keys), ("txn 100", 100, small_keys)):
            topic = f"bench-{rnd}-{parts}-{mode.replace(' ', '').replace('/', '')}"
            create_topic(broker.bootstrap, topic, parts)
            cpu0 = cpu_seconds(broker.pid)
            if txn_size > 0:
                r = run_transactional(broker.bootstrap, topic, keys, value, txn_size, f"bench-{topic}")
            else:
                r = run_idempotent(broker.bootstrap, topic, keys, value, -txn_size or None)
            cpu = cpu_seconds(broker.pid) - cpu0
            check_topic(broker.bootstrap, topic, parts, len(keys), r["txns"])
            row = {"what": mode, "partitions": parts, "records": len(keys), "rps": len(keys) / r["wall"],
                   "tps": r["txns"] / r["wall"] if r["txns"] else None,
                   "p50": 1000 * percentile(r["commits"], 0.50) if r["commits"] else None,
                   "p99": 1000 * percentile(r["commits"], 0.99) if r["commits"] else None,
                   "cpu_per_m": cpu / (len(keys) / 1e6)}
            rows.append(row)
            print(fmt(row), flush=True)
    # the commit alone: single-record transactions, nothing else running
    topic = f"bench-{rnd}-commit"
    create_topic(broker.bootstrap, topic, 1)
    keys, _ = records(args.commits)
    cpu0 = cpu_seconds(broker.pid)
    r = run_transactional(broker.bootstrap, topic, keys, value, 1, f"bench-{topic}")
    cpu = cpu_seconds(broker.pid) - cpu0
    check_topic(broker.bootstrap, topic, 1, len(keys), r["txns"])
    row = {"what": "txn 1 (idle)", "partitions": 1, "records": len(keys), "rps": len(keys) / r["wall"],
           "tps": r["txns"] / r["wall"], "p50": 1000 * percentile(r["commits"], 0.5),
           "p99": 1000 * percentile(r["commits"], 0.99), "cpu_per_m": cpu / (len(keys) / 1e6)}
    rows.append(row)
    print(fmt(row), flush=True)
    return rows


def fmt(row: dict, spread: dict | None = None) -> str:
    def num(v, f):
        return "-" if v is None else format(v, f)
    s = (f"{row['what']:<14} {row['partitions']}p {row['records']:>9,} rec: {num(row['rps'], '>9,.0f')} rec/s  "
         f"{num(row['tps'], '>7,.1f')} txn/s  commit p50 {num(row['p50'], '6.2f')} ms p99 "
         f"{num(row['p99'], '6.2f')} ms  broker CPU {row['cpu_per_m']:5.2f} s/M")
    if spread:
        s += "  (range: " + ", ".join(f"{k} {lo:,.{d}f}-{hi:,.{d}f}" for k, (lo, hi, d) in spread.items()) + ")"
    return s


def summarize(rounds: list[list[dict]]) -> None:
    print("\nmedians over", len(rounds), "round(s), with the range:")
    medians = {}
    for i, first in enumerate(rounds[0]):
        same = [r[i] for r in rounds]
        row = dict(first)
        spread = {}
        for k, d in (("rps", 0), ("tps", 1), ("p50", 2), ("p99", 2), ("cpu_per_m", 2)):
            vals = [r[k] for r in same if r[k] is not None]
            row[k] = statistics.median(vals) if vals else None
            if vals and len(vals) > 1:
                spread[k] = (min(vals), max(vals), d)
        medians[(row["what"], row["partitions"])] = row
        print(fmt(row, spread))
    print()
    for parts in sorted({k[1] for k in medians if k[0] == "idempotent"}):
        idem, big = medians[("idempotent", parts)], medians[("txn 10000", parts)]
        alike = medians[("idem flush/1e4", parts)]
        ratio = big["rps"] / idem["rps"]
        print(f"{parts} partition(s): transactions of 10,000 at {100 * ratio:.0f}% of the idempotent "
              f"producer's records/s (target >= {100 * TARGET_RATIO:.0f}%): "
              f"{'met' if ratio >= TARGET_RATIO else 'MISSED'}; {100 * big['rps'] / alike['rps']:.0f}% of "
              f"the idempotent producer flushed every 10,000")
    idle = medians[("txn 1 (idle)", 1)]
    print(f"commit p99 with no other load: {idle['p99']:.2f} ms (target < {TARGET_COMMIT_P99_MS:.0f} ms): "
          f"{'met' if idle['p99'] < TARGET_COMMIT_P99_MS else 'MISSED'}")


def txn_size_only(args) -> None:
    """Transactions of ``--txn-size`` records, ``--commits`` of them, on each tree's broker in turn."""
    trees = args.trees or {"this": None}
    keys, value = records(args.commits * args.txn_size)
    samples: dict[str, list[tuple[float, float, float]]] = {t: [] for t in trees}
    work = tempfile.mkdtemp(prefix="compactlog-txn-bench-")
    brokers = {}
    try:
        for name, path in trees.items():
            overrides = {"num.partitions": "1", "log.cleaner.enable": "false"}
            if name in args.off:        # no BrokerMetrics at all: what the metrics cost
                overrides["metrics.listener"] = ""
            env = {"PYTHONPATH": os.path.abspath(path)} if path is not None else None
            brokers[name] = Broker(os.path.join(work, name), overrides, env=env,
                                   python=args.python.get(name)).start()
        order = list(trees)
        for rnd in range(args.repeat):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                broker = brokers[name]
                topic = f"size{args.txn_size}-{rnd}"
                create_topic(broker.bootstrap, topic, 1)
                # a first transaction outside the measure: the producer id, the coordinator's topic
                run_transactional(broker.bootstrap, topic, keys[:args.txn_size], value, args.txn_size,
                                  f"warm-{topic}")
                cpu0 = cpu_seconds(broker.pid)
                r = run_concurrently(broker.bootstrap, topic, keys, value, args.txn_size, f"bench-{topic}",
                                     args.producers)
                cpu = cpu_seconds(broker.pid) - cpu0
                check_topic(broker.bootstrap, topic, 1, len(keys) + args.txn_size, r["txns"] + 1)
                ms = 1000 * cpu / r["txns"]
                samples[name].append((ms, len(keys) / r["wall"], 1000 * percentile(r["commits"], 0.99)))
                print(f"{name:<8} round {rnd + 1}: {r['txns']:,} transactions of {args.txn_size}"
                      f"{f' from {args.producers} producers at once' if args.producers > 1 else ''}: broker CPU "
                      f"{ms:.3f} ms per transaction ({cpu / (len(keys) / 1e6):.2f} s per M records), "
                      f"{len(keys) / r['wall']:,.0f} rec/s, commit p99 {samples[name][-1][2]:.2f} ms", flush=True)
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\nmedians:")
    med = {}
    for name, rows in samples.items():
        med[name] = statistics.median(r[0] for r in rows)
        print(f"{name:<8} broker CPU {med[name]:.3f} ms per transaction of {args.txn_size} "
              f"(range {min(r[0] for r in rows):.3f}-{max(r[0] for r in rows):.3f}), "
              f"{statistics.median(r[1] for r in rows):,.0f} rec/s")
    if len(med) == 2:
        (a, x), (b, y) = med.items()
        print(f"{b} / {a}: {y / x:.2f} of the broker CPU per transaction")
        # each round's two runs back to back: their ratio cancels what the machine did meanwhile
        paired = sorted(p[0] / q[0] for p, q in zip(samples[b], samples[a]))
        print(f"{b} / {a} paired by round: median {statistics.median(paired):.2f} "
              f"(range {paired[0]:.2f}-{paired[-1]:.2f}, {len(paired)} rounds)")
    for off in sorted(args.off & set(med)):
        for name in med:
            if name not in args.off:
                print(f"{name} over {off} (metrics off): {1000 * (med[name] - med[off]):.1f} µs per transaction")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000, help="records per idempotent / 10,000-record run")
    ap.add_argument("--small-records", type=int, default=100_000, help="records per 100-record-transaction run")
    ap.add_argument("--commits", type=int, default=1000, help="single-record transactions timed idle")
    ap.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the data dir (printed)")
    ap.add_argument("--txn-size", type=int, default=None,
                    help="only transactions of this many records (1 or 100), --commits of them")
    ap.add_argument("--producers", type=int, default=1,
                    help="with --txn-size: this many transactional producers at once, sharing --commits")
    ap.add_argument("--trees", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), default=None,
                    help="with --txn-size: name=checkout,... one broker per checkout, same run")
    ap.add_argument("--off", type=lambda s: set(s.split(",")), default=set(),
                    help="with --trees: the names whose broker runs with metrics.listener= (no metrics)")
    ap.add_argument("--python", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), default={},
                    help="with --trees: name=interpreter,... whose broker runs on that Python (a venv with "
                         "compactlog's dependencies; the tree still comes from --trees)")
    args = ap.parse_args()
    if args.txn_size is not None:
        txn_size_only(args)
        return
    if args.trees:
        ap.error("--trees needs --txn-size")
    if args.producers != 1:
        ap.error("--producers needs --txn-size")
    work = tempfile.mkdtemp(prefix="compactlog-txn-bench-")
    print(f"compactlog serve transactions benchmark: {args.records:,} records per run "
          f"({args.small_records:,} in transactions of 100; {KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values), "
          f"confluent-kafka, data dir {work}")
    broker = Broker(os.path.join(work, "data"), {"num.partitions": "1", "log.cleaner.enable": "false"}).start()
    rounds = []
    try:
        for rnd in range(args.repeat):
            print(f"-- round {rnd + 1}")
            rounds.append(one_round(broker, rnd, args))
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    summarize(rounds)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
