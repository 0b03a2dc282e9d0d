"""Helpers for the storage unit tests (``*_test.py`` beside the code)."""

from __future__ import annotations

import os
import struct

import pytest

from compactlog.record.batch import BatchSpec, encode_batch, iter_batches
from compactlog.storage.config import LogConfig
from compactlog.storage.log import Log

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "tests", "data", "kafka-vectors")

T0 = 1_700_000_000_000


def vector(rel: str) -> bytes:
    with open(os.path.join(VECTORS, rel), "rb") as f:
        return f.read()


class Clock:
    """An injectable clock (ms)."""

    def __init__(self, now: int = T0):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def config(**kw) -> LogConfig:
    """LogConfig from keyword arguments: segment_bytes=100 -> segment.bytes=100."""
    return LogConfig({k.replace("_", "."): str(v) for k, v in kw.items()})


def batch(base_offset: int, n: int = 1, *, ts: int | list = T0, key: bytes | None = b"k",
          value: bytes | None = b"v", value_size: int | None = None, **spec) -> bytes:
    """One v2 batch of ``n`` records at ``base_offset`` (timestamps ``ts`` or ``ts + i``)."""
    if isinstance(ts, list):
        stamps = ts
    elif ts < 0:
        stamps = [ts] * n
    else:
        stamps = [ts + i for i in range(n)]
    if value_size is not None:
        value = b"x" * value_size
    recs = [(base_offset + i, stamps[i], None if key is None else key + b"%d" % i, value)
            for i in range(n)]
    return encode_batch(BatchSpec(base_offset=base_offset, **spec), recs)


def batch_sizes(data: bytes) -> list[int]:
    return [b.size for b in iter_batches(data)]


def crash(log: Log) -> None:
    """Drop a log as a kill -9 would: no final index entry, no trimming, no snapshot, no flush."""
    for seg in log.segments:
        seg.close_handles()
    log.closed = True


def flip_bit(path: str, position: int, bit: int = 0) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ (1 << bit)]))


def read_u32_be(data: bytes, pos: int) -> int:
    return struct.unpack_from(">I", data, pos)[0]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_log(tmp_path, clock):
    """Factory: open_log(configs..., name=, **Log kwargs) -> Log in tmp_path/<name>; closed at the end."""
    opened: list[Log] = []

    def make(cfg: LogConfig | None = None, *, name: str = "topic-0", **kw) -> Log:
        path = tmp_path / name
        path.mkdir(exist_ok=True)
        kw.setdefault("clock", clock)
        log = Log(str(path), cfg or LogConfig(), **kw)
        opened.append(log)
        return log

    yield make
    for log in opened:
        if not log.closed:
            crash(log)


def local_tier_props(bucket: str, metadata_partitions: int = 1) -> dict[str, str]:
    """Broker settings of a remote tier on a local directory (Kafka's LocalTieredStorage; Aiven's
    filesystem backend names)."""
    return {"remote.log.storage.system.enable": "true",
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
            "rsm.config.storage.root": bucket, "rsm.config.key.prefix": "tiered/", "rsm.config.chunk.size": "512",
            "rlmm.config.remote.log.metadata.topic.num.partitions": str(metadata_partitions)}


def local_tier_manager(dd, props: dict):
    """A started RemoteLogManager of ``dd`` on the local-directory store ``props`` name."""
    from compactlog.storage.remote.manager import RemoteLogManager
    from compactlog.storage.remote.store import LocalDirectoryStore, StoreConfig
    rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", open_log=lambda t, p: dd.open_log(t, p),
                          create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                          store=LocalDirectoryStore(props["rsm.config.storage.root"], StoreConfig.from_properties(props)))
    rm.start()
    return rm
