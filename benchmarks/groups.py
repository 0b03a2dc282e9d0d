"""Benchmark of consumer groups on ``compactlog serve`` (a script, not a test).

1. A group of 3 confluent-kafka consumers (one process each) reads 1,000,000 records (16-byte
   keys, 100-byte values) from a 6-partition topic, each committing its positions synchronously
   every 1,000 records: records/s and commits/s over the whole read.
2. One member of the (then idle) group is killed with SIGKILL: the time until the two others own
   all 6 partitions (session expiry, then the rebalance), at session.timeout.ms 6000 and
   heartbeat.interval.ms 1000.
3. One consumer commits 100,000 times (4 partitions, asynchronous commits, as fast as the broker
   answers); then ``__consumer_offsets`` (its group's partition) is cleaned by ``compactlog clean``:
   its size before and after, the commit rate, and a check that the broker loads the last offsets.

    .venv/bin/python benchmarks/groups.py [--records N] [--commits N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from broker_support import KCAT, Broker, run_cli  # noqa: E402
from groups_support import create_topic  # noqa: E402

TOPIC = "bench-groups"
PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 1000

MEMBER = r"""
import sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, every = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": %d, "heartbeat.interval.ms": %d,
              "fetch.max.bytes": 4194304})
def on_assign(c, parts):
    print("assign", time.time(), ",".join(str(p.partition) for p in parts), flush=True)
c.subscribe([topic], on_assign=on_assign)
n = since = commits = 0
last_report = time.time()
while True:
    msgs = c.consume(1000, 0.2)
    for m in msgs:
        if m.error() is None:
            n += 1
            since += 1
            if since >= every:
                c.commit(asynchronous=False)
                commits += 1
                since = 0
    if time.time() - last_report > 0.2:
        print("progress", time.time(), n, commits, flush=True)
        last_report = time.time()
