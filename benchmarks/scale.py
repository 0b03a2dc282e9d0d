"""Many partitions on one broker (a script, not a test): start, produce, Metadata, idle CPU, fds.

    cd /work/main && PYTHONPATH=$PWD .venv/bin/python /path/to/benchmarks/scale.py   # main's code
    PYTHONPATH=$PWD .venv/bin/python benchmarks/scale.py                             # this tree's
    .venv/bin/python benchmarks/scale.py --partitions 10000 --startup-runs 0 --metadata-topics '' \
        --trees before=/work/main,after=.          # the partition figures of two checkouts, one run

The broker (``compactlog serve``) and the data-dir builder run the code found first on
PYTHONPATH, so one script measures two checkouts the same way. Figures, for each size in
``--partitions`` (topics of 10 partitions, one record in each partition):

- start after a clean stop, and after kill -9 (spawn -> "] started" in the broker's log; the
  kill -9 comes after a record was written to every partition, so every log needs recovery),
  then a produce while the logs are being recovered, and when every log is recovered;
- a produce of one record to each of ``--produce`` partitions (confluent-kafka, acks=all),
  first send -> last acknowledgement; then first writes: a topic of as many partitions made by
  CreateTopics, one record to each of them (never written), one more to each of the written ones
  and to the new ones (the new topic is deleted after);
- an all-topics Metadata (AdminClient.list_topics), the median of 5;
- open file descriptors after start and after the produce, and whether the broker starts at all
  under ``ulimit -n 1024``;
- SIGTERM -> exit (with every log open, and after every log was recovered), and the span between
  the broker's "shutting down" and "shut down completed" lines.

Then, on dirs of 50, 300 and 2,000 one-partition topics, the all-topics Metadata time, and on
the 300-topic dir the broker's CPU seconds over ``--idle-seconds`` of idleness (every 10th topic
compacted, so the log cleaner has something to look at).

First, start-up (``--startup-runs`` runs each, the median): the broker on an empty dir (spawn ->
"] started"), and read commands and a one-record produce on a small dir (3 partitions, 100
records), spawn -> exit, each also with numba's compiled kernels forced (the baseline).

Data dirs are built offline with fsync turned off (the builder's durability is not measured).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COMMAND = [sys.executable, "-m", "compactlog.cli.main"]
START_TIMEOUT_S = 180
PRODUCE_TIMEOUT_S = 90


# -- building a data dir (in a subprocess, with the code under test) ---------------------------

_BUILD = r"""
import json, os, sys
os.fsync = lambda fd: None
from compactlog.storage.datadir import DataDir
path, topics, parts, compact_every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dd = DataDir(path, create=True, writable=True)
for i in range(topics):
    name = f"t{i:05d}"
    configs = {"cleanup.policy": "compact"} if compact_every and i % compact_every == 0 else {}
    dd.create_topic(name, parts, configs)
    for p in range(parts):
        log = dd.open_log(name, p)
        log.append_records([b"key-%d" % p], [b"value"])
        log.close()
        dd.logs.pop((name, p))
