"""kill -9 trials of a librdkafka transactional producer whose messages time out while the broker is
down (issue 24: "one OUT_OF_ORDER_SEQUENCE_NUMBER in ~54,000 committed transactions, after a
transaction whose messages timed out across a broker restart; it aborted cleanly").

An application loop (begin, produce, flush, commit; abort on an abortable error, as the tester's
did) runs against ``compactlog serve``; a controller kills the broker -9 at a chosen point of a
transaction (``KILL_POINTS``), keeps it down longer than ``message.timeout.ms`` (so the
transaction's messages time out and librdkafka must abort and bump its epoch, KIP-360) or
shorter (retries across the restart), and restarts it on the same port. At the end a
read_committed consumer must see exactly the records of the transactions whose commit returned,
once each, and the producer must have met no OUT_OF_ORDER_SEQUENCE_NUMBER and no fatal error.

``run_trials`` is what tests/test_txn_restart_timeouts.py runs (a few trials); run this file for
a long one (every wait bounded, the broker on loopback, stopped by its pid):

    .venv/bin/python tests/txn_restart_soak.py --trials 40 --out /tmp/soak
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import sys
import threading
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_support import Broker, wait_until  # noqa: E402
from txn_support import BROKER_CONFIG, create_topics, read, uid  # noqa: E402

# where a kill lands in the application's transaction
KILL_POINTS = ("before-first-batch", "after-some-batches", "in-commit", "anywhere")
MESSAGE_TIMEOUT_MS = 1500
PARTITIONS = 2
# librdkafka's own diagnosis of an OUT_OF_ORDER_SEQUENCE_NUMBER (rd_kafka_handle_idempotent_
# Produce_error): the request's base sequence against the next one it expects the broker to want
# (its last acknowledged + 1). "skipped" (base > next): the client left a gap; "desync" (base ==
# next): the broker refused the sequence the client and the broker's last answers agree on (a
# broker that lost or corrupted producer state); "rewound" (base < next).
OOSN_RESPONSE = re.compile(r"encountered error: Broker: Broker received an out of order sequence number")
DIAGNOSIS = {"skipped": re.compile(r"failed due to skipped sequence numbers \((PID\{[^}]*\}), base seq (\d+) > "
                                   r"next seq (\d+)\)"),
             "desync": re.compile(r"due to sequence desynchronization with broker"),
             "rewound": re.compile(r"with rewound sequence number on broker")}


@dataclass
class SoakResult:
    committed: int = 0                 # transactions whose commit returned
    aborted: int = 0                   # transactions the application aborted
    timed_out_aborts: int = 0          # of those, aborted after a message timed out
    oosn: list = field(default_factory=list)       # every OUT_OF_ORDER_SEQUENCE_NUMBER seen
    fatal: list = field(default_factory=list)      # fatal errors (the producer is unusable)
    missing: list = field(default_factory=list)    # committed values the reader did not see
    unexpected: list = field(default_factory=list)  # values seen that were not committed
    duplicates: list = field(default_factory=list)  # values seen more than once
    kills: list = field(default_factory=list)      # (point, down seconds)
    # from librdkafka's debug log: OOSN answers and its diagnosis of each (see DIAGNOSIS)
    oosn_responses: int = 0
    diagnoses: dict = field(default_factory=dict)  # kind -> [log line]

    @property
    def broker_suspect(self) -> list:
        """OOSN answers the client's own bookkeeping does not explain by a gap it made."""
        return self.diagnoses.get("desync", []) + self.diagnoses.get("rewound", [])

    @property
    def ok(self) -> bool:
        """Nothing the broker is to blame for: no record lost, invented or doubled, and no OOSN
        but those librdkafka itself diagnoses as sequences it skipped."""
        return not (self.missing or self.unexpected or self.duplicates or self.broker_suspect
                    or self.oosn_responses > len(self.diagnoses.get("skipped", [])))

    def summary(self) -> str:
        return (f"kills {len(self.kills)}, committed {self.committed}, aborted {self.aborted} "
                f"({self.timed_out_aborts} after timeouts), OOSN {self.oosn_responses} (client gaps "
                f"{len(self.diagnoses.get('skipped', []))}, broker-suspect {len(self.broker_suspect)}), "
                f"fatal {len(self.fatal)}, missing {len(self.missing)}, unexpected {len(self.unexpected)}, "
                f"duplicates {len(self.duplicates)}")

    def read_client_log(self, path: str) -> None:
        with open(path, errors="replace") as f:
            for line in f:
                if OOSN_RESPONSE.search(line):
                    self.oosn_responses += 1
                for kind, pattern in DIAGNOSIS.items():
                    if pattern.search(line):
                        self.diagnoses.setdefault(kind, []).append(line.strip())


