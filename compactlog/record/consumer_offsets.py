"""The ``__consumer_offsets`` records: keys, values, the partition of a group, and their JSON.

Follows Kafka's ``GroupCoordinatorRecordSerde`` / ``CoordinatorRecordSerde`` (a record's key is an
``int16`` record type followed by the key struct, its value an ``int16`` version followed by the
value struct, a null value being a tombstone), the generated ``OffsetCommitKey/Value`` and
``GroupMetadataKey/Value`` messages (``group-coordinator/src/main/resources/common/message``),
``GroupCoordinatorRecordHelpers`` (which versions are written), ``Utils.abs(groupId.hashCode()) %
partitions`` (``GroupCoordinatorService.topicPartitionFor``), the embedded consumer protocol
(``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``) and ``DumpLogSegments``'
``OffsetsMessageParser`` (the text of ``kafka-dump-log --offsets-decoder``).

Record types (the key's version): 0 and 1 = offset commit (Kafka writes 1), 2 = group metadata;
3-8 and 16 are the consumer group protocol's (KIP-848: ``ConsumerGroup*Key/Value``, all value
version 0, flexible, with their tagged fields: ``ConsumerGroupMetadataValue.MetadataHash`` of
KIP-1101, ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``); 10-15 (share groups) and
17-23 (streams groups) are not decoded. ``decode_record`` returns the consumer-group types only
when asked (``consumer_groups=True``: kafka-dump-log's decoder and the consumer-group loader);
otherwise, like every other type it does not know, they raise ``UnknownRecordType``, which the
classic coordinator's loader skips as Kafka's loader skips types it does not know. A consumer-group
value of a version above 0 is read with v0's layout (KIP-915 lets later versions add only tagged
fields; Kafka's serde refuses such a value, ``UnknownRecordVersionException``). Value versions: an offset commit is written as v3 (v1 when it carries an expire
timestamp), group metadata as v3. v4 is the first flexible version of both values; KIP-915 lets
later versions add only tagged fields, so a version above 4 is read with v4's layout, exactly as
Kafka's generated readers (which test ``version >= 4``) read it.

Everything here is sans-IO: bytes in, objects out, and the reverse; the field types and the JSON
are ``schema_fields``', shared with the ``__transaction_state`` codec (``transaction_log``).
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field

from .schema_fields import I16 as _I16
from .schema_fields import I32 as _I32
from .schema_fields import I64 as _I64
from .schema_fields import SchemaFormatError, SchemaReader, put_bytes, put_count, put_string, to_json
from .varint import encode_uvarint

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_LEGACY = 0        # key version 0 (Kafka before 0.10 wrote it); same layout as 1
OFFSET_COMMIT = 1
GROUP_METADATA = 2

OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
FLEXIBLE_FROM = 4

# the consumer group protocol's records (GroupCoordinatorRecordType / CoordinatorRecordType)
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4       # read only: replaced by MetadataHash in 4.1 (KIP-1101)
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
CONSUMER_GROUP_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
CONSUMER_GROUP_VALUE_VERSION = 0

CONSUMER_PROTOCOL_TYPE = "consumer"


class RecordFormatError(SchemaFormatError):
    """Bytes that are not a ``__consumer_offsets`` key or value (the field and position named)."""


class UnknownRecordType(RecordFormatError):
    """A key whose record type (its version) this coordinator does not know."""

    def __init__(self, record_type: int):
        self.record_type = record_type
        super().__init__(f"unknown record type {record_type}")


# -- the partition of a group ---------------------------------------------------------------------

def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + c`` over UTF-16 code units, 32-bit wrap."""
    h = 0
    data = s.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id`` (Kafka's ``Utils.abs`` maps
    -2147483648 to 0, where Java's ``Math.abs`` would stay negative)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- keys and values ------------------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA


@dataclass
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1

    def default_version(self) -> int:
        return OFFSET_COMMIT_VALUE_WITH_EXPIRY if self.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)

    def default_version(self) -> int:
        return GROUP_METADATA_VALUE_VERSION


