"""One pass of ``compactlog clean`` on local Spark over many distinct keys (a script, not a test;
issue 28 asks 100M keys on 2 cores in under 6 minutes on a quiet machine, the driver under 1 GiB).

    .venv/bin/python benchmarks/spark_many_keys.py --keys 100000000 [--master local[2]] [--dir D]

Writes one partition of ``--keys`` records, every key distinct (``clean_rss.write_log``: 12-byte
keys, 10-byte values, batches of 1,000, 100 MiB segments, ~28 bytes a record), then runs
``compactlog --data-dir D clean --engine spark --spark-master MASTER`` as its own process and
samples, every 0.2 s, the resident memory of the command's Python process (the driver's Python)
and of its JVM (the Spark driver, whose executors run in it in local mode; their Python workers
are counted apart). Reports wall and CPU seconds (the command and every process under it), the
map the engine chose (a map too large for one task goes to the distributed map), and the peaks.
Disk: the log and its cleaned copy while written (~2x the log); removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from clean_rss import NOW, write_log  # noqa: E402


def _tree(root: int) -> dict[int, tuple[str, int, float]]:
    """pid -> (comm, RSS bytes, CPU seconds) for ``root`` and every process under it."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                head, rest = f.read().rsplit(b")", 1)
            fields = rest.split()
            procs[int(entry)] = (head.split(b"(", 1)[1].decode(), int(fields[1]),
                                 int(fields[21]) * page,
                                 (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    out, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        if pid in procs:
            comm, _, rss, cpu = procs[pid]
            out[pid] = (comm, rss, cpu)
        frontier += [p for p, v in procs.items() if v[1] == pid and p not in out]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--segment-bytes", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    work = args.dir or tempfile.mkdtemp(prefix="spark-many-keys-")
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    t0 = time.perf_counter()
    size = write_log(data, args.keys, args.segment_bytes)
    print(f"wrote {args.keys:,} distinct keys, {size / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s", flush=True)
    cmd = [sys.executable, "-m", "compactlog", "--data-dir", data, "clean", "--now-ms", str(NOW),
           "--engine", "spark", "--spark-master", args.master]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak_py = peak_jvm = peak_workers = 0
    cpu = {}
    import threading
    outs = {}
    readers = [threading.Thread(target=lambda k, s: outs.__setitem__(k, s.read()), args=(k, s), daemon=True)
               for k, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        tree = _tree(proc.pid)
        for pid, (comm, rss, c) in tree.items():
            cpu[pid] = c
        peak_py = max(peak_py, tree.get(proc.pid, ("", 0, 0))[1])
        peak_jvm = max([peak_jvm] + [rss for pid, (comm, rss, _) in tree.items() if comm == "java"])
        peak_workers = max(peak_workers, sum(rss for pid, (comm, rss, _) in tree.items()
                                             if pid != proc.pid and comm != "java"))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    for r in readers:
        r.join()
    text = (outs.get("out", b"") + outs.get("err", b"")).decode("utf-8", "replace")
    print(text[-1500:])
    print(f"exit {proc.returncode}; wall {wall:.0f} s ({wall / 60:.1f} min); CPU of the tree (sampled) "
          f"{sum(cpu.values()):.0f} s; peak RSS: driver Python {peak_py / 2**20:.0f} MiB, driver JVM "
          f"{peak_jvm / 2**20:.0f} MiB, Python workers together {peak_workers / 2**20:.0f} MiB")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
