"""The storage fault campaign: fail each kind of write, fsync, truncate, rename and file creation
a broker makes, in turn, under acks=all idempotent producers, group commits and transactions;
then restart the broker without faults and compare what it serves with what was acknowledged.

Each injection point is (system call, file kind, occurrence, failure): ``pwrite`` of a topic's
``.log``, its 3rd occurrence, ENOSPC. A census run of the same workload (no fault) lists the
points; ``inject.c``, an LD_PRELOAD library built here with the system's C compiler, fails the
chosen call in the broker process (ENOSPC, EIO, or a short write followed by ENOSPC: a disk that
fills mid-write). After each trial:

- every record whose delivery was acknowledged is served at its offset with its value (in the
  compacted topic, the latest acknowledged record of each key);
- nothing is served that no producer sent, and nothing twice (the producer is idempotent);
- a transaction whose commit was acknowledged is served whole, an aborted one not at all, and one
  whose commit failed is served whole or not at all (read_committed);
- the group's committed offset is the last acknowledged commit, or a later one that was attempted;
- ``compactlog verify`` of the stopped dir finds every batch valid (nothing corrupt served).

``python tests/faults/campaign.py`` runs the whole campaign (every point, first and last
occurrence, every failure that applies) and prints a table; ``--write`` also writes it to
``tests/faults/RESULTS.md``. ``tests/test_fault_campaign.py`` runs a small subset in ``make test``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)

from broker_support import Broker, run_cli  # noqa: E402

SOURCE = os.path.join(HERE, "inject.c")
TOPIC = "t"             # retention never deletes: every acknowledged record must be served
COMPACTED = "c"         # the same records, compacted by the broker's cleaner as they come
RECORDS = 240           # idempotent records to each, produced in rounds of 40
TXNS = 3                # committed transactions of 8 records, then one aborted
GROUP = "g"

# the failures a system call can have here
FAILURES = {"pwrite": ("enospc", "eio", "short"), "write": ("enospc", "eio", "short"),
            "fsync": ("eio",), "ftruncate": ("eio",), "rename": ("enospc", "eio"),
            "create": ("enospc",), "mkdir": ("enospc",)}


def build_injector() -> str | None:
    """inject.so, compiled once per source (cached under build/); None without a C compiler."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out_dir = os.path.join(REPO, "build", "faults")
    out = os.path.join(out_dir, f"inject-{digest}.so")
    if not os.path.exists(out):
        os.makedirs(out_dir, exist_ok=True)
        tmp = f"{out}.{os.getpid()}.tmp"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", tmp, SOURCE, "-ldl"], check=True,
                       capture_output=True)
        os.replace(tmp, out)
    return out


# -- file kinds -----------------------------------------------------------------------------------

_SEGMENT = re.compile(r"^\d{20}\.(log|index|timeindex|txnindex|snapshot)(\.tmp|\.cleaned|\.swap|\.deleted)?$")


def file_kind(path: str, data_dir: str) -> tuple[str, str] | None:
    """(the kind's name, a glob matching every file of the kind under ``data_dir``)."""
    rel = os.path.relpath(path, data_dir)
    parts = rel.split(os.sep)
    if rel == ".":
        return "data dir", data_dir
    if len(parts) == 1:
        name = parts[0]
        if re.match(r".+-\d+\.[0-9a-f]{32}-delete$", name):
            # a new name in each run (a random id): one glob for every such rename
            return "partition dir renamed to -delete", os.path.join(data_dir, "*.*-delete")
        if os.path.isdir(path) or re.match(r".+-\d+$", name):
            topic = name.rsplit("-", 1)[0]
            return f"{_topic_class(topic)} partition dir", os.path.join(data_dir, f"{_topic_glob(topic)}-*")
        return name, os.path.join(data_dir, name)
    if len(parts) == 2:
        topic = parts[0].rsplit("-", 1)[0]
        name = parts[1]
        m = _SEGMENT.match(name)
        file_glob = f"*.{m.group(1)}{m.group(2) or ''}" if m else name
        return (f"{_topic_class(topic)} {file_glob.lstrip('*')}",
                os.path.join(data_dir, f"{_topic_glob(topic)}-*", file_glob))
    return rel, os.path.join(data_dir, rel)