@dataclass
class CoordinatorRecord:
    """One ``__consumer_offsets`` record (classic or consumer-group key and value); ``value`` None
    is a tombstone."""
    key: OffsetCommitKey | GroupMetadataKey
    value: OffsetCommitValue | GroupMetadataValue | None
    value_version: int | None = None

    @property
    def group(self) -> str:
        return self.key.group

    def key_bytes(self) -> bytes:
        return encode_key(self.key)

    def value_bytes(self) -> bytes | None:
        return encode_value(self.value, self.value_version)


def offset_commit_record(group: str, topic: str, partition: int,
                         value: OffsetCommitValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), value,
                             None if value is None else value.default_version())


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(group), value,
                             None if value is None else GROUP_METADATA_VALUE_VERSION)


# -- the consumer group protocol's records (KIP-848) ----------------------------------------------
# Keys are non-flexible (int16-length strings) and start with the group id; values are version 0,
# flexible: compact strings and arrays, 16-byte uuids, a tagged section after every struct.

@dataclass(frozen=True)
class ConsumerGroupMetadataKey:
    group: str
    version: int = CONSUMER_GROUP_METADATA


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataKey:
    group: str
    version: int = CONSUMER_GROUP_PARTITION_METADATA


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str
    version: int = CONSUMER_GROUP_MEMBER_METADATA


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str
    version: int = CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str
    version: int = CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str
    version: int = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT


@dataclass(frozen=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str
    version: int = CONSUMER_GROUP_REGULAR_EXPRESSION


_CG_KEYS = {
    CONSUMER_GROUP_METADATA: (ConsumerGroupMetadataKey, None),
    CONSUMER_GROUP_PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, None),
    CONSUMER_GROUP_MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, "memberId"),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (ConsumerGroupTargetAssignmentMetadataKey, None),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (ConsumerGroupTargetAssignmentMemberKey, "memberId"),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey, "memberId"),
    CONSUMER_GROUP_REGULAR_EXPRESSION: (ConsumerGroupRegularExpressionKey, "regularExpression"),
}

# (topic id, [partition, ...]) pairs: ConsumerGroup*Value's TopicPartition(s) structs
TopicPartitions = list[tuple[uuid.UUID, list[int]]]


@dataclass
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0              # tag 0 (KIP-1101), written only when not 0


@dataclass
class PartitionRacks:
    partition: int
    racks: list[str] = field(default_factory=list)


@dataclass
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: list[PartitionRacks] = field(default_factory=list)


@dataclass
class ConsumerGroupPartitionMetadataValue:
    topics: list[TopicMetadata] = field(default_factory=list)


@dataclass
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass
class ClassicMemberMetadata:
    session_timeout_ms: int
    supported_protocols: list[ClassicProtocol] = field(default_factory=list)


@dataclass
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None    # tag 0


@dataclass
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicPartitions = field(default_factory=list)


@dataclass
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: TopicPartitions = field(default_factory=list)
    partitions_pending_revocation: TopicPartitions = field(default_factory=list)


@dataclass
class ConsumerGroupRegularExpressionValue:
    topics: list[str] = field(default_factory=list)
    version: int = -1
    timestamp: int = -1


CONSUMER_GROUP_VALUES = (ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue,
                         ConsumerGroupMemberMetadataValue, ConsumerGroupTargetAssignmentMetadataValue,
                         ConsumerGroupTargetAssignmentMemberValue, ConsumerGroupCurrentMemberAssignmentValue,
                         ConsumerGroupRegularExpressionValue)


def consumer_group_record(key, value) -> CoordinatorRecord:
    """A consumer-group record (``GroupCoordinatorRecordHelpers.newConsumerGroup*Record``), value
    version 0; ``value`` None is the tombstone."""
    return CoordinatorRecord(key, value, None if value is None else CONSUMER_GROUP_VALUE_VERSION)


