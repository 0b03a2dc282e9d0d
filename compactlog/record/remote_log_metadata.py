"""``__remote_log_metadata`` records, byte for byte as Kafka's ``RemoteLogMetadataSerde`` writes
them, the text its ``RemoteLogMetadataFormatter`` prints, and the segment state machine.

Follows Kafka's ``RemoteLogMetadataSerde`` / ``AbstractApiMessageSerde`` (the value is an unsigned
varint frame version 1, the api key and the record version, then the generated message), the four
schemas in ``storage/src/main/resources/message/Remote*Record.json`` (all version 0, flexible:
compact strings, arrays and nullable bytes as unsigned varint length + 1, a UUID as its 16 bytes,
an empty tagged-field section closing every struct, nested ones included), the ``toString`` of
``RemoteLogSegmentMetadata``, ``…Update``, ``RemotePartitionDeleteMetadata`` and
``RemoteLogSegmentMetadataSnapshot``, and ``RemoteLogSegmentState.isValidTransition`` /
``RemotePartitionDeleteState.isValidTransition``.

Keys are null (``ProducerManager.publishMessage``); only values are encoded here. Ids are kept in
Kafka's text form (``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding), the form every
key, manifest and log line uses; ``uuid_to_str``/``uuid_from_str`` convert.

What Kafka's constructors refuse is refused on both encode and decode (a start offset below 0, an
end below the start, no leader epoch, an unknown state id), so nothing written here makes
``RemoteLogMetadataSerde.deserialize`` throw on a Kafka broker. Sans-IO.
"""

from __future__ import annotations

import base64
import enum
import re
import struct
from dataclasses import dataclass

from .schema_fields import I8, I32, I64, SchemaFormatError, SchemaReader, put_bytes, put_count, put_string
from .varint import encode_uvarint

TOPIC = "__remote_log_metadata"
FRAME_VERSION = 1          # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION; 0 (KRaft preview) is refused

SEGMENT_METADATA = 0               # RemoteLogSegmentMetadataRecord
SEGMENT_METADATA_UPDATE = 1        # RemoteLogSegmentMetadataUpdateRecord
PARTITION_DELETE_METADATA = 2      # RemotePartitionDeleteMetadataRecord
SEGMENT_METADATA_SNAPSHOT = 3      # RemoteLogSegmentMetadataSnapshotRecord: in the serde, never written to the topic


class RemoteLogMetadataFormatError(SchemaFormatError):
    """A ``__remote_log_metadata`` value that Kafka's serde would refuse (the message says where)."""


# -- ids --------------------------------------------------------------------------------------------

_B64 = re.compile(r"[A-Za-z0-9_-]*={0,2}")


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes (most significant half first),
    without padding: 22 characters."""
    if len(raw) != 16:
        raise ValueError(f"a Uuid has 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: the 16 bytes of URL-safe base64 text (padding optional)."""
    if len(text) > 24:
        raise ValueError(f"{text[:24]!r}... is too long to be a base64 Uuid")
    if not _B64.fullmatch(text):
        raise ValueError(f"{text!r} is not URL-safe base64")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as e:
        raise ValueError(f"{text!r} is not base64: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, a Uuid has 16")
    return raw


# -- states -----------------------------------------------------------------------------------------

class SegmentState(enum.IntEnum):
    """``RemoteLogSegmentState``; the names are what Kafka's ``toString`` prints."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class PartitionDeleteState(enum.IntEnum):
    """``RemotePartitionDeleteState`` (ZooKeeper-era partition deletion; KRaft brokers never write
    it, compactlog neither, but both accept it on replay)."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


