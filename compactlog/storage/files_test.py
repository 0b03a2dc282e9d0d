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


@pytest.mark.parametrize("name, refused", [
    ("orders-0", False), ("__consumer_offsets-49", False), ("my-topic-12", False),
    ("orders-0.0123456789abcdef0123456789abcdef-delete", False), ("orders-3.abc-future", False),
    ("orders-1.abc-stray", False), ("remote-log-index-cache", False), ("orders-+7", False),
    ("logs", True), ("lost+found", True), (".git", True), ("orders-x", True), ("orders-", True),
    ("-0", True), ("orders-0-delete", True), ("orders-99999999999", True), ("snapshots-old", True),
])
def test_kafka_loader_refuses_what_parse_topic_partition_name_rejects(name, refused):
    assert files.kafka_loader_refuses(name) is refused