def _uuid(r: SchemaReader, name: str) -> uuid.UUID:
    p = r.take(16, name)
    return uuid.UUID(bytes=bytes(r.buf[p:p + 16]))


def _compact_strings(r: SchemaReader, name: str) -> list[str]:
    return [r.string(name, compact=True) for _ in range(r.array_length(name, compact=True))]


def _compact_int32s(r: SchemaReader, name: str) -> list[int]:
    return [r.i32(name) for _ in range(r.array_length(name, compact=True, min_element=4))]


def _cg_topic_partitions(r: SchemaReader, name: str) -> TopicPartitions:
    out = []
    for i in range(r.array_length(name, compact=True, min_element=18)):
        topic_id = _uuid(r, f"{name}[{i}].topicId")
        parts = _compact_int32s(r, f"{name}[{i}].partitions")
        r.tagged_fields(f"{name}[{i}]")
        out.append((topic_id, parts))
    return out


def _classic_member_metadata(data: bytes) -> ClassicMemberMetadata | None:
    r = _reader(data, "value: tagged field ClassicMemberMetadata")
    if r.i8("ClassicMemberMetadata") < 0:         # nullable struct: -1 null, 1 present
        return None
    timeout = r.i32("sessionTimeoutMs")
    protocols = []
    for i in range(r.array_length("supportedProtocols", compact=True, min_element=3)):
        name = r.string(f"supportedProtocols[{i}].name", compact=True)
        metadata = r.bytes_(f"supportedProtocols[{i}].metadata", compact=True)
        r.tagged_fields(f"supportedProtocols[{i}]")
        protocols.append(ClassicProtocol(name, metadata))
    r.tagged_fields("ClassicMemberMetadata")
    return ClassicMemberMetadata(timeout, protocols)


def _consumer_group_value(record_type: int, r: SchemaReader):
    """A consumer-group value after its version (read with v0's layout, unknown tags skipped)."""
    if record_type == CONSUMER_GROUP_METADATA:
        epoch = r.i32("epoch")
        tags = r.tagged_fields("ConsumerGroupMetadataValue")
        h = tags.get(0)
        if h is not None and len(h) != 8:
            r.fail("metadataHash", f"tagged int64 of {len(h)} bytes")
        return ConsumerGroupMetadataValue(epoch, _I64.unpack(h)[0] if h else 0)
    if record_type == CONSUMER_GROUP_PARTITION_METADATA:
        topics = []
        for i in range(r.array_length("topics", compact=True, min_element=24)):
            n = f"topics[{i}]"
            topic_id = _uuid(r, f"{n}.topicId")
            name = r.string(f"{n}.topicName", compact=True)
            count = r.i32(f"{n}.numPartitions")
            racks = []
            for j in range(r.array_length(f"{n}.partitionMetadata", compact=True, min_element=6)):
                partition = r.i32(f"{n}.partitionMetadata[{j}].partition")
                racks.append(PartitionRacks(partition, _compact_strings(r, f"{n}.partitionMetadata[{j}].racks")))
                r.tagged_fields(f"{n}.partitionMetadata[{j}]")
            r.tagged_fields(n)
            topics.append(TopicMetadata(topic_id, name, count, racks))
        r.tagged_fields("ConsumerGroupPartitionMetadataValue")
        return ConsumerGroupPartitionMetadataValue(topics)
    if record_type == CONSUMER_GROUP_MEMBER_METADATA:
        v = ConsumerGroupMemberMetadataValue(
            r.string("instanceId", nullable=True, compact=True),
            r.string("rackId", nullable=True, compact=True),
            r.string("clientId", compact=True),
            r.string("clientHost", compact=True),
            _compact_strings(r, "subscribedTopicNames"),
            r.string("subscribedTopicRegex", nullable=True, compact=True),
            r.i32("rebalanceTimeoutMs"),
            r.string("serverAssignor", nullable=True, compact=True))
        tags = r.tagged_fields("ConsumerGroupMemberMetadataValue")
        if 0 in tags:
            v.classic_member_metadata = _classic_member_metadata(tags[0])
        return v
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        v = ConsumerGroupTargetAssignmentMetadataValue(r.i32("assignmentEpoch"))
        r.tagged_fields("ConsumerGroupTargetAssignmentMetadataValue")
        return v
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        v = ConsumerGroupTargetAssignmentMemberValue(_cg_topic_partitions(r, "topicPartitions"))
        r.tagged_fields("ConsumerGroupTargetAssignmentMemberValue")
        return v
    if record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        v = ConsumerGroupCurrentMemberAssignmentValue(
            r.i32("memberEpoch"), r.i32("previousMemberEpoch"), r.i8("state"),
            _cg_topic_partitions(r, "assignedPartitions"),
            _cg_topic_partitions(r, "partitionsPendingRevocation"))
        r.tagged_fields("ConsumerGroupCurrentMemberAssignmentValue")
        return v
    v = ConsumerGroupRegularExpressionValue(_compact_strings(r, "topics"), r.i64("version"),
                                            r.i64("timestamp"))
    r.tagged_fields("ConsumerGroupRegularExpressionValue")
    return v


