"""Many partitions on one broker, at a size CI affords (2,000 partitions: 200 topics of 10, one
record each), under ``ulimit -n 512``: the broker starts (before, 3 descriptors per partition made
``ulimit -n 1024`` refuse to start), answers an all-topics Metadata, acknowledges one record to
each of the 2,000 partitions, and never holds more descriptors than the limit allows; after a
kill -9 it serves at once and recovers the logs in the background (each before its first use),
and after a clean stop it starts without opening a log. ``benchmarks/scale.py`` measures 10,000."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time

import pytest

from broker_support import Broker

pytestmark = [pytest.mark.broker, pytest.mark.slow]

TOPICS, PARTITIONS = 200, 10
NOFILE = 512

_BUILD = r"""
import os, sys
os.fsync = lambda fd: None          # the builder's durability is not what is tested
from compactlog.storage.datadir import DataDir
path, topics, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dd = DataDir(path, create=True, writable=True)
for i in range(topics):
    name = f"t{i:04d}"
    dd.create_topic(name, parts)
    for p in range(parts):
        log = dd.open_log(name, p)
        log.append_records([b"key"], [b"value"])
        log.close()
        dd.logs.pop((name, p))
dd.close()
"""


class LimitedBroker(Broker):
    """``compactlog serve`` with RLIMIT_NOFILE set in the child before it runs."""

    def __init__(self, data_dir, nofile: int, **kw):
        super().__init__(data_dir, **kw)
        self.nofile = nofile

    def start(self):
        real = subprocess.Popen
        nofile = self.nofile

        def limited(*args, **kwargs):
            kwargs["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            return real(*args, **kwargs)

        subprocess.Popen = limited
        try:
            return super().start()
        finally:
            subprocess.Popen = real

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("scale") / "data")
    subprocess.run([sys.executable, "-c", _BUILD, path, str(TOPICS), str(PARTITIONS)], check=True, timeout=600)
    return path


def test_two_thousand_partitions_under_ulimit_512(data_dir):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    broker = LimitedBroker(data_dir, NOFILE)
    started = time.monotonic()
    broker.start()                          # no producer-id file yet: every log is opened first
    first_start = time.monotonic() - started
    try:
        assert broker.fds() < NOFILE
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        t0 = time.monotonic()
        md = admin.list_topics(timeout=60)
        metadata_s = time.monotonic() - t0
        ours = {n: t for n, t in md.topics.items() if n.startswith("t")}
        assert len(ours) == TOPICS and all(len(t.partitions) == PARTITIONS for t in ours.values())

        acked = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
                             "message.timeout.ms": 60000})
        t0 = time.monotonic()
        for name in sorted(ours):
            for p in range(PARTITIONS):
                producer.produce(name, key=b"k", value=b"v", partition=p,
                                 on_delivery=lambda err, msg: acked.append(err))
                producer.poll(0)
        assert producer.flush(90) == 0
        produce_s = time.monotonic() - t0
        assert len(acked) == TOPICS * PARTITIONS and not [e for e in acked if e is not None]
        assert broker.fds() < NOFILE
        del producer, admin                 # no client left reconnecting to the killed broker
    finally:
        broker.kill()                       # kill -9: every partition was written since its checkpoint
    print(f"\n2,000 partitions under ulimit -n {NOFILE}: first start {first_start:.1f} s, all-topics "
          f"Metadata {metadata_s:.3f} s, one record to each acknowledged in {produce_s:.1f} s")

    # after kill -9 the listeners open without reading a log: each is recovered before its first
    # use, and a background thread recovers the others; once all are, a clean stop writes the
    # clean-shutdown marker again
    broker = LimitedBroker(data_dir, NOFILE)
    started = time.monotonic()
    broker.start()
    crash_start = time.monotonic() - started
    try:
        assert "Unclean shutdown of" in broker.log_text()
        consumer_check(broker.bootstrap)
        deadline = time.monotonic() + 120
        while "Recovered 2000 log(s) after an unclean shutdown" not in broker.log_text():
            assert time.monotonic() < deadline, broker.log_text()[-2000:]
            time.sleep(0.2)
        recovered_s = time.monotonic() - started
        assert broker.fds() < NOFILE
    finally:
        assert broker.stop() == 0
    assert os.path.exists(os.path.join(data_dir, ".kafka_cleanshutdown"))
    print(f"start after kill -9: {crash_start:.1f} s, every log recovered {recovered_s:.1f} s after spawn")

    # after the clean stop, the next start opens no log (each is opened on first use)
    broker = LimitedBroker(data_dir, NOFILE)
    started = time.monotonic()
    broker.start()
    clean_start = time.monotonic() - started
    try:
        log = broker.log_text()
        # the consumer check's group made __consumer_offsets: its 50 logs are opened at start
        assert re.search(r"Skipping log recovery after a clean shutdown .*: 50 log\(s\) of internal topics "
                         r"loaded in \d+ ms, 2000 opened on first use", log), log[-2000:]
        assert broker.fds() < 200
        consumer_check(broker.bootstrap)
    finally:
        assert broker.stop() == 0
    print(f"start after a clean stop: {clean_start:.1f} s")


def consumer_check(bootstrap: str) -> None:
    """Both records of one partition are read back (the log opened on first use)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("t0123", 7, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [b"value", b"v"]
    finally:
        consumer.close()


SHUTDOWN_PARTITIONS = 2000
# SIGTERM -> exit measured on a loaded 2-core machine: 10-16 s before (every log closed one after
# the other), 1.9-2.4 s after; a clean clone's make test at load 11-18 took 6.5 s: the bound stays
# below what the regression took
SHUTDOWN_BOUND_S = 9.0

_BUILD_TOPIC = r"""
import os, sys
os.fsync = lambda fd: None          # the builder's durability is not what is tested
from compactlog.storage.datadir import DataDir
path, parts = sys.argv[1], int(sys.argv[2])
dd = DataDir(path, create=True, writable=True)
dd.create_topic("s", parts)
dd.close()
"""


def test_sigterm_with_two_thousand_logs_written_since_they_were_opened(tmp_path):
    """The reproduction: SIGTERM took 20-46 s with 10,000 open logs, each closed one after the
    other (a producer snapshot, the .log's and the directory's fsyncs, one at a time). A broker
    with 2,000 partitions, every log opened at start and given one acknowledged record, stops
    within a few seconds; after it every record is there and the data dir is clean."""
    from confluent_kafka import Producer

    path = str(tmp_path / "data")
    subprocess.run([sys.executable, "-c", _BUILD_TOPIC, path, str(SHUTDOWN_PARTITIONS)], check=True, timeout=300)
    broker = Broker(path)
    broker.start()                          # no producer-id file yet: every log is opened now
    try:
        acked = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
                             "message.timeout.ms": 60000})
        for p in range(SHUTDOWN_PARTITIONS):
            producer.produce("s", key=b"k", value=b"v%d" % p, partition=p,
                             on_delivery=lambda err, msg: acked.append((err, msg.partition())))
            producer.poll(0)
        assert producer.flush(90) == 0
        assert len(acked) == SHUTDOWN_PARTITIONS and not [e for e, _ in acked if e is not None]
        del producer
        started = time.monotonic()
        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(120)
        took = time.monotonic() - started
    finally:
        broker.kill()
    log = broker.log_text()
    assert broker.proc.returncode == 0 and "shut down completed" in log, log[-2000:]
    print(f"\nSIGTERM -> exit with {SHUTDOWN_PARTITIONS} logs written since they were opened: {took:.2f} s")
    assert took < SHUTDOWN_BOUND_S, f"SIGTERM took {took:.1f} s"
    assert os.path.exists(os.path.join(path, ".kafka_cleanshutdown"))
    from compactlog.storage.datadir import DataDir
    with DataDir(path) as dd:               # a reader: every acknowledged record is there
        for p in range(SHUTDOWN_PARTITIONS):
            assert [r.value for r in dd.open_log("s", p).records()] == [b"v%d" % p]


