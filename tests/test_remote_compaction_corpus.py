"""Kafka's cleaner corpus with the tiers split (tiered-storage.md §5.1): a few cases, each run with
its first 1, 2, ... rolled segments copied to a local-directory bucket and trimmed from the disk
before the first round, then every round of the case cleaned over both tiers. The batches a
consumer from the log start reads (the remote tier below the local log start, then the local
segments) must equal, byte for byte, the batches of Kafka's own cleaner output for that round:
only segment boundaries may differ (groups never straddle the tiers)."""

from __future__ import annotations

import os

import pytest

from corpus_support import broker_overrides, load_case, prepare

pytestmark = pytest.mark.slow

CASES = ["rnd-019-tombstones", "kt-c09b-clean-tombstone-at-horizon", "kt-c10-tombstone-two-phase-staged",
         "rnd-038-transactions", "rnd-075-grouping", "kt-c30-segment-grouping", "rnd-110-incremental"]


COMPRESSED = False


def _batches(data: bytes, keep=lambda b: True) -> list:
    """The batches' bytes; for a compressed case their records (the corpus compares those: the
    compressed bytes depend on the codec library)."""
    from compactlog.record.batch import iter_batches
    if COMPRESSED:
        return [(b.base_offset, b.last_offset, [(r.offset, r.timestamp, r.key, r.value, r.headers)
                                                for r in b.records()]) for b in iter_batches(data) if keep(b)]
    return [bytes(b.raw()) for b in iter_batches(data) if keep(b)]


def expected_batches(corpus: str, name: str, case: dict, k: int) -> list[bytes]:
    d = os.path.join(corpus, "cases", name, "expected", f"round-{k}", f"{case['topic']}-{case['partition']}")
    out = []
    for f in sorted(n for n in os.listdir(d) if n.endswith(".log")):
        with open(os.path.join(d, f), "rb") as fh:
            out += _batches(fh.read())
    return out


def rolled_segments(corpus: str, name: str, case: dict) -> int:
    d = os.path.join(corpus, "cases", name, "input", f"{case['topic']}-{case['partition']}")
    return len([n for n in os.listdir(d) if n.endswith(".log")]) - 1


def run_split(corpus: str, name: str, data_dir: str, split: int) -> list[tuple[int, list, list]]:
    import compactlog.settings  # noqa: F401
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from compactlog.storage.remote import keys
    from compactlog.storage.remote.manager import RemoteLogManager
    from compactlog.storage.remote.store import LocalDirectoryStore, StoreConfig
    case = prepare(corpus, name, data_dir)
    bucket = data_dir + ".bucket"
    props = {**broker_overrides(case), "remote.log.storage.system.enable": "true",
             "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
             "rsm.config.storage.root": bucket, "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
    topic, partition = case["topic"], case["partition"]
    with DataDir(data_dir, broker=BrokerConfig(props), writable=True) as dd:
        dd.alter_topic(topic, {**case["topic_configs"], "remote.storage.enable": "true",
                               "local.retention.bytes": "0"})
    out = []
    for k, now in enumerate(case["rounds"], start=1):
        with DataDir(data_dir, broker=BrokerConfig(props), clock=lambda now=now: now, writable=True) as dd:
            rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=lambda now=now: now,
                                  open_log=lambda t, p: dd.open_log(t, p),
                                  create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                                  store=LocalDirectoryStore(bucket, StoreConfig.from_properties(props)))
            try:
                rm.start()
                log = dd.open_log(topic, partition)
                rp = rm.partition(log)
                if k == 1:
                    for _ in range(split):
                        c = rm._next_candidate(log, rp)
                        if c is None:           # at the last stable offset: nothing more to copy
                            return None
                        try:
                            rm._copy_segment(log, rp, c)
                        finally:
                            os.close(c["fd"])
                    dd.delete_old_segments(log)
                    assert log.local_log_start_offset > log.log_start_offset
                outcomes = Cleaner(dd).run(now, topic=topic)
                local_start = log.local_log_start_offset
                got = []
                for s in rp.manifest.segments:
                    key = keys.SegmentKey("", topic, rp.topic_id, partition, s.start_offset, s.id)
                    data = rm.store.get(key.key("log")).data if s.size_in_bytes else b""
                    got += _batches(data, lambda b: b.last_offset < local_start)
                for s in log.segments:
                    with open(s.log.path, "rb") as fh:
                        got += _batches(fh.read(), lambda b: b.last_offset >= local_start)
                out.append((k, got, outcomes))
            finally:
                rm.close()
    return out


@pytest.mark.parametrize("name", CASES)
def test_corpus_case_split_at_every_segment_boundary(name, corpus_dir, tmp_path):
    global COMPRESSED
    case = load_case(corpus_dir, name)
    COMPRESSED = bool(case["compressed"])
    splits = range(1, rolled_segments(corpus_dir, name, case) + 1)
    ran = 0
    for split in splits:
        rounds = run_split(corpus_dir, name, str(tmp_path / f"split-{split}"), split)
        if rounds is None:
            break                        # the rest of the log is above the last stable offset
        ran += 1
        for k, got, outcomes in rounds:
            (out,) = outcomes
            assert out.error is None, f"split {split} round {k}: {out.error}"
            want = expected_batches(corpus_dir, name, case, k)
            assert got == want, f"split {split} round {k}: {len(got)} batches, Kafka kept {len(want)}"
    assert ran, "at least one split"