def _put_cg_topic_partitions(out: bytearray, tps: TopicPartitions) -> None:
    put_count(out, len(tps), True)
    for topic_id, parts in tps:
        out += topic_id.bytes
        put_count(out, len(parts), True)
        for p in parts:
            out += _I32.pack(p)
        out.append(0)


def _put_tag(out: bytearray, tag: int, data: bytes) -> None:
    out += encode_uvarint(tag)
    out += encode_uvarint(len(data))
    out += data


def _encode_consumer_group_value(value, out: bytearray) -> None:
    if isinstance(value, ConsumerGroupMetadataValue):
        out += _I32.pack(value.epoch)
        if value.metadata_hash:
            out.append(1)
            _put_tag(out, 0, _I64.pack(value.metadata_hash))
        else:
            out.append(0)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        put_count(out, len(value.topics), True)
        for t in value.topics:
            out += t.topic_id.bytes
            put_string(out, t.topic_name, True)
            out += _I32.pack(t.num_partitions)
            put_count(out, len(t.partition_metadata), True)
            for pm in t.partition_metadata:
                out += _I32.pack(pm.partition)
                put_count(out, len(pm.racks), True)
                for rack in pm.racks:
                    put_string(out, rack, True)
                out.append(0)
            out.append(0)
        out.append(0)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        put_string(out, value.instance_id, True)
        put_string(out, value.rack_id, True)
        put_string(out, value.client_id, True)
        put_string(out, value.client_host, True)
        put_count(out, len(value.subscribed_topic_names), True)
        for name in value.subscribed_topic_names:
            put_string(out, name, True)
        put_string(out, value.subscribed_topic_regex, True)
        out += _I32.pack(value.rebalance_timeout_ms)
        put_string(out, value.server_assignor, True)
        cm = value.classic_member_metadata
        if cm is None:
            out.append(0)
        else:
            body = bytearray(b"\x01")                 # a present nullable struct
            body += _I32.pack(cm.session_timeout_ms)
            put_count(body, len(cm.supported_protocols), True)
            for proto in cm.supported_protocols:
                put_string(body, proto.name, True)
                put_bytes(body, proto.metadata, True)
                body.append(0)
            body.append(0)
            out.append(1)
            _put_tag(out, 0, bytes(body))
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        out += _I32.pack(value.assignment_epoch)
        out.append(0)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _put_cg_topic_partitions(out, value.topic_partitions)
        out.append(0)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        out += _I32.pack(value.member_epoch)
        out += _I32.pack(value.previous_member_epoch)
        out += struct.pack(">b", value.state)
        _put_cg_topic_partitions(out, value.assigned_partitions)
        _put_cg_topic_partitions(out, value.partitions_pending_revocation)
        out.append(0)
    else:
        put_count(out, len(value.topics), True)
        for t in value.topics:
            put_string(out, t, True)
        out += _I64.pack(value.version)
        out += _I64.pack(value.timestamp)
        out.append(0)