def _topic_class(topic: str) -> str:
    return topic if topic.startswith("__") else "topic"


def _topic_glob(topic: str) -> str:
    return topic if topic.startswith("__") else "[!_]*"


@dataclasses.dataclass(frozen=True)
class Point:
    syscall: str
    kind: str
    glob: str
    occurrence: int
    failure: str

    def __str__(self) -> str:
        return f"{self.failure} on {self.syscall} #{self.occurrence} of {self.kind}"


def census(lines: list[str], data_dir: str) -> dict[tuple[str, str, str], int]:
    """(syscall, kind, glob) -> how many calls of the census run touched it."""
    counts: dict[tuple[str, str, str], int] = collections.Counter()
    for line in lines:
        syscall, _, path = line.rstrip("\n").partition(" ")
        kind = file_kind(path, data_dir)
        if kind is not None:
            counts[(syscall, kind[0], kind[1])] += 1
    return counts


def points_of(counts: dict, *, occurrences=("first", "last")) -> list[Point]:
    out = []
    for (syscall, kind, glob), n in sorted(counts.items()):
        chosen = sorted({1 if o == "first" else n for o in occurrences})
        for k in chosen:
            for failure in FAILURES.get(syscall, ()):
                out.append(Point(syscall, kind, glob, k, failure))
    return out


# -- the workload ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Acked:
    records: dict = dataclasses.field(default_factory=dict)     # value -> offset, in TOPIC
    compacted: dict = dataclasses.field(default_factory=dict)   # value -> (key, offset), in COMPACTED
    sent: set = dataclasses.field(default_factory=set)
    commits: list = dataclasses.field(default_factory=list)     # (offset, acknowledged)
    txns: list = dataclasses.field(default_factory=list)        # (values, "committed"|"aborted"|"unknown")
    errors: list = dataclasses.field(default_factory=list)


