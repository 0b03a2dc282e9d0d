"""Classic consumer groups of confluent-kafka consumers as applications run them, beside a producer:

* cooperative-sticky assignment with members joining and leaving while records are produced, each
  member committing what it processed when partitions are revoked from it: every acknowledged
  record is read exactly once by the group, and no partition is ever owned by two members;
* static membership (``group.instance.id``): a member closed and started again within its session
  takes back its partitions without a rebalance (the others keep theirs, no callbacks), as Kafka's
  coordinator does for a static member rejoining a Stable group with the same protocols (KIP-345);
  the same for a member in a process of its own killed with SIGKILL;
* committed offsets and a live group through a kill -9 of the broker while the producer goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, Producer

from broker_support import Broker, wait_until
from groups_support import GROUP_BROKER, committed, create_topic, names, owned_once

PARTITIONS = 6
SESSION_MS = 6000


class Member:
    """A classic confluent-kafka consumer recording its rebalance callbacks in ``events`` and the
    values it read in ``got``; it commits its position synchronously when partitions are revoked."""

    def __init__(self, bootstrap, group, topic, name, events, strategy="cooperative-sticky", **extra):
        self.name, self.events, self.got = name, events, []
        self.commit_errors: list = []       # commits on revocation that failed
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
                           "heartbeat.interval.ms": 250, "partition.assignment.strategy": strategy, **extra})
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost)

    def _assign(self, c, ps):
        self.events.append((self.name, "assign", sorted((p.topic, p.partition) for p in ps)))

    def _revoke(self, c, ps):
        if ps:
            try:
                c.commit(asynchronous=False)
            except Exception as e:          # nothing consumed yet: _NO_OFFSET
                if "NO_OFFSET" not in str(e):
                    self.commit_errors.append(e)
        self.events.append((self.name, "revoke", sorted((p.topic, p.partition) for p in ps)))

    def _lost(self, c, ps):
        self.events.append((self.name, "lost", sorted((p.topic, p.partition) for p in ps)))

    def poll(self):
        for m in self.c.consume(500, 0.05):
            if m.error() is None:
                self.got.append(m.value())

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def close(self):
        self.c.close()


class AckedProducer(threading.Thread):
    """Produces ``v<i>`` records round robin over the partitions at about ``rate``/s (idempotent),
    keeping the values the broker acknowledged."""

    def __init__(self, bootstrap, topic, rate=400.0):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.acked: list[bytes] = []
        self.errors: list = []
        self.stop_now = threading.Event()

    def run(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60000})

        def done(err, msg):
            (self.errors.append(err) if err is not None else self.acked.append(msg.value()))
        i, start = 0, time.monotonic()
        while not self.stop_now.is_set():
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            p.produce(self.topic, value=b"v%d" % i, partition=i % PARTITIONS, on_delivery=done)
            p.poll(0)
            i += 1
        if p.flush(60):
            self.errors.append("records still undelivered after 60 s")

    def finish(self):
        self.stop_now.set()
        self.join(90)
        assert not self.is_alive() and not self.errors, self.errors[:3]


def poll_for(members, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in members:
            m.poll()


def settle(members, events, quiet=1.5, timeout=30):
    """Poll until the members' rebalance callbacks have stopped for ``quiet`` seconds. A cooperative
    join is two rebalances (the revocation, then the assignment): the broker describes the second's
    assignment once the leader's SyncGroup is in, before the leader has run its own (empty)
    incremental assign, which a later poll would then deliver as if it were a new rebalance."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(events)
        poll_for(members, quiet)
        if len(events) == n:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the group kept rebalancing for {timeout} s: {events[-5:]}")


def poll_until(members, predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                 f"assignments {[(m.name, sorted(m.assignment())) for m in members]}")
        for m in members:
            m.poll()


def split(members) -> bool:
    owned = [m.assignment() for m in members]
    return sorted(p for o in owned for p in o) == list(range(PARTITIONS)) and all(owned)


def test_cooperative_members_join_and_leave_while_producing(tmp_path):
    with Broker(tmp_path / "data", GROUP_BROKER) as b:
        topic, group = names("coop")
        create_topic(b.bootstrap, topic, PARTITIONS)
        producer = AckedProducer(b.bootstrap, topic)
        producer.start()
        events: list = []
        gone: list[Member] = []
        live = [Member(b.bootstrap, group, topic, "m0", events)]
        poll_until(live, lambda: split(live), 30, "m0's assignment")
        for name in ("m1", "m2"):
            live.append(Member(b.bootstrap, group, topic, name, events))
            poll_until(live, lambda: split(live), 30, f"{name} to share the partitions")
            poll_for(live, 1.0)
        # members leave (and one comes back) while the producer goes on
        for leaving, joining in (("m0", None), ("m1", "m3"), ("m3", None)):
            m = next(x for x in live if x.name == leaving)
            live.remove(m)
            m.close()
            gone.append(m)
            if joining:
                live.append(Member(b.bootstrap, group, topic, joining, events))
            poll_until(live, lambda: split(live), 30, f"{leaving} gone, {joining} in")
            poll_for(live, 1.0)
        producer.finish()
        acked = set(producer.acked)
        poll_until(live, lambda: set(v for m in live + gone for v in m.got) >= acked, 30, "every acked record")
        poll_for(live, 1.0)
        for m in live:
            m.close()
        got = [v for m in live + gone for v in m.got]
        assert len(acked) > 1000
        assert set(got) == acked
        assert not [e for m in live + gone for e in m.commit_errors]
        dups = len(got) - len(set(got))
        assert dups == 0, f"{dups} records read twice"
        owned_once([(n, k if k != "lost" else "revoke", ps) for n, k, ps in events])
        # a cooperative rebalance revokes only what moves: m2 never gave up everything at once
        assert all(ps or k == "assign" for n, k, ps in events if n == "m2")


