"""The consumer group protocol's (KIP-848) ``__consumer_offsets`` records (``consumer_offsets.py``):
round trips, bytes against an encoder driven by Kafka's JSON schemas (``ConsumerGroup*Key/Value
.json`` of group-coordinator, restated below field by field), the examples of spec §7.1, the JSON
kafka-dump-log prints, and ``compactlog dump-log --offsets-decoder`` on a log holding them."""

from __future__ import annotations

import base64
import json
import os
import random
import struct
import uuid

import pytest

from compactlog.record import consumer_offsets as R
from compactlog.record.varint import encode_uvarint

T1 = uuid.UUID("4f5f80e2cdd54f0888e424db129e8f3b")        # "T1-A4s3VTwiI5CTbEp6POw"

# Kafka's schemas: (Name, type); "?" = nullableVersions 0+; ("tag", n) marks a tagged field with
# its default; a list is an array of structs (its fields), a tuple ("struct?", fields) a nullable
# struct. Keys are version 0, not flexible; values version 0, flexibleVersions 0+.
TP = [("TopicId", "uuid"), ("Partitions", "[]int32")]
KEYS = {3: ["GroupId"], 4: ["GroupId"], 5: ["GroupId", "MemberId"], 6: ["GroupId"],
        7: ["GroupId", "MemberId"], 8: ["GroupId", "MemberId"], 16: ["GroupId", "RegularExpression"]}
VALUES = {
    3: [("Epoch", "int32"), ("MetadataHash", "int64", ("tag", 0, 0))],
    4: [("Topics", [("TopicId", "uuid"), ("TopicName", "string"), ("NumPartitions", "int32"),
                    ("PartitionMetadata", [("Partition", "int32"), ("Racks", "[]string")])])],
    5: [("InstanceId", "string?"), ("RackId", "string?"), ("ClientId", "string"), ("ClientHost", "string"),
        ("SubscribedTopicNames", "[]string"), ("SubscribedTopicRegex", "string?"),
        ("RebalanceTimeoutMs", "int32"), ("ServerAssignor", "string?"),
        ("ClassicMemberMetadata", ("struct?", [("SessionTimeoutMs", "int32"),
                                              ("SupportedProtocols", [("Name", "string"), ("Metadata", "bytes")])]),
         ("tag", 0, None))],
    6: [("AssignmentEpoch", "int32")],
    7: [("TopicPartitions", TP)],
    8: [("MemberEpoch", "int32"), ("PreviousMemberEpoch", "int32"), ("State", "int8"),
        ("AssignedPartitions", TP), ("PartitionsPendingRevocation", TP)],
    16: [("Topics", "[]string"), ("Version", "int64"), ("Timestamp", "int64")],
}


def camel(name: str) -> str:
    return name[0].lower() + name[1:]


def _string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return encode_uvarint(len(b) + 1) + b


def _field(ftype, v) -> bytes:
    """One value in the flexible encoding, from the JSON kafka-dump-log prints."""
    if isinstance(ftype, list):
        return encode_uvarint(len(v) + 1) + b"".join(_struct(ftype, e) for e in v)
    if isinstance(ftype, tuple):                          # nullable struct
        return b"\xff" if v is None else b"\x01" + _struct(ftype[1], v)
    base = ftype.rstrip("?")
    if base == "int8":
        return struct.pack(">b", v)
    if base == "int32":
        return struct.pack(">i", v)
    if base == "int64":
        return struct.pack(">q", v)
    if base == "uuid":
        return base64.urlsafe_b64decode(v + "==")
    if base == "string":
        return _string(v)
    if base == "bytes":
        raw = v if isinstance(v, bytes) else base64.b64decode(v)     # to_json writes bytes as base64
        return encode_uvarint(len(raw) + 1) + raw
    if base.startswith("[]"):
        return encode_uvarint(len(v) + 1) + b"".join(_field(base[2:], e) for e in v)
    raise AssertionError(ftype)


def _struct(fields, data: dict) -> bytes:
    out, tags = b"", []
    assert [camel(f[0]) for f in fields if camel(f[0]) in data] == list(data), \
        "JSON fields not in schema order"
    for f in fields:
        name, ftype = camel(f[0]), f[1]
        if len(f) == 3:                                   # tagged: only when not the default
            if name in data and data[name] != f[2][2]:
                body = _field(ftype, data[name])
                tags.append(encode_uvarint(f[2][1]) + encode_uvarint(len(body)) + body)
            continue
        out += _field(ftype, data[name])
    return out + encode_uvarint(len(tags)) + b"".join(tags)


def schema_value_bytes(record_type: int, data: dict) -> bytes:
    return struct.pack(">h", 0) + _struct(VALUES[record_type], data)


