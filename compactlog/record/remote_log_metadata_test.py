"""The ``__remote_log_metadata`` codec against the worked bytes of tiered-storage.md §2.5, Kafka's
``RemoteLogMetadataFormatterTest`` text, the partitioner vectors of §2.2 (checked against the JDK
when the spec was written) and ``isValidTransition``."""

from __future__ import annotations

import itertools

import pytest

from compactlog.record.remote_log_metadata import (
    PartitionDeleteState, RemoteLogMetadataFormatError, RemoteLogSegmentId, RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata, SegmentState,
    TopicIdPartition, decode, encode, format_record, is_valid_partition_delete_transition, is_valid_transition,
    objects_hash, uuid_from_str, uuid_to_str)
from compactlog.storage.remote.metadata_topic import metadata_partition

TIP = TopicIdPartition("MWJ6FHTfRYy67jzwZdeqSQ", "foo", 0)
SID = RemoteLogSegmentId(TIP, "tqimKeZwStOEOwRzT3L5oQ")

# §2.5, column by column
STARTED_HEX = "".join("""
01 00 00
04 666f6f
31627a1474df458cbaee3cf065d7aa49 00000000 00
b6a8a629e6704ad3843b04734f72f9a1 00
0000000000000000 0000000000000063
00000001 0000018bcfe56800 0000018bcfe5687b
02 00000000 0000000000000000 00
00001000 00 00 00
""".split())
FINISHED_HEX = "".join("""
01 01 00
04 666f6f
31627a1474df458cbaee3cf065d7aa49 00000000 00
b6a8a629e6704ad3843b04734f72f9a1 00
00000001 0000018bcfe569c8 00 01 00
""".split())


def started() -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(SID, 0, 99, 1, 1700000000000, 1700000000123, {0: 0}, 4096)


def test_the_worked_bytes_of_a_copy_started_record():
    value = encode(started())
    assert len(value) == 102
    assert value.hex() == STARTED_HEX
    assert decode(value) == started()


def test_the_worked_bytes_of_its_finished_update():
    update = RemoteLogSegmentMetadataUpdate(SID, 1, 1700000000456, SegmentState.COPY_SEGMENT_FINISHED)
    value = encode(update)
    assert len(value) == 60
    assert value.hex() == FINISHED_HEX
    assert decode(value) == update


def test_what_kafkas_formatter_prints():
    # RemoteLogMetadataFormatterTest's record, with fixed ids: epochs {0=0, 1=20, 2=80} (given out of
    # order), 10 bytes of custom metadata, max timestamp -1
    tip = TopicIdPartition("LWgrMmVrT0a__7a4SasuPA", "foo", 0)
    sid = RemoteLogSegmentId(tip, "tqimKeZwStOEOwRzT3L5oQ")
    m = RemoteLogSegmentMetadata(sid, 0, 100, 1, -1, 123, [(2, 80), (0, 0), (1, 20)], 1024, bytes(10))
    assert format_record(0, 0, encode(m)) == (
        "partition: 0, offset: 0, value: RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{"
        "topicIdPartition=LWgrMmVrT0a__7a4SasuPA:foo-0, id=tqimKeZwStOEOwRzT3L5oQ}, startOffset=0, endOffset=100, "
        "brokerId=1, maxTimestampMs=-1, eventTimestampMs=123, segmentLeaderEpochs={0=0, 1=20, 2=80}, "
        "segmentSizeInBytes=1024, customMetadata=Optional[CustomMetadata{10 bytes}], state=COPY_SEGMENT_STARTED}")
    update = RemoteLogSegmentMetadataUpdate(SID, 3, 5, SegmentState.DELETE_SEGMENT_STARTED)
    assert format_record(7, 9, encode(update)) == (
        "partition: 7, offset: 9, value: RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=RemoteLogSegmentId{"
        "topicIdPartition=MWJ6FHTfRYy67jzwZdeqSQ:foo-0, id=tqimKeZwStOEOwRzT3L5oQ}, customMetadata=Optional.empty, "
        "state=DELETE_SEGMENT_STARTED, eventTimestampMs=5, brokerId=3}")
    delete = RemotePartitionDeleteMetadata(TIP, 1, 2, PartitionDeleteState.DELETE_PARTITION_MARKED)
    assert str(decode(encode(delete))) == (
        "RemotePartitionDeleteMetadata{topicPartition=MWJ6FHTfRYy67jzwZdeqSQ:foo-0, "
        "state=DELETE_PARTITION_MARKED, eventTimestampMs=2, brokerId=1}")