class App:
    """The application: a transactional confluent-kafka producer in a loop, in its own thread.
    ``phase`` tells the controller where the current transaction is."""

    def __init__(self, bootstrap: str, topic: str, log_path: str, result: SoakResult, *, batch: int = 20,
                 txn_timeout_ms: int = 60000, linger_ms: int = 20):
        from confluent_kafka import Producer
        self.topic, self.result, self.batch = topic, result, batch
        self.logger = logging.getLogger(f"rdkafka.{topic}")
        self.logger.propagate = False
        handler = logging.FileHandler(log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        self.logger.addHandler(handler)
        self.logger.setLevel(logging.DEBUG)
        self.log_path = log_path
        self.conf = {
            "bootstrap.servers": bootstrap, "transactional.id": uid("soak"), "acks": "all",
            "linger.ms": linger_ms, "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "transaction.timeout.ms": txn_timeout_ms,
            "socket.timeout.ms": 1000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 100, "debug": "eos,protocol,msg",
            "logger": self.logger, "error_cb": self._error}
        self.p = Producer(self.conf)
        self.phase = "init"
        self.phase_changed = threading.Condition()
        self.stop = threading.Event()
        self.delivered = 0
        self.committed_values: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.txn = 0
        self.crash: BaseException | None = None

    def _error(self, err) -> None:
        if "OUT_OF_ORDER" in err.name() or err.code() == 45:
            self.result.oosn.append(f"txn {self.txn}: error_cb: {err}")

    def _set_phase(self, phase: str) -> None:
        with self.phase_changed:
            self.phase = phase
            self.phase_changed.notify_all()

    def wait_phase(self, phases, timeout: float) -> bool:
        with self.phase_changed:
            return self.phase_changed.wait_for(lambda: self.phase in phases or self.stop.is_set(), timeout)

    def _delivery(self, err, msg) -> None:
        if err is not None:
            if "OUT_OF_ORDER" in err.name() or err.code() == 45:
                self.result.oosn.append(f"delivery: {err} {msg.value()!r}")
            return
        self.delivered += 1
        if self.delivered >= self.batch // 2:
            self._set_phase("some-delivered")

    def start(self) -> "App":
        self.p.init_transactions(60)
        self.thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import KafkaException
        try:
            while not self.stop.is_set():
                self.txn += 1
                values = [b"%d:%d" % (self.txn, i) for i in range(self.batch)]
                self.delivered = 0
                timed_out = False
                try:
                    self.logger.info(f"APP: begin txn {self.txn}")
                    self.p.begin_transaction()
                    self._set_phase("begun")
                    for i, v in enumerate(values):
                        self.p.produce(self.topic, value=v, partition=i % PARTITIONS, on_delivery=self._delivery)
                    self._set_phase("produced")
                    self.p.poll(0)
                    self._set_phase("committing")
                    self._commit()
                    self.committed_values.extend(values)
                    self.result.committed += 1
                except KafkaException as e:
                    err = e.args[0]
                    if "OUT_OF_ORDER" in err.name():
                        self.result.oosn.append(f"txn {self.txn}: {err.name()}: {err.str()}")
                    if err.fatal():
                        self._fatal(err)
                        continue
                    timed_out = "failed delivery" in err.str() or "TIMED_OUT" in err.name()
                    if not self._abort():
                        continue
                    self.result.aborted += 1
                    self.result.timed_out_aborts += timed_out
                self._set_phase("done")
        except BaseException as e:       # noqa: BLE001 (the controller reports it)
            self.crash = e
            self.stop.set()
        finally:
            self._set_phase("stopped")

    def _commit(self) -> None:
        """commit_transaction, retried while its error is retriable (the broker may be down)."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + 120
        while True:
            try:
                self.p.commit_transaction(10)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and not err.txn_requires_abort() and time.monotonic() < deadline:
                    continue
                raise

    def _abort(self) -> bool:
        """abort_transaction, retried while it times out; False after a fatal error (the
        producer was replaced, as an application must)."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + 120
        while True:
            try:
                self.p.abort_transaction(10)
                return True
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    self._fatal(err)
                    return False
                if time.monotonic() > deadline:
                    raise

    def _fatal(self, err) -> None:
        """A fatal error: recorded, then the producer is replaced by a new instance of the same
        transactional id (what librdkafka documents an application must do); its InitProducerId
        fences the old one and aborts whatever it left open."""
        from confluent_kafka import Producer
        self.result.fatal.append(f"txn {self.txn}: {err.name()}: {err.str()}")
        self.logger.info(f"APP: fatal error in txn {self.txn}: {err}; replacing the producer")
        try:
            self.p.purge()
        except Exception:       # noqa: BLE001 (a fatal producer may refuse)
            pass
        self.p = Producer(self.conf)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.p.init_transactions(10)
                return
            except Exception:   # noqa: BLE001 (retried while the broker is down)
                if time.monotonic() > deadline:
                    raise

    def close(self) -> None:
        self.stop.set()
        self.thread.join(180)
        try:
            self.p.flush(5)
        except Exception:       # noqa: BLE001 (a fatal producer may refuse)
            pass


def run_trials(work_dir: str, trials: int, *, seed: int | None = None, batch: int = 20,
               txn_timeout_ms: int = 60000, linger_ms: int = 20,
               between: tuple[float, float] = (0.3, 1.5), log=print) -> SoakResult:
    """``trials`` kills of one broker under one application; the result (see SoakResult).
    ``txn_timeout_ms`` above the outage (the default): the application's abort reaches a
    transaction still Ongoing at the coordinator; below it, the coordinator's timeout-abort
    usually comes first (the application is then fenced, as with Kafka)."""
    rng = random.Random(seed)
    data = os.path.join(work_dir, "data")
    result = SoakResult()
    config = {**BROKER_CONFIG, "transaction.max.timeout.ms": "60000"}
    broker = Broker(data, config).start()
    port = broker.port
    topic = uid("soak")
    create_topics(broker.bootstrap, topic, partitions=PARTITIONS)
    app = App(broker.bootstrap, topic, os.path.join(work_dir, "rdkafka.log"), result, batch=batch,
              txn_timeout_ms=txn_timeout_ms, linger_ms=linger_ms).start()
    try:
        for trial in range(trials):
            if app.stop.is_set():
                break
            time.sleep(rng.uniform(*between))           # some transactions between kills
            point = KILL_POINTS[trial % len(KILL_POINTS)]
            if point == "before-first-batch":
                app.wait_phase(("begun", "produced"), 30)
            elif point == "after-some-batches":
                app.wait_phase(("some-delivered",), 30)
            elif point == "in-commit":
                app.wait_phase(("committing",), 30)
                time.sleep(rng.uniform(0, 0.02))
            # down longer than message.timeout.ms (the transaction's messages time out) two times
            # in three, else a short outage (retries across the restart)
            down = rng.uniform(MESSAGE_TIMEOUT_MS / 1000 + 0.2, MESSAGE_TIMEOUT_MS / 1000 + 2.5) \
                if rng.random() < 2 / 3 else rng.uniform(0.05, 0.5)
            broker.kill()
            app.logger.info(f"APP: broker killed ({point}), down {down:.2f} s")
            result.kills.append((point, round(down, 2)))
            time.sleep(down)
            broker = Broker(data, config, port=port).start()
            log(f"trial {trial + 1}/{trials}: killed {point}, down {down:.2f} s; {result.summary()}")
        # a few clean transactions after the last restart
        committed_before = result.committed
        wait_until(lambda: result.committed >= committed_before + 3 or app.stop.is_set(), timeout=120,
                   what="transactions after the last restart")
    finally:
        app.close()
    if app.crash is not None:
        result.fatal.append(f"application crashed: {app.crash!r}")
    try:
        seen = [r[3] for r in read("confluent", broker.bootstrap, topic, "read_committed", PARTITIONS)]
    finally:
        broker.stop()
        broker.kill()
    want = set(app.committed_values)
    counts: dict[bytes, int] = {}
    for v in seen:
        counts[v] = counts.get(v, 0) + 1
    result.missing = sorted(want - set(counts))
    result.unexpected = sorted(set(counts) - want)
    result.duplicates = sorted(v for v, n in counts.items() if n > 1)
    result.read_client_log(app.log_path)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--runs", type=int, default=1, help="brokers (each with its own application)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--txn-timeout-ms", type=int, default=60000)
    ap.add_argument("--linger-ms", type=int, default=20)
    ap.add_argument("--out", default="/tmp/txn-restart-soak")
    args = ap.parse_args(argv)
    bad = 0
    total = SoakResult()
    for run in range(args.runs):
        work = os.path.join(args.out, f"run{run}")
        os.makedirs(work, exist_ok=True)
        r = run_trials(work, args.trials, seed=None if args.seed is None else args.seed + run,
                       txn_timeout_ms=args.txn_timeout_ms, linger_ms=args.linger_ms)
        print(f"run {run}: {r.summary()}", flush=True)
        for what in ("oosn", "fatal", "missing", "unexpected", "duplicates", "broker_suspect"):
            if getattr(r, what):
                print(f"  {what}: {getattr(r, what)[:10]}", flush=True)
        for line in r.diagnoses.get("skipped", [])[:5]:
            print(f"  client gap: {line[:300]}", flush=True)
        bad += not r.ok
        total.committed += r.committed
        total.aborted += r.aborted
        total.timed_out_aborts += r.timed_out_aborts
        total.kills.extend(r.kills)
        total.oosn_responses += r.oosn_responses
        for kind, lines in r.diagnoses.items():
            total.diagnoses.setdefault(kind, []).extend(lines)
        for what in ("oosn", "fatal", "missing", "unexpected", "duplicates"):
            getattr(total, what).extend(getattr(r, what))
    print(f"total over {args.runs} run(s): {total.summary()}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