def _uuid_json(u: uuid.UUID) -> str:
    # Uuid.toString: URL-safe base64 without padding
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def _cg_tp_json(tps: TopicPartitions) -> list:
    return [{"topicId": _uuid_json(t), "partitions": list(p)} for t, p in tps]


def _consumer_group_value_json(value) -> dict:
    """The generated ``*JsonConverter.write``: camelCase fields in schema order, a tagged field
    only when it differs from its default, uuids as ``Uuid.toString``, bytes as base64."""
    if isinstance(value, ConsumerGroupMetadataValue):
        d = {"epoch": value.epoch}
        if value.metadata_hash:
            d["metadataHash"] = value.metadata_hash
        return d
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        return {"topics": [{"topicId": _uuid_json(t.topic_id), "topicName": t.topic_name,
                            "numPartitions": t.num_partitions,
                            "partitionMetadata": [{"partition": pm.partition, "racks": list(pm.racks)}
                                                  for pm in t.partition_metadata]}
                           for t in value.topics]}
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        d = {"instanceId": value.instance_id, "rackId": value.rack_id, "clientId": value.client_id,
             "clientHost": value.client_host, "subscribedTopicNames": list(value.subscribed_topic_names),
             "subscribedTopicRegex": value.subscribed_topic_regex,
             "rebalanceTimeoutMs": value.rebalance_timeout_ms, "serverAssignor": value.server_assignor}
        cm = value.classic_member_metadata
        if cm is not None:
            d["classicMemberMetadata"] = {
                "sessionTimeoutMs": cm.session_timeout_ms,
                "supportedProtocols": [{"name": p.name, "metadata": p.metadata} for p in cm.supported_protocols]}
        return d
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": value.assignment_epoch}
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _cg_tp_json(value.topic_partitions)}
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        return {"memberEpoch": value.member_epoch, "previousMemberEpoch": value.previous_member_epoch,
                "state": value.state, "assignedPartitions": _cg_tp_json(value.assigned_partitions),
                "partitionsPendingRevocation": _cg_tp_json(value.partitions_pending_revocation)}
    return {"topics": list(value.topics), "version": value.version, "timestamp": value.timestamp}


# -- reading --------------------------------------------------------------------------------------

def _reader(data: bytes, what: str) -> SchemaReader:
    return SchemaReader(data, what, error=RecordFormatError)


def decode_key(data: bytes, *, consumer_groups: bool = False):
    """The key of a record; ``consumer_groups`` also decodes types 3-8 and 16 (else they raise
    ``UnknownRecordType``, as every type this module does not know)."""
    r = _reader(data, "key")
    record_type = r.i16("record type")
    if record_type in (OFFSET_COMMIT_LEGACY, OFFSET_COMMIT):
        return OffsetCommitKey(r.string("group"), r.string("topic"), r.i32("partition"), record_type)
    if record_type == GROUP_METADATA:
        return GroupMetadataKey(r.string("group"))
    if consumer_groups and record_type in _CG_KEYS:
        cls, second = _CG_KEYS[record_type]
        group = r.string("groupId")
        return cls(group) if second is None else cls(group, r.string(second))
    raise UnknownRecordType(record_type)


def decode_value(key: OffsetCommitKey | GroupMetadataKey, data: bytes | None):
    """(value, version) for ``key``'s record type; (None, None) for a tombstone."""
    if data is None:
        return None, None
    r = _reader(data, "value")
    version = r.i16("version")
    if version < 0:
        r.pos = 0
        r.fail("version", f"negative version {version}")
    if isinstance(key, OffsetCommitKey):
        return _offset_commit_value(r, version), version
    if isinstance(key, GroupMetadataKey):
        return _group_metadata_value(r, version), version
    return _consumer_group_value(key.version, r), version