_SEGMENT_NEXT = {
    SegmentState.COPY_SEGMENT_STARTED: {SegmentState.COPY_SEGMENT_FINISHED, SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.COPY_SEGMENT_FINISHED: {SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.DELETE_SEGMENT_STARTED: {SegmentState.DELETE_SEGMENT_FINISHED},
    SegmentState.DELETE_SEGMENT_FINISHED: set(),
}
_PARTITION_NEXT = {
    PartitionDeleteState.DELETE_PARTITION_MARKED: {PartitionDeleteState.DELETE_PARTITION_STARTED},
    PartitionDeleteState.DELETE_PARTITION_STARTED: {PartitionDeleteState.DELETE_PARTITION_FINISHED},
    PartitionDeleteState.DELETE_PARTITION_FINISHED: set(),
}


def is_valid_transition(current: SegmentState | None, target: SegmentState) -> bool:
    """``RemoteLogSegmentState.isValidTransition``: none -> STARTED; a state to itself (a retry or a
    failover repeats an event); STARTED -> FINISHED | DELETE_STARTED; FINISHED -> DELETE_STARTED;
    DELETE_STARTED -> DELETE_FINISHED. Kafka logs and drops an event failing this."""
    if current is None:
        return target == SegmentState.COPY_SEGMENT_STARTED
    return current == target or target in _SEGMENT_NEXT[SegmentState(current)]


def is_valid_partition_delete_transition(current: PartitionDeleteState | None,
                                         target: PartitionDeleteState) -> bool:
    """``RemotePartitionDeleteState.isValidTransition``: none -> MARKED -> STARTED -> FINISHED, and
    a state to itself."""
    if current is None:
        return target == PartitionDeleteState.DELETE_PARTITION_MARKED
    return current == target or target in _PARTITION_NEXT[PartitionDeleteState(current)]


# -- the records ------------------------------------------------------------------------------------

def _optional_custom(custom: bytes | None) -> str:
    # java.util.Optional<CustomMetadata>.toString
    return "Optional.empty" if custom is None else f"Optional[CustomMetadata{{{len(custom)} bytes}}]"


def _epochs_text(epochs: tuple[tuple[int, int], ...]) -> str:
    # a TreeMap<Integer, Long>'s toString
    return "{" + ", ".join(f"{e}={o}" for e, o in epochs) + "}"


def _normalize_epochs(epochs) -> tuple[tuple[int, int], ...]:
    # Kafka keeps them in a TreeMap built from a HashMap: ascending epochs, the last entry of a
    # repeated epoch wins
    items = epochs.items() if isinstance(epochs, dict) else epochs
    merged: dict[int, int] = {}
    for epoch, offset in items:
        merged[int(epoch)] = int(offset)
    return tuple(sorted(merged.items()))


@dataclass(frozen=True)
class TopicIdPartition:
    """``TopicIdPartition``: printed ``<topicId>:<topic>-<partition>``."""

    topic_id: str
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """``RemoteLogSegmentId``: the partition and the segment's own random id."""

    topic_id_partition: TopicIdPartition
    id: str

    def __str__(self) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={self.topic_id_partition}, id={self.id}}}"


def _check_segment(m) -> None:
    """A segment's fields as Kafka's constructors take them (``RemoteLogSegmentMetadata`` and its
    snapshot alike): the epochs normalised, the state an enum, the offsets and epochs checked."""
    object.__setattr__(m, "segment_leader_epochs", _normalize_epochs(m.segment_leader_epochs))
    object.__setattr__(m, "state", SegmentState(m.state))
    start, end, epochs = m.start_offset, m.end_offset, m.segment_leader_epochs
    if start < 0:
        raise ValueError(f"Unexpected start offset = {start}. StartOffset for a remote segment cannot be negative")
    if end < start:
        raise ValueError(f"Unexpected end offset = {end}. EndOffset for a remote segment cannot be less than "
                         f"startOffset = {start}")
    if not epochs:
        raise ValueError("segmentLeaderEpochs can not be null or empty")


@dataclass(frozen=True)
class _SegmentFields:
    """The fields a segment's record and its snapshot share, after the segment's id (a subclass
    redefines ``segment_id`` with its type and adds ``custom_metadata`` and ``state``)."""

    segment_id: object
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_in_bytes: int

    def __post_init__(self):
        _check_segment(self)


@dataclass(frozen=True)
class RemoteLogSegmentMetadata(_SegmentFields):
    """api 0, ``RemoteLogSegmentMetadataRecord``: a segment's copy starting (Kafka writes it only
    with state COPY_SEGMENT_STARTED, ``addRemoteLogSegmentMetadata``); ``end_offset`` inclusive."""

    segment_id: RemoteLogSegmentId
    custom_metadata: bytes | None = None
    state: SegmentState = SegmentState.COPY_SEGMENT_STARTED
    API_KEY = SEGMENT_METADATA

    def __str__(self) -> str:
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={self.segment_id}, "
                f"startOffset={self.start_offset}, endOffset={self.end_offset}, brokerId={self.broker_id}, "
                f"maxTimestampMs={self.max_timestamp_ms}, eventTimestampMs={self.event_timestamp_ms}, "
                f"segmentLeaderEpochs={_epochs_text(self.segment_leader_epochs)}, "
                f"segmentSizeInBytes={self.segment_size_in_bytes}, "
                f"customMetadata={_optional_custom(self.custom_metadata)}, state={self.state.name}}}")