def schema_key_bytes(record_type: int, data: dict) -> bytes:
    out = struct.pack(">h", record_type)
    for name in KEYS[record_type]:
        b = data[camel(name)].encode("utf-8")
        out += struct.pack(">h", len(b)) + b
    return out


# -- random records -------------------------------------------------------------------------------

def _rs(rng, n=8, nullable=False):
    if nullable and rng.random() < 0.3:
        return None
    return "".join(rng.choice("abcé-_.0") for _ in range(rng.randint(0, n)))


def _tps(rng):
    return [(uuid.UUID(int=rng.getrandbits(128)), sorted(rng.sample(range(64), rng.randint(0, 5))))
            for _ in range(rng.randint(0, 3))]


def random_record(rng) -> R.CoordinatorRecord:
    t = rng.choice(sorted(KEYS))
    g, mid = _rs(rng), _rs(rng, 22)
    if t == 3:
        return R.consumer_group_record(R.ConsumerGroupMetadataKey(g), R.ConsumerGroupMetadataValue(
            rng.randint(-2**31, 2**31 - 1), rng.choice([0, rng.randint(-2**63, 2**63 - 1)])))
    if t == 4:
        topics = [R.TopicMetadata(uuid.UUID(int=rng.getrandbits(128)), _rs(rng), rng.randint(0, 9),
                                  [R.PartitionRacks(p, [_rs(rng) for _ in range(rng.randint(0, 2))])
                                   for p in range(rng.randint(0, 3))]) for _ in range(rng.randint(0, 3))]
        return R.consumer_group_record(R.ConsumerGroupPartitionMetadataKey(g),
                                       R.ConsumerGroupPartitionMetadataValue(topics))
    if t == 5:
        classic = None
        if rng.random() < 0.5:
            classic = R.ClassicMemberMetadata(rng.randint(0, 99999), [
                R.ClassicProtocol(_rs(rng), rng.randbytes(rng.randint(0, 9))) for _ in range(rng.randint(0, 2))])
        v = R.ConsumerGroupMemberMetadataValue(
            _rs(rng, nullable=True), _rs(rng, nullable=True), _rs(rng), "/" + _rs(rng),
            sorted(_rs(rng) for _ in range(rng.randint(0, 3))), _rs(rng, nullable=True),
            rng.randint(-1, 10**6), rng.choice([None, "uniform", "range"]), classic)
        return R.consumer_group_record(R.ConsumerGroupMemberMetadataKey(g, mid), v)
    if t == 6:
        return R.consumer_group_record(R.ConsumerGroupTargetAssignmentMetadataKey(g),
                                       R.ConsumerGroupTargetAssignmentMetadataValue(rng.randint(-1, 99)))
    if t == 7:
        return R.consumer_group_record(R.ConsumerGroupTargetAssignmentMemberKey(g, mid),
                                       R.ConsumerGroupTargetAssignmentMemberValue(_tps(rng)))
    if t == 8:
        return R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey(g, mid),
                                       R.ConsumerGroupCurrentMemberAssignmentValue(
                                           rng.randint(-2, 99), rng.randint(-2, 99), rng.choice([0, 1, 2, 127]),
                                           _tps(rng), _tps(rng)))
    return R.consumer_group_record(R.ConsumerGroupRegularExpressionKey(g, "^" + _rs(rng) + ".*"),
                                   R.ConsumerGroupRegularExpressionValue(
                                       sorted(_rs(rng) for _ in range(rng.randint(0, 3))),
                                       rng.randint(-1, 2**40), rng.randint(-1, 2**42)))


def test_random_records_round_trip_and_match_kafkas_schemas():
    rng = random.Random(848)
    for _ in range(400):
        rec = random_record(rng)
        key, value = rec.key_bytes(), rec.value_bytes()
        back = R.decode_record(key, value, consumer_groups=True)
        assert back.key == rec.key and back.value == rec.value and back.value_version == 0
        k_json, v_json = R.key_json(rec.key), R.value_json(rec.value, 0)
        assert k_json["type"] == str(rec.key.version) and v_json["version"] == "0"
        # the bytes an encoder driven by Kafka's schemas makes of the JSON kafka-dump-log prints
        assert schema_key_bytes(rec.key.version, k_json["data"]) == key
        assert schema_value_bytes(rec.key.version, v_json["data"]) == value
        # a tombstone of the same key
        tomb = R.decode_record(key, None, consumer_groups=True)
        assert tomb.key == rec.key and tomb.value is None


