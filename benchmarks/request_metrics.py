"""Broker CPU per cheap request, with and without the request metrics (a script, not a test).

What the broker does per request for its metrics (``server/metrics/requests.py``: the request
observer) is measured as the difference between brokers started from the given checkouts, one of
them (or more) with ``metrics.listener=`` empty (no ``BrokerMetrics`` at all, nothing counted):
each probe sends ``--requests`` requests one after the other on one connection (raw socket, the
next sent when the answer is read) and takes the broker's CPU (its threads' time on a CPU, from
/proc/<pid>/task/*/schedstat, in ns) before and after. Probes:

- ``apiversions``: ApiVersions v2, answered on the event loop (INLINE), ~60 API entries;
- ``metadata``: Metadata v1 with no topics, handed to a worker thread (THREAD).

The brokers run side by side (loopback, free ports, stopped by their pid) and take turns,
``--repeat`` rounds in alternating order; medians of the rounds, µs of broker CPU per request;
the metrics' cost as the median of each round's difference with a broker without metrics.

    .venv/bin/python benchmarks/request_metrics.py --trees main=/work/base,after=.,off=/work/base --off off
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from broker_support import Broker  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """The CPU time of the process's threads (each one's /proc schedstat: nanoseconds, where
    /proc/PID/stat counts clock ticks of 10 ms; the broker's threads live as long as it does)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:       # a thread that ended meanwhile
            pass
    return total / 1e9


def _request(key: int, version: int, body: bytes) -> bytes:
    head = struct.pack(">hhih", key, version, 1, 5) + b"probe"     # header v1: client id "probe"
    return struct.pack(">i", len(head) + len(body)) + head + body


PROBES = {
    "apiversions": _request(18, 2, b""),
    "metadata": _request(3, 1, struct.pack(">i", 0)),      # an empty topic array: no topic
}


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def probe(port: int, frame: bytes, count: int, pid: int, depth: int = 1) -> float:
    """Broker CPU seconds for ``count`` requests sent ``depth`` at a time (1: one after the other;
    more: the broker reads and answers them in turn without waiting for the client, so that less
    of its CPU is waking up and the measure is steadier)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frames = frame * depth

        def some():
            sock.sendall(frames)
            for _ in range(depth):
                size = struct.unpack(">i", _read_exact(sock, 4))[0]
                _read_exact(sock, size)
        for _ in range(max(200 // depth, 1)):        # warm: the connection, the handler's caches
            some()
        cpu0 = cpu_seconds(pid)
        for _ in range(count // depth):
            some()
        return cpu_seconds(pid) - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=lambda s: dict(kv.split("=", 1) for kv in s.split(",")), required=True,
                    help="name=checkout,... one broker per entry (a checkout may appear twice)")
    ap.add_argument("--off", type=lambda s: set(s.split(",")), default=set(),
                    help="names of the entries whose broker runs with metrics.listener= (no metrics)")
    ap.add_argument("--probes", type=lambda s: s.split(","), default=list(PROBES))
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--depth", type=int, default=1, help="requests sent at a time on the connection")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="compactlog-reqmetrics-bench-")
    brokers: dict[str, Broker] = {}
    samples = {(name, p): [] for name in args.trees for p in args.probes}
    try:
        for name, path in args.trees.items():
            overrides = {"num.partitions": "1", "log.cleaner.enable": "false"}
            if name in args.off:
                overrides["metrics.listener"] = ""
            brokers[name] = Broker(os.path.join(work, name), overrides, env={"PYTHONPATH": os.path.abspath(path)}).start()
        order = list(args.trees)
        for rnd in range(args.repeat):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                b = brokers[name]
                for p in args.probes:
                    n = args.requests // args.depth * args.depth
                    us = 1e6 * probe(b.port, PROBES[p], n, b.pid, args.depth) / n
                    samples[(name, p)].append(us)
                    print(f"round {rnd + 1} {name:<8} {p:<12} {us:7.1f} µs CPU per request", flush=True)
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\nmedians (µs of broker CPU per request, range, min):")
    for p in args.probes:
        for name in args.trees:
            rows = samples[(name, p)]
            print(f"{p:<12} {name:<8} {statistics.median(rows):7.1f} ({min(rows):.1f}-{max(rows):.1f})"
                  f"{'  metrics off' if name in args.off else ''}")
        # the metrics' cost: each round's difference with the broker without metrics (the same
        # moment of a shared machine's load), median of the rounds; and the difference of the
        # minimums (the least disturbed round of each)
        for off in sorted(args.off):
            for name in args.trees:
                if name not in args.off:
                    diffs = [x - y for x, y in zip(samples[(name, p)], samples[(off, p)])]
                    print(f"{p:<12} {name:<8} metrics cost over {off}: {statistics.median(diffs):5.1f} µs per "
                          f"request (rounds' median), {min(samples[(name, p)]) - min(samples[(off, p)]):5.1f} "
                          f"(minimums)")

if __name__ == "__main__":
    main()
