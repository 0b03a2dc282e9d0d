"""The broker's resident memory with many PLAINTEXT connections (a script, not a test).

One ``compactlog serve`` (from whichever tree is first on PYTHONPATH) and ``--connections``
client sockets on one asyncio loop here:

* idle: each connection sends ApiVersions and Metadata, then nothing. RSS a few seconds later,
  and again after ``--idle-wait`` seconds (the broker drops a quiet connection's receive buffer
  after a quarter of connections.max.idle.ms, at most 30 s: 30-60 s at the default 600000).
* active: the same connections then send Produce requests (acks=1) of ``--request-kb`` KiB one
  after another, answered before the next, for ``--active-seconds``; RSS sampled meanwhile
  (median and max) and once they stop.

RSS is RssAnon of /proc/<pid>/status (the heap and the receive buffers, not the mapped segment
files and indexes), in MiB; the first line is the broker's before any client.

    PYTHONPATH=<tree> .venv/bin/python benchmarks/connections_rss.py [--connections 200]
        [--request-kb 4,256] [--active-seconds 8] [--idle-wait 65]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import os
import shutil
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from broker_support import Broker  # noqa: E402

from compactlog.record.batch import BatchSpec, encode_batch  # noqa: E402
from compactlog.server.messages import build, nested  # noqa: E402
from compactlog.server.versions import request_schema, response_schema  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402


def rss_mib(pid: int) -> float:
    """Anonymous resident memory (RssAnon): the heap, the receive buffers; not the mapped
    segment indexes and files (RssFile), which follow the data, not the connections."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no RssAnon")


def frame(api_key: int, version: int, correlation_id: int, body) -> bytes:
    cls = request_schema(api_key, version)
    hdr = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(hdr)(out, hdr(request_api_key=api_key, request_api_version=version,
                                correlation_id=correlation_id, client_id="rss"))
    entity_writer(cls)(out, body)
    data = out.getvalue()
    return struct.pack(">i", len(data)) + data


def produce_frame(topic: str, partition: int, kib: int) -> bytes:
    now = int(time.time() * 1000)
    value = b"v" * 1000
    records = [(i, now, b"k%d" % i, value) for i in range(max(1, kib * 1024 // 1024))]
    cls = request_schema(0, 9)
    body = build(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
                 topic_data=(build(nested(cls, "TopicProduceData"), name=topic, partition_data=(
                     build(nested(cls, "PartitionProduceData"), index=partition,
                           records=encode_batch(BatchSpec(base_offset=0), records)),)),))
    return frame(0, 9, 1, body)


async def answer(reader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def measure(broker: Broker, n: int, kibs: list[int], active_s: float, idle_wait: float) -> None:
    pid = broker.pid
    print(f"broker alone: {rss_mib(pid):.1f} MiB", flush=True)
    conns = []
    for _ in range(n):
        conns.append(await asyncio.open_connection("127.0.0.1", broker.port))
    av_cls = request_schema(18, 3)
    av = frame(18, 3, 1, build(av_cls, client_software_name="rss", client_software_version="1"))
    md_cls = request_schema(3, 9)
    md = frame(3, 9, 2, build(md_cls, topics=(build(nested(md_cls, "MetadataRequestTopic"), name="rss"),),
                              allow_auto_topic_creation=True,
                              include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False))
    for r, w in conns:
        w.write(av + md)
    for r, w in conns:
        await answer(r)
        await answer(r)
    await asyncio.sleep(3)
    print(f"{n} idle connections, 3 s: {rss_mib(pid):.1f} MiB", flush=True)
    if idle_wait > 0:
        await asyncio.sleep(idle_wait)
        print(f"{n} idle connections, {3 + idle_wait:.0f} s: {rss_mib(pid):.1f} MiB", flush=True)
    for kib in kibs:
        frames = [produce_frame("rss", i % 4, kib) for i in range(4)]
        stop = time.monotonic() + active_s
        sent = 0

        async def client(i, r, w):
            nonlocal sent
            f = frames[i % 4]
            while time.monotonic() < stop:
                w.write(f)
                await answer(r)
                sent += 1

        samples = []

        async def sampler():
            while time.monotonic() < stop:
                samples.append(rss_mib(pid))
                await asyncio.sleep(0.25)

        await asyncio.gather(sampler(), *(client(i, r, w) for i, (r, w) in enumerate(conns)))
        samples.sort()
        await asyncio.sleep(1)
        print(f"{n} connections producing {kib} KiB requests ({sent} requests in {active_s:g} s): "
              f"median {samples[len(samples) // 2]:.1f} MiB, max {samples[-1]:.1f} MiB; 1 s after: "
              f"{rss_mib(pid):.1f} MiB", flush=True)
    for r, w in conns:
        w.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--request-kb", type=lambda s: [int(x) for x in s.split(",")], default=[4, 256])
    ap.add_argument("--active-seconds", type=float, default=8.0)
    ap.add_argument("--idle-wait", type=float, default=65.0)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="compactlog-rss-")
    broker = Broker(os.path.join(work, "data"), {"num.partitions": "4", "log.cleaner.enable": "false",
                                                  "metrics.listener": ""}).start()
    try:
        import compactlog
        print(f"compactlog from {os.path.dirname(os.path.dirname(compactlog.__file__))}", flush=True)
        asyncio.run(measure(broker, args.connections, args.request_kb, args.active_seconds, args.idle_wait))
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
