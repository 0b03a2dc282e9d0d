"""Transaction conformance, consume-transform-produce (transactions.md §6.3 scenarios 7 and 8) with
confluent-kafka, kafka-python and aiokafka:

* an application (tests/txn_eos_app.py, a subprocess per client) with a read_committed consumer in
  a group and a transactional producer turns an input topic (committed and aborted transactions)
  into an output topic while the test kills it with SIGKILL at random points (inside a
  transaction and between two) and once stops it (SIGSTOP) inside a transaction, starts the next
  instance with the same transactional id, then lets the stopped one go on: that zombie is fenced
  and exits, and the output holds every committed input record exactly once, in order;
* OffsetFetch after a commit shows the new offsets, after an abort the old; while a transactional
  offset commit is pending, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT and a
  read_committed consumer of the group waits for the transaction before it starts (KIP-447);
* KIP-447 fencing by generation: offsets sent with a consumer's group metadata from before a
  rebalance are refused (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) and the transaction is aborted."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from broker_support import Broker
from txn_support import (ALL_CLIENTS, BROKER_CONFIG, E, Raw, TxnProducer, WAIT_S, create_topics, read, uid, values,
                         wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "txn_eos_app.py")
SEED = int(os.environ.get("COMPACTLOG_EOS_SEED", "0")) or random.randrange(1 << 30)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn-eos") / "data", BROKER_CONFIG) as b:
        yield b


class App:
    """One instance of the application, its stdout lines read in a thread."""

    def __init__(self, client, bootstrap, src, dst, group, tid, log_path, in_txn_delay_s: float = 0.05):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]),
               "TXN_EOS_APP_IN_TXN_DELAY_S": str(in_txn_delay_s)}
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, APP, client, bootstrap, src, dst, group, tid],
                                     stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode().strip())
        self.lines.put(None)

    def wait_for(self, prefix: str, count: int = 1, timeout: float = WAIT_S) -> None:
        """Until ``count`` lines starting with ``prefix`` were printed (since the start)."""
        deadline = time.monotonic() + timeout
        while sum(1 for s in self.seen if s.startswith(prefix)) < count:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {count} x {prefix!r} within {timeout} s: {self.seen[-5:]}") from None
            if line is None:
                raise AssertionError(f"the app exited ({self.proc.wait()}) before {count} x {prefix!r}: "
                                     f"{self.seen[-5:]}")
            self.seen.append(line)

    def signal(self, sig) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()


def write_input(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Committed and aborted transactions on both partitions; the committed values per partition."""
    p = TxnProducer("confluent", bootstrap, uid("tx-input")).init()
    committed: dict[int, list[bytes]] = {0: [], 1: []}
    try:
        for t in range(7):
            p.begin()
            for part in (0, 1):
                for i in range(12):
                    v = b"%s-%d-%d-%d" % (b"aborted" if t == 3 else b"in", t, part, i)
                    p.send(topic, v, key=b"k%d" % (i % 4), partition=part)
                    if t != 3:
                        committed[part].append(v)
            p.commit() if t != 3 else (p.flush(), p.abort())
    finally:
        p.close()
    return committed