def test_the_snapshot_record_decodes():
    snap = RemoteLogSegmentMetadataSnapshot("tqimKeZwStOEOwRzT3L5oQ", 10, 20, 1, 30, 40, {3: 10}, 50, None,
                                            SegmentState.COPY_SEGMENT_FINISHED)
    value = encode(snap)
    assert value[:3] == b"\x01\x03\x00"
    assert decode(value) == snap
    assert str(snap).startswith("RemoteLogSegmentMetadataSnapshot{segmentId=tqimKeZwStOEOwRzT3L5oQ, startOffset=10")


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b"\x00" + b[1:], "frame version 0"),
    (lambda b: b"\x02" + b[1:], "unknown frame version 2"),
    (lambda b: b[:1] + b"\x09" + b[2:], "unknown api key 9"),
    (lambda b: b[:2] + b"\x01" + b[3:], "unsupported version 1"),
    (lambda b: b + b"\x00", "1 byte(s) of garbage"),
    (lambda b: b[:-5], "needs"),
    (lambda b: b[:-2] + b"\x07\x00", "unknown RemoteLogSegmentState id 7"),
])
def test_what_kafkas_serde_refuses_is_refused(mutate, message):
    with pytest.raises(RemoteLogMetadataFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode(mutate(encode(started())))


def test_constructor_rules_hold_on_both_sides():
    with pytest.raises(ValueError, match="cannot be negative"):
        RemoteLogSegmentMetadata(SID, -1, 5, 1, 0, 0, {0: 0}, 1)
    with pytest.raises(ValueError, match="less than startOffset"):
        RemoteLogSegmentMetadata(SID, 5, 4, 1, 0, 0, {0: 0}, 1)
    with pytest.raises(ValueError, match="segmentLeaderEpochs can not be null or empty"):
        RemoteLogSegmentMetadata(SID, 0, 4, 1, 0, 0, {}, 1)
    # an empty epoch list on the wire (written by a bad writer) is refused on read
    raw = bytearray(encode(started()))
    at = raw.index(bytes.fromhex("02 00000000 0000000000000000 00"))
    bad = bytes(raw[:at]) + b"\x01" + bytes(raw[at + 14:])
    with pytest.raises(RemoteLogMetadataFormatError, match="segmentLeaderEpochs can not be null or empty"):
        decode(bad)


@pytest.mark.parametrize("topic_id, hashes, partitions", [
    ("MWJ6FHTfRYy67jzwZdeqSQ", (1763308608, 1763308609, 1763308615), (42, 45, 26)),
    ("LWgrMmVrT0a__7a4SasuPA", (1811555823, 1811555824, 1811555830), (1, 18, 23)),
    ("AAAAAAAAAAAAAAAAAAAAAQ", (30752, 30753, 30759), (35, 6, 46)),
])
def test_the_metadata_partition_of_a_user_partition(topic_id, hashes, partitions):
    assert tuple(objects_hash(topic_id, p) for p in (0, 1, 7)) == hashes
    assert tuple(metadata_partition(topic_id, p) for p in (0, 1, 7)) == partitions


def test_uuid_text_is_kafkas_url_safe_base64():
    raw = bytes.fromhex("2d682b32656b4f46bfffb6b849ab2e3c")
    assert uuid_to_str(raw) == "LWgrMmVrT0a__7a4SasuPA"
    assert uuid_from_str("LWgrMmVrT0a__7a4SasuPA") == raw
    for bad in ("LWgrMmVrT0a//7a4SasuPA", "short", "x" * 25):
        with pytest.raises(ValueError):
            uuid_from_str(bad)


def test_segment_state_transitions_are_kafkas():
    S = SegmentState
    allowed = {(None, S.COPY_SEGMENT_STARTED), (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
               (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED), (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
               (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED)}
    allowed |= {(s, s) for s in S}
    for src, dst in itertools.product([None, *S], S):
        assert is_valid_transition(src, dst) == ((src, dst) in allowed), (src, dst)


def test_partition_delete_transitions_are_kafkas():
    P = PartitionDeleteState
    allowed = {(None, P.DELETE_PARTITION_MARKED), (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED),
               (P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED)} | {(s, s) for s in P}
    for src, dst in itertools.product([None, *P], P):
        assert is_valid_partition_delete_transition(src, dst) == ((src, dst) in allowed), (src, dst)
