"""``compactlog clean`` offline on a stopped broker's data dir whose compacted topic is tiered (the
remote tier cleaned with the local segments: storage/remote/offline.py) against the same records
all local, in one run (a script, not a test).

    .venv/bin/python benchmarks/offline_tiered_clean.py [--mb 16] [--rewrites 4]

Two scratch data dirs get the same compacted partition (1 MiB segments, 1 KiB values, every key
written ``--rewrites`` times); in the first, the broker's remote log manager copies every rolled
segment to ``moto_server`` (a child process on 127.0.0.1, behind the tests' proxy, which counts
requests) and local retention trims them. Then ``clean --force --engine local`` runs as its own
process on each. Prints wall and CPU seconds of both, their ratio, the bytes each tier held before
and after, and the bucket's requests by method and per GB of remote log read, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _s3_bench import child_cpu, moto_bucket  # noqa: E402

COMMAND = [sys.executable, "-m", "compactlog"]


def fill(root: str, props: dict, mb: int, rewrites: int, tiered: bool) -> int:
    """The partition c-0 at ``root``; the bytes of its rolled segments."""
    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from compactlog.storage.remote.manager import RemoteLogManager
    os.makedirs(root)
    if tiered:
        with open(os.path.join(root, "server.properties"), "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    dd = DataDir(root, broker=BrokerConfig(props if tiered else {}), create=True, writable=True)
    configs = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01"}
    if tiered:
        configs.update({"remote.storage.enable": "true", "local.retention.bytes": "0"})
    dd.create_topic("c", 1, configs)
    log = dd.open_log("c", 0)
    value = os.urandom(1000)
    keys = mb * 1024 // rewrites
    for _ in range(rewrites):
        for i in range(0, keys, 500):
            log.append_records([b"k%08d" % j for j in range(i, min(i + 500, keys))], [value] * min(500, keys - i))
    log.roll()
    size = sum(s.size for s in log.segments)
    if tiered:
        rm = RemoteLogManager(dd, broker_id=0, cluster_id="bench", open_log=dd.open_log,
                              create_topic=lambda t, p, c: dd.create_topic(t, p, c))
        rm.start()
        rm.copy_partition(log)
        dd.delete_old_segments(log)
        rm.close()
    dd.checkpoint_logs()
    dd.close()
    return size


def timed(cmd: list[str]) -> tuple[float, float, dict]:
    c0, t0 = child_cpu(), time.perf_counter()
    got = subprocess.run(cmd, capture_output=True, timeout=3600)
    if got.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{got.stderr.decode()}")
    rows = [json.loads(x) for x in got.stdout.decode().splitlines() if x.startswith("{")]
    row = next(r for r in rows if r.get("topic") == "c" and "cleaned" in r)
    return time.perf_counter() - t0, child_cpu() - c0, row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--rewrites", type=int, default=4)
    args = ap.parse_args()
    with moto_bucket("bench") as (endpoint, proxy, moto), tempfile.TemporaryDirectory() as tmp:
        props = {"remote.log.storage.system.enable": "true",
                 **moto.properties("bench", endpoint=proxy.endpoint, **{
                     "rsm.config.storage.s3.api.call.timeout": "60000",
                     "rsm.config.storage.s3.api.call.attempt.timeout": "30000",
                     "rsm.config.key.prefix": "tiered/"}),
                 "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
                 "compactlog.remote.compaction.delete.delay.ms": "0"}
        tiered, plain = os.path.join(tmp, "tiered"), os.path.join(tmp, "plain")
        size = fill(tiered, props, args.mb, args.rewrites, True)
        fill(plain, props, args.mb, args.rewrites, False)
        args_ = ["clean", "--force", "--engine", "local", "--json"]
        subprocess.run(COMMAND + ["--help"], capture_output=True, timeout=600)     # the interpreter warm
        lwall, lcpu, lrow = timed(COMMAND + ["--data-dir", plain, *args_])
        proxy.log.clear()
        rwall, rcpu, rrow = timed(COMMAND + ["--data-dir", tiered, *args_])
        methods: dict[str, int] = {}
        for m, _, _ in proxy.log:
            methods[m] = methods.get(m, 0) + 1
        assert rrow["messagesWritten"] == lrow["messagesWritten"], (rrow, lrow)
        gb = rrow["byTier"]["remote"]["bytesRead"] / 1e9
        out = {"mb": round(size / 1e6, 1), "records_kept": lrow["messagesWritten"],
               "local": {"seconds": round(lwall, 2), "cpu_s": round(lcpu, 2)},
               "tiered": {"seconds": round(rwall, 2), "cpu_s": round(rcpu, 2), "byTier": rrow["byTier"]},
               "wall_ratio": round(rwall / lwall, 2),
               "requests": methods, "requests_per_gb_remote_read": round(sum(methods.values()) / gb) if gb else None}
        print(f"all local   {lwall:7.2f} s {lcpu:7.2f} CPU s")
        print(f"tiered      {rwall:7.2f} s {rcpu:7.2f} CPU s  ({rwall / lwall:.2f}x wall)")
        print(f"bucket requests {methods} for {gb * 1e3:.1f} MB of remote log read = "
              f"{out['requests_per_gb_remote_read']:,} per GB")
        print(json.dumps(out))


if __name__ == "__main__":
    main()