# -- 7 + 8a. exactly once across kills, and a zombie ---------------------------------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_exactly_once_across_kills_of_the_application(broker, client, tmp_path):
    rng = random.Random(f"{SEED}-{client}")
    src, dst, group, tid = uid("eos-in"), uid("eos-out"), uid("eos-group"), uid("tx-eos")
    create_topics(broker.bootstrap, src)
    create_topics(broker.bootstrap, dst, compacted=None)
    committed = write_input(broker.bootstrap, src)
    with Raw(broker.port) as raw:
        # where the group's offsets end: the last record + 1, the offset of the input's last marker
        last = {part: raw.list_offset(src, part, read_committed=True) - 1 for part in (0, 1)}

    def start(in_txn_delay_s: float = 0.05):
        return App(client, broker.bootstrap, src, dst, group, tid, tmp_path / "app.log", in_txn_delay_s)
    apps = []
    try:
        # SIGKILL inside a transaction, SIGSTOP (a zombie) inside one, SIGKILL between two; the
        # instances stopped or killed inside a transaction pause there long enough to be caught
        for plan in ("kill-in-txn", "zombie", "kill-after-commit"):
            app = start(0.3 if plan == "zombie" else 0.1 if plan == "kill-in-txn" else 0.05)
            apps.append(app)
            n = rng.randint(1, 3)
            if plan == "kill-after-commit":
                app.wait_for("commit", n)
                time.sleep(rng.uniform(0, 0.03))
                app.kill()
            elif plan == "kill-in-txn":
                app.wait_for("in-txn", n)
                app.kill()
            else:
                app.wait_for("in-txn", n)
                app.signal(signal.SIGSTOP)
                zombie = app
                successor = start()
                apps.append(successor)
                successor.wait_for("commit", 1)            # the zombie's transaction was aborted by its init
                zombie.signal(signal.SIGCONT)
                # back, the zombie's commit (or its next send) is fenced: it exits without committing
                assert zombie.proc.wait(20) == 3, zombie.seen
                zombie.log.close()
                successor.kill()
        final = start()
        apps.append(final)
        with Raw(broker.port) as raw:
            wait_until(lambda: raw.offset_fetch(group, src, [0, 1], require_stable=True) ==
                       {0: (E.none, last[0]), 1: (E.none, last[1])}, timeout=WAIT_S,
                       what=f"the application to reach the end of the input (seed {SEED})")
        final.kill()
    finally:
        for a in apps:
            if a.proc.poll() is None:
                a.signal(signal.SIGCONT)
                a.kill()
    out = read(client, broker.bootstrap, dst, "read_committed")
    for part in (0, 1):
        got = [v for p, _, _, v in out if p == part]
        assert got == [b"out:" + v for v in committed[part]], f"partition {part}, seed {SEED}"
    # the instances killed inside a transaction had sent its records: there, aborted
    assert len(read(client, broker.bootstrap, dst, "read_uncommitted")) > len(out)


# -- 7. offsets with commit and abort; require_stable and a waiting consumer -----------------------------------

@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_transactional_offsets_commit_abort_and_require_stable(broker, client):
    src, group = uid("offs-in"), uid("offs-group")
    create_topics(broker.bootstrap, src)
    feeder = TxnProducer("confluent", broker.bootstrap, uid("tx-feed")).init()
    feeder.begin()
    for i in range(15):
        feeder.send(src, b"r%d" % i, partition=0)
    feeder.commit()                                              # offsets 0-14, marker 15
    feeder.close()
    p = TxnProducer(client, broker.bootstrap, uid("tx")).init()
    meta = group if client != "confluent" else _confluent_metadata(broker.bootstrap, group)
    waiter = None
    try:
        with Raw(broker.port) as raw:
            p.begin()
            p.send(src, b"x", partition=1)
            p.send_offsets({(src, 0): 10}, meta)
            p.commit()
            assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.none, 10)}
            p.begin()
            p.send(src, b"y", partition=1)
            p.send_offsets({(src, 0): 12}, meta)
            p.flush()
            p.abort()
            assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.none, 10)}
            # pending: require_stable says so (v7+), the old versions and require_stable=false see 10
            p.begin()
            p.send(src, b"z", partition=1)
            p.send_offsets({(src, 0): 13}, meta)
            p.flush()
            assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.unstable_offset_commit, -1)}
            assert raw.offset_fetch(group, src, [0], require_stable=False) == {0: (E.none, 10)}
            assert raw.offset_fetch(group, src, [0], require_stable=False, version=6) == {0: (E.none, 10)}
            # a read_committed consumer of the group waits (KIP-447), then starts at the new offset
            waiter = Waiter(client, broker.bootstrap, src, group)
            time.sleep(0.6)
            first = waiter.first_offset()
            p.commit()
            assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.none, 13)}
            if client == "aiokafka":
                # aiokafka's OffsetFetch cannot ask for stable offsets (no require_stable): it took
                # the last committed offset, 10, at once and does not wait; the broker's side is
                # the v6 answer above
                assert first == 10 and waiter.wait_first() == 10
            else:
                assert first is None, f"{client} started at {first} while the offsets were pending"
                assert waiter.wait_first() == 13
    finally:
        p.close()
        if waiter is not None:
            waiter.close()


