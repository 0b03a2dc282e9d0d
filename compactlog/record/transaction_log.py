"""``__transaction_state`` records (Kafka's TransactionLogKey / TransactionLogValue), sans-IO.

Key: ``int16 version`` (0) + ``transactional_id string``. Value (null = tombstone): ``int16
version`` + ``producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
transaction_status int8, transaction_partitions [topic string, partition_ids [int32]] (nullable),
transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64``; version 1 is
the flexible form (compact strings and arrays, tagged fields: previous producer id 0, next producer
id 1, client transaction version 2; TransactionLogValue.json in Kafka's transaction-coordinator). Printed as kafka-dump-log's ``--transaction-log-decoder`` does
(TransactionLogMessageParser: the generated JSON converters' field names).
"""

from __future__ import annotations

import struct

STATUS_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


class TransactionLogError(ValueError):
    """Bytes that are not a TransactionLogKey / TransactionLogValue."""


class _Reader:
    def __init__(self, data: bytes, flexible: bool):
        self.data, self.pos, self.flexible = data, 0, flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TransactionLogError(f"{n} bytes needed at byte {self.pos}, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt: str) -> int:
        s = struct.Struct(">" + fmt)
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise TransactionLogError(f"unsigned varint too long at byte {self.pos}")

    def length(self, width: str) -> int:
        return self.uvarint() - 1 if self.flexible else self.fixed(width)

    def string(self) -> str | None:
        n = self.length("h")
        if n < 0:
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TransactionLogError(f"string at byte {self.pos - n} is not UTF-8: {e.reason}") from None

    def tagged(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


def decode_key(key: bytes) -> dict:
    r = _Reader(key, False)
    version = r.fixed("h")
    if version != 0:
        raise TransactionLogError(f"unknown transaction log key version {version}")
    tid = r.string()
    if tid is None:
        raise TransactionLogError("null transactional id")
    return {"type": str(version), "data": {"transactionalId": tid}}


def decode_value(value: bytes) -> dict:
    version = struct.unpack_from(">h", value, 0)[0] if len(value) >= 2 else -1
    if version not in (0, 1):
        raise TransactionLogError(f"unknown transaction log value version {version}")
    r = _Reader(value[2:], version >= 1)
    producer_id, producer_epoch = r.fixed("q"), r.fixed("h")
    timeout_ms, status = r.fixed("i"), r.fixed("b")
    n = r.length("i")
    if n < 0:
        parts = None
    else:
        parts = []
        for _ in range(n):
            topic = r.string()
            ids = [r.fixed("i") for _ in range(r.length("i"))]
            r.tagged()
            parts.append({"topic": topic, "partitionIds": ids})
    last_update, start = r.fixed("q"), r.fixed("q")
    tags = r.tagged()
    # the generated JSON converter's order (the schema's), tagged fields only when set
    data = {"producerId": producer_id}
    for tag, name in ((0, "previousProducerId"), (1, "nextProducerId")):
        if tag in tags and struct.unpack(">q", tags[tag])[0] != -1:
            data[name] = struct.unpack(">q", tags[tag])[0]
    data.update({"producerEpoch": producer_epoch, "transactionTimeoutMs": timeout_ms,
                 "transactionStatus": status, "transactionPartitions": parts,
                 "transactionLastUpdateTimestampMs": last_update, "transactionStartTimestampMs": start})
    if 2 in tags and struct.unpack(">h", tags[2])[0] != 0:
        data["clientTransactionVersion"] = struct.unpack(">h", tags[2])[0]
    return {"type": str(version), "data": data}


def decoder_text(key: bytes | None, value: bytes | None, offset: int, to_json) -> tuple[str, str | None]:
    """(key text, payload text or None), as TransactionLogMessageParser prints them."""
    if key is None:
        return f"Error at offset {offset}, skipping. Failed to decode message using transaction log " \
               f"decoder (message had a missing key)", None
    try:
        k = decode_key(key)
        payload = "<DELETE>" if value is None else to_json(decode_value(value))
    except (TransactionLogError, struct.error) as e:
        return f"Error at offset {offset}, skipping. {e}", None
    return to_json(k), payload


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return struct.pack(">hh", 0, len(raw)) + raw


def encode_value_v0(producer_id: int, producer_epoch: int, timeout_ms: int, status: int,
                    partitions: list[tuple[str, list[int]]] | None, last_update_ms: int, start_ms: int) -> bytes:
    out = struct.pack(">hqhib", 0, producer_id, producer_epoch, timeout_ms, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            raw = topic.encode("utf-8")
            out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update_ms, start_ms)
