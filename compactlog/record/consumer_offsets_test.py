"""The __consumer_offsets record formats against records a real Kafka broker wrote."""

from __future__ import annotations

import os

import pytest

from compactlog.record.batch import iter_batches
from compactlog.record import consumer_offsets as R

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "tests", "data", "kafka-vectors")
KAFKA_37 = os.path.join(VECTORS, "Niloufar1171+LDI-POC", "__consumer_offsets-6", "00000000000000000000.log")
KAFKA_2022 = os.path.join(VECTORS, "Bheem6005+kafka", "kafka-logs", "__consumer_offsets-0",
                          "00000000000000000000.log")


def fixture_records(path):
    with open(path, "rb") as f:
        buf = f.read()
    return [r for b in iter_batches(buf) for r in b.records()]


def test_partition_formula_is_javas_string_hash():
    # the two groups of the Kafka-written fixtures, in the partitions Kafka put them in
    assert R.java_string_hash("DEVSmileCDR") == 551467806
    assert R.partition_for("DEVSmileCDR", 50) == 6
    assert R.java_string_hash("console-consumer-14897") == 158520050
    assert R.partition_for("console-consumer-14897", 50) == 0
    # Utils.abs(Integer.MIN_VALUE) == 0, not a negative partition
    assert R.java_string_hash("polygenelubricants") == -2**31
    assert R.partition_for("polygenelubricants", 50) == 0
    # negative hashes; UTF-16 code units (a character outside the BMP is two of them)
    assert R.java_string_hash("zzzzzzzzzz") < 0
    assert R.partition_for("zzzzzzzzzz", 50) == abs(R.java_string_hash("zzzzzzzzzz")) % 50
    assert R.java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00
    assert R.java_string_hash("") == 0


@pytest.mark.parametrize("path", [KAFKA_37, KAFKA_2022])
def test_every_fixture_record_decodes_and_reencodes_byte_for_byte(path):
    recs = fixture_records(path)
    assert recs
    for r in recs:
        rec = R.decode_record(r.key, r.value)
        assert rec.key_bytes() == r.key
        assert rec.value_bytes() == r.value


def test_kafka_37_fixture_contents():
    recs = {r.offset: R.decode_record(r.key, r.value) for r in fixture_records(KAFKA_37)}
    assert sorted(recs) == list(range(13))
    groups = [o for o, rec in recs.items() if isinstance(rec.key, R.GroupMetadataKey)]
    assert groups == [0, 2, 4, 5, 6, 7]
    commit = recs[12]
    assert commit.key == R.OffsetCommitKey("DEVSmileCDR", "TestTopicPatient", 0, 1)
    assert commit.value_version == 3
    assert commit.value == R.OffsetCommitValue(3, -1, "", 1769793578176, -1)
    empty = recs[4]
    assert empty.value_version == 3
    assert (empty.value.protocol_type, empty.value.generation, empty.value.protocol,
            empty.value.leader, empty.value.members) == ("consumer", 3, None, None, [])
    stable = recs[7].value
    assert (stable.generation, stable.protocol) == (6, "range")
    assert len(stable.members) == 17 and stable.leader == stable.members[0].member_id
    m = stable.members[0]
    assert m.client_host == "/172.18.0.5" and m.session_timeout == 420000
    assert m.rebalance_timeout == 3600000 and m.group_instance_id is None
    sub = R.decode_subscription(m.subscription)
    assert sub.version == 3 and sub.topics == ["batch2.work.notification.SHR_PROD.persistence"]
    assert sub.generation_id == 5 and sub.rack_id is None
    assigned = {t: p for mm in stable.members for t, p in R.decode_assignment(mm.assignment).partitions}
    assert assigned == {"subscription.matching.SHR_PROD.persistence": [0], "TestTopicPatient": [0],
                        "batch2.work.notification.SHR_PROD.persistence": [0],
                        "Retry.TestTopicPatient": [0]}


def test_kafka_2022_fixture_assignment():
    first, second = (R.decode_record(r.key, r.value) for r in fixture_records(KAFKA_2022))
    (m,) = first.value.members
    assert R.decode_subscription(m.subscription).topics == ["cities"]
    assert R.decode_assignment(m.assignment).partitions == [("cities", [0])]
    assert second.value.members == [] and second.value.generation == 2


def test_values_of_every_version_round_trip():
    oc = R.OffsetCommitValue(42, 7, "meta\u00e9", 1700000000000, 1700000600000)
    for version in range(5):
        data = R.encode_value(oc, version)
        back, v = R.decode_value(R.OffsetCommitKey("g", "t", 0), data)
        assert v == version and back.offset == 42 and back.metadata == "meta\u00e9"
        assert back.leader_epoch == (7 if version >= 3 else -1)
        assert back.expire_timestamp == (1700000600000 if version == 1 else -1)
    member = R.MemberMetadata("m-1", "inst", "client", "/127.0.0.1", 300000, 10000, b"sub", b"")
    gm = R.GroupMetadataValue("consumer", 5, "range", "m-1", 1700000000000, [member])
    for version in range(5):
        data = R.encode_value(gm, version)
        back, v = R.decode_value(R.GroupMetadataKey("g"), data)
        assert v == version and back.members[0].subscription == b"sub"
        assert back.members[0].group_instance_id == ("inst" if version >= 3 else None)
        assert back.members[0].rebalance_timeout == (300000 if version >= 1 else -1)
        assert back.current_state_timestamp == (1700000000000 if version >= 2 else -1)
    # what Kafka writes: v3, or v1 with an expire timestamp
    assert R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1)).value_version == 3
    assert R.offset_commit_record("g", "t", 0, R.OffsetCommitValue(1, expire_timestamp=5)).value_version == 1
    assert R.group_metadata_record("g", gm).value_version == 3