def workload(bootstrap: str, *, deadline_s: float = 60) -> Acked:
    """Produce, commit and transact against the broker; what was acknowledged."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    acked = Acked()
    t_end = time.monotonic() + deadline_s
    common = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2}
    admin = AdminClient(common)
    small = {"segment.bytes": "4096", "segment.ms": "600000"}
    for topic, config in ((TOPIC, {**small, "retention.ms": "-1"}),
                          (COMPACTED, {**small, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                       "delete.retention.ms": "0"})):
        try:
            admin.create_topics([NewTopic(topic, 1, config=config)])[topic].result(15)
        except Exception as e:      # the fault may fall on the topic's creation
            acked.errors.append(f"create {topic}: {e}")
    producer = Producer({**common, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 6000, "retry.backoff.ms": 50})

    def delivered(err, msg):
        if err is None and msg.topic() == TOPIC:
            acked.records[msg.value().decode()] = msg.offset()
        elif err is None:
            acked.compacted[msg.value().decode()] = (msg.key().decode(), msg.offset())
        else:
            acked.errors.append(f"produce: {err}")

    consumer = Consumer({**common, "group.id": GROUP, "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    for round_ in range(RECORDS // 40):
        for i in range(40):
            value = f"p-{round_}-{i}"
            acked.sent.add(value)
            for topic in (TOPIC, COMPACTED):
                try:
                    producer.produce(topic, key=f"k{i % 13}".encode(), value=value.encode(), on_delivery=delivered)
                except KafkaException as e:     # a topic the fault kept from being created
                    acked.errors.append(f"produce: {e}")
        producer.flush(max(1.0, t_end - time.monotonic()))
        offset = round_ * 40 + 1
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
            acked.commits.append((offset, True))
        except KafkaException as e:
            acked.commits.append((offset, False))
            acked.errors.append(f"commit: {e}")
    producer.flush(max(1.0, t_end - time.monotonic()))
    consumer.close()

    txp = Producer({**common, "transactional.id": "tx-campaign", "message.timeout.ms": 6000,
                    "transaction.timeout.ms": 10000})
    try:
        txp.init_transactions(15)
        for n in range(TXNS + 1):
            values = [f"tx-{n}-{i}" for i in range(8)]
            outcome = "unknown"
            try:
                txp.begin_transaction()
                for v in values:
                    acked.sent.add(v)
                    txp.produce(TOPIC, key=f"tk{n}".encode(), value=v.encode())
                    txp.produce(COMPACTED, key=f"tk{n}".encode(), value=v.encode())
                if n < TXNS:
                    txp.commit_transaction(15)
                    outcome = "committed"
                else:
                    txp.abort_transaction(15)
                    outcome = "aborted"
            except KafkaException as e:
                acked.errors.append(f"txn {n}: {e}")
                try:
                    if e.args[0].txn_requires_abort():
                        txp.abort_transaction(15)
                        outcome = "aborted"
                except KafkaException as e2:
                    acked.errors.append(f"txn {n} abort: {e2}")
            acked.txns.append((values, outcome))
            if outcome == "unknown":
                break
    except KafkaException as e:
        acked.errors.append(f"init_transactions: {e}")
    finally:
        txp.flush(2)
    return acked


def served(bootstrap: str) -> tuple[dict, int | None]:
    """topic -> [(offset, key, value)] of every record read_committed, and the group's committed
    offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from confluent_kafka.admin import AdminClient

    existing = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2}).list_topics(timeout=15).topics
    out = {}
    for topic in (TOPIC, COMPACTED):
        if topic not in existing:       # its creation failed under the fault: nothing acknowledged in it
            out[topic] = []
            continue
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "campaign-reader", "enable.auto.commit": False,
                      "isolation.level": "read_committed", "enable.partition.eof": True, "check.crcs": True})
        try:
            c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            records = out[topic] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = c.poll(1.0)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == -191:      # _PARTITION_EOF
                        break
                    raise AssertionError(f"consume {topic}: {msg.error()}")
                records.append((msg.offset(), msg.key().decode() if msg.key() is not None else None,
                                msg.value().decode() if msg.value() is not None else None))
            else:
                raise AssertionError(f"the read of {topic} did not reach its end within 30 s")
        finally:
            c.close()
    g = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        [tp] = g.committed([TopicPartition(TOPIC, 0)], timeout=15)
        committed = tp.offset if tp.offset >= 0 else None
    finally:
        g.close()
    return out, committed


def wait_for_cleaning(data_dir: str, timeout: float) -> bool:
    """The broker's cleaner has cleaned COMPACTED once (its checkpoint names it)."""
    path = os.path.join(data_dir, "cleaner-offset-checkpoint")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if any(line.startswith(f"{COMPACTED} ") for line in f):
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    return False


def check(acked: Acked, topics: dict, committed: int | None) -> list[str]:
    """What broke the promise (empty when nothing did)."""
    problems = []
    for topic, records in topics.items():
        by_value = collections.defaultdict(list)
        for offset, _key, value in records:
            by_value[value].append(offset)
        for value, offsets in by_value.items():
            if value not in acked.sent:
                problems.append(f"{topic}: served {value!r} at {offsets}, which no producer sent")
            elif len(offsets) > 1:
                problems.append(f"{topic}: served {value} {len(offsets)} times, at {offsets}")
        if topic == TOPIC:
            for value, offset in acked.records.items():
                if offset not in by_value.get(value, []):
                    problems.append(f"{topic}: acknowledged {value} at offset {offset}, served at "
                                    f"{by_value.get(value)}")
        else:
            latest = {}
            for value, (key, offset) in acked.compacted.items():
                if offset >= latest.get(key, (-1, None))[0]:
                    latest[key] = (offset, value)
            served_latest = {}
            for offset, key, value in records:
                if offset >= served_latest.get(key, (-1, None))[0]:
                    served_latest[key] = (offset, value)
            for key, (offset, value) in latest.items():
                got = served_latest.get(key)
                if got is None or got[0] < offset:
                    problems.append(f"{topic}: key {key}: acknowledged {value} at {offset}, latest served {got}")
        for values, outcome in acked.txns:
            present = [v for v in values if v in by_value]
            if topic == COMPACTED:
                continue        # one key per transaction: compaction keeps its last record only
            if outcome == "committed" and len(present) != len(values):
                problems.append(f"{topic}: committed transaction {values[0]}..: {len(present)} of {len(values)} served")
            elif outcome == "aborted" and present:
                problems.append(f"{topic}: aborted transaction {values[0]}..: {len(present)} records served")
            elif outcome == "unknown" and present and len(present) != len(values):
                problems.append(f"{topic}: transaction {values[0]}.. served in part: {len(present)} of {len(values)}")
    ok = [o for o, good in acked.commits if good]
    if ok:
        last_ok = acked.commits.index((ok[-1], True))
        allowed = {ok[-1]} | {o for o, _ in acked.commits[last_ok + 1:]}
        if committed not in allowed:
            problems.append(f"group offset {committed}, acknowledged last {ok[-1]} (allowed {sorted(allowed)})")
    return problems