def _offset_commit_value(r: SchemaReader, version: int) -> OffsetCommitValue:
    flexible = version >= FLEXIBLE_FROM
    offset = r.i64("offset")
    leader_epoch = r.i32("leaderEpoch") if version >= 3 else -1
    metadata = r.string("metadata", compact=flexible)
    commit_ts = r.i64("commitTimestamp")
    expire_ts = r.i64("expireTimestamp") if version == 1 else -1
    if flexible:
        r.tagged_fields("OffsetCommitValue")
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def _group_metadata_value(r: SchemaReader, version: int) -> GroupMetadataValue:
    flexible = version >= FLEXIBLE_FROM
    protocol_type = r.string("protocolType", compact=flexible)
    generation = r.i32("generation")
    protocol = r.string("protocol", nullable=True, compact=flexible)
    leader = r.string("leader", nullable=True, compact=flexible)
    current_state_ts = r.i64("currentStateTimestamp") if version >= 2 else -1
    # a member is at least its fixed-size fields and empty strings/bytes
    n = r.array_length("members", compact=flexible, min_element=13 if flexible else 18)
    members = []
    for i in range(n):
        name = f"members[{i}]"
        member_id = r.string(f"{name}.memberId", compact=flexible)
        instance_id = r.string(f"{name}.groupInstanceId", nullable=True, compact=flexible) \
            if version >= 3 else None
        client_id = r.string(f"{name}.clientId", compact=flexible)
        client_host = r.string(f"{name}.clientHost", compact=flexible)
        rebalance_timeout = r.i32(f"{name}.rebalanceTimeout") if version >= 1 else -1
        session_timeout = r.i32(f"{name}.sessionTimeout")
        subscription = r.bytes_(f"{name}.subscription", compact=flexible)
        assignment = r.bytes_(f"{name}.assignment", compact=flexible)
        if flexible:
            r.tagged_fields(name)
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host,
                                      rebalance_timeout, session_timeout, subscription, assignment))
    if flexible:
        r.tagged_fields("GroupMetadataValue")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_ts, members)


def decode_record(key: bytes | None, value: bytes | None, *, consumer_groups: bool = False) -> CoordinatorRecord:
    """A record of ``__consumer_offsets``; ``RecordFormatError`` (``UnknownRecordType`` for a
    record type other than 0-2, or 0-8 and 16 with ``consumer_groups``) says what does not decode."""
    if key is None:
        raise RecordFormatError("key: null (every __consumer_offsets record has a key)")
    k = decode_key(key, consumer_groups=consumer_groups)
    try:
        v, version = decode_value(k, value)
    except RecordFormatError as e:
        version = _I16.unpack_from(value, 0)[0] if value is not None and len(value) >= 2 else None
        raise RecordFormatError(f"could not read record with version {version} from the value: {e}") \
            from None
    return CoordinatorRecord(k, v, version)


# -- writing --------------------------------------------------------------------------------------

def encode_key(key) -> bytes:
    out = bytearray(_I16.pack(key.version))
    put_string(out, key.group, False)
    if isinstance(key, OffsetCommitKey):
        put_string(out, key.topic, False)
        out += _I32.pack(key.partition)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        put_string(out, key.regex, False)
    elif hasattr(key, "member_id"):
        put_string(out, key.member_id, False)
    return bytes(out)


