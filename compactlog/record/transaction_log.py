"""``__transaction_state`` records (Kafka's TransactionLogKey / TransactionLogValue), sans-IO.

Key: ``int16 version`` (0) + ``transactional_id string``. Value (null = tombstone): ``int16
version`` + ``producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
transaction_status int8, transaction_partitions [topic string, partition_ids [int32]] (nullable),
transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64``; version 1 is
the flexible form (compact strings and arrays, tagged fields: previous producer id 0, next producer
id 1, client transaction version 2, next producer epoch 3; TransactionLogValue.json in Kafka's
transaction-coordinator). Printed as kafka-dump-log's ``--transaction-log-decoder`` does
(TransactionLogMessageParser: ``{"type": key version, "data": ...}`` and ``{"version": value
version, "data": ...}`` with the generated JSON converters' field names; versions it cannot read
noted and skipped). The field types, their errors (field and byte named) and the JSON are
``schema_fields``', shared with the ``__consumer_offsets`` codec.

The transaction coordinator writes with ``encode_value`` (v1 at transaction version level 1 and up,
as Kafka 4.x's ``TransactionLog.valueToBytes``; tagged fields only where they differ from their
defaults) and loads with ``read_key`` / ``read_value``: a key of a version it does not know is
skipped (``read_key`` answers None), as Kafka's loader skips it with a warning.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .schema_fields import I16, I32, I64, SchemaFormatError, SchemaReader, put_count, put_string, to_json
from .varint import encode_uvarint

STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}

# the value's tagged fields (version 1): tag -> (JSON name, layout, the default not printed)
_TAGGED = {0: ("previousProducerId", I64, -1), 1: ("nextProducerId", I64, -1),
           2: ("clientTransactionVersion", I16, 0), 3: ("nextProducerEpoch", I16, -1)}


_V0_HEAD = struct.Struct(">hqhib")     # version, producerId, producerEpoch, transactionTimeoutMs, status


class TransactionLogError(SchemaFormatError):
    """Bytes that are not a TransactionLogKey / TransactionLogValue."""


@dataclass(frozen=True)
class TransactionLogValue:
    """One ``__transaction_state`` value, every field (tagged ones at their defaults when absent)."""
    version: int
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: list[tuple[str, list[int]]] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1


def read_key(key: bytes) -> str | None:
    """The transactional id of a key, or None for a key version other than 0 (Kafka's loader
    skips such records with a warning; ``decode_key`` refuses them, as dump-log reports them)."""
    r = SchemaReader(key, "key", error=TransactionLogError)
    if r.i16("version") != 0:
        return None
    return r.string("transactionalId")


def decode_key(key: bytes) -> dict:
    r = SchemaReader(key, "key", error=TransactionLogError)
    version = r.i16("version")
    if version != 0:
        raise TransactionLogError(f"unknown transaction log key version {version}")
    tid = r.string("transactionalId")
    return {"type": str(version), "data": {"transactionalId": tid}}


def read_value(value: bytes) -> TransactionLogValue:
    """A value of version 0 or 1, every field read (the error names the field and byte)."""
    version = I16.unpack_from(value, 0)[0] if len(value) >= 2 else -1
    if version not in (0, 1):
        raise TransactionLogError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    r = SchemaReader(value, "value", pos=2, error=TransactionLogError)
    producer_id, producer_epoch = r.i64("producerId"), r.i16("producerEpoch")
    timeout_ms, status = r.i32("transactionTimeoutMs"), r.i8("transactionStatus")
    # a partition entry is at least an empty topic and an empty id array
    n = r.array_length("transactionPartitions", compact=flexible, nullable=True, min_element=3 if flexible else 6)
    if n < 0:
        parts = None
    else:
        parts = []
        for i in range(n):
            name = f"transactionPartitions[{i}]"
            topic = r.string(f"{name}.topic", compact=flexible)
            ids = [r.i32(f"{name}.partitionIds")
                   for _ in range(r.array_length(f"{name}.partitionIds", compact=flexible, min_element=4))]
            if flexible:
                r.tagged_fields(name)
            parts.append((topic, ids))
    last_update, start = r.i64("transactionLastUpdateTimestampMs"), r.i64("transactionStartTimestampMs")
    tags = _tagged(r.tagged_fields("TransactionLogValue")) if flexible else {}
    return TransactionLogValue(version, producer_id, producer_epoch, timeout_ms, status, parts, last_update,
                               start, tags.get("previousProducerId", -1), tags.get("nextProducerId", -1),
                               tags.get("clientTransactionVersion", 0), tags.get("nextProducerEpoch", -1))


def decode_value(value: bytes) -> dict:
    v = read_value(value)
    # the generated JSON converter's order (the schema's), tagged fields only when set; where
    # nextProducerEpoch (tag 3) sits in the schema was not checked: beside producerEpoch here
    data = {"producerId": v.producer_id}
    if v.previous_producer_id != -1:
        data["previousProducerId"] = v.previous_producer_id
    if v.next_producer_id != -1:
        data["nextProducerId"] = v.next_producer_id
    data["producerEpoch"] = v.producer_epoch
    if v.next_producer_epoch != -1:
        data["nextProducerEpoch"] = v.next_producer_epoch
    data.update({"transactionTimeoutMs": v.transaction_timeout_ms, "transactionStatus": v.transaction_status,
                 "transactionPartitions": None if v.partitions is None else
                 [{"topic": t, "partitionIds": ids} for t, ids in v.partitions],
                 "transactionLastUpdateTimestampMs": v.last_update_timestamp_ms,
                 "transactionStartTimestampMs": v.start_timestamp_ms})
    if v.client_transaction_version != 0:
        data["clientTransactionVersion"] = v.client_transaction_version
    return {"version": str(v.version), "data": data}


def _tagged(raw: dict[int, bytes]) -> dict:
    """The known tagged fields that differ from their defaults, by JSON name."""
    out = {}
    for tag, data in raw.items():
        if tag not in _TAGGED:
            continue
        name, layout, default = _TAGGED[tag]
        if len(data) != layout.size:
            raise TransactionLogError(f"value: tagged field {name} (tag {tag}) has {len(data)} bytes, "
                                      f"not {layout.size}")
        v = layout.unpack(data)[0]
        if v != default:
            out[name] = v
    return out


def decoder_text(key: bytes | None, value: bytes | None, offset: int) -> tuple[str, str | None]:
    """(key text, payload text or None), as TransactionLogMessageParser prints them."""
    if key is None:
        return f"Error at offset {offset}, skipping. Failed to decode message using transaction log " \
               f"decoder (message had a missing key)", None
    # the versions Kafka 4.x cannot read, noted as its CoordinatorRecordMessageParser notes them
    # (TransactionCoordinatorRecordSerde: the key version is the record type, the value is read
    # by the generated TransactionLogValue, which knows versions 0 and 1)
    key_version = I16.unpack_from(key, 0)[0] if len(key) >= 2 else 0
    if key_version != 0:
        return f"Unknown record type {key_version} at offset {offset}, skipping.", None
    value_version = I16.unpack_from(value, 0)[0] if value is not None and len(value) >= 2 else 0
    if value_version not in (0, 1):
        return (f"Error at offset {offset}, skipping. Could not read record with version {value_version} from "
                f"value's buffer due to: Can't read version {value_version} of TransactionLogValue."), None
    try:
        k = decode_key(key)
        payload = "<DELETE>" if value is None else to_json(decode_value(value))
    except TransactionLogError as e:
        return f"Error at offset {offset}, skipping. {e}", None
    return to_json(k), payload


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(I16.pack(0))
    put_string(out, transactional_id, False)
    return bytes(out)


def partitions_section(partitions: list[tuple[str, list[int]]] | None, compact: bool) -> bytes:
    """A value's ``transactionPartitions`` (null: Empty): v0's int16/int32 lengths, or v1's
    compact ones with each entry's empty tag section."""
    if partitions is None:
        return b"\x00" if compact else I32.pack(-1)
    out = bytearray()
    put_count(out, len(partitions), compact)
    for topic, ids in partitions:
        put_string(out, topic, compact)
        put_count(out, len(ids), compact)
        out += b"".join(I32.pack(i) for i in ids)
        if compact:
            out += b"\x00"
    return bytes(out)


