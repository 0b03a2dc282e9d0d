"""Reading a partition from the remote tier against reading it from the local one, in one run
(a script, not a test).

    .venv/bin/python benchmarks/tiered_read.py [--mb 32] [--fetch-kb 1024] [--chunk-mb 4]

Fills a tiered partition of a scratch data dir (1 MiB segments, 1 KiB records), copies it to
``moto_server`` (a child process on 127.0.0.1, behind a logging proxy that counts requests) with
the remote log manager, and reads it from offset 0 to the end twice in fetch-sized steps: through
``Log.read`` (the local segments) and through ``RemoteLogManager.read`` with local retention
having trimmed them (ranged GETs of ``rsm.config.chunk.size`` chunks, a cold cache). Prints
records/s, MB/s and process CPU seconds for each, and the remote read's GET requests per GB,
as one JSON line too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _s3_bench import cpu, moto_bucket  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--fetch-kb", type=int, default=1024)
    ap.add_argument("--chunk-mb", type=int, default=4)
    args = ap.parse_args()

    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from compactlog.storage.remote.manager import RemoteLogManager

    with moto_bucket("bench") as (endpoint, proxy, moto):
        props = {"remote.log.storage.system.enable": "true",
                 **moto.properties("bench", endpoint=proxy.endpoint, **{
                     "rsm.config.chunk.size": str(args.chunk_mb << 20),
                     "rsm.config.storage.s3.api.call.timeout": "60000",
                     "rsm.config.storage.s3.api.call.attempt.timeout": "30000"}),
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
        with tempfile.TemporaryDirectory() as tmp:
            dd = DataDir(os.path.join(tmp, "data"), broker=BrokerConfig(props), create=True, writable=True)
            dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": str(1 << 20),
                                     "local.retention.bytes": "0"})
            log = dd.open_log("t", 0)
            value = os.urandom(1000)
            n = args.mb * 1024
            for i in range(0, n, 500):
                log.append_records([b"k%d" % j for j in range(i, i + 500)], [value] * 500)
            log.roll()
            rm = RemoteLogManager(dd, broker_id=0, cluster_id="bench", open_log=dd.open_log,
                                  create_topic=lambda t, p, c: dd.create_topic(t, p, c))
            rm.start()
            rm.copy_partition(log)
            end = log.log_end_offset
            step = args.fetch_kb << 10

            def read_all(reader) -> tuple[int, float, float, int]:
                t0, c0 = time.perf_counter(), cpu()
                offset, nbytes = 0, 0
                while offset < end:
                    data, last = reader(offset)
                    nbytes += len(data)
                    offset = last + 1
                return end, time.perf_counter() - t0, cpu() - c0, nbytes

            from compactlog.record.batch import iter_batches

            def last_offset(data: bytes) -> int:
                b = None
                for b in iter_batches(data):
                    pass
                return b.last_offset

            def local(offset):
                data = log.read(offset, step)[1]
                return data, last_offset(data)

            def remote(offset):
                data = rm.read(log, offset, step, True, False).records
                return data, last_offset(data)

            lres = read_all(local)
            dd.delete_old_segments(log)
            proxy.log.clear()
            rres = read_all(remote)
            gets = sum(1 for m, _, _ in proxy.log if m == "GET")
            out = {}
            for name, (recs, secs, cpus, nbytes) in (("local", lres), ("remote", rres)):
                out[name] = {"records_per_s": round(recs / secs), "mb_per_s": round(nbytes / secs / 1e6, 1),
                             "cpu_s": round(cpus, 2), "seconds": round(secs, 2)}
                print(f"{name:7s} {recs / secs:12,.0f} records/s {nbytes / secs / 1e6:8.1f} MB/s "
                      f"{cpus:6.2f} CPU s {secs:6.2f} s")
            per_gb = gets / (rres[3] / 1e9)
            out["remote_gets_per_gb"] = round(per_gb)
            print(f"remote read: {gets} GETs for {rres[3] / 1e6:.1f} MB = {per_gb:,.0f} GETs per GB")
            print(json.dumps(out))
            rm.close()
            dd.close()


if __name__ == "__main__":
    main()
