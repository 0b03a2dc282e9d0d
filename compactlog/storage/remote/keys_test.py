"""Object keys as Aiven's ObjectKeyFactory writes them (its javadoc example and ObjectKeyFactoryTest's
form), Kafka's random ids, and the parse that listing and the orphan sweep rely on."""

from __future__ import annotations

from compactlog.record.remote_log_metadata import uuid_from_str
from compactlog.storage.remote.keys import (
    PARTITION_MANIFEST, SegmentKey, new_uuid, offset_prefix, parse_segment_key, partition_manifest_key,
    partition_prefix)


def test_aivens_main_path():
    key = SegmentKey("someprefix/", "topic", "MWJ6FHTfRYy67jzwZdeqSQ", 7, 1234, "tqimKeZwStOEOwRzT3L5oQ")
    assert key.key("log") == "someprefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tqimKeZwStOEOwRzT3L5oQ.log"
    assert [k.rsplit(".", 1)[1] for k in key.keys()] == ["log", "indexes", "compactlog-keys", "rsm-manifest"]
    # the prefix is pasted as is, as Aiven does: no "/" added
    assert SegmentKey("p", "t", "MWJ6FHTfRYy67jzwZdeqSQ", 0, 0, "tqimKeZwStOEOwRzT3L5oQ").main.startswith("pt-")


def test_twenty_digit_offsets():
    assert offset_prefix(0) == "0" * 20
    assert offset_prefix(2**63 - 1) == "09223372036854775807"


def test_parse_accepts_only_this_partitions_segment_keys():
    part = partition_prefix("x/", "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 1)
    key = SegmentKey("x/", "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 1, 42, "tqimKeZwStOEOwRzT3L5oQ")
    assert parse_segment_key(key.key("indexes"), part) == (42, "tqimKeZwStOEOwRzT3L5oQ", "indexes")
    assert parse_segment_key(partition_manifest_key("x/", "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 1), part) is None
    assert partition_manifest_key("x/", "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 1).endswith("/1/" + PARTITION_MANIFEST)
    other = SegmentKey("x/", "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 11, 42, "tqimKeZwStOEOwRzT3L5oQ")
    assert parse_segment_key(other.key("log"), part) is None          # partition 11 is not under ".../1/"
    assert parse_segment_key(part + "00000000000000000042-notanid.log", part) is None
    assert parse_segment_key(part + "someone-elses-file.txt", part) is None


def test_new_ids_are_kafka_random_uuids():
    ids = {new_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        raw = uuid_from_str(text)
        assert raw[6] >> 4 == 4 and raw[8] >> 6 == 2          # version 4, IETF variant, as java.util.UUID