class _StateRecord:
    """What the records share: ``state`` taken as the enum of ``STATE`` (an int is accepted)."""

    STATE = SegmentState

    def __post_init__(self):
        object.__setattr__(self, "state", self.STATE(self.state))


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate(_StateRecord):
    """api 1, ``RemoteLogSegmentMetadataUpdateRecord``: a segment's later state (1, 2 or 3)."""

    segment_id: RemoteLogSegmentId
    broker_id: int
    event_timestamp_ms: int
    state: SegmentState
    custom_metadata: bytes | None = None
    API_KEY = SEGMENT_METADATA_UPDATE

    def __str__(self) -> str:
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={self.segment_id}, "
                f"customMetadata={_optional_custom(self.custom_metadata)}, state={self.state.name}, "
                f"eventTimestampMs={self.event_timestamp_ms}, brokerId={self.broker_id}}}")


@dataclass(frozen=True)
class RemotePartitionDeleteMetadata(_StateRecord):
    """api 2, ``RemotePartitionDeleteMetadataRecord``."""

    topic_id_partition: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: PartitionDeleteState
    API_KEY = PARTITION_DELETE_METADATA
    STATE = PartitionDeleteState

    def __str__(self) -> str:
        return (f"RemotePartitionDeleteMetadata{{topicPartition={self.topic_id_partition}, "
                f"state={self.state.name}, eventTimestampMs={self.event_timestamp_ms}, "
                f"brokerId={self.broker_id}}}")


@dataclass(frozen=True)
class RemoteLogSegmentMetadataSnapshot(_SegmentFields):
    """api 3, ``RemoteLogSegmentMetadataSnapshotRecord`` (the metadata cache's snapshot form; in the
    serde, never on the topic): decoded, never written by compactlog."""

    segment_id: str
    custom_metadata: bytes | None
    state: SegmentState
    API_KEY = SEGMENT_METADATA_SNAPSHOT

    def __str__(self) -> str:
        return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={self.segment_id}, "
                f"startOffset={self.start_offset}, endOffset={self.end_offset}, "
                f"maxTimestampMs={self.max_timestamp_ms}, "
                f"segmentLeaderEpochs={_epochs_text(self.segment_leader_epochs)}, "
                f"segmentSizeInBytes={self.segment_size_in_bytes}, "
                f"customMetadata={_optional_custom(self.custom_metadata)}, state={self.state.name}}}")


RemoteLogMetadata = (RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata
                     | RemoteLogSegmentMetadataSnapshot)


# -- encoding ---------------------------------------------------------------------------------------

_TAGS_NONE = b"\x00"
_EPOCH = struct.Struct(">iq")
_I16_MAX = 32767


def _put_uuid(out: bytearray, text: str) -> None:
    out += uuid_from_str(text)


def _put_tip(out: bytearray, tip: TopicIdPartition) -> None:
    put_string(out, tip.topic, True)
    _put_uuid(out, tip.topic_id)
    out += I32.pack(tip.partition)
    out += _TAGS_NONE


def _put_segment_id(out: bytearray, sid: RemoteLogSegmentId) -> None:
    _put_tip(out, sid.topic_id_partition)
    _put_uuid(out, sid.id)
    out += _TAGS_NONE


def _put_epochs(out: bytearray, epochs) -> None:
    put_count(out, len(epochs), True)
    for epoch, offset in epochs:
        out += _EPOCH.pack(epoch, offset)
        out += _TAGS_NONE


def _put_segment_fields(out: bytearray, m) -> None:
    # StartOffset .. RemoteLogSegmentState: the same run in the segment record and its snapshot
    out += I64.pack(m.start_offset) + I64.pack(m.end_offset)
    out += I32.pack(m.broker_id) + I64.pack(m.max_timestamp_ms) + I64.pack(m.event_timestamp_ms)
    _put_epochs(out, m.segment_leader_epochs)
    out += I32.pack(m.segment_size_in_bytes)
    put_bytes(out, m.custom_metadata, True)
    out += I8.pack(m.state)


