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

4. ``--protocols``: the classic protocol (librdkafka's default eager range assignor) against
   KIP-848's consumer protocol (``group.protocol=consumer``, the broker's uniform assignor), in the
   same run on the same broker: N members, each a process polling on its own as an application
   does, read a topic a producer process writes ``--rate`` records/s to; one more member joins;
   the time from its subscribe() until every member owns its share (settle), and the records all
   members read meanwhile (and their share of what was written meanwhile). Then the
   coordinator's CPU per heartbeat, sans IO (the shard alone, 30 members in a stable group, and
   a 31st joining): ConsumerGroupHeartbeat, and the classic Heartbeat, JoinGroup and SyncGroup.
   (Members polled in turn from one thread beside a producer thread writing as fast as it could
   flooded the broker, 1,100 Produce requests/s: 20 or 30 classic members never settled.)

    .venv/bin/python benchmarks/groups.py [--records N] [--commits N]
    .venv/bin/python benchmarks/groups.py --protocols [--members N] [--rounds N] [--rate N]
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


# A member of the settle measure: a real application, one process with its own poll loop, as
# librdkafka expects (an eager classic member only revokes and rejoins when its application polls).
# It reports when it subscribed, every change of its assignment and its records read so far; its
# parent closes stdin to make it leave the group (close(), as an application shutting down does).
SETTLE_MEMBER = r"""
import sys, threading, time
from confluent_kafka import Consumer
bootstrap, group, topic, protocol, session_ms, heartbeat_ms = sys.argv[1:7]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
        "enable.auto.commit": False, "group.protocol": protocol}
if protocol == "classic":
    conf.update({"session.timeout.ms": int(session_ms), "heartbeat.interval.ms": int(heartbeat_ms)})
c = Consumer(conf)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
c.subscribe([topic])
print("subscribed", time.time(), flush=True)
owned, n, reported = -1, 0, 0.0
while not stop.is_set():
    for m in c.consume(500, 0.05):
        if m.error() is None:
            n += 1
    now = time.time()
    a = len(c.assignment())
    if a != owned:
        owned = a
        print("owned", now, a, flush=True)
    if now - reported >= 0.1:
        print("count", now, n, flush=True)
        reported = now
c.close()
"""

# The topic's writer: its own process, at a fixed rate, so that the load on the broker is the
# same for both protocols and every round (a producer thread beside the members would write as
# fast as the GIL lets it: 1,100 Produce requests/s with members polled from one thread).
FEEDER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, topic, rate = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
tick, i, nxt = 0.02, 0, time.monotonic()
per_tick = max(1, round(rate * tick))
while True:
    for _ in range(per_tick):
        try:
            p.produce(topic, key=b"%d" % i, value=b"x" * 100)
        except BufferError:
            p.poll(0.01)
        i += 1
    p.poll(0)
    nxt += tick
    time.sleep(max(0.0, nxt - time.monotonic()))