dd.close()
"""


def build(path: str, topics: int, partitions: int, compact_every: int = 0) -> float:
    shutil.rmtree(path, ignore_errors=True)
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", _BUILD, path, str(topics), str(partitions), str(compact_every)],
                   check=True)
    return time.monotonic() - started


# -- the broker ---------------------------------------------------------------------------------

class Broker:
    def __init__(self, data_dir: str, nofile: int | None = None):
        self.data_dir = data_dir
        self.nofile = nofile
        self.log_path = data_dir + ".log"
        self.proc = None
        self.port = None

    def start(self) -> float | str:
        """Seconds from spawn to "] started", or the reason it did not start."""
        open(self.log_path, "w").close()
        nofile = self.nofile

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        t0 = self.t0 = time.monotonic()
        self.proc = subprocess.Popen(COMMAND + ["--data-dir", self.data_dir, "--override",
                                                "listeners=PLAINTEXT://127.0.0.1:0", "--override",
                                                "metrics.listener=127.0.0.1:0", "serve"],
                                     stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=limit)
        while time.monotonic() - t0 < START_TIMEOUT_S:
            text = self.log()
            if "] started" in text:
                elapsed = time.monotonic() - t0
                for line in text.splitlines():
                    if "Awaiting socket connections on" in line:
                        self.port = int(line.split("Awaiting socket connections on ")[1].split()[0]
                                        .rstrip(".").rsplit(":", 1)[1])
                return elapsed
            if self.proc.poll() is not None:
                lines = [ln for ln in text.splitlines() if ln.strip()]
                return "refused: " + (lines[-1][:150] if lines else f"exit {self.proc.returncode}")
            time.sleep(0.02)
        self.kill()
        return f"not started in {START_TIMEOUT_S} s"

    def wait_for(self, text: str, before_start: str) -> float | str:
        """Seconds from spawn to a log line holding ``text`` ("before start" when the broker
        logged ``before_start`` instead, before it started)."""
        while time.monotonic() - self.t0 < START_TIMEOUT_S:
            log = self.log()
            if text in log:
                for line in log.splitlines():
                    if text in line:
                        return line.split(" in ")[-1].split(" (")[0] + " in the background, " + \
                            f"{time.monotonic() - self.t0:.1f} s after spawn"
            if before_start in log.split("] started", 1)[0]:
                return "before the broker started (see the start figure)"
            time.sleep(0.05)
        return f"not in {START_TIMEOUT_S} s"

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> float:
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return time.monotonic() - t0

    def stop_figure(self) -> str:
        """SIGTERM -> exit, and the span between the broker's "shutting down" and "shut down
        completed" lines (its own shutdown: connections, coordinators, closing every log)."""
        took = self.stop()
        stamps = {}
        for line in self.log().splitlines():
            for key in ("] shutting down", "] shut down completed"):
                if key in line:
                    stamps[key] = _log_time(line)
        if len(stamps) < 2:
            return f"{took:.2f} s (no 'shut down completed' line: exit {self.proc.returncode})"
        inner = stamps["] shut down completed"] - stamps["] shutting down"]
        return f"{took:.2f} s ({inner:.2f} s from 'shutting down' to 'shut down completed')"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _log_time(line: str) -> float:
    """Seconds of a ``[YYYY-mm-dd HH:MM:SS,mmm]`` log line's time stamp."""
    stamp = line[1:24]
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:23]) / 1000


# -- clients ------------------------------------------------------------------------------------

def metadata_seconds(bootstrap: str, expect_topics: int, runs: int = 5) -> float | str:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    times = []
    try:
        for _ in range(runs + 1):
            t0 = time.monotonic()
            md = admin.list_topics(timeout=120)
            times.append(time.monotonic() - t0)
            if len(md.topics) < expect_topics:
                return f"{len(md.topics)} of {expect_topics} topics"
    except Exception as e:      # noqa: BLE001 - a figure, not a test
        return f"failed: {e}"
    return statistics.median(times[1:])


def produce_one_each(bootstrap: str, topics: list[str], partitions: int) -> tuple[float, int, int]:
    """One record to each partition of ``topics``; (seconds, acknowledged, sent)."""
    from confluent_kafka import Producer
    acked = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": PRODUCE_TIMEOUT_S * 1000,
                         "enable.idempotence": False, "retries": 0})

    def done(err, msg):
        if err is None:
            acked.append(1)

    sent = 0
    t0 = time.monotonic()
    for topic in topics:
        for p in range(partitions):
            producer.produce(topic, key=b"k", value=b"v", partition=p, on_delivery=done)
            sent += 1
            producer.poll(0)
    producer.flush(PRODUCE_TIMEOUT_S + 10)
    return time.monotonic() - t0, len(acked), sent


# -- the runs -----------------------------------------------------------------------------------

def fmt(v, unit="s") -> str:
    if isinstance(v, float):
        return f"{v:.3f} {unit}"
    return str(v)