def test_a_newer_flexible_version_is_read_with_v4_layout():
    v4 = R.encode_value(R.OffsetCommitValue(9, 1, "", 5), 4)
    v5 = v4[:1] + b"\x05" + v4[2:]
    back, version = R.decode_value(R.OffsetCommitKey("g", "t", 0), v5)
    assert version == 5 and back.offset == 9
    # unknown tagged fields are skipped
    tagged = v4[:-1] + b"\x01\x07\x02ab"
    assert R.decode_value(R.OffsetCommitKey("g", "t", 0), tagged)[0].commit_timestamp == 5


def test_tombstones_and_unknown_record_types():
    key = R.encode_key(R.GroupMetadataKey("g"))
    assert R.decode_record(key, None).value is None
    with pytest.raises(R.UnknownRecordType) as e:
        R.decode_record(b"\x00\x03\x00\x01g", b"\x00\x00")
    assert e.value.record_type == 3


def test_bad_bytes_name_the_field_and_position():
    key = R.encode_key(R.OffsetCommitKey("group", "topic", 3))
    with pytest.raises(R.RecordFormatError, match=r"key: field partition at byte 16: needs 4 bytes"):
        R.decode_key(key[:-2])
    with pytest.raises(R.RecordFormatError, match="field group .* non-nullable field was serialized as null"):
        R.decode_key(b"\x00\x02\xff\xff")
    value = R.encode_value(R.OffsetCommitValue(1, -1, "", 5))
    with pytest.raises(R.RecordFormatError, match="version 3 .* field commitTimestamp"):
        R.decode_record(key, value[:-1])
    # an array count the bytes cannot hold is refused before anything is allocated
    gm = bytearray(R.encode_value(R.GroupMetadataValue("consumer", 1, None, None, -1, [])))
    gm[-4:] = (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(R.RecordFormatError, match="members.*cannot fit"):
        R.decode_value(R.GroupMetadataKey("g"), bytes(gm))
    with pytest.raises(R.RecordFormatError, match="not UTF-8"):
        R.decode_key(b"\x00\x02\x00\x02\xff\xfe")
    with pytest.raises(R.RecordFormatError, match="missing key"):
        R.offsets_decoder_text(None, b"", 5)


def test_consumer_protocol_round_trip():
    for version in range(4):
        data = R.encode_subscription(["a", "b"], version, b"ud")
        sub = R.decode_subscription(data)
        assert sub.version == version and sub.topics == ["a", "b"] and sub.user_data == b"ud"
    a = R.encode_assignment([("a", [0, 2]), ("b", [1])], 1)
    assert R.decode_assignment(a).partitions == [("a", [0, 2]), ("b", [1])]
    assert R.decode_subscription(R.encode_subscription(["x"], 3), topics_only=True).topics == ["x"]


def test_offsets_decoder_text_is_kafkas():
    recs = fixture_records(KAFKA_37)
    key, payload = R.offsets_decoder_text(recs[1].key, recs[1].value, 1)
    assert key == ('{"type":"1","data":{"group":"DEVSmileCDR","topic":'
                   '"batch2.work.notification.SHR_PROD.persistence","partition":0}}')
    assert payload == ('{"version":"3","data":{"offset":0,"leaderEpoch":-1,"metadata":"",'
                       '"commitTimestamp":1769791663122}}')
    key, payload = R.offsets_decoder_text(recs[4].key, recs[4].value, 4)
    assert key == '{"type":"2","data":{"group":"DEVSmileCDR"}}'
    assert payload == ('{"version":"3","data":{"protocolType":"consumer","generation":3,'
                       '"protocol":null,"leader":null,"currentStateTimestamp":1769791855188,'
                       '"members":[]}}')
    # consumer members: subscription and assignment decoded (an empty assignment stays bytes)
    _, payload = R.offsets_decoder_text(recs[0].key, recs[0].value, 0)
    assert ('"subscription":{"topics":["batch2.work.notification.SHR_PROD.persistence"],'
            '"userData":null,"ownedPartitions":[],"generationId":-1,"rackId":null}') in payload
    (r0, _) = fixture_records(KAFKA_2022)
    _, payload = R.offsets_decoder_text(r0.key, r0.value, 0)
    assert ('"assignment":{"assignedPartitions":[{"topic":"cities","partitions":[0]}],'
            '"userData":null}') in payload
    # a member of another protocol type keeps its bytes, base64 as Jackson writes them
    other = R.GroupMetadataValue("connect", 1, "default", "m", 5,
                                 [R.MemberMetadata("m", None, "c", "/h", 1, 1, b"\x00\x01", b"")])
    _, payload = R.offsets_decoder_text(R.encode_key(R.GroupMetadataKey("g")),
                                        R.encode_value(other), 0)
    assert '"subscription":"AAE=","assignment":""' in payload
    assert R.offsets_decoder_text(recs[4].key, None, 4)[1] == "<DELETE>"
    # share-group types (10-15) are not decoded (the consumer-group ones, 3-8 and 16, are)
    assert R.offsets_decoder_text(b"\x00\x0b\x00\x01g", b"", 9) == \
        ("Unknown record type 11 at offset 9, skipping.", None)
    text, none = R.offsets_decoder_text(recs[1].key, b"\x00\x03\x00", 3)
    assert text.startswith("Error at offset 3, skipping. could not read record with version 3")
    assert none is None
