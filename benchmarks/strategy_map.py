"""The key map's memory per key under each compaction strategy (KIP-280), and a clean's cost (a
script, not a test).

    .venv/bin/python benchmarks/strategy_map.py [--keys 1000000] [--records 400000] [--dir build/bench-strategy]

1. The map alone: ``--keys`` distinct key digests put into the offset strategy's map
   (``CompactOffsetMap``: 16-byte slots) and the version strategies' (``VersionMap``: 24-byte
   slots), sized as a round sizes them (from the key estimate) and grown from the default; bytes
   of table per key. KIP-280 says 8 bytes a key become 16 (offset, then offset and version).
2. A clean: ``--records`` records over ``--records/4`` keys, timestamps out of order and an 8-byte
   ``v`` header on every record, the same log cleaned in this process with each strategy: the
   map's keys and bytes (the round's own statistics) and the clean's wall time (a version strategy
   also ranks the clean section: the second round reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

NOW = 1_900_000_000_000
STRATEGIES = {"offset": {}, "timestamp": {"compaction.strategy": "timestamp"},
              "header": {"compaction.strategy": "header", "compaction.strategy.header": "v"}}


def map_memory(keys: int) -> dict:
    from compactlog.cleaner.offset_map import CompactOffsetMap, VersionMap
    rng = np.random.default_rng(1)
    h1 = rng.integers(1, 2**63, keys, dtype=np.int64).astype(np.uint64)
    h2 = rng.integers(1, 2**63, keys, dtype=np.int64).astype(np.uint64)
    offsets = np.arange(keys, dtype=np.int64)
    ver, has = rng.integers(0, 1000, keys), np.ones(keys, np.int8)
    out = {}
    for name, presize in (("sized", keys), ("grown", 1024)):
        m = CompactOffsetMap(0, presize)
        m.put(h1, h2, offsets)
        v = VersionMap(0, presize)
        v.put(h1, h2, offsets, ver, has)
        assert len(m) == len(v) == keys
        out[name] = {"offset": round(m.bytes_used / keys, 2), "version": round(v.bytes_used / keys, 2),
                     "slot bytes": (16, 24)}
    return out


def write_log(root: str, records: int, configs: dict) -> None:
    from compactlog.storage.datadir import DataDir
    rng = np.random.default_rng(7)
    keys = max(records // 4, 1)
    with DataDir(root, create=True, writable=True, clock=lambda: NOW) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(8 << 20), **configs})
        log = dd.open_log("t", 0)
        batch = 500
        for start in range(0, records, batch):
            n = min(batch, records - start)
            ks = [b"key-%08d" % k for k in rng.integers(0, keys, n)]
            vs = [b"x" * 60] * n
            ts = NOW - rng.integers(0, 10**6, n)
            hs = [[("v", struct.pack(">q", int(x)))] for x in rng.integers(0, 10**6, n)]
            log.append_records(ks, vs, timestamps=ts, headers=hs)
            if start and start % (records // 2 // batch * batch) == 0:
                log.roll()
        log.roll()


def clean(root: str) -> dict:
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.storage.datadir import DataDir
    with DataDir(root, writable=True, clock=lambda: NOW) as dd:
        t0 = time.perf_counter()
        [o] = Cleaner(dd).run(NOW, force=True)
        secs = time.perf_counter() - t0
    s = o.stats
    return {"seconds": round(secs, 3), "map keys": s.map_keys, "map bytes": s.map_bytes,
            "bytes per key": round(s.map_bytes / max(s.map_keys, 1), 2), "kept": s.messages_written}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--dir", default="build/bench-strategy")
    a = ap.parse_args()
    os.environ.setdefault("COMPACTLOG_KERNELS", "jit")
    print(json.dumps({"map memory per key": map_memory(a.keys), "keys": a.keys}))
    shutil.rmtree(a.dir, ignore_errors=True)
    template = os.path.join(a.dir, "template")
    write_log(template, a.records, {})
    for name, configs in STRATEGIES.items():
        root = os.path.join(a.dir, name)
        shutil.copytree(template, root)
        from compactlog.storage.datadir import DataDir
        with DataDir(root, writable=True) as dd:
            dd.alter_topic("t", {"cleanup.policy": "compact", "segment.bytes": str(8 << 20), **configs})
        print(json.dumps({"strategy": name, "records": a.records, **clean(root)}))
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