def encode(message: RemoteLogMetadata) -> bytes:
    """The record value (``RemoteLogMetadataSerde.serialize``)."""
    out = bytearray(encode_uvarint(FRAME_VERSION))
    out += encode_uvarint(message.API_KEY)
    out += encode_uvarint(0)                        # every record is at version 0
    if isinstance(message, RemoteLogSegmentMetadata):
        _put_segment_id(out, message.segment_id)
        _put_segment_fields(out, message)
    elif isinstance(message, RemoteLogSegmentMetadataUpdate):
        _put_segment_id(out, message.segment_id)
        out += I32.pack(message.broker_id) + I64.pack(message.event_timestamp_ms)
        put_bytes(out, message.custom_metadata, True)
        out += I8.pack(message.state)
    elif isinstance(message, RemotePartitionDeleteMetadata):
        _put_tip(out, message.topic_id_partition)
        out += I32.pack(message.broker_id) + I64.pack(message.event_timestamp_ms)
        out += I8.pack(message.state)
    elif isinstance(message, RemoteLogSegmentMetadataSnapshot):
        _put_uuid(out, message.segment_id)
        _put_segment_fields(out, message)
    else:
        raise TypeError(f"not a remote log metadata record: {type(message).__name__}")
    out += _TAGS_NONE
    return bytes(out)


# -- decoding ---------------------------------------------------------------------------------------

def _uuid(r: SchemaReader, name: str) -> str:
    p = r.take(16, name)
    return uuid_to_str(bytes(r.buf[p:p + 16]))


def _end_struct(r: SchemaReader, name: str) -> None:
    # unknown tagged fields are skipped, as generated readers keep them as unknown
    r.tagged_fields(name)


def _tip(r: SchemaReader) -> TopicIdPartition:
    topic = r.string("TopicIdPartition.Name", compact=True)
    topic_id = _uuid(r, "TopicIdPartition.Id")
    partition = r.i32("TopicIdPartition.Partition")
    _end_struct(r, "TopicIdPartition")
    return TopicIdPartition(topic_id, topic, partition)


def _segment_id(r: SchemaReader) -> RemoteLogSegmentId:
    tip = _tip(r)
    sid = _uuid(r, "RemoteLogSegmentId.Id")
    _end_struct(r, "RemoteLogSegmentId")
    return RemoteLogSegmentId(tip, sid)


def _epochs(r: SchemaReader) -> list[tuple[int, int]]:
    n = r.array_length("SegmentLeaderEpochs", compact=True, min_element=13)
    out = []
    for _ in range(n):
        epoch = r.i32("SegmentLeaderEpochs.LeaderEpoch")
        offset = r.i64("SegmentLeaderEpochs.Offset")
        _end_struct(r, "SegmentLeaderEpochs")
        out.append((epoch, offset))
    return out


def _small_uvarint(r: SchemaReader, name: str) -> int:
    v = r.uvarint(name)
    if v > _I16_MAX:
        r.fail(name, f"value {v} was too large")
    return v


def _segment_state(r: SchemaReader, name: str) -> SegmentState:
    v = r.i8(name)
    try:
        return SegmentState(v)
    except ValueError:
        r.pos -= 1
        r.fail(name, f"unknown RemoteLogSegmentState id {v}")


def _segment_fields(r: SchemaReader) -> tuple:
    """StartOffset .. RemoteLogSegmentState, in the order of the two records' fields after the id
    (and of their dataclasses' fields)."""
    start, end = r.i64("StartOffset"), r.i64("EndOffset")
    broker, max_ts, event_ts = r.i32("BrokerId"), r.i64("MaxTimestampMs"), r.i64("EventTimestampMs")
    epochs = _epochs(r)
    size = r.i32("SegmentSizeInBytes")
    custom = r.bytes_("CustomMetadata", nullable=True, compact=True)
    state = _segment_state(r, "RemoteLogSegmentState")
    return start, end, broker, max_ts, event_ts, epochs, size, custom, state


