"""Partition directory names as Kafka forms and parses them."""

from __future__ import annotations

import pytest

from compactlog.storage import files


def test_live_partition_directories_and_the_others():
    assert files.parse_partition_dir("/data/my-topic-12/") == ("my-topic", 12)
    for name in ("my-topic-12", "/data/orders-0", "a.b_c-3"):
        assert files.is_partition_dir(name)
    for name in ("orders", "orders-", "-3", "orders-x", "orders-0.8f0a2b-delete", "orders-1.abc-future",
                 "recovery-point-offset-checkpoint", "meta.properties"):
        assert not files.is_partition_dir(name), name
        with pytest.raises(ValueError):
            files.parse_partition_dir(name)
