"""A clean of a partition whose segments are in the remote tier against the same clean all local,
in one run (a script, not a test).

    .venv/bin/python benchmarks/remote_clean.py [--mb 16] [--keys 2000] [--segment-mb 1]

Two scratch data dirs get the same records (1 KiB values over ``--keys`` keys, ``--segment-mb``
segments). One is an ordinary compacted topic; the other a tiered compacted one whose rolled
segments are copied to ``moto_server`` (a child process on 127.0.0.1 behind a proxy that counts
requests) and trimmed locally, so its cleaner round reads every segment from the bucket (ranged
GETs), writes the compacted ones as new objects and commits them with one manifest CAS
(tiered-storage.md §5). Both are cleaned once by the in-process engine at the same ``now``.
Prints seconds and process CPU seconds of each round, bytes before and after, and the remote
round's requests (and requests per GB read), as one JSON line too.
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
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--segment-mb", type=int, default=1)
    args = ap.parse_args()

    import compactlog.settings  # noqa: F401
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from compactlog.storage.remote.manager import RemoteLogManager

    with moto_bucket("bench") as (endpoint, proxy, moto):
        props = {"remote.log.storage.system.enable": "true",
                 **moto.properties("bench", endpoint=proxy.endpoint, **{
                     "rsm.config.storage.s3.api.call.timeout": "60000",
                     "rsm.config.storage.s3.api.call.attempt.timeout": "30000"}),
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
        value = os.urandom(1000)
        n = args.mb * 1024
        topic = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_mb << 20),
                 "min.cleanable.dirty.ratio": "0.01"}
        with tempfile.TemporaryDirectory() as tmp:
            rounds = {}
            for name in ("local", "remote"):
                dd = DataDir(os.path.join(tmp, name), broker=BrokerConfig(props), create=True, writable=True)
                cfg = dict(topic)
                if name == "remote":
                    cfg.update({"remote.storage.enable": "true", "local.retention.bytes": "0"})
                dd.create_topic("t", 1, cfg)
                log = dd.open_log("t", 0)
                for i in range(0, n, 500):
                    log.append_records([b"k%d" % (j % args.keys) for j in range(i, i + 500)], [value] * 500)
                log.roll()
                rm = None
                if name == "remote":
                    rm = RemoteLogManager(dd, broker_id=0, cluster_id="bench", open_log=dd.open_log,
                                          create_topic=lambda t, p, c: dd.create_topic(t, p, c))
                    rm.start()
                    rm.copy_partition(log)
                    dd.delete_old_segments(log)
                    before = sum(s.size_in_bytes for s in rm.partition(log).manifest.segments)
                else:
                    before = log.size()
                proxy.log.clear()
                t0, c0 = time.perf_counter(), cpu()
                [out] = Cleaner(dd).run(int(time.time() * 1000), topic="t", force=True)
                secs, cpus = time.perf_counter() - t0, cpu() - c0
                if out.error or not out.cleaned:
                    raise SystemExit(f"{name}: the round did not clean: {out.error or out.status.reason}")
                if rm is not None:
                    after = sum(s.size_in_bytes for s in rm.partition(log).manifest.segments)
                    after += sum(s.size for s in log.segments if s.base_offset > log.highest_remote_offset)
                    before += sum(s.size for s in log.segments if s.base_offset > log.highest_remote_offset)
                else:
                    after = log.size()
                reqs = {}
                for m, _, _ in proxy.log:
                    reqs[m] = reqs.get(m, 0) + 1
                rounds[name] = {"seconds": round(secs, 2), "cpu_s": round(cpus, 2), "bytes_before": before,
                                "bytes_after": after, "mb_per_s": round(before / secs / 1e6, 1), "requests": reqs}
                print(f"{name:7s} clean {before / 1e6:7.1f} MB -> {after / 1e6:6.1f} MB in {secs:6.2f} s "
                      f"({before / secs / 1e6:6.1f} MB/s, {cpus:5.2f} CPU s)"
                      + (f", requests {reqs}, {sum(reqs.values()) / (before / 1e9):,.0f} per GB cleaned" if reqs else ""))
                if rm is not None:
                    rm.close()
                dd.close()
            print(json.dumps(rounds))


if __name__ == "__main__":
    main()