def _confluent_metadata(bootstrap, group):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


class Waiter:
    """A read_committed consumer of ``group`` assigned partition 0, polling in a thread; the offset
    of the first record it got."""

    def __init__(self, client, bootstrap, topic, group):
        self.client, self.first = client, None
        self.stop = threading.Event()
        self.got = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(bootstrap, topic, group), daemon=True)
        self.thread.start()

    def _run(self, bootstrap, topic, group):
        if self.client == "confluent":
            from confluent_kafka import Consumer, TopicPartition
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                          "enable.auto.commit": False, "auto.offset.reset": "earliest"})
            c.assign([TopicPartition(topic, 0)])
            try:
                while not self.stop.is_set():
                    m = c.poll(0.05)
                    if m is not None and m.error() is None:
                        self._found(m.offset())
                        return
            finally:
                c.close()
        elif self.client == "kafka-python":
            import kafka
            c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
            c.assign([kafka.TopicPartition(topic, 0)])
            try:
                while not self.stop.is_set():
                    for recs in c.poll(timeout_ms=50).values():
                        self._found(recs[0].offset)
                        return
            finally:
                c.close()
        else:
            import asyncio

            import aiokafka

            async def run():
                c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                              isolation_level="read_committed", enable_auto_commit=False,
                                              auto_offset_reset="earliest")
                await c.start()
                c.assign([aiokafka.TopicPartition(topic, 0)])
                try:
                    while not self.stop.is_set():
                        for recs in (await c.getmany(timeout_ms=50)).values():
                            self._found(recs[0].offset)
                            return
                finally:
                    await c.stop()
            asyncio.run(run())

    def _found(self, offset):
        self.first = offset
        self.got.set()

    def first_offset(self):
        return self.first

    def wait_first(self, timeout: float = WAIT_S):
        assert self.got.wait(timeout), f"{self.client}'s consumer got nothing within {timeout} s"
        return self.first

    def close(self):
        self.stop.set()
        self.thread.join(10)


# -- 8b. KIP-447: offsets from a consumer of an older generation ------------------------------------------------

@pytest.mark.parametrize("client", [c for c in ALL_CLIENTS if c.values[0] != "aiokafka"])
def test_offsets_of_a_fenced_group_member_are_refused(broker, client):
    src, group = uid("gen-in"), uid("gen-group")
    create_topics(broker.bootstrap, src)
    members = Members(client, broker.bootstrap, src, group)
    p = TxnProducer(client, broker.bootstrap, uid("tx")).init()
    try:
        old = members.join("a")
        members.leave("a")                               # a's member id is gone from the group
        p.begin()
        p.send(src, b"x", partition=1)
        err = _refused(p, {(src, 0): 5}, old)
        assert "UNKNOWN_MEMBER_ID" in err or "UnknownMemberId" in err, err
        p.abort()
        members.join("b")
        stale = members.metadata("b")
        members.join("c")                                # a rebalance: b and c in a new generation
        p.begin()
        p.send(src, b"y", partition=1)
        err = _refused(p, {(src, 0): 6}, stale)
        assert "ILLEGAL_GENERATION" in err or "IllegalGeneration" in err, err
        p.abort()
        # the current generation's metadata is accepted
        p.begin()
        p.send(src, b"z", partition=1)
        p.send_offsets({(src, 0): 7}, members.metadata("b"))
        p.commit()
        with Raw(broker.port) as raw:
            assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.none, 7)}
        assert values(read(client, broker.bootstrap, src, "read_committed")) == [b"z"]
    finally:
        p.close()
        members.close()


def _refused(p: TxnProducer, offsets, meta) -> str:
    """send_offsets must fail (an abortable error, not a fatal one); its text."""
    try:
        p.send_offsets(offsets, meta)
    except Exception as e:                          # noqa: BLE001 (checked by the caller)
        if p.client == "confluent":
            kerr = e.args[0]
            assert kerr.txn_requires_abort() and not kerr.fatal(), kerr
            return kerr.name()
        return repr(e)
    raise AssertionError("the offsets of a fenced member were accepted")


