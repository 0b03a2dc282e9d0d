"""Consumer-group helpers for the broker tests: the three Python clients behind one small interface
(poll, assignment, commit, close), polled together from one thread so that several members of a
group rebalance as the clients would in separate processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

# short sessions and quick heartbeats keep rebalances within a second or two
SESSION_MS = 6000
HEARTBEAT_MS = 250
GROUP_BROKER = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int | None = None) -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        kw = {} if partitions is None else {"partition": i % partitions}
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, **kw)
    assert p.flush(30) == 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def names(prefix: str) -> tuple[str, str]:
    """A fresh (topic, group) pair, for tests sharing one broker."""
    u = uuid.uuid4().hex[:6]
    return f"{prefix}-t-{u}", f"{prefix}-g-{u}"


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
_COORDINATOR_NOT_READY = (14, 15, 16)


def committed(bootstrap: str, group: str, topic: str, partitions) -> dict:
    """{partition: committed offset} through confluent-kafka's AdminClient (-1001: none);
    ``partitions`` is a count or the partition numbers."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    if isinstance(partitions, int):
        partitions = range(partitions)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
    # a broker just started answers COORDINATOR_LOAD_IN_PROGRESS until its offsets topic is read
    # (as Kafka's does); librdkafka's admin hands that to the caller where Kafka's Java admin retries
    deadline = time.monotonic() + 60
    while True:
        try:
            res = admin.list_consumer_group_offsets([req])[group].result(30)
            return {tp.partition: tp.offset for tp in res.topic_partitions}
        except KafkaException as e:
            if e.args[0].code() not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def table(text: str) -> list[list[str]]:
    """The rows (header included) of a consumer-groups table, split on whitespace."""
    return [line.split() for line in text.splitlines() if line.strip()]


class Member:
    """One group member of one of the three clients."""

    client = ""

    def poll(self) -> list[bytes]:
        raise NotImplementedError

    def assignment(self) -> set[int]:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Confluent(Member):
    client = "confluent-kafka"

    def __init__(self, bootstrap, group, topic, session_ms=SESSION_MS, **extra):
        self.c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": session_ms,
                             "heartbeat.interval.ms": HEARTBEAT_MS, **extra})
        self.c.subscribe([topic])

    def poll(self):
        out = []
        for m in self.c.consume(500, 0.05):
            if m.error() is None:
                out.append(m.value())
        return out

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def commit(self):
        self.c.commit(asynchronous=False)

    def committed(self, topic, partitions):
        return {tp.partition: tp.offset for tp in
                self.c.committed([CKTopicPartition(topic, p) for p in partitions], timeout=10)}

    def close(self):
        self.c.close()


class KafkaPython(Member):
    client = "kafka-python"

    def __init__(self, bootstrap, group, topic, session_ms=SESSION_MS):
        from kafka import KafkaConsumer
        self.c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                               enable_auto_commit=False, session_timeout_ms=session_ms,
                               heartbeat_interval_ms=HEARTBEAT_MS, max_poll_records=500)

    def poll(self):
        # a long timeout on purpose: kafka-python 3.0.12 loses a rebalance that spans two poll()
        # calls (its join task finishes while need_rejoin() already says False, so the assignment
        # is never applied and heartbeats stay disabled until the session expires); seen under
        # CPU load with 50 ms polls
        return [m.value for msgs in self.c.poll(1000).values() for m in msgs]

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def commit(self):
        self.c.commit()

    def close(self):
        self.c.close()