CHILD_STATIC = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": int(sys.argv[5]), "heartbeat.interval.ms": 250,
              "group.instance.id": sys.argv[4], "partition.assignment.strategy": sys.argv[6]})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", sorted(p.partition for p in ps), flush=True))
n = 0
while True:
    m = c.poll(0.1)
    if m is not None and m.error() is None:
        n += 1
        if n % 50 == 0:
            c.commit(asynchronous=False)
"""


def child_static(bootstrap, group, topic, instance, session_ms, strategy) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD_STATIC, bootstrap, group, topic, instance,
                             str(session_ms), strategy], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def generation(bootstrap, group) -> tuple[str, dict]:
    """The group's state and {instance id: partitions} as the broker describes it."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})     # kept alive until the answer came
    d = admin.describe_consumer_groups([group])[group].result(10)
    return str(d.state), {m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                          for m in d.members}


def test_static_members_restart_within_the_session_without_a_rebalance(tmp_path):
    for strategy in ("range", "cooperative-sticky"):
        with Broker(tmp_path / f"data-{strategy}", {**GROUP_BROKER, "group.max.session.timeout.ms": "60000"}) as b:
            topic, group = names("static")
            create_topic(b.bootstrap, topic, PARTITIONS)
            producer = AckedProducer(b.bootstrap, topic, rate=200.0)
            producer.start()
            events: list = []
            a = Member(b.bootstrap, group, topic, "a", events, strategy, **{"group.instance.id": "i-a",
                                                                            "session.timeout.ms": 20000})
            poll_until([a], lambda: len(a.assignment()) == PARTITIONS, 30, "a's assignment")
            child = child_static(b.bootstrap, group, topic, "i-b", 20000, strategy)
            try:
                poll_until([a], lambda: len(a.assignment()) == PARTITIONS // 2, 30,
                           "b to take half")
                settle([a], events)
                before = generation(b.bootstrap, group)
                assert before[0].endswith("STABLE") and set(before[1]) == {"i-a", "i-b"}, before
                n_events = len(events)
                # the child dies with no LeaveGroup (SIGKILL) and comes back well within its session
                child.kill()
                child.wait(10)
                child = child_static(b.bootstrap, group, topic, "i-b", 20000, strategy)
                line = child.stdout.readline().decode()
                assert line.startswith("assigned"), line
                assert eval(line.split(" ", 1)[1]) == before[1]["i-b"], (line, before)
                poll_for([a], 2.0)
                assert events[n_events:] == [], f"a saw a rebalance: {events[n_events:]}"
                assert generation(b.bootstrap, group) == before
                # a closed static member sends no LeaveGroup either (librdkafka): a new one with its
                # instance id gets the same partitions, the other member sees nothing
                a.close()
                a2 = Member(b.bootstrap, group, topic, "a2", events, strategy,
                            **{"group.instance.id": "i-a", "session.timeout.ms": 20000})
                poll_until([a2], lambda: sorted(a2.assignment()) == before[1]["i-a"], 30, "a2's assignment")
                assert generation(b.bootstrap, group) == before
                a2.close()
            finally:
                child.kill()
                child.wait(10)
                producer.finish()


def test_cooperative_group_rides_a_broker_kill9(tmp_path):
    """Two cooperative members and the producer through kill -9 of the broker: afterwards every
    acknowledged record is read (offsets committed before the kill are not read again beyond what
    was read after the last commit), and the committed offsets after a final commit are the ends."""
    data = tmp_path / "data"
    b = Broker(data, GROUP_BROKER).start()
    port = b.port
    topic, group = names("coopk9")
    try:
        create_topic(b.bootstrap, topic, PARTITIONS)
        producer = AckedProducer(b.bootstrap, topic, rate=300.0)
        producer.start()
        events: list = []
        # sessions longer than the broker's absence: the members ride it out
        ms = [Member(b.bootstrap, group, topic, n, events, **{"session.timeout.ms": 30000}) for n in ("x", "y")]
        poll_until(ms, lambda: split(ms), 30, "the split")
        poll_for(ms, 1.5)
        for m in ms:
            m.c.commit(asynchronous=False)
        b.kill()
        poll_for(ms, 1.0)
        b = Broker(data, GROUP_BROKER, port=port).start()
        poll_for(ms, 3.0)
        producer.finish()
        acked = set(producer.acked)
        poll_until(ms, lambda: set(v for m in ms for v in m.got) >= acked, 60, "every acked record")
        for m in ms:
            m.c.commit(asynchronous=False)
        ends = {}
        for p in range(PARTITIONS):
            ends[p] = sum(1 for v in acked if int(v[1:]) % PARTITIONS == p)
        assert committed(b.bootstrap, group, topic, PARTITIONS) == ends
        for m in ms:
            m.close()
    finally:
        b.kill()
