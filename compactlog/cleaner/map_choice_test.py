"""The key-count estimate that chooses the in-task or distributed key map holds for any batch size."""

from __future__ import annotations

import pyarrow as pa

import compactlog
from compactlog.cleaner.map_choice import SAMPLE_BYTES, choose_map, estimate_keys
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir


def _load(path, n: int, per_send: int) -> None:
    with compactlog.open(path, write=True, create=True) as c:
        c.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(8 << 20)})
        for lo in range(0, n, per_send):
            keys = pa.array([b"key-%09d" % i for i in range(lo, min(lo + per_send, n))])
            c.send_arrow("t", keys, pa.array([b"v" * 40] * len(keys)), partition=0)


def _estimate(path, broker=None):
    with DataDir(str(path), writable=True, broker=broker) as dd:
        log = dd.open_log("t", 0)
        log.roll()
        end = log.active_segment.base_offset
        first_batch = next(iter(log.batches(0))).size
        return first_batch, estimate_keys(log, 0, end), choose_map(log, 0, end, dd.broker)


def test_batches_larger_than_the_sample_are_read_whole(tmp_path):
    # send_arrow writes batches of ~600 KB, more than the sample: the old estimate read none
    _load(tmp_path, 200_000, 200_000)
    first_batch, (_, records, keys), _ = _estimate(tmp_path)
    assert first_batch > SAMPLE_BYTES
    assert 0.8 * 200_000 <= records <= 1.2 * 200_000
    assert 0.8 * 200_000 <= keys <= 1.2 * 200_000


def test_a_huge_key_space_in_large_batches_gets_the_distributed_map(tmp_path):
    _load(tmp_path, 200_000, 200_000)
    small = BrokerConfig({"compactlog.cleaner.task.memory.bytes": "1048576"})
    _, _, (kind, why, presize) = _estimate(tmp_path, small)
    assert kind == "distributed", why
    assert "distinct keys" in why and presize == 0


def test_small_batches_still_estimate_the_keys(tmp_path):
    _load(tmp_path, 30_000, 100)
    first_batch, (_, records, keys), (kind, _, presize) = _estimate(tmp_path)
    assert first_batch < SAMPLE_BYTES
    assert 0.8 * 30_000 <= records <= 1.2 * 30_000 and 0.8 * 30_000 <= keys <= 1.2 * 30_000
    assert kind == "task" and presize == keys


def _load_repeating(path, n: int, keys: int, per_send: int) -> None:
    import numpy as np
    rng = np.random.default_rng(7)
    with compactlog.open(path, write=True, create=True) as c:
        c.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(1 << 20)})
        for lo in range(0, n, per_send):
            ids = rng.integers(0, keys, min(per_send, n - lo))
            c.send_arrow("t", pa.array([b"key-%09d" % i for i in ids.tolist()]), pa.array([b"v" * 40] * len(ids)),
                         partition=0)


def test_keys_that_recur_over_the_range_are_counted_once(tmp_path):
    # 150k records of 15k uniform keys over ~9 segments: the first batches of three segments
    # (the sample before) saw most keys once and estimated ~100k keys, a table far too big
    _load_repeating(tmp_path, 150_000, 15_000, 500)
    _, (_, records, keys), (kind, _, presize) = _estimate(tmp_path)
    distinct = 15_000      # all of them, ~10 draws each
    assert 0.8 * 150_000 <= records <= 1.2 * 150_000
    assert distinct / 2 <= keys <= distinct * 2, keys
    assert kind == "task" and presize == keys


def test_the_distinct_estimate():
    import numpy as np
    from compactlog.cleaner.map_choice import distinct_estimate
    rng = np.random.default_rng(3)
    for population, keys, n in ((5_000_000, 1_000_000, 20_000), (5_000_000, 5_000_000, 20_000),
                                (1_000_000, 10, 5_000), (50_000_000, 50_000_000, 150_000)):
        sample = rng.integers(0, keys, n) if keys < population else rng.choice(population, n, replace=False)
        counts = np.unique(sample, return_counts=True)[1]
        est = distinct_estimate(counts, population)
        truth = keys if keys == population else keys * (1 - np.exp(-population / keys))
        assert truth / 2 <= est <= truth * 2, (population, keys, est)
    assert distinct_estimate(np.array([1, 1, 2]), 4) == 3        # the whole population sampled