"""


class SettleMember:
    """One SETTLE_MEMBER process and what it reported."""

    def __init__(self, bootstrap, group, topic, protocol, log_path):
        # librdkafka's own log lines (request timeouts, errors) kept for a failed round
        self.log_path = log_path
        with open(log_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", SETTLE_MEMBER, bootstrap, group, topic, protocol,
                                          str(SESSION_MS), "500"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        self.subscribed_at: float | None = None
        self.owned, self.owned_at = 0, 0.0
        self.counts: list[tuple[float, int]] = [(0.0, 0)]
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            kind, at, value = (line.split() + ["", "", ""])[:3]
            with self.lock:
                if kind == "subscribed":
                    self.subscribed_at = float(at)
                elif kind == "owned":
                    self.owned, self.owned_at = int(value), float(at)
                elif kind == "count":
                    self.counts.append((float(at), int(value)))

    def read_at(self, t: float) -> int:
        """Records read by time ``t`` (the last report at or before it)."""
        with self.lock:
            return max((n for at, n in self.counts if at <= t), default=0)

    def leave(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(30)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(10)


def settle(bootstrap: str, protocol: str, members: int, partitions: int, rate: int, log_dir: str) -> dict:
    """``members`` consumers of one protocol, each a process, own a topic a producer writes
    ``rate`` records/s to; one more joins: seconds from its subscribe() until every member owns
    its share, and the records all members read meanwhile."""
    tag = f"{protocol}-{time.monotonic_ns()}"
    topic, group = f"bench-settle-{tag}", f"bench-settle-{tag}"
    create_topic(bootstrap, topic, partitions)
    feeder = subprocess.Popen([sys.executable, "-c", FEEDER, bootstrap, topic, str(rate)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cs: list[SettleMember] = []
    try:
        def settled(n) -> float | None:
            """When the last of ``n`` members reported its share (None: not settled)."""
            views = [(m.owned, m.owned_at) for m in cs]
            owned = [o for o, _ in views]
            if len(owned) == n and sum(owned) == partitions and min(owned) >= partitions // n:
                return max(at for _, at in views)
            return None

        def wait(n, limit):
            deadline = time.monotonic() + limit
            while (at := settled(n)) is None:
                if time.monotonic() > deadline or any(m.proc.poll() is not None for m in cs):
                    raise RuntimeError(f"{protocol}: {n} members did not settle within {limit} s "
                                       f"(owned {[m.owned for m in cs]}; the members' logs: {log_dir})")
                time.sleep(0.02)
            return at
        os.makedirs(log_dir, exist_ok=True)

        def member():
            return SettleMember(bootstrap, group, topic, protocol, os.path.join(log_dir, f"{tag}-{len(cs)}.log"))
        for _ in range(members):
            cs.append(member())
        wait(members, 300)
        time.sleep(2)               # a steady group, reading, before the join
        joining = member()
        cs.append(joining)
        settled_at = wait(members + 1, 300)
        started = joining.subscribed_at
        time.sleep(0.3)             # the members' counts up to settled_at are reported
        during = sum(m.read_at(settled_at) - m.read_at(started) for m in cs)
        return {"settle_s": settled_at - started, "records": during,
                "share": during / max(1.0, rate * (settled_at - started))}
    finally:
        feeder.kill()
        feeder.wait(10)
        for m in cs:
            m.leave()


def heartbeat_cpu(members: int = 30, rounds: int = 200) -> dict:
    """CPU seconds per ConsumerGroupHeartbeat in the coordinator shard (no sockets, no log)."""
    import uuid
    from compactlog.coordinator.group.api_data import HeartbeatRequest
    from compactlog.coordinator.group.config import GroupConfig
    from compactlog.coordinator.group.consumer.model import MetadataImage, TopicImage
    from compactlog.coordinator.group.shard import GroupCoordinatorShard
    now = [0]
    shard = GroupCoordinatorShard(GroupConfig(), clock=lambda: now[0])
    topics = [TopicImage(uuid.uuid4(), f"t{i}", 16) for i in range(4)]
    image = MetadataImage(topics, 1)
    shard.consumer.image = lambda: image

    def run(outcome):
        for rec in outcome.records:
            shard.replay(rec)
        if outcome.on_written:
            outcome.on_written(None)
        for o in shard.take_pending():
            run(o)

    def hb(mid, epoch, owned=None):
        req = HeartbeatRequest("g", mid, epoch, rebalance_timeout_ms=300000 if epoch == 0 else -1,
                               subscribed_topic_names=[t.name for t in topics] if epoch == 0 else None,
                               topic_partitions=[] if epoch == 0 else owned, client_id="c", client_host="/h")
        outcome, resp = shard.consumer_group_heartbeat(req)
        run(outcome)
        return resp
    ids = [f"m{i}" for i in range(members)]
    started = time.process_time()
    joins = 0
    for mid in ids:
        hb(mid, 0)
        joins += 1
    join_s = time.process_time() - started

    def converge():
        n = 0
        for _ in range(6):
            for mid in ids:
                m = shard.consumer.groups["g"].members[mid]
                hb(mid, m.member_epoch, [(t, sorted(ps)) for t, ps in m.assigned_partitions.items()])
                n += 1
        return n
    converge()
    g = shard.consumer.groups["g"]
    assert g.state.value == "Stable", g.state
    started = time.process_time()
    n = 0
    for _ in range(rounds):
        for mid in ids:
            hb(mid, g.members[mid].member_epoch)
            n += 1
    steady = (time.process_time() - started) / n
    started = time.process_time()
    hb("late", 0)
    ids.append("late")
    n = converge()
    rebalance = (time.process_time() - started) / (n + 1)
    return {"steady_us": steady * 1e6, "join_us": join_s / joins * 1e6, "rebalance_us": rebalance * 1e6}


def classic_heartbeat_cpu(members: int = 30, rounds: int = 200) -> dict:
    """CPU seconds per classic Heartbeat in the coordinator shard (no sockets, no log), in a stable
    group of ``members`` subscribed to 4 topics, and per request (JoinGroup, SyncGroup) of the
    rebalance one more member's join starts: the counterpart of ``heartbeat_cpu``."""
    from compactlog.coordinator.group.api_data import JoinRequest, SyncRequest
    from compactlog.coordinator.group.config import GroupConfig
    from compactlog.coordinator.group.shard import GroupCoordinatorShard
    from compactlog.record import consumer_offsets as R
    now = [0]
    shard = GroupCoordinatorShard(GroupConfig(initial_rebalance_delay_ms=0), clock=lambda: now[0])
    sub = R.encode_subscription([f"t{i}" for i in range(4)])

    def run(outcome):
        if outcome.on_written:
            outcome.on_written(None)
        for o in shard.take_pending():
            run(o)

    def join(mid):
        outcome, fut = shard.join_group(JoinRequest("g", mid, "consumer", [("range", sub)], SESSION_MS, 300000,
                                                    client_id="c", client_host="/h"))
        run(outcome)
        return fut

    def sync(mid, gen, assignments=None):
        outcome, fut = shard.sync_group(SyncRequest("g", gen, mid, assignments=assignments or {}))
        run(outcome)
        return fut

    def rebalance(ids):
        """Every member rejoins, the leader assigns, all sync: the number of requests."""
        futs = [join(mid) for mid in ids]
        for o in shard.run_timers(now[0]):
            run(o)
        g = shard.groups["g"]
        gen = g.generation_id
        assert all(f.done() and f.result().generation_id == gen for f in futs), "the join did not complete"
        parts = [(f"t{t}", p) for t in range(4) for p in range(16)]
        plan = {mid: R.encode_assignment([(t, [p]) for t, p in parts[i::len(ids)]]) for i, mid in enumerate(ids)}
        sync(g.leader_id, gen, plan)
        for mid in ids:
            if mid != g.leader_id:
                sync(mid, gen)
        assert g.state == "Stable", g.state
        return 2 * len(ids)

    ids = []
    for _ in range(members):
        ids.append(join("").result().member_id)      # MEMBER_ID_REQUIRED: the id to rejoin with
    rebalance(ids)
    gen = shard.groups["g"].generation_id
    started = time.process_time()
    n = 0
    for _ in range(rounds):
        for mid in ids:
            outcome, code = shard.heartbeat("g", mid, None, gen)
            n += 1
    assert code == 0 and not outcome.records, code
    steady = (time.process_time() - started) / n
    started = time.process_time()
    late = join("").result().member_id
    ids.append(late)
    n = 1 + rebalance(ids)
    return {"steady_us": steady * 1e6, "rebalance_us": (time.process_time() - started) / n * 1e6}