class AioKafka(Member):
    """aiokafka on its own event loop thread; calls are forwarded to it."""

    client = "aiokafka"

    def __init__(self, bootstrap, group, topic, session_ms=SESSION_MS):
        from aiokafka import AIOKafkaConsumer
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def make():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS)
            await c.start()
            return c
        self.c = self._run(make())

    def _run(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def poll(self):
        res = self._run(self.c.getmany(timeout_ms=50))
        return [m.value for msgs in res.values() for m in msgs]

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def commit(self):
        self._run(self.c.commit())

    def close(self):
        try:
            self._run(self.c.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


CLIENTS = {"confluent": Confluent, "kafka-python": KafkaPython, "aiokafka": AioKafka}


def poll_until(members, predicate, timeout=30.0, what="condition", got=None):
    """Poll every member in turn until ``predicate()``; values read are added to ``got``."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            values = m.poll()
            if got is not None:
                got.extend(values)
        if predicate():
            return
        if time.monotonic() > deadline:
            state = {i: sorted(m.assignment()) for i, m in enumerate(members)}
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; assignments {state}")


def module_broker(name: str, overrides: dict):
    """A ``broker`` fixture for a test module: one broker with ``overrides`` for all its tests,
    in a fresh data dir, stopped at the end."""
    import pytest
    from broker_support import Broker

    @pytest.fixture(scope="module")
    def broker(tmp_path_factory):
        with Broker(tmp_path_factory.mktemp(name) / "data", overrides) as b:
            yield b
    return broker


def close_all(members) -> None:
    """Close every member, whatever one of them raises (a test's cleanup)."""
    for m in members:
        try:
            m.close()
        except Exception:
            pass


def read_resumed(member, n: int, what: str) -> list[bytes]:
    """What ``member``, new to a group with committed offsets, reads: polled until ``n`` records
    came, then once more a moment later (a record read twice would show up there); closed after."""
    got: list[bytes] = []
    try:
        poll_until([member], lambda: len(got) >= n, got=got, what=what)
        time.sleep(0.3)
        got.extend(member.poll())
    finally:
        member.close()
    return got


def read_and_commit(member, n: int, what: str | None = None) -> list[bytes]:
    """Poll ``member`` until it has read ``n`` records, then commit synchronously; the values read."""
    got: list[bytes] = []
    poll_until([member], lambda: len(got) >= n, got=got, what=what or f"{n} records")
    member.commit()
    return got


def split_evenly(members, partitions: int) -> bool:
    """Every partition owned by exactly one member, each member owning its share."""
    owned = [m.assignment() for m in members]
    every = [p for o in owned for p in o]
    share = partitions // len(members)
    return sorted(every) == list(range(partitions)) and all(len(o) >= share for o in owned)


CHILD_CONSUMER = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": 250})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def child_consumer(bootstrap, group, topic, session_ms) -> subprocess.Popen:
    """A confluent-kafka member in its own process, to be killed with SIGKILL."""
    return subprocess.Popen([sys.executable, "-c", CHILD_CONSUMER, bootstrap, group, topic, str(session_ms)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ))


# -- KIP-848: confluent-kafka with group.protocol=consumer --------------------------------------------

# the coordinator's consumer-group timings, lowered (the client may set none of them): members are
# fenced 6 s after their last heartbeat and heartbeat every 500 ms
CONSUMER_PROTOCOL_BROKER = {"group.consumer.session.timeout.ms": "6000",
                            "group.consumer.min.session.timeout.ms": "6000",
                            "group.consumer.heartbeat.interval.ms": "500",
                            "group.consumer.min.heartbeat.interval.ms": "500"}


class ConsumerProtocol(Member):
    """A confluent-kafka member with ``group.protocol=consumer`` (KIP-848): the broker assigns.
    Its rebalance callbacks (incremental, as KIP-848 always is) append ``(name, "assign" |
    "revoke", partitions)`` to ``events`` (shared by the members of a test, polled from one
    thread, so the list is the order in which the callbacks ran)."""

    client = "confluent-kafka (consumer protocol)"

    def __init__(self, bootstrap, group, topics, name="m", events=None, **extra):
        self.name = name
        self.events = events if events is not None else []
        self.c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
        self.c.subscribe(list(topics) if not isinstance(topics, str) else [topics],
                         on_assign=lambda c, ps: self._event("assign", ps),
                         on_revoke=lambda c, ps: self._event("revoke", ps))
        self.errors: list = []

    def _event(self, kind, ps):
        self.events.append((self.name, kind, sorted((p.topic, p.partition) for p in ps)))

    def poll(self):
        out = []
        for m in self.c.consume(500, 0.05):
            if m.error() is None:
                out.append(m.value())
            else:
                self.errors.append(m.error())
        return out

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def topic_assignment(self):
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}

    def caught_up(self, topic: str, end: int) -> bool:
        """Every partition assigned to this member read up to ``end`` (its next position): a
        member given partitions another member had read has read them again by then, and has
        offsets to commit."""
        parts = [CKTopicPartition(topic, p) for p in self.assignment()]
        return bool(parts) and all(tp.offset == end for tp in self.c.position(parts))

    def commit(self):
        self.c.commit(asynchronous=False)

    def close(self):
        self.c.close()


def owned_once(events) -> None:
    """Replay the callbacks in order: a partition is never assigned to a member while another one
    still owns it (revocation before assignment), and a revoke only names owned partitions."""
    owner: dict = {}
    for name, kind, parts in events:
        for tp in parts:
            if kind == "assign":
                assert owner.get(tp) in (None, name), f"{tp} assigned to {name} while {owner[tp]} owns it: {events}"
                owner[tp] = name
            else:
                assert owner.get(tp) == name, f"{name} revoked {tp} it did not own: {events}"
                del owner[tp]


CHILD_CONSUMER_PROTOCOL = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""


def child_consumer_protocol(bootstrap, group, topic) -> subprocess.Popen:
    """A ``group.protocol=consumer`` member in its own process, to be killed with SIGKILL."""
    return subprocess.Popen([sys.executable, "-c", CHILD_CONSUMER_PROTOCOL, bootstrap, group, topic],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ))