def test_txn_offset_commit_generation_checks_by_version(broker):
    """The broker's side of 8b with raw requests, the group's one member joined over the wire: v3
    carries the member and generation and is checked; v0-2 (aiokafka sends v0) carry neither and
    are accepted on a group with members, so an aiokafka application cannot be fenced this way
    (KIP-447 needs v3)."""
    src, group, tid = uid("gen-raw"), uid("gen-group"), uid("tx")
    create_topics(broker.bootstrap, src)
    with Raw(broker.port) as raw:
        generation, member = _join(raw, group)
        code, pid, e = raw.init_producer_id(tid)
        assert raw.add_offsets(tid, pid, e, group) == E.none
        assert raw.txn_offset_commit(tid, group, pid, e, {(src, 0): 1}, version=3, generation=generation + 1,
                                     member=member) == {(src, 0): E.illegal_generation}
        assert raw.txn_offset_commit(tid, group, pid, e, {(src, 0): 1}, version=3, generation=generation,
                                     member="someone-else") == {(src, 0): E.unknown_member_id}
        assert raw.txn_offset_commit(tid, group, pid, e, {(src, 0): 1}, version=3) == {(src, 0): E.none}
        assert raw.txn_offset_commit(tid, group, pid, e, {(src, 0): 1}, version=0) == {(src, 0): E.none}
        assert raw.txn_offset_commit(tid, group, pid, e, {(src, 0): 2}, version=3, generation=generation,
                                     member=member) == {(src, 0): E.none}
        assert raw.end_txn(tid, pid, e, True) == E.none
        assert raw.offset_fetch(group, src, [0], require_stable=True) == {0: (E.none, 2)}


def _join(raw: Raw, group: str) -> tuple[int, str]:
    """JoinGroup (the member id asked for first, KIP-394) and SyncGroup as the group's only member:
    (generation, member id)."""
    import datetime
    join = dict(group_id=group, session_timeout=datetime.timedelta(seconds=30),
                rebalance_timeout=datetime.timedelta(seconds=30), group_instance_id=None, protocol_type="consumer",
                protocols=[{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}])
    r = raw.call(11, 5, member_id="", **join)
    assert r.error_code == E.member_id_required
    r = raw.call(11, 5, member_id=r.member_id, **join)
    assert r.error_code == E.none
    s = raw.call(14, 3, group_id=group, generation_id=r.generation_id, member_id=r.member_id, group_instance_id=None,
                 assignments=[{"member_id": r.member_id, "assignment": b""}])
    assert s.error_code == E.none
    return r.generation_id, r.member_id


# a member's session: long enough that a loaded machine's late heartbeat does not start a new
# generation under a test that holds one (members leave with LeaveGroup, so no rebalance waits for it)
SESSION_MS = 30000