def first_writes(b: Broker, written: list[str], n: int, out: dict) -> None:
    """One record to each of ``n`` partitions CreateTopics has just made (never written, their
    logs opened by the creation), beside one more record to each of the written partitions the
    produce before wrote to (open now), and to the new ones again; the new topic is deleted
    after, so that the figures after it are those of the dir as built."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    t0 = time.monotonic()
    admin.create_topics([NewTopic("fresh", n, 1)])["fresh"].result(120)
    out[f"CreateTopics, one topic of {n} partitions"] = time.monotonic() - t0
    secs, acked, sent = produce_one_each(b.bootstrap, ["fresh"], n)
    out[f"  1 record to each of its {sent} never-written partitions"] = f"{secs:.2f} s ({acked} of {sent} acked)"
    secs, acked, sent = produce_one_each(b.bootstrap, written, 10)
    out[f"  1 more record to each of the {sent} written ones (open)"] = f"{secs:.2f} s ({acked} of {sent} acked)"
    secs, acked, sent = produce_one_each(b.bootstrap, ["fresh"], n)
    out[f"  1 more record to each of the {sent} new ones"] = f"{secs:.2f} s ({acked} of {sent} acked)"
    admin.delete_topics(["fresh"])["fresh"].result(120)


def many_partitions(base: str, total: int, produce_to: int, report: dict, tree: str = "") -> None:
    topics = total // 10
    path = os.path.join(base, f"p{total}{tree}")
    name = f"{total} partitions{', ' + tree if tree else ''}"
    code = subprocess.run([sys.executable, "-c", "import compactlog, os; "
                           "print(os.path.dirname(os.path.dirname(compactlog.__file__)))"],
                          capture_output=True, text=True).stdout.strip()
    print(f"[{name}] (compactlog from {code}) building ({topics} topics x 10) ...", flush=True)
    report[f"build {name}"] = build(path, topics, 10)
    out = {}
    b = Broker(path)
    first = b.start()                       # no producer-id file yet: every log is opened first
    out["first start (every log opened)"] = first
    if isinstance(first, str):
        report[name] = out
        print(f"  {first}", flush=True)
        return
    out["stop (SIGTERM, every log open)"] = b.stop_figure()
    b = Broker(path)
    out["start after clean stop"] = b.start()
    if isinstance(out["start after clean stop"], str):
        report[name] = out
        return
    out["fds after start"] = b.fds()
    out[f"Metadata, all {topics} topics"] = metadata_seconds(b.bootstrap, topics)
    names = [f"t{i:05d}" for i in range(produce_to // 10)]
    secs, acked, sent = produce_one_each(b.bootstrap, names, 10)
    out[f"produce 1 record to each of {sent} partitions"] = f"{secs:.2f} s ({acked} of {sent} acked)"
    out["fds after produce"] = b.fds()
    first_writes(b, names, produce_to, out)
    others = [f"t{i:05d}" for i in range(produce_to // 10, topics)]
    if others:
        secs, acked, sent = produce_one_each(b.bootstrap, others, 10)
        out[f"produce 1 record to each of the other {sent} partitions"] = f"{secs:.2f} s ({acked} of {sent} acked)"
    b.kill()                                # every partition written since its last checkpoint
    b = Broker(path)
    out["start after kill -9 (every partition written)"] = b.start()
    if not isinstance(out["start after kill -9 (every partition written)"], str):
        secs, acked, sent = produce_one_each(b.bootstrap, names, 10)
        out[f"  then produce to {sent} partitions"] = f"{secs:.2f} s ({acked} of {sent} acked)"
        done = b.wait_for(" Recovered ", "Loaded ")
        out["  every log recovered (spawn ->)"] = done
        out["  stop (SIGTERM, every log recovered)"] = b.stop_figure()
    b = Broker(path, nofile=1024)
    res = b.start()
    out["start under ulimit -n 1024"] = "ok" if not isinstance(res, str) else res
    if not isinstance(res, str):
        out["fds under ulimit -n 1024, after start"] = b.fds()
        secs, acked, sent = produce_one_each(b.bootstrap, names, 10)
        out[f"  produce to {sent} partitions under it"] = f"{secs:.2f} s ({acked} of {sent} acked)"
        out["  fds after it"] = b.fds()
        b.stop()
    b.kill()
    report[name] = out
    for k, v in out.items():
        print(f"  {k}: {fmt(v)}", flush=True)
    shutil.rmtree(path, ignore_errors=True)


def metadata_and_idle(base: str, counts: list[int], idle_topics: int, idle_s: float, report: dict) -> None:
    out = {}
    for n in counts:
        path = os.path.join(base, f"m{n}")
        build(path, n, 1, compact_every=10)
        b = Broker(path)
        started = b.start()
        if isinstance(started, str):
            out[f"Metadata, all {n} topics"] = started
            continue
        out[f"Metadata, all {n} topics"] = metadata_seconds(b.bootstrap, n)
        print(f"  Metadata, all {n} topics: {fmt(out[f'Metadata, all {n} topics'])}", flush=True)
        if n == idle_topics:
            time.sleep(5)
            c0 = b.cpu_seconds()
            time.sleep(idle_s)
            used = b.cpu_seconds() - c0
            out[f"idle CPU, {n} topics"] = f"{used:.2f} CPU-s in {idle_s:g} s ({60 * used / idle_s:.2f} per minute)"
            print(f"  idle CPU, {n} topics: {out[f'idle CPU, {n} topics']}", flush=True)
        b.stop()
        shutil.rmtree(path, ignore_errors=True)
    report["topics"] = out


def startup(base: str, runs: int, report: dict) -> None:
    out = {}
    times = []
    for i in range(runs):
        b = Broker(os.path.join(base, f"empty{i}"))
        started = b.start()
        b.stop()
        if isinstance(started, str):
            times = started
            break
        times.append(started)
    out["broker ready, empty dir"] = statistics.median(times) if isinstance(times, list) else times
    small = os.path.join(base, "small")
    subprocess.run(COMMAND + ["--data-dir", small, "topics", "create", "--topic", "t", "--partitions", "3"],
                   check=True, capture_output=True)
    subprocess.run(COMMAND + ["--data-dir", small, "produce", "--topic", "t", "--property", "parse.key=true",
                              "--property", "key.separator=:"],
                   input="".join(f"k{i}:v{i}\n" for i in range(100)).encode(), check=True, capture_output=True)
    # each command as it runs (kernels in plain Python on small work), then with numba's compiled
    # kernels forced (COMPACTLOG_KERNELS=jit: what every command paid before): the baseline
    produce = ["produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:"]
    for args in (["topics", "list"], ["topics", "describe", "--topic", "t"],
                 ["consume", "--topic", "t", "--from-beginning"], ["dump-log", "--files", os.path.join(small, "t-0")],
                 ["verify"], produce):
        for kernels in ("auto", "jit"):
            env = {**os.environ, "COMPACTLOG_KERNELS": kernels}
            times = []
            for _ in range(runs):
                t0 = time.monotonic()
                r = subprocess.run(COMMAND + ["--data-dir", small] + args, capture_output=True, env=env,
                                   input=b"k:v\n" if args is produce else None)
                times.append(time.monotonic() - t0 if r.returncode == 0 else f"exit {r.returncode}")
            key = ("read command: " if args is not produce else "command: ") + \
                " ".join(a if not a.startswith(base) else "t-0" for a in args[:3]) + \
                (" (compiled kernels forced)" if kernels == "jit" else "")
            ok = [t for t in times if isinstance(t, float)]
            out[key] = statistics.median(ok) if len(ok) == len(times) else times[-1]
    report["start-up"] = out
    for k, v in out.items():
        print(f"  {k}: {fmt(v)}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", default="2000,10000", help="sizes, comma separated")
    ap.add_argument("--produce", type=int, default=2000)
    ap.add_argument("--metadata-topics", default="50,300,2000")
    ap.add_argument("--idle-topics", type=int, default=300)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--startup-runs", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join("build", "bench-scale"))
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--trees", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), default=None,
                    help="NAME=PATH,NAME=PATH: the partition-count figures for each checkout in turn, "
                         "each size built and run with that checkout's code (an A/B in one run)")
    args = ap.parse_args(argv)
    import compactlog
    print(f"$ {' '.join([os.path.basename(sys.executable)] + sys.argv)}  "
          f"(compactlog from {os.path.dirname(os.path.dirname(compactlog.__file__))})", flush=True)
    base = os.path.abspath(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    report: dict = {}
    if args.startup_runs > 0:
        print("[start-up]", flush=True)
        startup(base, args.startup_runs, report)
    for n in (int(x) for x in args.partitions.split(",") if x):
        for tree, tree_path in (args.trees or {"": None}).items():
            if tree_path is not None:       # the broker and the builder run that checkout's code
                os.environ["PYTHONPATH"] = os.path.abspath(tree_path)
                os.environ["PYTHONSAFEPATH"] = "1"      # not the working directory's (-m and -c put it first)
            many_partitions(base, n, min(args.produce, n), report, tree)
    metadata_and_idle(base, [int(x) for x in args.metadata_topics.split(",") if x], args.idle_topics,
                      args.idle_seconds, report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2, default=str)
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
