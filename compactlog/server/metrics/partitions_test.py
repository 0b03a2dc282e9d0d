"""PartitionScan: the broker-wide counts a scrape reads from the open logs."""

from __future__ import annotations

from compactlog.server.metrics.partitions import PartitionScan
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir


def test_offline_logs_are_counted_as_kafka_counts_offline_replicas(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({}), writable=True, command="test")
    dd.create_topic("t", 2, {})
    for p in (0, 1):
        dd.open_log("t", p).append_records([b"k"], [b"v"])
    assert PartitionScan(dd, None, False).offline == 0
    dd.open_log("t", 1).take_offline("fsync failed: Input/output error")
    scan = PartitionScan(dd, None, False)
    assert (scan.partitions, scan.offline) == (2, 1)
    dd.close()