def encode_value(value, version: int | None = None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, CONSUMER_GROUP_VALUES):
        out = bytearray(_I16.pack(CONSUMER_GROUP_VALUE_VERSION if version is None else version))
        _encode_consumer_group_value(value, out)
        return bytes(out)
    version = value.default_version() if version is None else version
    flexible = version >= FLEXIBLE_FROM
    out = bytearray(_I16.pack(version))
    if isinstance(value, OffsetCommitValue):
        out += _I64.pack(value.offset)
        if version >= 3:
            out += _I32.pack(value.leader_epoch)
        put_string(out, value.metadata, flexible)
        out += _I64.pack(value.commit_timestamp)
        if version == 1:
            out += _I64.pack(value.expire_timestamp)
    else:
        put_string(out, value.protocol_type, flexible)
        out += _I32.pack(value.generation)
        put_string(out, value.protocol, flexible)
        put_string(out, value.leader, flexible)
        if version >= 2:
            out += _I64.pack(value.current_state_timestamp)
        put_count(out, len(value.members), flexible)
        for m in value.members:
            put_string(out, m.member_id, flexible)
            if version >= 3:
                put_string(out, m.group_instance_id, flexible)
            put_string(out, m.client_id, flexible)
            put_string(out, m.client_host, flexible)
            if version >= 1:
                out += _I32.pack(m.rebalance_timeout)
            out += _I32.pack(m.session_timeout)
            put_bytes(out, m.subscription, flexible)
            put_bytes(out, m.assignment, flexible)
            if flexible:
                out.append(0)
    if flexible:
        out.append(0)
    return bytes(out)


# -- the embedded consumer protocol ---------------------------------------------------------------

@dataclass
class ConsumerSubscription:
    """ConsumerProtocolSubscription (a ``consumer`` member's JoinGroup metadata)."""
    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[tuple[str, list[int]]] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass
class ConsumerAssignment:
    """ConsumerProtocolAssignment (what the leader hands a member in SyncGroup)."""
    version: int
    partitions: list[tuple[str, list[int]]]
    user_data: bytes | None = None


def _topic_partitions(r: SchemaReader, name: str) -> list[tuple[str, list[int]]]:
    out = []
    for i in range(r.array_length(name, min_element=6)):
        topic = r.string(f"{name}[{i}].topic")
        parts = [r.i32(f"{name}[{i}].partitions")
                 for _ in range(r.array_length(f"{name}[{i}].partitions", min_element=4))]
        out.append((topic, parts))
    return out


def decode_subscription(data: bytes, *, topics_only: bool = False) -> ConsumerSubscription:
    """Newer versions are read with the newest known layout (the protocol only appends fields);
    ``topics_only`` reads the v0 prefix, as the coordinator does to learn the subscribed topics."""
    r = _reader(data, "subscription")
    version = r.i16("version")
    if version < 0:
        r.fail("version", f"negative version {version}")
    topics = [r.string("topics") for _ in range(r.array_length("topics", min_element=2))]
    if topics_only:
        return ConsumerSubscription(version, topics)
    user_data = r.bytes_("userData", nullable=True)
    sub = ConsumerSubscription(version, topics, user_data)
    if version >= 1:
        sub.owned_partitions = _topic_partitions(r, "ownedPartitions")
    if version >= 2:
        sub.generation_id = r.i32("generationId")
    if version >= 3:
        sub.rack_id = r.string("rackId", nullable=True)
    return sub


def decode_assignment(data: bytes) -> ConsumerAssignment:
    r = _reader(data, "assignment")
    version = r.i16("version")
    if version < 0:
        r.fail("version", f"negative version {version}")
    parts = _topic_partitions(r, "assignedPartitions")
    user_data = r.bytes_("userData", nullable=True)
    return ConsumerAssignment(version, parts, user_data)


def encode_subscription(topics, version: int = 0, user_data: bytes | None = None) -> bytes:
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(topics))
    for t in topics:
        put_string(out, t, False)
    put_bytes(out, user_data, False)
    if version >= 1:
        out += _I32.pack(0)
    if version >= 2:
        out += _I32.pack(-1)
    if version >= 3:
        put_string(out, None, False)
    return bytes(out)


def encode_assignment(partitions, version: int = 0, user_data: bytes | None = None) -> bytes:
    """``partitions``: (topic, [partition, ...]) pairs."""
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(partitions))
    for topic, parts in partitions:
        put_string(out, topic, False)
        out += _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
    put_bytes(out, user_data, False)
    return bytes(out)