def test_spec_examples_byte_for_byte():
    rec = R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                  R.ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, [(T1, [0, 1])], []))
    assert rec.key_bytes() == bytes.fromhex("0008 0001 67 0001 6d")
    assert rec.value_bytes() == bytes.fromhex("0000 00000001 00000000 00 02") + T1.bytes + \
        bytes.fromhex("03 00000000 00000001 00 01 00")
    assert R.encode_key(R.ConsumerGroupMetadataKey("g")) == bytes.fromhex("0003 0001 67")
    assert R.encode_value(R.ConsumerGroupMetadataValue(1)) == bytes.fromhex("0000 00000001 00")
    h = 0x0123456789ABCDEF
    assert R.encode_value(R.ConsumerGroupMetadataValue(1, h)) == \
        bytes.fromhex("0000 00000001 01 00 08") + struct.pack(">q", h)
    v = R.ConsumerGroupMemberMetadataValue(None, None, "rdkafka", "/127.0.0.1", ["t"], "", 300000, None)
    assert R.encode_value(v) == bytes.fromhex(
        "00 00 00 00 08 72 64 6b 61 66 6b 61 0b 2f 31 32 37 2e 30 2e 30 2e 31 02 02 74 01 00 04 93 e0 00 00")
    v.subscribed_topic_regex = None                      # null regex is 00, "" is 01
    assert R.encode_value(v)[-7] == 0


def test_readers_skip_unknown_tags_and_read_later_versions_as_v0():
    rng = random.Random(7)
    for _ in range(100):
        rec = random_record(rng)
        value = rec.value_bytes()
        if isinstance(rec.value, R.ConsumerGroupMetadataValue) and rec.value.metadata_hash:
            continue                                     # its top-level tag section is not empty
        if isinstance(rec.value, R.ConsumerGroupMemberMetadataValue) and rec.value.classic_member_metadata:
            continue
        # the value's last byte is its (empty) top-level tag section: put an unknown tag 9 there
        assert value[-1] == 0
        tagged = value[:-1] + b"\x01\x09\x03abc"
        assert R.decode_record(rec.key_bytes(), tagged, consumer_groups=True).value == rec.value
        # a version 1 (which Kafka's serde refuses) is read with v0's layout
        later = struct.pack(">h", 1) + value[2:]
        back = R.decode_record(rec.key_bytes(), later, consumer_groups=True)
        assert back.value == rec.value and back.value_version == 1


def test_bad_bytes_name_the_field():
    key = R.encode_key(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"))
    value = R.encode_value(R.ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, [(T1, [0, 1])], []))
    with pytest.raises(R.RecordFormatError, match="with version 0.*field assignedPartitions"):
        R.decode_record(key, value[:15], consumer_groups=True)
    with pytest.raises(R.RecordFormatError, match="memberId"):
        R.decode_record(key[:-2], value, consumer_groups=True)
    # a huge count is refused before any allocation
    bad = value[:11] + encode_uvarint(10**8) + value[12:]
    with pytest.raises(R.RecordFormatError, match="cannot fit"):
        R.decode_record(key, bad, consumer_groups=True)
    bad_hash = R.encode_value(R.ConsumerGroupMetadataValue(1))[:-1] + b"\x01\x00\x02\xff\xff"
    with pytest.raises(R.RecordFormatError, match="metadataHash"):
        R.decode_record(R.encode_key(R.ConsumerGroupMetadataKey("g")), bad_hash, consumer_groups=True)


def test_classic_loader_still_skips_consumer_group_types():
    # until the consumer-group coordinator replays them, the classic loader's decode_record
    # reports them as unknown types, which it skips
    key = R.encode_key(R.ConsumerGroupMetadataKey("g"))
    with pytest.raises(R.UnknownRecordType) as e:
        R.decode_record(key, R.encode_value(R.ConsumerGroupMetadataValue(1)))
    assert e.value.record_type == 3


