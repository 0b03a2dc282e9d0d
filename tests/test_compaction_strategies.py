"""KIP-280's compaction strategies through every engine: one random workload (keys, timestamps out
of order, headers present, absent, repeated and malformed, tombstones, committed and aborted
transactions, compressed batches), cleaned in three rounds by the per-batch Python rules, the numba
whole-segment kernels and the distributed map's stages in this process (distributed_map_support),
and, for the header strategy (the one whose versions can be missing or malformed), by a Spark task
and the distributed map on Spark too (what Spark adds to the same tasks is their shipping and the
shuffle, the same for every strategy); every engine leaves the same bytes, and the latest state of
the cleaned log (``storage.latest``, ``spark.snapshot`` on Spark and in this process) is the state
of the log before cleaning, which a plain Python model of KIP-280's rule computes too."""

from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest

from compactlog.cleaner import fast_path
from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.strategy import CompactionStrategy
from compactlog.spark.executor import SparkExecutor
from compactlog.spark.snapshot import latest_state, latest_state_local
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.isolation import READ_COMMITTED
from compactlog.storage.latest import latest_values
from compactlog.storage.reader import PartitionReader

T0 = 1_700_000_000_000
TOPIC = "s"
LONG = struct.Struct(">q")
STRATEGIES = {
    "timestamp": {"compaction.strategy": "timestamp"},
    "header": {"compaction.strategy": "header", "compaction.strategy.header": "v"},
    "offset": {},
}
ENGINES = ("python", "numba", "distributed-in-process", "spark-task", "distributed")
SPARK_ENGINES = ("spark-task", "distributed")
SPARK_STRATEGY = "header"


def _headers(rng):
    kind = int(rng.integers(6))
    v = lambda: LONG.pack(int(rng.integers(-3, 6)))   # noqa: E731 - small range: ties happen
    return [[], [("v", v())], [("v", v()), ("z", b"."), ("v", v())], [("v", b"bad")],
            [("x", v())], [("v", v()), ("v", None)]][kind]


def _phase(log, rng, pids, n_batches: int) -> None:
    """Append one phase of the workload (deterministic in ``rng``)."""
    for _ in range(n_batches):
        n = int(rng.integers(1, 6))
        keys = [b"k%d" % rng.integers(12) for _ in range(n)]
        values = [None if rng.random() < 0.2 else b"v%d" % rng.integers(1000) for _ in range(n)]
        ts = T0 - rng.integers(0, 5000, n)
        headers = [_headers(rng) for _ in range(n)]
        kind = rng.random()
        if kind < 0.2:
            pid = int(rng.integers(len(pids)))
            log.append_records(keys, values, timestamps=ts, headers=headers, producer_id=1000 + pid,
                               producer_epoch=0, base_sequence=pids[pid], transactional=True)
            pids[pid] += n
            log.append_control(commit=rng.random() < 0.6, producer_id=1000 + pid, producer_epoch=0)
        else:
            log.append_records(keys, values, timestamps=ts, headers=headers,
                               compression="gzip" if kind < 0.3 else "none")


def _expected(pdir: str, strategy: CompactionStrategy) -> dict:
    """KIP-280's rule over the committed records, one record at a time (the test's own model)."""
    best = {}
    reader = PartitionReader(pdir)
    for _, records in reader.visible(READ_COMMITTED).batches(reader.log_start_offset):
        for r in records:
            if r.key is None:
                continue
            if strategy.name == "timestamp":
                rank = (r.timestamp, 1, r.offset)
            elif strategy.name == "header":
                named = [h.value for h in r.headers if h.key == strategy.header]
                ok = bool(named) and named[-1] is not None and len(named[-1]) == 8
                rank = (LONG.unpack(named[-1])[0], 1, r.offset) if ok else (-(1 << 63), 0, r.offset)
            else:
                rank = (0, 1, r.offset)
            if r.key not in best or rank > best[r.key][0]:
                best[r.key] = (rank, r)
    return {k: (r.offset, r.value) for k, (_, r) in best.items() if r.value is not None}


def _state(table) -> dict:
    d = table.to_pydict()
    return {k: (o, v) for k, o, v in zip(d["key"], d["offset"], d["value"])}


def _logs(pdir: str) -> dict:
    out = {}
    for name in sorted(os.listdir(pdir)):
        if name.endswith((".log", ".txnindex", ".index", ".timeindex")):
            with open(os.path.join(pdir, name), "rb") as f:
                out[name] = f.read()
    return out


def _clean(root: str, engine: str, now: int, spark) -> None:
    from distributed_map_support import InProcessDistributedExecutor
    broker = BrokerConfig({"compactlog.cleaner.map": "distributed" if engine.startswith("distributed") else "task"})
    executor = (SparkExecutor(spark=spark) if engine in SPARK_ENGINES else
                InProcessDistributedExecutor() if engine == "distributed-in-process" else InProcessExecutor())
    fast_path.ENABLED = engine != "python"
    try:
        with DataDir(root, broker=broker, clock=lambda: now, writable=True) as dd:
            outcomes = Cleaner(dd, executor).run(now, force=True)
    finally:
        fast_path.ENABLED = True
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    assert any(o.cleaned for o in outcomes)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_every_engine_keeps_the_same_winners(tmp_path, spark, name):
    strategy = CompactionStrategy(*{"timestamp": ("timestamp",), "header": ("header", "v"),
                                    "offset": ()}[name])
    engines = [e for e in ENGINES if name == SPARK_STRATEGY or e not in SPARK_ENGINES]
    roots = {e: str(tmp_path / e) for e in ("raw", *engines)}
    configs = {"cleanup.policy": "compact", "segment.bytes": "900", "delete.retention.ms": "86400000",
               **STRATEGIES[name]}
    with DataDir(roots["raw"], clock=lambda: T0, writable=True, create=True) as dd:
        dd.create_topic(TOPIC, 1, configs)
    for e in engines:
        shutil.copytree(roots["raw"], roots[e])
    sequences = {e: [0, 0, 0] for e in roots}     # each producer's next sequence, per copy
    for rnd in range(3):
        for e, root in roots.items():
            rng = np.random.default_rng(25 + rnd)
            with DataDir(root, clock=lambda: T0, writable=True) as dd:
                _phase(dd.open_log(TOPIC, 0), rng, sequences[e], 40)
        for e in engines:
            _clean(roots[e], e, T0 + 1000 * rnd, spark)
        pdirs = {e: os.path.join(roots[e], f"{TOPIC}-0") for e in roots}
        reference = _logs(pdirs["python"])
        for e in engines[1:]:
            assert _logs(pdirs[e]) == reference, (e, rnd)
        assert _logs(pdirs["raw"]) != reference            # the cleaner removed something
        expected = _expected(pdirs["raw"], strategy)
        assert _expected(pdirs["python"], strategy) == expected
        assert _state(latest_values(PartitionReader(pdirs["raw"]), strategy=strategy)) == expected
        assert _state(latest_values(PartitionReader(pdirs["python"]), strategy=strategy)) == expected
        assert _state(latest_state_local(roots["numba"], TOPIC)) == expected       # the topic's own strategy
    spark_state = latest_state(spark, roots[engines[-1]], TOPIC).toArrow()
    assert _state(spark_state) == expected
    assert _state(latest_state(spark, roots["raw"], TOPIC).toArrow()) == expected
    if name != "offset":   # the strategy changes which records stay (the offset rule would differ)
        assert expected != _expected(pdirs["raw"], CompactionStrategy())