""" % (SESSION_MS, HEARTBEAT_MS)


class Member:
    def __init__(self, bootstrap, group, every):
        self.proc = subprocess.Popen([sys.executable, "-c", MEMBER, bootstrap, group, TOPIC, str(every)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.records = self.commits = 0
        self.first_record_at = None
        self.assignment: set[int] = set()
        self.assigned_at = 0.0
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split()
            with self.lock:
                if parts[0] == "assign":
                    self.assignment = {int(p) for p in parts[2].split(",")} if len(parts) > 2 else set()
                    self.assigned_at = float(parts[1])
                elif parts[0] == "progress":
                    if self.first_record_at is None and int(parts[2]) > 0:
                        self.first_record_at = float(parts[1])
                    self.records, self.commits = int(parts[2]), int(parts[3])

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)


def produce(bootstrap: str, n: int) -> float:
    create_topic(bootstrap, TOPIC, PARTITIONS)
    started = time.monotonic()
    if KCAT:
        with tempfile.NamedTemporaryFile("wb", delete=False) as f:
            for i in range(n):
                f.write(b"%016d:%s\n" % (i, b"x" * 100))
            path = f.name
        with open(path, "rb") as src:
            subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", TOPIC, "-K:", "-X", "linger.ms=5"],
                           stdin=src, check=True, timeout=600)
        os.unlink(path)
    else:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000})
        for i in range(n):
            while True:
                try:
                    p.produce(TOPIC, key=b"%016d" % i, value=b"x" * 100)
                    break
                except BufferError:
                    p.poll(0.05)
        p.flush(120)
    return time.monotonic() - started


def group_read(bootstrap: str, n: int) -> dict:
    members = [Member(bootstrap, "bench-group", 1000) for _ in range(3)]
    deadline = time.monotonic() + 900
    while sum(m.records for m in members) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {sum(m.records for m in members)} of {n} records read")
        time.sleep(0.05)
    done = time.time()
    start = min(m.first_record_at for m in members if m.first_record_at is not None)
    elapsed = done - start
    result = {"records": sum(m.records for m in members), "commits": sum(m.commits for m in members),
              "elapsed": elapsed, "per_member": [m.records for m in members]}
    # the kill: the group is idle (everything read); one member dies
    wait = time.monotonic() + 30
    while not all(len(m.assignment) == 2 for m in members):
        if time.monotonic() > wait:
            raise RuntimeError(f"assignments {[sorted(m.assignment) for m in members]}")
        time.sleep(0.05)
    victim, survivors = members[0], members[1:]
    killed_at = time.time()
    victim.kill()
    wait = time.monotonic() + 60
    while not (set().union(*(m.assignment for m in survivors)) == set(range(PARTITIONS))
               and all(m.assigned_at > killed_at for m in survivors)):
        if time.monotonic() > wait:
            raise RuntimeError("the survivors never owned every partition")
        time.sleep(0.01)
    result["kill_to_owned"] = max(m.assigned_at for m in survivors) - killed_at
    for m in survivors:
        m.kill(signal.SIGTERM)
    return result


def commit_storm(data_dir: str, commits: int) -> dict:
    overrides = {"group.initial.rebalance.delay.ms": "0", "log.cleaner.enable": "false",
                 "offsets.topic.segment.bytes": str(1 << 20)}
    from compactlog.record.consumer_offsets import partition_for
    part = partition_for("bench-commits", 50)
    pdir = os.path.join(data_dir, f"__consumer_offsets-{part}")
    with Broker(data_dir, overrides) as b:
        from confluent_kafka import Consumer, TopicPartition
        create_topic(b.bootstrap, "bench-commits", 4)
        done = [0]

        def on_commit(err, parts):
            done[0] += 1
        c2 = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "bench-commits",
                       "enable.auto.commit": False, "on_commit": on_commit})
        c2.assign([TopicPartition("bench-commits", p) for p in range(4)])
        started = time.monotonic()
        for i in range(1, commits + 1):
            c2.commit(offsets=[TopicPartition("bench-commits", i % 4, i)], asynchronous=True)
            if i - done[0] > 500:
                c2.poll(0)
                while i - done[0] > 500:
                    c2.poll(0.01)
        while done[0] < commits:
            c2.poll(0.05)
        elapsed = time.monotonic() - started
        c2.close()
    before = _size(pdir)
    r = run_cli(data_dir, "clean", "--topic", "__consumer_offsets", "--partition", str(part), "--roll", "--force",
                "--engine", "local", timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode())
    after = _size(pdir)
    with Broker(data_dir, overrides) as b:
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "bench-commits", [TopicPartition("bench-commits", p) for p in range(4)])])["bench-commits"].result(30)
        loaded = {tp.partition: tp.offset for tp in res.topic_partitions}
    expected = {p: max(i for i in range(commits - 3, commits + 1) if i % 4 == p) for p in range(4)}
    return {"commits": commits, "elapsed": elapsed, "before": before, "after": after,
            "loaded_ok": loaded == expected}


def _size(pdir: str) -> int:
    return sum(os.path.getsize(os.path.join(pdir, f)) for f in os.listdir(pdir) if f.endswith(".log"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=100_000)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="compactlog-groups-bench-")
    try:
        data = os.path.join(root, "data")
        # Kafka's default initial rebalance delay (3 s): the three members, started together,
        # join one rebalance and each reads its own 2 partitions from the start
        with Broker(data, {"group.initial.rebalance.delay.ms": "3000"}) as b:
            produce_s = produce(b.bootstrap, args.records)
            print(f"produced {args.records:,} records to {PARTITIONS} partitions in {produce_s:.1f} s "
                  f"({'kcat' if KCAT else 'confluent-kafka'})")
            r = group_read(b.bootstrap, args.records)
        print(f"group of 3 (confluent-kafka, one process each, commit every 1,000 records): "
              f"{r['records']:,} records in {r['elapsed']:.1f} s = {r['records'] / r['elapsed']:,.0f} records/s; "
              f"{r['commits']:,} commits = {r['commits'] / r['elapsed']:,.0f} commits/s; per member "
              f"{r['per_member']}")
        print(f"member killed (SIGKILL, session.timeout.ms={SESSION_MS}, heartbeat.interval.ms="
              f"{HEARTBEAT_MS}): the two others owned its partitions {r['kill_to_owned']:.2f} s later")
        c = commit_storm(os.path.join(root, "commits"), args.commits)
        print(f"{c['commits']:,} commits from one consumer in {c['elapsed']:.1f} s = "
              f"{c['commits'] / c['elapsed']:,.0f} commits/s; __consumer_offsets partition "
              f"{c['before']:,} bytes before the clean, {c['after']:,} after; last offsets loaded after "
              f"a restart: {'yes' if c['loaded_ok'] else 'NO'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