class Members:
    """Consumers of ``group`` (subscribed to ``topic``) by name, each polled in its own thread so
    that it takes part in every rebalance. Each consumer has its own lock (a client is not
    thread-safe): with one lock for all, a member blocked in its JoinGroup (answered only when
    every member has rejoined) held the others off their polls, and a group at load 10 never settled."""

    def __init__(self, client, bootstrap, topic, group):
        self.client, self.bootstrap, self.topic, self.group = client, bootstrap, topic, group
        self.port = int(bootstrap.rsplit(":", 1)[1])
        self.consumers: dict = {}
        self.stops: dict = {}
        self.threads: dict = {}
        self.locks: dict = {}
        self.errors: dict = {}

    def join(self, name):
        """Start member ``name`` and wait until the group is Stable with every member assigned
        (a Stable group: every member has the newest generation); its group metadata. Members never
        commit themselves: an auto-commit of position 0 five seconds in would overwrite the
        transaction's offsets on a slow run."""
        if self.client == "confluent":
            from confluent_kafka import Consumer
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                          "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 100,
                          "partition.assignment.strategy": "roundrobin", "enable.auto.commit": False})
            c.subscribe([self.topic])
        else:
            import kafka
            c = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100,
                                    enable_auto_commit=False)
            # the topic's partitions known before the join: a kafka-python leader whose metadata
            # lacks them assigns nothing and does not rejoin until its next metadata refresh
            wait_until(lambda: c.partitions_for_topic(self.topic), timeout=WAIT_S, what="the topic's metadata")
            c.subscribe([self.topic])
            # and in the coordinator's snapshot of the subscription's metadata, taken on the first
            # metadata answer after subscribe: a leader that assigned before it has a stale snapshot
            # and rejoins once more, and kafka-python 3.0.12 finishes such a rejoin only inside the
            # poll that started it. When the poll's timeout ends first (20 ms here; seconds at load
            # 10) the join completes in the background, the assignment makes need_rejoin() false,
            # and the next poll skips the join's end: the heartbeat stays disabled, the member
            # never hears of the next rebalance and the broker drops it after its session timeout
            # (seen in a loaded run: member b gone 30 s after c joined; client debug log, no
            # heartbeat sent after the rejoin)
            snapshot = getattr(c, "_coordinator", None)
            if hasattr(snapshot, "_metadata_snapshot"):
                wait_until(lambda: snapshot._metadata_snapshot.get(self.topic), timeout=WAIT_S,
                           what="the consumer coordinator's metadata snapshot")
        stop, lock = threading.Event(), threading.Lock()
        self.consumers[name], self.stops[name], self.locks[name] = c, stop, lock
        t = threading.Thread(target=self._poll, args=(name, c, stop, lock), daemon=True)
        self.threads[name] = t
        t.start()
        try:
            wait_until(self._settled, timeout=WAIT_S, what="the group to settle")
        except AssertionError as e:
            raise AssertionError(f"{e}: {self._state()}") from None
        return self.metadata(name)

    def _poll(self, name, c, stop, lock):
        while not stop.is_set():
            try:
                with lock:
                    if self.client == "confluent":
                        c.poll(0.02)
                    else:
                        c.poll(timeout_ms=20)
            except Exception as e:                  # noqa: BLE001 (kept for the failure message)
                self.errors[name] = repr(e)
            time.sleep(0.005)

    def _settled(self) -> bool:
        generations = set()
        for name, c in list(self.consumers.items()):
            with self.locks[name]:
                if not c.assignment():
                    return False
                if self.client != "confluent":
                    md = c.group_metadata()
                    if md.state != "<stable>":          # kafka.structs.MemberState.STABLE
                        return False
                    generations.add(md.generation_id)
        # kafka-python: every member stable on one generation too. The broker's group is Stable once
        # the leader's SyncGroup is in, while another member may not have taken its JoinGroup answer
        # yet (a loaded run: b's metadata still of the generation before c joined, ILLEGAL_GENERATION).
        # confluent-kafka's group metadata is opaque; its members have not shown the race.
        if len(generations) > 1:
            return False
        return self._described()[0] == "Stable"

    def _described(self) -> tuple[str, int]:
        with Raw(self.port) as raw:
            [g] = raw.call(15, 5, groups=[self.group], include_authorized_operations=False).groups
            if g.group_state == "Stable" and len(g.members) != len(self.consumers):
                return "Stable with another member count", len(g.members)
            return g.group_state, len(g.members)

    def _state(self) -> str:
        """What each member and the broker said, for a failure message."""
        state, count = self._described()
        members = {name: {"thread alive": self.threads[name].is_alive(), "error": self.errors.get(name)}
                   for name in self.consumers}
        return f"group {state} with {count} members; members {members}"

    def metadata(self, name):
        c = self.consumers[name]
        with self.locks[name]:
            return c.consumer_group_metadata() if self.client == "confluent" else c.group_metadata()

    def leave(self, name):
        self.stops[name].set()
        self.threads[name].join(10)
        c = self.consumers.pop(name)
        c.close()
        del self.stops[name], self.threads[name], self.locks[name]

    def close(self):
        for name in list(self.consumers):
            self.leave(name)
