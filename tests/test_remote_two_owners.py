"""Two brokers writing one partition's remote tier at once (a data dir restored from a backup, or
cloned to a second machine, while the first still runs: same cluster id, broker id and topic id,
same bucket prefix). The manifest's owner is the last to take it; the other is fenced at its next
conditional write and must stay fenced until it restarts: it copies nothing more and does not take
the partition back. Taking it back (as it did at its next reconcile) ping-ponged ownership, each
broker's reconcile then deleting the other's committed-by-CAS segments as "uncommitted" and taking
the other's highest remote offset as its own. Real RemoteLogManagers on moto's S3."""

from __future__ import annotations

import json
import shutil

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.remote.manager import RemoteLogManager
from compactlog.storage.remote.partition_manifest import Fenced
from compactlog.storage.remote.store import open_store
from s3_support import moto  # noqa: F401 - fixture

T0 = 1_700_000_000_000


class Node:
    def __init__(self, root: str, props: dict):
        self.dd = DataDir(root, broker=BrokerConfig(props), clock=lambda: T0, create=True, writable=True)
        dd = self.dd
        self.rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=lambda: T0,
                                   open_log=lambda t, p: dd.open_log(t, p),
                                   create_topic=lambda t, n, c: dd.create_topic(t, n, c), store=open_store(props))
        self.rm.start()
        self.log = dd.open_log("t", 0)

    def append(self, tag: bytes, n: int = 12) -> None:
        for i in range(n):
            self.log.append_records([b"k%d" % i], [tag + b"-%03d" % i + b"." * 40], timestamps=[T0 + i])

    def close(self) -> None:
        self.rm.close()
        self.dd.close()


def test_a_fenced_broker_stays_fenced(moto, tmp_path):
    moto.create_bucket("two-owners")
    props = moto.properties("two-owners", **{"remote.log.storage.system.enable": "true",
                                             "rsm.config.key.prefix": "tiered/",
                                             "rlmm.config.remote.log.metadata.topic.num.partitions": "1"})
    a_root, b_root = str(tmp_path / "a"), str(tmp_path / "b")
    dd = DataDir(a_root, broker=BrokerConfig(props), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400", "retention.ms": "-1"})
    dd.close()
    a = Node(a_root, props)
    a.append(b"a")
    assert a.rm.copy_partition(a.log) > 0
    a.dd.checkpoint_logs()
    shutil.copytree(a_root, b_root, ignore=shutil.ignore_patterns(".lock"))
    b = Node(b_root, props)                     # the clone starts: it takes the partition
    b.append(b"b")
    assert b.rm.copy_partition(b.log) > 0
    s3 = moto.client()
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket="two-owners")["Contents"]
             if o["Key"].endswith("compactlog-partition.json")]

    def stored() -> dict:
        return json.loads(s3.get_object(Bucket="two-owners", Key=key)["Body"].read())
    assert stored()["owner"]["incarnation"] == b.rm.owner.incarnation
    b_segments = [s["id"] for s in stored()["segments"]]
    try:
        a.append(b"a2")
        with pytest.raises(Fenced):
            a.rm.copy_partition(a.log)           # fenced at its commit
        for _ in range(2):                        # and stays so: no copy, no take-back
            with pytest.raises(Fenced):
                a.rm.copy_partition(a.log)
        m = stored()
        assert m["owner"]["incarnation"] == b.rm.owner.incarnation
        assert [s["id"] for s in m["segments"]] == b_segments
        b.append(b"b2")
        assert b.rm.copy_partition(b.log) > 0     # the owner goes on
        assert [s["id"] for s in stored()["segments"]][:len(b_segments)] == b_segments
    finally:
        a.close()
        b.close()
