"""Offline reads of a tiered partition (what ``consume``, ``verify`` and the ``kafka-log`` Spark
source do with no broker) from the remote tier against the same partition read locally, in one
run (a script, not a test).

    .venv/bin/python benchmarks/remote_offline_read.py [--mb 32]

Fills a tiered partition of a scratch data dir (1 MiB segments, 1 KiB records), copies it to
``moto_server`` (a child process on 127.0.0.1, behind a logging proxy that counts requests) with
the remote log manager, writes the store settings to the data dir's ``server.properties``, then
reads every record as Arrow columns (``PartitionReader.read_columns``, the Spark task's path)
twice: from the local segments, and, local retention having trimmed them, through the tiered
source (``storage/remote/tiered_read.py``: one whole-object GET per segment, nothing written to
disk). Prints records/s, MB/s, process CPU seconds and the remote read's requests (GET, HEAD,
LIST and any write) per GB, as one JSON line too.
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
    args = ap.parse_args()

    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from compactlog.storage.reader import PartitionReader
    from compactlog.storage.remote.manager import RemoteLogManager
    from compactlog.storage.remote.tiered_read import TieredSource, partition_source
    from compactlog.storage.segment_source import LocalDirSource

    with moto_bucket("bench") as (endpoint, proxy, moto):
        props = {"remote.log.storage.system.enable": "true",
                 **moto.properties("bench", endpoint=proxy.endpoint, **{
                     "rsm.config.storage.s3.api.call.timeout": "60000",
                     "rsm.config.storage.s3.api.call.attempt.timeout": "30000"}),
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "data")
            dd = DataDir(root, broker=BrokerConfig(props), create=True, writable=True)
            dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": str(1 << 20),
                                     "local.retention.bytes": "0"})
            log = dd.open_log("t", 0)
            value = os.urandom(1000)
            for i in range(0, args.mb * 1024, 500):
                log.append_records([b"k%d" % j for j in range(i, i + 500)], [value] * 500)
            log.roll()
            rm = RemoteLogManager(dd, broker_id=0, cluster_id="bench", open_log=dd.open_log,
                                  create_topic=lambda t, p, c: dd.create_topic(t, p, c))
            rm.start()
            rm.copy_partition(log)
            pdir = os.path.join(root, "t-0")

            def read_all(source) -> tuple[int, float, float, int]:
                t0, c0 = time.perf_counter(), cpu()
                with PartitionReader(source) as r:
                    table = r.read_columns()
                    nbytes = sum(s.size for s in r.segments())
                return table.num_rows, time.perf_counter() - t0, cpu() - c0, nbytes

            read_all(LocalDirSource(pdir))          # the kernels loaded (numba's cache) before timing
            lres = read_all(LocalDirSource(pdir))
            dd.delete_old_segments(log)
            dd.checkpoint_logs()
            rm.close()
            dd.close()
            with open(os.path.join(root, "server.properties"), "w") as f:
                f.write("".join(f"{k}={v}\n" for k, v in props.items()))
            source = partition_source(pdir)
            assert isinstance(source, TieredSource), source
            proxy.log.clear()
            rres = read_all(source)
            assert rres[0] == lres[0], (rres[0], lres[0])
            methods: dict[str, int] = {}
            for m, _, _ in proxy.log:
                methods[m] = methods.get(m, 0) + 1
            out = {}
            for name, (recs, secs, cpus, nbytes) in (("local", lres), ("remote", rres)):
                out[name] = {"records_per_s": round(recs / secs), "mb_per_s": round(nbytes / secs / 1e6, 1),
                             "cpu_s": round(cpus, 2), "seconds": round(secs, 2)}
                print(f"{name:7s} {recs / secs:12,.0f} records/s {nbytes / secs / 1e6:8.1f} MB/s "
                      f"{cpus:6.2f} CPU s {secs:6.2f} s")
            gb = rres[3] / 1e9
            out["remote_requests_per_gb"] = {m: round(n / gb) for m, n in sorted(methods.items())}
            print(f"remote read: {methods} for {rres[3] / 1e6:.1f} MB = "
                  f"{sum(methods.values()) / gb:,.0f} requests per GB")
            print(json.dumps(out))


if __name__ == "__main__":
    main()