# -- kafka-dump-log --offsets-decoder --------------------------------------------------------------

def key_json(key) -> dict:
    if isinstance(key, OffsetCommitKey):
        data = {"group": key.group, "topic": key.topic, "partition": key.partition}
    elif isinstance(key, GroupMetadataKey):
        data = {"group": key.group}
    else:
        # the consumer-group keys: GroupId, then MemberId or RegularExpression
        second = _CG_KEYS[key.version][1]
        data = {"groupId": key.group}
        if second == "memberId":
            data[second] = key.member_id
        elif second:
            data[second] = key.regex
    return {"type": str(key.version), "data": data}


def _tp_json(parts) -> list:
    return [{"topic": t, "partitions": list(p)} for t, p in parts]


def subscription_json(sub: ConsumerSubscription) -> dict:
    d = {"topics": list(sub.topics), "userData": sub.user_data}
    if sub.version >= 1:
        d["ownedPartitions"] = _tp_json(sub.owned_partitions)
    if sub.version >= 2:
        d["generationId"] = sub.generation_id
    if sub.version >= 3:
        d["rackId"] = sub.rack_id
    return d


def assignment_json(a: ConsumerAssignment) -> dict:
    return {"assignedPartitions": _tp_json(a.partitions), "userData": a.user_data}


def _embedded(data: bytes, decode, render):
    # DumpLogSegments keeps the raw bytes when the embedded protocol does not decode
    try:
        return render(decode(data))
    except RecordFormatError:
        return data


def value_json(value, version: int) -> dict:
    if isinstance(value, OffsetCommitValue):
        data = {"offset": value.offset}
        if version >= 3:
            data["leaderEpoch"] = value.leader_epoch
        data["metadata"] = value.metadata
        data["commitTimestamp"] = value.commit_timestamp
        if version == 1:
            data["expireTimestamp"] = value.expire_timestamp
        return {"version": str(version), "data": data}
    if isinstance(value, CONSUMER_GROUP_VALUES):
        return {"version": str(version), "data": _consumer_group_value_json(value)}
    consumer = value.protocol_type == CONSUMER_PROTOCOL_TYPE
    data = {"protocolType": value.protocol_type, "generation": value.generation,
            "protocol": value.protocol, "leader": value.leader}
    if version >= 2:
        data["currentStateTimestamp"] = value.current_state_timestamp
    members = []
    for m in value.members:
        md = {"memberId": m.member_id}
        if version >= 3:
            md["groupInstanceId"] = m.group_instance_id
        md["clientId"] = m.client_id
        md["clientHost"] = m.client_host
        if version >= 1:
            md["rebalanceTimeout"] = m.rebalance_timeout
        md["sessionTimeout"] = m.session_timeout
        md["subscription"] = _embedded(m.subscription, decode_subscription, subscription_json) \
            if consumer else m.subscription
        md["assignment"] = _embedded(m.assignment, decode_assignment, assignment_json) \
            if consumer else m.assignment
        members.append(md)
    data["members"] = members
    return {"version": str(version), "data": data}


def offsets_decoder_text(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """(key text, payload text or None) of one record, as ``OffsetsMessageParser.parse`` (Kafka's
    ``CoordinatorRecordMessageParser`` with ``GroupCoordinatorRecordJsonConverters``)."""
    if key is None:
        raise RecordFormatError(f"Failed to decode message at offset {offset} using offset topic "
                                f"decoder (message had a missing key)")
    try:
        rec = decode_record(key, value, consumer_groups=True)
    except UnknownRecordType as e:
        return f"Unknown record type {e.record_type} at offset {offset}, skipping.", None
    except RecordFormatError as e:
        return f"Error at offset {offset}, skipping. {e}", None
    payload = "<DELETE>" if rec.value is None else to_json(value_json(rec.value, rec.value_version))
    return to_json(key_json(rec.key)), payload