def protocols(members: int, rounds: int, rate: int) -> None:
    root = tempfile.mkdtemp(prefix="compactlog-groups-bench-")
    try:
        overrides = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
                     "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
                     "group.consumer.session.timeout.ms": str(SESSION_MS),
                     "group.consumer.min.session.timeout.ms": str(SESSION_MS)}
        with Broker(os.path.join(root, "data"), overrides) as b:
            results = {"classic": [], "consumer": []}
            for _ in range(rounds):
                for proto in ("classic", "consumer"):          # alternating, on the same broker
                    results[proto].append(settle(b.bootstrap, proto, members, 2 * (members + 1), rate,
                                                 os.path.join(root, "members")))
        for proto, rs in results.items():
            ss = sorted(r["settle_s"] for r in rs)
            rec = sorted(r["records"] for r in rs)
            share = sorted(r["share"] for r in rs)
            print(f"{proto:8s}: {members} members + 1 joining (one process each), {2 * (members + 1)} "
                  f"partitions, {rate:,} records/s written: settled in "
                  f"{ss[len(ss) // 2]:.2f} s (median of {len(rs)}: {', '.join(f'{x:.2f}' for x in ss)}); records "
                  f"consumed meanwhile {rec[len(rec) // 2]:,} (median; {share[len(share) // 2]:.0%} of what was "
                  f"written meanwhile)")
    except BaseException:
        print(f"kept for a look: {root} (the broker's and the members' logs)", file=sys.stderr)
        raise
    shutil.rmtree(root, ignore_errors=True)
    h = heartbeat_cpu()
    print(f"coordinator CPU per ConsumerGroupHeartbeat (shard alone, 30 members, 4 topics x 16 partitions): "
          f"steady {h['steady_us']:.0f} us, join {h['join_us']:.0f} us, during a rebalance {h['rebalance_us']:.0f} us")
    c = classic_heartbeat_cpu()
    print(f"coordinator CPU per classic Heartbeat (shard alone, 30 members, 4 topics x 16 partitions): "
          f"steady {c['steady_us']:.0f} us; per JoinGroup/SyncGroup of the rebalance a 31st member starts "
          f"{c['rebalance_us']:.0f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=100_000)
    ap.add_argument("--protocols", action="store_true", help="classic against the consumer protocol (KIP-848)")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000, help="records/s written to the topic the members read "
                    "during --protocols")
    args = ap.parse_args()
    if args.protocols:
        protocols(args.members, args.rounds, args.rate)
        return
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