def tagged_section(previous_producer_id: int = -1, next_producer_id: int = -1, client_transaction_version: int = 0,
                   next_producer_epoch: int = -1) -> bytes:
    """A v1 value's tagged fields in tag order, each only when it differs from its default (the
    generated ``Writable``'s rule)."""
    tagged = bytearray()
    count = 0
    for tag, v in ((0, previous_producer_id), (1, next_producer_id), (2, client_transaction_version),
                   (3, next_producer_epoch)):          # in tag order
        _, layout, default = _TAGGED[tag]
        if v != default:
            data = layout.pack(v)
            tagged += encode_uvarint(tag) + encode_uvarint(len(data)) + data
            count += 1
    return encode_uvarint(count) + bytes(tagged)


_TIMES = struct.Struct(">qq")           # transactionLastUpdateTimestampMs, transactionStartTimestampMs


def assemble_value(version: int, producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                   partitions: bytes, last_update_ms: int, start_ms: int, tagged: bytes = b"") -> bytes:
    """A value from its sections (``partitions_section`` and, for v1, ``tagged_section``): the
    coordinator's writer keeps the sections a producer repeats every transaction."""
    return b"".join((_V0_HEAD.pack(version, producer_id, producer_epoch, timeout_ms, status), partitions,
                     _TIMES.pack(last_update_ms, start_ms), tagged))


def encode_value_v0(producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                    partitions: list[tuple[str, list[int]]] | None, last_update_ms: int, start_ms: int) -> bytes:
    return assemble_value(0, producer_id, producer_epoch, timeout_ms, status, partitions_section(partitions, False),
                          last_update_ms, start_ms)


def encode_value_v1(producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                    partitions: list[tuple[str, list[int]]] | None, last_update_ms: int, start_ms: int, *,
                    previous_producer_id: int = -1, next_producer_id: int = -1,
                    client_transaction_version: int = 0, next_producer_epoch: int = -1) -> bytes:
    """The flexible value (version 1): compact partitions (null: ``uvarint 0``), each entry with
    its empty tag section, then the value's tagged fields (``tagged_section``)."""
    return assemble_value(1, producer_id, producer_epoch, timeout_ms, status, partitions_section(partitions, True),
                          last_update_ms, start_ms,
                          tagged_section(previous_producer_id, next_producer_id, client_transaction_version,
                                         next_producer_epoch))


def encode_value(version: int, producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                 partitions: list[tuple[str, list[int]]] | None, last_update_ms: int, start_ms: int,
                 **tagged) -> bytes:
    """A value in ``version`` (0: the tagged fields cannot be written and are dropped, as Kafka's
    level-0 writer drops them)."""
    if version == 0:
        return encode_value_v0(producer_id, producer_epoch, timeout_ms, status, partitions, last_update_ms,
                               start_ms)
    if version != 1:
        raise ValueError(f"unknown transaction log value version {version}")
    return encode_value_v1(producer_id, producer_epoch, timeout_ms, status, partitions, last_update_ms,
                           start_ms, **tagged)
