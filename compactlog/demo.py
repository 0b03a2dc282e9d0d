"""The seed walkthrough (``make demo``) through a real Kafka client: a broker, a compacted topic,
records produced and consumed with confluent-kafka, and the broker's own cleaner compacting them.

1. ``compactlog serve`` starts in the background on a free loopback port (the data dir's lock is
   the broker's for its whole life);
2. a confluent-kafka AdminClient creates ``latest-product-price`` with ``cleanup.policy=compact``
   (and settings that make the cleaner act within seconds instead of hours);
3. a confluent-kafka Producer sends the seed's records, keys p3, p5 and p6, ``segment.ms`` apart,
   so that every record rolls a new segment;
4. a confluent-kafka Consumer reads the topic from the beginning: every record (the topic's
   ``min.compaction.lag.ms`` keeps the cleaner away until then; the AdminClient then sets it to 0);
5. the broker's log cleaner (on Spark by default: ``--engine``) compacts the closed segments;
   the walkthrough waits for the cleaner checkpoint;
6. the consumer reads again: the latest value of every key; the broker stops (SIGTERM: a clean
   shutdown).

Every step prints what it does and what it sees, so the output doubles as a tutorial; the same
with kcat is in the README.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

TOPIC = "latest-product-price"
SEED = ["p3:10$", "p5:7$", "p3:11$", "p6:25$", "p6:12$", "p5:14$", "p5:17$"]
# min.compaction.lag.ms holds every record back from the cleaner until the first read has seen it
# (lift_compaction_lag); without it a fast cleaner could compact before that read
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "100", "delete.retention.ms": "100",
                 "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"}
_LISTENING = re.compile(r"Awaiting socket connections on ([0-9.]+):([0-9]+)\.")
TIMEOUT = 120


def _exe() -> list[str]:
    candidate = os.path.join(os.path.dirname(sys.executable), "compactlog")
    return [candidate] if os.path.exists(candidate) else [sys.executable, "-m", "compactlog.cli.main"]


def say(text: str) -> None:
    print(text, flush=True)


class BackgroundBroker:
    """``compactlog serve`` on 127.0.0.1 with a port the system picks; stopped by its pid."""

    def __init__(self, data_dir: str, engine: str):
        self.data_dir = data_dir
        self.engine = engine
        self.log_path = data_dir + ".broker.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> "BackgroundBroker":
        cmd = _exe() + ["--data-dir", self.data_dir,
                        "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                        "--override", "metrics.listener=127.0.0.1:0",
                        "--override", "log.cleaner.backoff.ms=200",
                        "serve", "--engine", self.engine]
        say(f"$ compactlog --data-dir {self.data_dir} --override listeners=PLAINTEXT://127.0.0.1:0 "
            f"--override metrics.listener=127.0.0.1:0 --override log.cleaner.backoff.ms=200 "
            f"serve --engine {self.engine} &")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            text = self.log()
            m = _LISTENING.search(text)
            if m and "] started" in text:
                self.port = int(m.group(2))
                say(f"  broker pid {self.proc.pid} listening on 127.0.0.1:{self.port} (log: {self.log_path})")
                return self
            if self.proc.poll() is not None:
                raise SystemExit(f"compactlog serve exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"compactlog serve did not start within {TIMEOUT} s:\n{self.log()}")

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        say(f"\n$ kill -TERM {self.proc.pid}")
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()
        say(f"  broker stopped (exit code {self.proc.returncode}); "
            f"clean shutdown marker: {os.path.exists(os.path.join(self.data_dir, '.kafka_cleanshutdown'))}")


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    say(f"\n>>> AdminClient.create_topics([NewTopic('{TOPIC}', 1, config={TOPIC_CONFIGS})])")
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})   # no info line at destroy
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                            config=TOPIC_CONFIGS)])
    futures[TOPIC].result(timeout=30)
    say("  created")


def produce(bootstrap: str) -> None:
    from confluent_kafka import Producer
    say(f"\n>>> Producer.produce('{TOPIC}', key, value) for {' '.join(SEED)}, ~150 ms apart")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []
    for line in SEED:
        key, value = line.split(":", 1)
        producer.produce(TOPIC, key=key.encode(), value=value.encode(),
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.flush(30)
        time.sleep(0.15)          # > segment.ms: the next record rolls a new segment
    if errors or producer.flush(30):
        raise SystemExit(f"produce failed: {errors}")
    say(f"  {len(SEED)} records acknowledged")


def consume(bootstrap: str, title: str) -> list[str]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    say(f"\n>>> Consumer.assign([TopicPartition('{TOPIC}', 0, OFFSET_BEGINNING)]); poll until the end  # {title}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == msg.error()._PARTITION_EOF:
                    break
                raise SystemExit(f"consume failed: {msg.error()}")
            line = f"{msg.key().decode()}:{msg.value().decode() if msg.value() is not None else 'null'}"
            out.append(line)
            say(f"  offset {msg.offset()}  {line}")
    finally:
        consumer.close()
    return out


def lift_compaction_lag(bootstrap: str) -> None:
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    say(f"\n>>> AdminClient.incremental_alter_configs: {TOPIC} min.compaction.lag.ms=0  "
        f"# the cleaner may now compact what we read")
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})   # no info line at destroy
    entry = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, TOPIC,
                                                              incremental_configs=[entry])])
    for f in futures.values():
        f.result(timeout=30)
    say("  altered")


def list_partition(data_dir: str, title: str) -> None:
    pdir = os.path.join(data_dir, f"{TOPIC}-0")
    say(f"\n{title}: {pdir}")
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log"):
            say(f"  {name}  {os.path.getsize(os.path.join(pdir, name)):>5} bytes")
    say("  (segment files are named by their base offset; the last one is the active segment)")


def wait_for_clean(data_dir: str, broker: BackgroundBroker) -> float:
    """Until the broker's cleaner checkpoint covers every closed segment (read, never written) and
    the broker has logged the clean (its line comes just after the checkpoint is written)."""
    say("\n... waiting for the broker's log cleaner")
    path = os.path.join(data_dir, "cleaner-offset-checkpoint")
    t0 = time.monotonic()
    while time.monotonic() - t0 < TIMEOUT:
        try:
            with open(path) as f:
                if f"{TOPIC} 0 6" in f.read() and "Cleaned log" in broker.log():
                    return time.monotonic() - t0
        except FileNotFoundError:
            pass
        if broker.proc.poll() is not None:
            raise SystemExit(f"the broker exited:\n{broker.log()}")
        time.sleep(0.2)
    raise SystemExit(f"the broker's cleaner did not clean within {TIMEOUT} s:\n{broker.log()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="build/demo-data")
    ap.add_argument("--engine", default="spark", help="where the broker's cleaner runs: spark (default), "
                                                      "local (in the broker's process) or auto")
    args = ap.parse_args(argv)
    data_dir = os.path.abspath(args.data_dir)
    if os.path.exists(data_dir):
        shutil.rmtree(data_dir)
    os.makedirs(data_dir)
    broker = BackgroundBroker(data_dir, args.engine).start()
    try:
        create_topic(broker.bootstrap)
        produce(broker.bootstrap)
        before = consume(broker.bootstrap, "every record")
        if before != SEED:
            raise SystemExit(f"unexpected records {before}, expected {SEED}")
        list_partition(data_dir, "before cleaning")
        lift_compaction_lag(broker.bootstrap)
        took = wait_for_clean(data_dir, broker)
        cleaned = [line for line in broker.log().splitlines() if "cleaned log" in line or "Cleaner" in line]
        say(f"  cleaned after {took:.1f} s" + (f" ({args.engine} engine)" if args.engine else ""))
        for line in cleaned[-3:]:
            say(f"  broker log: {line.strip()}")
        list_partition(data_dir, "after cleaning")
        say(f"\n$ cat {os.path.join(data_dir, 'cleaner-offset-checkpoint')}")
        with open(os.path.join(data_dir, "cleaner-offset-checkpoint")) as f:
            sys.stdout.write(f.read())
        after = consume(broker.bootstrap, "after the broker's cleaner")
    finally:
        broker.stop()
    expected = ["p3:11$", "p6:12$", "p5:14$", "p5:17$"]
    if after != expected:
        raise SystemExit(f"unexpected compacted content {after}, expected {expected}")
    say("\nThe latest value of every key survives; p5:17$ is still in the active segment, which Kafka never "
        "cleans, so p5:14$ stays beside it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
