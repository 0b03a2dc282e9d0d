"""``__transaction_state`` records: encoded and decoded, and bad bytes reported by field and byte."""

from __future__ import annotations

import struct

import pytest

from compactlog.record.transaction_log import (TransactionLogError, decode_key, decode_value, decoder_text,
                                               encode_key, encode_value_v0)


def test_round_trip_and_dump_log_text():
    key = encode_key("txn-é")
    value = encode_value_v0(7, 1, 60000, 1, [("orders", [0, 2]), ("audit", [])], 10, 5)
    assert decode_key(key) == {"type": "0", "data": {"transactionalId": "txn-é"}}
    assert decode_value(value)["data"]["transactionPartitions"] == [
        {"topic": "orders", "partitionIds": [0, 2]}, {"topic": "audit", "partitionIds": []}]
    text_key, payload = decoder_text(key, value, 0)
    assert text_key == '{"type":"0","data":{"transactionalId":"txn-é"}}'
    assert payload == ('{"type":"0","data":{"producerId":7,"producerEpoch":1,"transactionTimeoutMs":60000,'
                       '"transactionStatus":1,"transactionPartitions":[{"topic":"orders","partitionIds":[0,2]},'
                       '{"topic":"audit","partitionIds":[]}],"transactionLastUpdateTimestampMs":10,'
                       '"transactionStartTimestampMs":5}}')
    assert decoder_text(key, None, 0)[1] == "<DELETE>"
    assert decoder_text(None, value, 4) == ("Error at offset 4, skipping. Failed to decode message using "
                                            "transaction log decoder (message had a missing key)", None)


def test_bad_bytes_name_the_field_and_byte():
    key = encode_key("t")
    value = encode_value_v0(7, 1, 60000, 1, [("orders", [0])], 10, 5)
    text, none = decoder_text(key, value[:15], 3)
    assert none is None and text == \
        "Error at offset 3, skipping. value: field transactionTimeoutMs at byte 12: needs 4 bytes, 3 left"
    # the partition ids of "orders" (their count at byte 29) serialized as null
    with pytest.raises(TransactionLogError, match=r"field transactionPartitions\[0\]\.partitionIds at byte 29: "
                                                  r"non-nullable field was serialized as null"):
        decode_value(value[:29] + struct.pack(">i", -1) + value[33:])
    with pytest.raises(TransactionLogError, match="unknown transaction log value version 2"):
        decode_value(b"\x00\x02" + value[2:])
    with pytest.raises(TransactionLogError, match="key: field transactionalId at byte 2: non-nullable"):
        decode_key(b"\x00\x00\xff\xff")
    # a v1 value whose tagged previous producer id is not 8 bytes
    v1 = struct.pack(">hqhib", 1, 7, 1, 100, 2) + b"\x00" + struct.pack(">qq", 5, 6) + b"\x01\x00\x02\x00\x01"
    with pytest.raises(TransactionLogError, match=r"previousProducerId \(tag 0\) has 2 bytes, not 8"):
        decode_value(v1)