def decode(value: bytes) -> RemoteLogMetadata:
    """A record value back into its message (``RemoteLogMetadataSerde.deserialize``); anything
    Kafka's serde refuses raises ``RemoteLogMetadataFormatError`` naming the field and byte."""
    if value is None:
        raise RemoteLogMetadataFormatError("__remote_log_metadata value: null (keys and values are never null here)")
    r = SchemaReader(bytes(value), "__remote_log_metadata value", error=RemoteLogMetadataFormatError)
    frame = _small_uvarint(r, "frame version")
    if frame != FRAME_VERSION:
        r.pos = 0
        if frame == 0:
            r.fail("frame version", "frame version 0 is refused (KRaft preview records)")
        r.fail("frame version", f"unknown frame version {frame} (only {FRAME_VERSION} is supported)")
    api_key = _small_uvarint(r, "type")
    version = _small_uvarint(r, "version")
    if api_key > SEGMENT_METADATA_SNAPSHOT:
        r.fail("type", f"unknown api key {api_key}")
    if version != 0:
        r.fail("version", f"unsupported version {version} of record type {api_key} (valid: 0)")
    try:
        if api_key == SEGMENT_METADATA:
            sid = _segment_id(r)
            fields = _segment_fields(r)
            _end_struct(r, "RemoteLogSegmentMetadataRecord")
            message = RemoteLogSegmentMetadata(sid, *fields)
        elif api_key == SEGMENT_METADATA_UPDATE:
            sid = _segment_id(r)
            broker, event_ts = r.i32("BrokerId"), r.i64("EventTimestampMs")
            custom = r.bytes_("CustomMetadata", nullable=True, compact=True)
            state = _segment_state(r, "RemoteLogSegmentState")
            _end_struct(r, "RemoteLogSegmentMetadataUpdateRecord")
            message = RemoteLogSegmentMetadataUpdate(sid, broker, event_ts, state, custom)
        elif api_key == PARTITION_DELETE_METADATA:
            tip = _tip(r)
            broker, event_ts = r.i32("BrokerId"), r.i64("EventTimestampMs")
            v = r.i8("RemotePartitionDeleteState")
            if v not in PartitionDeleteState._value2member_map_:
                r.pos -= 1
                r.fail("RemotePartitionDeleteState", f"unknown RemotePartitionDeleteState id {v}")
            _end_struct(r, "RemotePartitionDeleteMetadataRecord")
            message = RemotePartitionDeleteMetadata(tip, broker, event_ts, PartitionDeleteState(v))
        else:
            seg = _uuid(r, "SegmentId")
            fields = _segment_fields(r)
            _end_struct(r, "RemoteLogSegmentMetadataSnapshotRecord")
            message = RemoteLogSegmentMetadataSnapshot(seg, *fields)
    except ValueError as e:
        if isinstance(e, RemoteLogMetadataFormatError):
            raise
        raise RemoteLogMetadataFormatError(f"__remote_log_metadata value: record type {api_key}: {e}") from None
    if r.pos != len(r.buf):
        raise RemoteLogMetadataFormatError(
            f"__remote_log_metadata value: found {len(r.buf) - r.pos} byte(s) of garbage after record type {api_key}")
    return message


def format_record(partition: int, offset: int, value: bytes) -> str:
    """One line as ``kafka-console-consumer.sh --formatter
    'org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde$RemoteLogMetadataFormatter'``
    prints it (without the line separator)."""
    return f"partition: {partition}, offset: {offset}, value: {decode(value)}"


def objects_hash(topic_id: str, partition: int) -> int:
    """``Objects.hash(topicId.leastSignificantBits, topicId.mostSignificantBits, partition)`` in
    int32 arithmetic: the input of ``RemoteLogMetadataTopicPartitioner`` (which then takes
    murmur2 of its 4 big-endian bytes; ``storage.remote.metadata_topic``)."""
    raw = uuid_from_str(topic_id)
    msb, lsb = struct.unpack(">qq", raw)
    h = 1
    for v in (_long_hash(lsb), _long_hash(msb), partition):
        h = (31 * h + v) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def _long_hash(v: int) -> int:
    # Long.hashCode: (int) (v ^ (v >>> 32))
    u = v & 0xFFFFFFFFFFFFFFFF
    return (u ^ (u >> 32)) & 0xFFFFFFFF