FIRST_WRITE_PARTITIONS = 2000
# measured on a loaded 2-core machine: 8.6-12.3 s before against 1.3-2.1 s for the second record,
# 1.56 s against 1.48 s after
FIRST_WRITE_RATIO = 2


def test_first_record_to_two_thousand_new_partitions_costs_what_the_next_does(tmp_path):
    """The reproduction: one record to each of 2,000 partitions CreateTopics had just made took
    6-23 s, against 1.6-3.8 s once they had been written (each first append wrote and fsynced
    the leader-epoch checkpoint, the file and then its directory, one partition after the
    other). Kafka writes that checkpoint when the partition is created (Partition.makeLeader);
    so does compactlog now, and the first record costs what the second does."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = Broker(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("fresh", FIRST_WRITE_PARTITIONS, 1)])["fresh"].result(120)
        first = produce_to_each(broker.bootstrap, "fresh", FIRST_WRITE_PARTITIONS)
        second = produce_to_each(broker.bootstrap, "fresh", FIRST_WRITE_PARTITIONS)
        del admin
    finally:
        assert broker.stop() == 0
    print(f"\none record to each of {FIRST_WRITE_PARTITIONS} partitions: never written {first:.2f} s, "
          f"written {second:.2f} s")
    assert first < FIRST_WRITE_RATIO * second + 1, (first, second)
    # what Kafka leaves in a partition directory
    pdir = tmp_path / "data" / "fresh-1234"
    assert sorted(os.listdir(pdir)) == ["00000000000000000000.index", "00000000000000000000.log",
                                        "00000000000000000000.timeindex", "00000000000000000002.snapshot",
                                        "leader-epoch-checkpoint", "partition.metadata"]
    assert (pdir / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n0 0\n"


def produce_to_each(bootstrap: str, topic: str, partitions: int) -> float:
    """One acknowledged record (acks=all) to each partition; seconds from the first send to the
    last acknowledgement."""
    from confluent_kafka import Producer
    acked = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "message.timeout.ms": 90000})
    producer.list_topics(topic, timeout=30)        # metadata first: not part of the figure
    started = time.monotonic()
    for p in range(partitions):
        producer.produce(topic, key=b"k", value=b"v", partition=p, on_delivery=lambda err, msg: acked.append(err))
        producer.poll(0)
    assert producer.flush(120) == 0
    took = time.monotonic() - started
    assert len(acked) == partitions and not [e for e in acked if e is not None]
    return took