def test_dump_log_json_is_kafkas():
    text = R.offsets_decoder_text(
        R.encode_key(R.ConsumerGroupMemberMetadataKey("g", "m")),
        R.encode_value(R.ConsumerGroupMemberMetadataValue(
            "i", None, "rdkafka", "/127.0.0.1", ["t"], "", 300000, "uniform",
            R.ClassicMemberMetadata(45000, [R.ClassicProtocol("range", b"\x00\x01")]))), 4)
    assert text == (
        '{"type":"5","data":{"groupId":"g","memberId":"m"}}',
        '{"version":"0","data":{"instanceId":"i","rackId":null,"clientId":"rdkafka",'
        '"clientHost":"/127.0.0.1","subscribedTopicNames":["t"],"subscribedTopicRegex":"",'
        '"rebalanceTimeoutMs":300000,"serverAssignor":"uniform","classicMemberMetadata":'
        '{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range","metadata":"AAE="}]}}}')
    assert R.offsets_decoder_text(R.encode_key(R.ConsumerGroupRegularExpressionKey("g", "^t.*")), None, 5) == \
        ('{"type":"16","data":{"groupId":"g","regularExpression":"^t.*"}}', "<DELETE>")
    assert R.offsets_decoder_text(R.encode_key(R.ConsumerGroupMetadataKey("g")),
                                  R.encode_value(R.ConsumerGroupMetadataValue(3, -7)), 6)[1] == \
        '{"version":"0","data":{"epoch":3,"metadataHash":-7}}'
    part = R.ConsumerGroupPartitionMetadataValue([R.TopicMetadata(T1, "foo", 2, [R.PartitionRacks(0, ["r1"])])])
    assert R.offsets_decoder_text(R.encode_key(R.ConsumerGroupPartitionMetadataKey("g")),
                                  R.encode_value(part), 7)[1] == (
        '{"version":"0","data":{"topics":[{"topicId":"T1-A4s3VTwiI5CTbEp6POw","topicName":"foo",'
        '"numPartitions":2,"partitionMetadata":[{"partition":0,"racks":["r1"]}]}]}}')
    # a value that does not decode: Kafka's "Error at offset" line
    key = R.encode_key(R.ConsumerGroupTargetAssignmentMetadataKey("g"))
    assert R.offsets_decoder_text(key, b"\x00\x00\x00", 8)[0].startswith(
        "Error at offset 8, skipping. could not read record with version 0")


def test_dump_log_offsets_decoder_prints_consumer_group_records(tmp_path, capsys):
    from compactlog.cli.main import main
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir

    dd = DataDir(str(tmp_path / "d"), broker=BrokerConfig({}), writable=True, create=True, command="test")
    dd.create_topic(R.OFFSETS_TOPIC, 1, {"cleanup.policy": "compact"})
    log = dd.open_log(R.OFFSETS_TOPIC, 0)
    # a first member joining an empty group: 5, 3, 7, 6, 8 (spec §7.2), then its leave's tombstones
    recs = [R.consumer_group_record(R.ConsumerGroupMemberMetadataKey("g", "m"), R.ConsumerGroupMemberMetadataValue(
                None, None, "rdkafka", "/127.0.0.1", ["t"], "", 300000, None)),
            R.consumer_group_record(R.ConsumerGroupMetadataKey("g"), R.ConsumerGroupMetadataValue(1, 42)),
            R.consumer_group_record(R.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
                                    R.ConsumerGroupTargetAssignmentMemberValue([(T1, [0, 1])])),
            R.consumer_group_record(R.ConsumerGroupTargetAssignmentMetadataKey("g"),
                                    R.ConsumerGroupTargetAssignmentMetadataValue(1)),
            R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
                                    R.ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, [(T1, [0, 1])], [])),
            R.consumer_group_record(R.ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None)]
    log.append_records([r.key_bytes() for r in recs], [r.value_bytes() for r in recs],
                       timestamps=[1700000000000] * len(recs))
    path = os.path.join(log.dir, "00000000000000000000.log")
    dd.close()
    capsys.readouterr()
    assert main(["dump-log", "--offsets-decoder", "--files", path]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| offset:")]
    tails = [line.split(" key: ", 1)[1] for line in lines]
    assert tails == [
        '{"type":"5","data":{"groupId":"g","memberId":"m"}} payload: {"version":"0","data":{'
        '"instanceId":null,"rackId":null,"clientId":"rdkafka","clientHost":"/127.0.0.1",'
        '"subscribedTopicNames":["t"],"subscribedTopicRegex":"","rebalanceTimeoutMs":300000,'
        '"serverAssignor":null}}',
        '{"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":1,"metadataHash":42}}',
        '{"type":"7","data":{"groupId":"g","memberId":"m"}} payload: {"version":"0","data":{'
        '"topicPartitions":[{"topicId":"T1-A4s3VTwiI5CTbEp6POw","partitions":[0,1]}]}}',
        '{"type":"6","data":{"groupId":"g"}} payload: {"version":"0","data":{"assignmentEpoch":1}}',
        '{"type":"8","data":{"groupId":"g","memberId":"m"}} payload: {"version":"0","data":{'
        '"memberEpoch":1,"previousMemberEpoch":0,"state":0,"assignedPartitions":[{"topicId":'
        '"T1-A4s3VTwiI5CTbEp6POw","partitions":[0,1]}],"partitionsPendingRevocation":[]}}',
        '{"type":"8","data":{"groupId":"g","memberId":"m"}} payload: <DELETE>']
    assert main(["dump-log", "--offsets-decoder", "--json", "--files", path]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    recs = [o for o in objs if o["type"] == "record"]
    assert recs[1]["decodedKey"] == {"type": "3", "data": {"groupId": "g"}}
    assert recs[1]["decodedValue"] == {"version": "0", "data": {"epoch": 1, "metadataHash": 42}}
    assert recs[5]["decodedValue"] == "<DELETE>"