# -- trials ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Trial:
    point: Point | None
    fired: bool = False
    outcome: str = ""           # "ok" or what broke
    detail: str = ""
    seconds: float = 0.0
    acked: int = 0
    errors: int = 0


def _broker(data_dir: str, env: dict | None = None) -> Broker:
    b = Broker(data_dir, {"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "3",
                          "transaction.state.log.num.partitions": "2", "log.cleaner.backoff.ms": "200",
                          "log.flush.interval.messages": "50"}, env=env)
    b.log_path = os.path.join(os.path.dirname(data_dir), "broker-logs", "stderr.log")
    return b


def run_census(work: str, injector: str) -> tuple[dict, str]:
    data = os.path.join(work, "census", "data")
    log = os.path.join(work, "census", "calls.txt")
    os.makedirs(os.path.dirname(data), exist_ok=True)
    b = _broker(data, {"LD_PRELOAD": injector, "FAULT_DIR": data, "FAULT_LOG": log}).start()
    try:
        acked = workload(b.bootstrap)
        cleaned = wait_for_cleaning(data, 60)
    finally:
        b.stop()
    if acked.errors or not cleaned:
        raise RuntimeError(f"the census run (no fault) failed: {acked.errors[:3]}, cleaned: {cleaned}")
    with open(log) as f:
        return census(f.readlines(), data), data


def run_trial(work: str, injector: str, point: Point, n: int) -> Trial:
    """One fault: the workload under it, then a restart without it, compared."""
    t0 = time.monotonic()
    trial = Trial(point)
    base = os.path.join(work, f"trial-{n}")
    data = os.path.join(base, "data")
    os.makedirs(base, exist_ok=True)
    fired = os.path.join(base, "fired")
    env = {"LD_PRELOAD": injector, "FAULT_DIR": data, "FAULT_SYSCALL": point.syscall,
           "FAULT_GLOB": _retarget(point.glob, data), "FAULT_AT": str(point.occurrence),
           "FAULT_KIND": point.failure, "FAULT_FIRED": fired}
    b = _broker(data, env)
    acked = Acked()
    try:
        try:
            b.start()
        except RuntimeError as e:
            # a refused start must say why in one line and change nothing acknowledged (none)
            trial.fired = os.path.exists(fired)
            trial.outcome = "ok" if trial.fired else "start failed without a fault"
            trial.detail = "start refused: " + _last_line(str(e))
            return trial
        acked = workload(b.bootstrap)
        swap_step = point.syscall == "rename" and re.search(r"\.(log|index|timeindex|txnindex)$", point.kind)
        if swap_step or any(k in point.kind for k in (".cleaned", ".swap", ".deleted", "cleaner-offset")):
            wait_for_cleaning(data, 15)         # the cleaner's files: let it run into the fault
    finally:
        exit_code = None
        try:
            exit_code = b.stop()
        except RuntimeError as e:
            trial.detail += f" stop: {e}"
        b.kill()
    trial.fired = os.path.exists(fired)
    trial.acked, trial.errors = len(acked.records), len(acked.errors)
    after = _broker(data).start()
    try:
        topics, committed = served(after.bootstrap)
    finally:
        after.stop()
    problems = check(acked, topics, committed)
    if exit_code is not None and exit_code < 0:
        # a failed write is reported and the broker exits, never killed by a signal of its own
        # (the injector once overran a signal stack and the broker died of a heap corruption)
        problems.append(f"the broker died of signal {-exit_code} when stopped")
    v = run_cli(data, "verify")
    if v.returncode not in (0,):
        problems.append(f"verify exit {v.returncode}: {_last_line(v.stdout.decode() + v.stderr.decode())}")
    trial.outcome = "ok" if not problems else "; ".join(problems[:3])
    if acked.errors:
        trial.detail = (trial.detail + " " + acked.errors[0]).strip()
    trial.seconds = time.monotonic() - t0
    return trial


