"""The remote tier's S3 client: obstore against boto3 on the same moto server, in one run (a
script, not a test).

    .venv/bin/python benchmarks/object_store.py [--small 200] [--large 12] [--objects 8]

Starts ``moto_server`` (moto's S3 API) on 127.0.0.1 as a child process, so the server does not
share the clients' interpreter lock, and measures for each client, the rounds interleaved:

  * 16 KiB ranged GET latency (a consumer fetch through the remote offset index), ``--small`` times;
  * 12 MiB whole GET latency (a Spark task or a compaction reading a segment), ``--large`` times;
  * upload throughput of ``--objects`` 12 MiB objects with create-only puts (``If-None-Match: *``);
  * requests per GB uploaded and read, counted through a logging proxy in a separate untimed pass:
    uploads as compactlog writes a segment (``.log`` + ``.indexes`` + ``.rsm-manifest``), reads as
    16 KiB ranges, as 4 MiB chunk-aligned ranges (the fetch cache's unit, ``rsm.config.chunk.size``)
    and as whole objects.

moto answers in ~5 ms and one request at a time, so it bounds both clients: this compares client
overhead on this machine, not S3's latency. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from compactlog.record.remote_log_metadata import (  # noqa: E402
    RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition)
from compactlog.storage.remote import keys  # noqa: E402
from compactlog.storage.remote.segment_objects import SegmentFiles, upload_segment  # noqa: E402
from compactlog.storage.remote.store import open_store  # noqa: E402
from s3_support import ACCESS_KEY, REGION, SECRET_KEY, FaultProxy  # noqa: E402

KiB, MiB, GB = 1 << 10, 1 << 20, 10**9
BUCKET = "bench-bucket"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:                               # bounded by the server's start, not a fixed sleep
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=2).read()
            return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"moto_server did not start on {endpoint}")
            time.sleep(0.05)


def boto3_client(endpoint: str):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                        region_name=REGION, config=Config(s3={"addressing_style": "path"},
                                                          retries={"max_attempts": 1}))


def props(endpoint: str) -> dict:
    return {"rsm.config.storage.s3.bucket.name": BUCKET, "rsm.config.storage.s3.region": REGION,
            "rsm.config.storage.s3.endpoint.url": endpoint, "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": ACCESS_KEY,
            "rsm.config.storage.aws.secret.access.key": SECRET_KEY}


class Obstore:
    name = "obstore"

    def __init__(self, endpoint):
        self.store = open_store(props(endpoint))

    def put(self, key, data):
        self.store.put_if_absent(key, data)

    def get(self, key):
        return self.store.get(key).data

    def get_range(self, key, start, end):
        return self.store.get_range(key, start, end)


class Boto3:
    name = "boto3"

    def __init__(self, endpoint):
        self.s3 = boto3_client(endpoint)

    def put(self, key, data):
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=data, IfNoneMatch="*")

    def get(self, key):
        return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def get_range(self, key, start, end):
        return self.s3.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={start}-{end - 1}")["Body"].read()


def seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def summary(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median_ms": round(statistics.median(xs) * 1000, 2),
            "p90_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.9))] * 1000, 2), "n": len(xs)}


def latency(clients, small: int, large: int, objects: int) -> dict:
    big = os.urandom(12 * MiB)
    for c in clients:                           # the objects read, one per client
        c.put(f"read/{c.name}/seg.log", big)
        c.get(f"read/{c.name}/seg.log")         # warm-up: connections, first request
    out = {c.name: {"range16k": [], "get12m": [], "put12m": []} for c in clients}
    rng = __import__("random").Random(7)
    for i in range(small):
        start = rng.randrange(0, 12 * MiB - 16 * KiB)
        for c in (clients if i % 2 == 0 else clients[::-1]):
            out[c.name]["range16k"].append(seconds(lambda: c.get_range(f"read/{c.name}/seg.log",
                                                                       start, start + 16 * KiB)))
    for i in range(large):
        for c in (clients if i % 2 == 0 else clients[::-1]):
            out[c.name]["get12m"].append(seconds(lambda: c.get(f"read/{c.name}/seg.log")))
    for i in range(objects):
        for c in (clients if i % 2 == 0 else clients[::-1]):
            out[c.name]["put12m"].append(seconds(lambda: c.put(f"up/{c.name}/{i}", big)))
    result = {}
    for name, series in out.items():
        result[name] = {k: summary(v) for k, v in series.items()}
        result[name]["upload_MBps"] = round(12 * MiB * len(series["put12m"]) / sum(series["put12m"]) / 1e6, 1)
    return result


def requests_per_gb(endpoint: str, segments: int) -> dict:
    """Requests counted through a logging proxy (untimed)."""
    proxy = FaultProxy(endpoint)
    try:
        store = open_store(props(proxy.endpoint))
        log = os.urandom(12 * MiB)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "seg.log")
            with open(path, "wb") as f:
                f.write(log)
            seg = SegmentFiles(path, os.urandom(8 * KiB), os.urandom(12 * KiB), os.urandom(200), b"0\n1\n0 0\n")
            tip = TopicIdPartition("MWJ6FHTfRYy67jzwZdeqSQ", "bench", 0)
            proxy.log.clear()
            mains = []
            for i in range(segments):
                m = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, keys.new_uuid()), i * 1000, i * 1000 + 999,
                                             1, 0, 0, {0: i * 1000}, len(log))
                mains.append(upload_segment(store, "bench/", m, seg, chunk_size=4 * MiB).key)
            uploaded = segments * len(log)
            up = len(proxy.log)
        counts = {"upload_segment": round(up / (uploaded / GB))}
        for label, size in (("read_16KiB_ranges", 16 * KiB), ("read_4MiB_chunks", 4 * MiB)):
            proxy.log.clear()
            key = mains[0].key(keys.LOG)
            for start in range(0, len(log), size):
                store.get_range(key, start, min(start + size, len(log)))
            counts[label] = round(len(proxy.log) / (len(log) / GB))
        proxy.log.clear()
        for k in mains:
            store.get(k.key(keys.LOG))
        counts["read_whole_objects"] = round(len(proxy.log) / (uploaded / GB))
        return counts
    finally:
        proxy.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", type=int, default=200, help="16 KiB ranged GETs per client")
    ap.add_argument("--large", type=int, default=12, help="12 MiB GETs per client")
    ap.add_argument("--objects", type=int, default=8, help="12 MiB uploads per client")
    args = ap.parse_args()
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    proc, endpoint = start_moto()
    try:
        boto3_client(endpoint).create_bucket(Bucket=BUCKET)
        clients = [Obstore(endpoint), Boto3(endpoint)]
        lat = latency(clients, args.small, args.large, args.objects)
        reqs = requests_per_gb(endpoint, args.objects)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"moto {__import__('moto').__version__}, obstore {__import__('obstore').__version__}, "
          f"boto3 {__import__('boto3').__version__}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'client':8} {'16KiB range GET':>22} {'12MiB GET':>22} {'12MiB PUT':>22} {'upload MB/s':>12}")
    for name, r in lat.items():
        cell = lambda s: f"{s['median_ms']:8.2f} ms (p90 {s['p90_ms']:.1f})"  # noqa: E731
        print(f"{name:8} {cell(r['range16k']):>22} {cell(r['get12m']):>22} {cell(r['put12m']):>22} "
              f"{r['upload_MBps']:>12}")
    print("requests per GB: " + ", ".join(f"{k} {v}" for k, v in reqs.items()))
    print(json.dumps({"latency": lat, "requests_per_gb": reqs}))


if __name__ == "__main__":
    main()