def _retarget(glob: str, data_dir: str) -> str:
    """The census run's glob, for the trial's data dir."""
    marker = f"{os.sep}census{os.sep}data"
    i = glob.find(marker)
    return data_dir + glob[i + len(marker):] if i >= 0 else glob


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def choose(points: list[Point], names: list[str]) -> list[Point]:
    """The points whose description matches one of the fnmatch patterns ``names``."""
    return [p for p in points if any(fnmatch.fnmatch(str(p), n) for n in names)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[],
                    help="fnmatch pattern over a point's description, e.g. '*pwrite*topic .log'")
    ap.add_argument("--list", action="store_true", help="list the injection points and stop")
    ap.add_argument("--write", action="store_true", help="write the table to tests/faults/RESULTS.md")
    ap.add_argument("--keep", action="store_true", help="keep the trials' data dirs")
    args = ap.parse_args(argv)
    injector = build_injector()
    if injector is None:
        print("no C compiler (gcc or cc): the injector cannot be built", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="compactlog-faults-")
    try:
        counts, _ = run_census(work, injector)
        order = ["pwrite", "fsync", "write", "rename", "ftruncate", "create", "mkdir"]
        points = sorted(points_of(counts), key=lambda p: order.index(p.syscall) if p.syscall in order else 99)
        if args.only:
            points = choose(points, args.only)
        kinds = len(counts)
        print(f"{kinds} (system call, file kind) pairs in the census; {len(points)} injection points")
        if args.list:
            for p in points:
                print(f"  {p}")
            return 0
        trials = []
        for n, p in enumerate(points):
            try:
                t = run_trial(work, injector, p, n)
            except Exception as e:          # the trial itself broke: counted as a failure
                t = Trial(p, fired=True, outcome=f"trial error: {type(e).__name__}: {_last_line(str(e))}")
            trials.append(t)
            print(f"{'ok  ' if t.outcome == 'ok' else 'FAIL'} {p}  ({t.seconds:.1f} s, fired={t.fired}, "
                  f"acked={t.acked}, errors={t.errors}){'' if t.outcome == 'ok' else ': ' + t.outcome}",
                  flush=True)
            if not args.keep:
                shutil.rmtree(os.path.join(work, f"trial-{n}"), ignore_errors=True)
        failed = [t for t in trials if t.outcome != "ok"]
        fired = sum(t.fired for t in trials)
        print(f"\n{len(trials)} trials, {fired} faults fired, {len(failed)} broke a promise")
        if args.write:
            _write_results(counts, trials)
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept in {work}")


def _write_results(counts: dict, trials: list[Trial]) -> None:
    lines = ["# Storage fault campaign: results", "",
             "Written by `python tests/faults/campaign.py --write` (see its docstring for the checks).", "",
             f"{len(counts)} (system call, file kind) pairs in the census run; {len(trials)} injection points "
             f"(first and last occurrence of each, every failure that applies); "
             f"{sum(t.fired for t in trials)} fired; "
             f"{sum(t.outcome != 'ok' for t in trials)} broke a promise.", "",
             "| system call | file kind | occurrence | failure | fired | records acked | client errors | result |",
             "|---|---|---|---|---|---|---|---|"]
    for t in trials:
        p = t.point
        lines.append(f"| {p.syscall} | {p.kind} | {p.occurrence} | {p.failure} | {'yes' if t.fired else 'no'} | "
                     f"{t.acked} | {t.errors} | {t.outcome} |")
    with open(os.path.join(HERE, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
